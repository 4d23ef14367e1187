"""The fake Graph API over HTTP (aiohttp.web): routing, parameter merging, auth, faults, control.

Graph merges the query string with a urlencoded, multipart or JSON body, so the fake does too.
Control endpoints under ``/__fake/`` are not Graph: tests and rehearsals use them to read codes,
move the clock, inject faults and reset.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from mogateway.testing.fake_graph.callback_check import verify_callback
from mogateway.testing.fake_graph.errors import FakeGraphError, invalid_parameter, not_found, trace_id
from mogateway.testing.fake_graph.media import FakeMedia, download
from mogateway.testing.fake_graph.messaging import Messaging
from mogateway.testing.fake_graph.world import World

VERSION_RE = re.compile(r"^v\d+\.\d+$")
MAX_BODY = 64 * 1024
SECRET_PARAMS = ("access_token", "input_token", "pin", "code", "verify_token")
WORLD_KEY = web.AppKey("world", World)
FAULTS_KEY = web.AppKey("faults", list)
LOG_KEY = web.AppKey("log", list)
INITIAL_KEY = web.AppKey("initial", dict)
MESSAGING_KEY = web.AppKey("messaging", Messaging)
MEDIA_KEY = web.AppKey("media", FakeMedia)


@dataclass
class Fault:
    """An injected failure for requests whose path matches ``path_regex``."""

    path_regex: str
    times: int = 1
    method: str | None = None
    http: int | None = None
    code: int = 2
    subcode: int | None = None
    is_transient: bool = True
    message: str = "Service temporarily unavailable"
    details: str | None = None
    user_title: str | None = None
    drop: bool = False  # close the connection without an answer
    apply: bool = False  # run the real handler first, then fail (the answer is lost)
    body: dict[str, Any] | None = None  # answer this JSON with HTTP 200 instead of an error
    skip: int = 0  # let this many matching requests through first

    def matches(self, method: str, path: str) -> bool:
        """True when this fault applies to the request."""
        if self.times <= 0 or (self.method and self.method.upper() != method):
            return False
        return re.search(self.path_regex, path) is not None

    def consume(self) -> bool:
        """Count one matching request; True when this one fails."""
        if self.skip > 0:
            self.skip -= 1
            return False
        self.times -= 1
        return True

    def error(self) -> FakeGraphError:
        """The Graph error this fault answers."""
        return FakeGraphError(
            self.code,
            self.message,
            subcode=self.subcode,
            details=self.details,
            user_title=self.user_title,
            user_msg=self.user_title,
            is_transient=self.is_transient,
            http_status=self.http,
        )


def create_app(fixtures: dict[str, Any]) -> web.Application:
    """An aiohttp application serving the fake Graph API over ``fixtures``."""
    app = web.Application(client_max_size=MAX_BODY)
    app[WORLD_KEY] = World(fixtures)
    app[FAULTS_KEY] = []
    app[LOG_KEY] = []
    app[INITIAL_KEY] = fixtures
    app[MESSAGING_KEY] = Messaging()
    app[MEDIA_KEY] = FakeMedia()
    app.router.add_get("/__fake/messages", _messages)
    app.router.add_get("/__fake/messages/reads", _reads)
    app.router.add_post("/__fake/messages/errors", _script_error)
    app.router.add_delete("/__fake/messages/errors", _clear_scripted)
    app.router.add_get("/__fake/outbox", _outbox)
    app.router.add_get("/__fake/state", _state)
    app.router.add_get("/__fake/requests", _requests)
    app.router.add_post("/__fake/clock", _clock)
    app.router.add_post("/__fake/faults", _add_fault)
    app.router.add_delete("/__fake/faults", _clear_faults)
    app.router.add_post("/__fake/reset", _reset)
    app.router.add_post("/__fake/media", _register_media)  # media: fake_graph/media.py
    app.router.add_patch("/__fake/media/{media_id}", _patch_media)
    app.router.add_get("/__fake/media/download/{key}", _download_media)
    app.router.add_route("*", "/{version}/{tail:.*}", _graph)
    return app


async def _params(request: web.Request) -> dict[str, Any]:
    params: dict[str, Any] = dict(request.query)
    if request.method in ("POST", "DELETE") and request.can_read_body:
        ctype = request.content_type
        if ctype == "application/json":
            try:
                body = json.loads(await request.read() or b"{}")
            except ValueError:
                raise invalid_parameter("the JSON body cannot be parsed") from None
            if not isinstance(body, dict):
                raise invalid_parameter("the JSON body must be an object")
            params.update(body)
        elif ctype in ("application/x-www-form-urlencoded", "multipart/form-data"):
            form = await request.post()
            params.update({k: v for k, v in form.items() if isinstance(v, str)})
    return params


def _token(request: web.Request, params: dict[str, Any]) -> str | None:
    auth = request.headers.get("Authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    value = params.get("access_token")
    return str(value) if value else None


async def _graph(request: web.Request) -> web.StreamResponse:
    version = request.match_info["version"]
    tail = request.match_info["tail"].strip("/")
    trace = trace_id()
    headers = {"facebook-api-version": version, "x-fb-trace-id": trace, "x-fb-request-id": trace_id()}
    method = request.method.upper()
    world = request.app[WORLD_KEY]
    fault = next((f for f in request.app[FAULTS_KEY] if f.matches(method, "/" + tail)), None)
    if fault is not None and not fault.consume():
        fault = None
    try:
        params = await _params(request)
        request.app[LOG_KEY].append(
            {
                "method": method,
                "path": "/" + tail,
                "version": version,
                "params": {k: ("***" if k in SECRET_PARAMS else v) for k, v in params.items()},
                "auth": "header"
                if request.headers.get("Authorization")
                else ("param" if "access_token" in params else None),
                "at": world.clock.now(),
            }
        )
        if fault is not None and not fault.apply:
            return await _fail(request, fault, headers, trace)
        if not VERSION_RE.match(version):
            raise invalid_parameter(f"Unknown API version {version!r}")
        token = world.authenticate(_token(request, params))
        if method == "POST" and tail.endswith("/register"):
            latency = float(world.knobs.get("register_latency_s") or 0)
            if latency:
                await asyncio.sleep(latency)
        parts = tail.split("/")
        if method == "GET" and len(parts) == 1:  # a media id's lookup (fake_graph/media.py)
            found = await request.app[MEDIA_KEY].lookup(world, parts[0], f"{request.scheme}://{request.host}")
            if found is not None:
                if fault is not None:
                    return await _fail(request, fault, headers, trace)
                return web.json_response(found, headers=headers)
        if method == "POST" and len(parts) == 2 and parts[1] == "messages":
            body = request.app[MESSAGING_KEY].handle(world, token, parts[0], params, world.clock.now())
        else:
            if method == "POST" and parts[1:] == ["subscribed_apps"] and params.get("override_callback_uri"):
                world.subscribe(token, parts[0], params, check_only=True)
                if world.knobs.get("verify_callback_uri", True):
                    await verify_callback(str(params["override_callback_uri"]), str(params["verify_token"]))
            body = _dispatch(world, token, method, parts, params)
    except FakeGraphError as err:
        return web.json_response(err.envelope(trace), status=err.http_status, headers=headers)
    if fault is not None:
        return await _fail(request, fault, headers, trace)
    return web.json_response(body, headers=headers)


async def _fail(
    request: web.Request, fault: Fault, headers: dict[str, str], trace: str
) -> web.StreamResponse:
    if fault.drop:
        # Network loss: the client sees the connection close with no answer at all.
        if request.transport is not None:
            request.transport.close()
        raise asyncio.CancelledError
    if fault.body is not None:
        return web.json_response(fault.body, headers=headers)
    err = fault.error()
    return web.json_response(err.envelope(trace), status=err.http_status, headers=headers)


def _dispatch(
    world: World, token: dict[str, Any], method: str, parts: list[str], params: dict[str, Any]
) -> Any:
    head = parts[0]
    if parts == ["debug_token"] and method == "GET":
        return world.debug_token(params)
    if len(parts) == 1:
        if method == "GET":
            return world.get_object(token, head, params)
        if method == "POST":
            return world.update_number(token, head, params)
    elif len(parts) == 2:
        edge = parts[1]
        route = (method, edge)
        if route == ("GET", "phone_numbers"):
            return world.list_numbers(token, head, params)
        if route == ("POST", "phone_numbers"):
            return world.request_migration(token, head, params)
        if route == ("GET", "subscribed_apps"):
            return world.list_subscribed_apps(token, head)
        if route == ("POST", "subscribed_apps"):
            return world.subscribe(token, head, params)
        if route == ("DELETE", "subscribed_apps"):
            return world.unsubscribe(token, head)
        if route == ("GET", "message_templates"):
            return world.list_templates(token, head)
        if route == ("POST", "migrate_message_templates"):
            return world.migrate_templates(token, head, params)
        if route == ("POST", "request_code"):
            return world.request_code(token, head, params)
        if route == ("POST", "verify_code"):
            return world.verify_code(token, head, params)
        if route == ("POST", "register"):
            return world.register(token, head, params)
        if route == ("POST", "deregister"):
            return world.deregister(token, head)
    raise not_found(head, method.lower())


async def _outbox(request: web.Request) -> web.Response:
    phone = request.query.get("phone", "").replace(" ", "")
    if phone and not phone.startswith("+"):
        phone = "+" + phone
    items = [m for m in request.app[WORLD_KEY].outbox if not phone or m["phone"] == phone]
    return web.json_response({"data": items})


async def _state(request: web.Request) -> web.Response:
    return web.json_response(request.app[WORLD_KEY].snapshot())


async def _requests(request: web.Request) -> web.Response:
    return web.json_response({"data": request.app[LOG_KEY]})


async def _json_object(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json() if request.can_read_body else {}
    except ValueError:
        raise web.HTTPBadRequest(text="body must be JSON") from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="body must be a JSON object")
    return body


async def _clock(request: web.Request) -> web.Response:
    body = await _json_object(request)
    world = request.app[WORLD_KEY]
    world.clock.advance(float(body.get("advance_s", 0)))
    return web.json_response({"now": world.clock.now()})


async def _add_fault(request: web.Request) -> web.Response:
    body = await _json_object(request)
    try:
        fault = Fault(**body)
        re.compile(fault.path_regex)
    except (TypeError, re.error) as exc:
        raise web.HTTPBadRequest(text=f"bad fault: {exc}") from None
    request.app[FAULTS_KEY].append(fault)
    return web.json_response({"faults": len(request.app[FAULTS_KEY])})


async def _clear_faults(request: web.Request) -> web.Response:
    request.app[FAULTS_KEY].clear()
    return web.json_response({"faults": 0})


async def _reset(request: web.Request) -> web.Response:
    body = await _json_object(request)
    fixtures = body.get("fixtures") or request.app[INITIAL_KEY]
    request.app[WORLD_KEY].reset(fixtures)
    if "knobs" in body:
        request.app[WORLD_KEY].knobs.update(body["knobs"])
    request.app[FAULTS_KEY].clear()
    request.app[LOG_KEY].clear()
    request.app[MESSAGING_KEY].reset()
    request.app[MEDIA_KEY].reset()
    return web.json_response({"reset": True})


async def _register_media(request: web.Request) -> web.Response:
    body = await _json_object(request)
    media = request.app[MEDIA_KEY]
    try:
        item = media.register(body)
    except (ValueError, TypeError) as exc:
        raise web.HTTPBadRequest(text=f"bad media: {exc}") from None
    return web.json_response(media.described(item))


async def _patch_media(request: web.Request) -> web.Response:
    body = await _json_object(request)
    media = request.app[MEDIA_KEY]
    item = media.items.get(request.match_info["media_id"])
    if item is None:
        raise web.HTTPNotFound(text="no such media")
    media.update(item, body)
    return web.json_response(media.described(item))


async def _download_media(request: web.Request) -> web.StreamResponse:
    auth = request.headers.get("Authorization", "")
    token = auth[7:].strip() if auth.lower().startswith("bearer ") else None
    return await download(request, request.app[MEDIA_KEY], request.app[WORLD_KEY], token)


async def _messages(request: web.Request) -> web.Response:
    """Every send so far; ``?to=`` and ``?phone_number_id=`` filter."""
    to = request.query.get("to", "").replace("+", "").replace(" ", "")
    pid = request.query.get("phone_number_id", "")
    items = [
        m
        for m in request.app[MESSAGING_KEY].messages
        if (not to or m["to"] == to) and (not pid or m["phone_number_id"] == pid)
    ]
    return web.json_response({"data": items})


async def _reads(request: web.Request) -> web.Response:
    return web.json_response({"data": request.app[MESSAGING_KEY].reads})


async def _script_error(request: web.Request) -> web.Response:
    """``{"code": 131047, "to": "9198...", "times": 2, "details": "...", "after": 1}``: see
    Messaging.script."""
    body = await _json_object(request)
    code, to, times, details = body.get("code"), body.get("to"), body.get("times"), body.get("details")
    after = body.get("after", 0)
    if not isinstance(after, int) or isinstance(after, bool) or after < 0:
        raise web.HTTPBadRequest(text="after must be a non-negative integer")
    if not isinstance(code, int) or isinstance(code, bool):
        raise web.HTTPBadRequest(text="code must be an integer")
    if to is not None and not isinstance(to, str):
        raise web.HTTPBadRequest(text="to must be a string")
    if times is not None and (not isinstance(times, int) or times < 1):
        raise web.HTTPBadRequest(text="times must be a positive integer")
    if details is not None and not isinstance(details, str):
        raise web.HTTPBadRequest(text="details must be a string")
    messaging = request.app[MESSAGING_KEY]
    messaging.script(code, to=to, times=times, details=details, after=after)
    return web.json_response({"scripted": len(messaging.scripted)})


async def _clear_scripted(request: web.Request) -> web.Response:
    request.app[MESSAGING_KEY].scripted.clear()
    return web.json_response({"scripted": 0})
