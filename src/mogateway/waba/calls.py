"""The migration's Graph calls, one function each, over a :class:`GraphClient`.

Every call has a ``*_request`` builder that only describes it (used by dry runs to print the exact
calls) and a function that sends it and returns a typed answer. Bodies are sent as JSON, which Graph
accepts for all of these calls.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from mogateway.waba.errors import GraphError
from mogateway.waba.graph import GraphClient, GraphRequest, is_success

MANAGEMENT_SCOPE = "whatsapp_business_management"
MESSAGING_SCOPE = "whatsapp_business_messaging"
CODE_METHODS = ("SMS", "VOICE")
NUMBER_FIELDS = (
    "id,display_phone_number,verified_name,status,code_verification_status,name_status,"
    "quality_rating,platform_type,webhook_configuration"
)
REGISTER_TIMEOUT_S = 60.0  # Meta: register "could take as long as 15 seconds"; leave room.
MAX_PAGES = 50


@dataclass(frozen=True)
class TokenInfo:
    """What ``debug_token`` says about the access token."""

    is_valid: bool
    app_id: str | None
    app_name: str | None
    scopes: tuple[str, ...]
    expires_at: int
    """Epoch seconds; 0 means the token never expires."""
    waba_targets: tuple[str, ...] | None
    """WABA ids the management scope is granted for, when Graph lists them."""


@dataclass(frozen=True)
class WabaInfo:
    """The destination WhatsApp Business Account as Graph shows it."""

    id: str
    name: str | None
    review_status: str | None
    business_verification_status: str | None


@dataclass(frozen=True)
class NumberInfo:
    """A phone number object (fields present depend on what was asked)."""

    id: str
    display_phone_number: str | None = None
    verified_name: str | None = None
    status: str | None = None
    code_verification_status: str | None = None
    name_status: str | None = None
    quality_rating: str | None = None
    platform_type: str | None = None
    webhook_configuration: Mapping[str, Any] | None = None
    raw: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> NumberInfo:
        """Build from a Graph phone number object."""
        hook = body.get("webhook_configuration")
        return cls(
            id=str(body.get("id", "")),
            display_phone_number=_opt(body.get("display_phone_number")),
            verified_name=_opt(body.get("verified_name")),
            status=_opt(body.get("status")),
            code_verification_status=_opt(body.get("code_verification_status")),
            name_status=_opt(body.get("name_status")),
            quality_rating=_opt(body.get("quality_rating")),
            platform_type=_opt(body.get("platform_type")),
            webhook_configuration=hook if isinstance(hook, dict) else None,
            raw=dict(body),
        )

    @property
    def is_connected(self) -> bool:
        """True once the number is registered and can send."""
        return self.status == "CONNECTED"

    @property
    def is_verified(self) -> bool:
        """True once ownership was confirmed with the registration code."""
        return self.code_verification_status == "VERIFIED"


@dataclass(frozen=True)
class SubscribedApp:
    """One app subscribed to a WABA's webhooks."""

    app_id: str
    name: str | None
    override_callback_uri: str | None


def _opt(value: Any) -> str | None:
    return None if value is None else str(value)


def digits_of(display: str | None) -> str:
    """Only the digits of a displayed number ("+91 98765-43210" → "919876543210")."""
    return "".join(ch for ch in display or "" if ch.isdigit())


# -- request builders ----------------------------------------------------------------------------


def debug_token_request(token: str) -> GraphRequest:
    """``GET /debug_token?input_token=…``: validity, scopes and app of the token."""
    return GraphRequest("GET", "debug_token", params={"input_token": token})


def get_waba_request(waba_id: str) -> GraphRequest:
    """``GET /<WABA>``: is the destination WABA reachable with this token."""
    return GraphRequest(
        "GET", waba_id, params={"fields": "id,name,account_review_status,business_verification_status"}
    )


def list_numbers_request(waba_id: str, after: str | None = None) -> GraphRequest:
    """``GET /<WABA>/phone_numbers``: numbers already on the destination WABA (one page)."""
    params = {"fields": NUMBER_FIELDS, "limit": "100"}
    if after:
        params["after"] = after
    return GraphRequest("GET", f"{waba_id}/phone_numbers", params=params)


def get_number_request(phone_number_id: str) -> GraphRequest:
    """``GET /<PHONE_NUMBER_ID>?fields=…``: status of the number."""
    return GraphRequest("GET", phone_number_id, params={"fields": NUMBER_FIELDS})


def list_subscribed_apps_request(waba_id: str) -> GraphRequest:
    """``GET /<WABA>/subscribed_apps``."""
    return GraphRequest("GET", f"{waba_id}/subscribed_apps")


def subscribe_app_request(waba_id: str) -> GraphRequest:
    """``POST /<WABA>/subscribed_apps`` without a body: subscribe the token's app to the WABA."""
    return GraphRequest("POST", f"{waba_id}/subscribed_apps")


def request_migration_request(waba_id: str, cc: str, national: str) -> GraphRequest:
    """``POST /<WABA>/phone_numbers`` with ``migrate_phone_number=true``."""
    return GraphRequest(
        "POST",
        f"{waba_id}/phone_numbers",
        json={"cc": cc, "phone_number": national, "migrate_phone_number": True},
    )


def request_code_request(phone_number_id: str, code_method: str, language: str) -> GraphRequest:
    """``POST /<PHONE_NUMBER_ID>/request_code``."""
    return GraphRequest(
        "POST", f"{phone_number_id}/request_code", json={"code_method": code_method, "language": language}
    )


def verify_code_request(phone_number_id: str, code: str) -> GraphRequest:
    """``POST /<PHONE_NUMBER_ID>/verify_code``."""
    return GraphRequest("POST", f"{phone_number_id}/verify_code", json={"code": code})


def register_request(phone_number_id: str, pin: str) -> GraphRequest:
    """``POST /<PHONE_NUMBER_ID>/register``; never retried automatically (10 per number per 72 h)."""
    return GraphRequest(
        "POST",
        f"{phone_number_id}/register",
        json={"messaging_product": "whatsapp", "pin": pin},
        retry=False,
        timeout_s=REGISTER_TIMEOUT_S,
    )


def override_callback_request(waba_id: str, callback_url: str, verify_token: str) -> GraphRequest:
    """``POST /<WABA>/subscribed_apps`` with ``override_callback_uri`` and ``verify_token``."""
    return GraphRequest(
        "POST",
        f"{waba_id}/subscribed_apps",
        json={"override_callback_uri": callback_url, "verify_token": verify_token},
    )


# -- calls ---------------------------------------------------------------------------------------


def debug_token(client: GraphClient) -> TokenInfo:
    """Ask Graph what the client's own token is."""
    body = client.send(debug_token_request(client.token))
    data = body.get("data") if isinstance(body.get("data"), dict) else {}
    assert isinstance(data, dict)
    targets: list[str] | None = None
    for grant in data.get("granular_scopes") or []:
        if isinstance(grant, dict) and grant.get("scope") == MANAGEMENT_SCOPE and "target_ids" in grant:
            targets = [str(t) for t in grant.get("target_ids") or []]
    return TokenInfo(
        is_valid=bool(data.get("is_valid", False)),
        app_id=_opt(data.get("app_id")),
        app_name=_opt(data.get("application")),
        scopes=tuple(str(s) for s in data.get("scopes") or []),
        expires_at=int(data.get("expires_at") or 0),
        waba_targets=tuple(targets) if targets is not None else None,
    )


def get_waba(client: GraphClient, waba_id: str) -> WabaInfo:
    """Read the destination WABA (raises ``GraphError`` 100/33 when the id is wrong or hidden)."""
    body = client.send(get_waba_request(waba_id))
    return WabaInfo(
        id=str(body.get("id", waba_id)),
        name=_opt(body.get("name")),
        review_status=_opt(body.get("account_review_status")),
        business_verification_status=_opt(body.get("business_verification_status")),
    )


def iter_numbers(client: GraphClient, waba_id: str) -> Iterator[NumberInfo]:
    """Every phone number on the WABA, following cursor pages."""
    after: str | None = None
    for _ in range(MAX_PAGES):
        body = client.send(list_numbers_request(waba_id, after))
        for item in body.get("data") or []:
            if isinstance(item, dict):
                yield NumberInfo.from_json(item)
        paging = body.get("paging") if isinstance(body.get("paging"), dict) else {}
        assert isinstance(paging, dict)
        cursors = paging.get("cursors") if isinstance(paging.get("cursors"), dict) else {}
        assert isinstance(cursors, dict)
        after = _opt(cursors.get("after"))
        if not after or "next" not in paging:
            return


def find_number(client: GraphClient, waba_id: str, cc: str, national: str) -> NumberInfo | None:
    """The number on the WABA, if it is already there (how a re-run finds its id after 2388012)."""
    wanted = cc + national
    for number in iter_numbers(client, waba_id):
        if digits_of(number.display_phone_number) in (wanted, national):
            return number
    return None


def get_number(client: GraphClient, phone_number_id: str) -> NumberInfo:
    """Status of a phone number object."""
    return NumberInfo.from_json(client.send(get_number_request(phone_number_id)))


def list_subscribed_apps(client: GraphClient, waba_id: str) -> list[SubscribedApp]:
    """Apps subscribed to the WABA's webhooks."""
    body = client.send(list_subscribed_apps_request(waba_id))
    apps = []
    for item in body.get("data") or []:
        if not isinstance(item, dict):
            continue
        api = item.get("whatsapp_business_api_data")
        api = api if isinstance(api, dict) else {}
        apps.append(
            SubscribedApp(
                app_id=str(api.get("id", "")),
                name=_opt(api.get("name")),
                override_callback_uri=_opt(item.get("override_callback_uri")),
            )
        )
    return apps


def is_app_subscribed(apps: list[SubscribedApp], app_id: str) -> bool:
    """True when *this* app (not just any app) is subscribed."""
    return any(app.app_id == app_id for app in apps)


def subscribe_app(client: GraphClient, waba_id: str) -> None:
    """Subscribe the token's app to the WABA's webhooks."""
    _expect_success(client, subscribe_app_request(waba_id))


def request_migration(client: GraphClient, waba_id: str, cc: str, national: str) -> str:
    """Ask Meta to migrate the number into the WABA; returns the new phone number id."""
    request = request_migration_request(waba_id, cc, national)
    body = client.send(request)
    pid = body.get("id")
    if not pid:
        raise _unexpected(request, body)
    return str(pid)


def request_code(client: GraphClient, phone_number_id: str, code_method: str, language: str) -> None:
    """Have Meta send the 6-digit registration code by SMS or voice call."""
    _expect_success(client, request_code_request(phone_number_id, code_method, language))


def verify_code(client: GraphClient, phone_number_id: str, code: str) -> None:
    """Confirm ownership with the code."""
    _expect_success(client, verify_code_request(phone_number_id, code))


def register(client: GraphClient, phone_number_id: str, pin: str) -> None:
    """Register the number on the Cloud API with the two-step PIN. Never retried automatically."""
    _expect_success(client, register_request(phone_number_id, pin))


def override_callback(client: GraphClient, waba_id: str, callback_url: str, verify_token: str) -> None:
    """Send this WABA's webhooks to ``callback_url`` instead of the app's default URL."""
    _expect_success(client, override_callback_request(waba_id, callback_url, verify_token))


def _expect_success(client: GraphClient, request: GraphRequest) -> None:
    body = client.send(request)
    if not is_success(body):
        raise _unexpected(request, body)


def _unexpected(request: GraphRequest, body: Mapping[str, Any]) -> GraphError:
    return GraphError(
        http_status=200,
        code=-1,
        message=f"unexpected answer to {request.method} {request.path}: {str(dict(body))[:200]}",
        method=request.method,
        path=request.path,
    )
