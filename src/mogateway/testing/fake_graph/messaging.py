"""The fake Graph API's ``POST /{version}/{phone_number_id}/messages``: sends and mark-read, recorded.

Who may send: a number of the fixtures' ``cloud_numbers`` section (``{phone_number_id:
{"display_phone_number", "waba_id", "registered"}}``), or a number of the migration world that is on the
Cloud API and registered (a migration the fake has completed); the token must reach its WABA and hold the
``whatsapp_business_messaging`` scope. A number not registered answers 133010.

What it checks of a send, in this order (the first failure wins, Meta's envelope): ``messaging_product``
is ``whatsapp``; ``to`` is digits (a ``+`` and spaces allowed); ``recipient_type`` is ``individual``; the
``type`` is one Meta knows (131051 otherwise); a text has a non-empty ``text.body`` of at most 4,096
UTF-16 code units (the strictest reading of Meta's "characters"); any other type (an interactive, a
media, a location, contacts, a reaction) keeps Meta's published limits (``core.whatsapp_answer``): a
value too long or too many of something answers 131009 ("Parameter value is not valid"), a missing or
unknown member 100 ("Invalid parameter"), each with the member in the details; ``context`` has a
``message_id``. Then a scripted error, if one applies (:meth:`Messaging.script`: ``after`` lets that
many matching sends through first, to fail a part in the middle of a reply), and otherwise a new wamid.

Every call (answered with a wamid or with an error) is recorded in :attr:`Messaging.messages`, with
``message``: the message object as sent (the request without ``messaging_product``, ``recipient_type``,
``to`` and ``context``); mark-read calls in :attr:`Messaging.reads`.
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass
from typing import Any

from mogateway.core.whatsapp_answer import RichAnswerError, check_message
from mogateway.core.whatsapp_send import MAX_TEXT_UNITS, utf16_units
from mogateway.testing.fake_graph.errors import FakeGraphError, invalid_parameter, not_found
from mogateway.testing.fake_graph.world import World

#: Meta's titles and details for the codes a send can meet (reference §3), and whether Graph marks the
#: error transient.
SEND_ERRORS: dict[int, tuple[str, str, bool]] = {
    131047: (
        "Re-engagement message",
        "Message failed to send because more than 24 hours have passed since the customer last replied "
        "to this number.",
        False,
    ),
    131026: (
        "Message Undeliverable",
        "Unable to deliver message. Reasons can include: the recipient phone number is not a WhatsApp "
        "phone number; the recipient has not accepted the new Terms of Service; the recipient is using "
        "an old WhatsApp version.",
        False,
    ),
    130429: ("Rate limit hit", "Cloud API message throughput has been reached.", True),
    131056: (
        "(Business Account, Consumer Account) pair rate limit hit",
        "Too many messages sent from the sender phone number to the same recipient phone number in a "
        "short period of time.",
        True,
    ),
    131048: (
        "Spam rate limit hit",
        "Message failed to send because there are restrictions on how many messages can be sent from "
        "this phone number.",
        False,
    ),
    4: ("Application request limit reached", "Too many API calls from this app.", True),
    80007: ("Rate limit issues", "The WhatsApp Business Account has reached its rate limit.", True),
    1: ("An unknown error occurred", "Invalid request or possible server error.", True),
    2: ("Service temporarily unavailable", "The service is temporarily unavailable.", True),
    131000: ("Something went wrong", "Message failed to send due to an unknown error.", True),
    190: ("Error validating access token: Session has expired", "The access token has expired.", False),
    100: ("Invalid parameter", "A parameter is missing or invalid.", False),
    131009: ("Parameter value is not valid", "A parameter value is not valid.", False),
    131051: ("Unsupported message type", "Message type is not currently supported.", False),
    133010: ("Account not registered", "The phone number is not registered on the Cloud API.", False),
    131031: ("Business Account locked", "The WhatsApp Business Account is restricted or disabled.", False),
    368: ("Temporarily blocked for policies violations", "The account is restricted for policy.", False),
}
MESSAGE_TYPES = frozenset(
    {
        "text",
        "template",
        "image",
        "audio",
        "video",
        "document",
        "sticker",
        "interactive",
        "location",
        "contacts",
        "reaction",
    }
)


def send_error(code: int, details: str | None = None) -> FakeGraphError:
    """The error Graph answers a send with for ``code`` (any code; the table's have Meta's words)."""
    title, default_details, transient = SEND_ERRORS.get(code, ("Error", "Scripted by the test.", False))
    return FakeGraphError(code, title, details=details or default_details, is_transient=transient)


def digits_of(number: str) -> str:
    """``"+91 98123 45678"`` → ``"919812345678"``."""
    return number.replace("+", "").replace(" ", "")


@dataclass
class ScriptedError:
    """Answer ``code`` to sends to ``to`` (digits; None: any recipient) ``times`` more times (None: until
    cleared), once ``after`` more matching sends went through."""

    code: int
    to: str | None = None
    times: int | None = 1
    details: str | None = None
    after: int = 0

    def applies(self, to: str) -> bool:
        return (self.to is None or self.to == to) and (self.times is None or self.times > 0)


class Messaging:
    """What the fake's ``/messages`` endpoint remembers; one per server, cleared by ``/__fake/reset``."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.reads: list[dict[str, Any]] = []
        self.scripted: list[ScriptedError] = []

    def reset(self) -> None:
        """Forget every send, read and scripted error."""
        self.messages.clear()
        self.reads.clear()
        self.scripted.clear()

    def script(
        self,
        code: int,
        *,
        to: str | None = None,
        times: int | None = None,
        details: str | None = None,
        after: int = 0,
    ) -> None:
        """Answer ``code`` to the next send (``to`` None, ``times`` defaults to 1) or to every send to
        ``to`` (``times`` defaults to until cleared); ``after``: let that many matching sends through
        first."""
        if times is None and to is None:
            times = 1
        self.scripted.append(ScriptedError(code, digits_of(to) if to else None, times, details, after))

    def handle(
        self, world: World, token: dict[str, Any], pid: str, params: dict[str, Any], at: float
    ) -> dict[str, Any]:
        """``POST /<PHONE_NUMBER_ID>/messages``: a send or a mark-read."""
        display = self._sender(world, token, pid)
        if params.get("messaging_product") != "whatsapp":
            raise invalid_parameter("messaging_product must be whatsapp")
        if params.get("status") == "read":
            wamid = params.get("message_id")
            if not isinstance(wamid, str) or not wamid.startswith("wamid."):
                raise invalid_parameter("message_id must be the wamid of a message received")
            self.reads.append({"phone_number_id": pid, "message_id": wamid, "at": at})
            return {"success": True}
        record = self._validate(pid, display, params, at)
        self.messages.append(record)
        scripted = next((s for s in self.scripted if s.applies(record["to"])), None)
        if scripted is not None and scripted.after > 0:
            scripted.after -= 1
            scripted = None
        if scripted is not None:
            if scripted.times is not None:
                scripted.times -= 1
            record["error"] = scripted.code
            raise send_error(scripted.code, scripted.details)
        record["wamid"] = new_wamid(record["to"])
        return {
            "messaging_product": "whatsapp",
            "contacts": [{"input": str(params["to"]), "wa_id": record["to"]}],
            "messages": [{"id": record["wamid"]}],
        }

    @staticmethod
    def _sender(world: World, token: dict[str, Any], pid: str) -> str:
        """The sending number's display digits, after the access checks."""
        cloud = world.fixtures.get("cloud_numbers", {}).get(pid)
        if cloud is not None:
            if cloud.get("waba_id") not in token.get("waba_ids", []):
                raise not_found(pid, "post")
            registered = bool(cloud.get("registered", True))
            display = digits_of(str(cloud.get("display_phone_number", "")))
        else:
            number, record = world._pid_for(token, pid, "post")
            registered = (record is None or record.state == "REGISTERED") and number["status"] == "CONNECTED"
            registered = registered and number["platform_type"] == "CLOUD_API"
            display = number["cc"] + number["national"]
        if "whatsapp_business_messaging" not in token.get("scopes", []):
            raise FakeGraphError(10, "Application does not have permission for this action")
        if not registered:
            raise send_error(133010)
        return display

    @staticmethod
    def _validate(pid: str, display: str, params: dict[str, Any], at: float) -> dict[str, Any]:
        to = digits_of(str(params.get("to") or ""))
        if not to.isdigit():
            raise invalid_parameter("to must be the recipient's phone number (digits, country code first)")
        if params.get("recipient_type", "individual") != "individual":
            raise invalid_parameter("recipient_type must be individual")
        kind = params.get("type", "text")
        if kind not in MESSAGE_TYPES:
            raise send_error(131051, f"Message type {kind!r} is not supported.")
        text = None
        if kind == "text":
            content = params.get("text")
            body = content.get("body") if isinstance(content, dict) else None
            if not isinstance(body, str) or not body:
                raise invalid_parameter("text['body'] is required")
            if utf16_units(body) > MAX_TEXT_UNITS:
                raise invalid_parameter(
                    f"Param text['body'] must be at most {MAX_TEXT_UNITS} characters long."
                )
            text = body
        message = {k: v for k, v in params.items() if k not in _ENVELOPE}
        if kind != "text" and kind != "template":
            try:
                check_message(message, "")
            except RichAnswerError as exc:
                member = exc.path.lstrip(".")
                if any(w in exc.reason for w in _VALUE_WORDS):
                    raise send_error(131009, f"{member}: {exc.reason}") from None
                raise invalid_parameter(f"{member}: {exc.reason}") from None
        context = params.get("context")
        context_id = None
        if context is not None:
            context_id = context.get("message_id") if isinstance(context, dict) else None
            if not isinstance(context_id, str) or not context_id:
                raise invalid_parameter("context['message_id'] must be a wamid")
        return {
            "phone_number_id": pid,
            "from": display,
            "to": to,
            "type": kind,
            "text": text,
            "context_message_id": context_id,
            "message": message,
            "wamid": None,
            "error": None,
            "at": at,
            "body": params,
        }


#: What Meta sets around the message object (and the gateway around an answer's).
_ENVELOPE = frozenset({"messaging_product", "recipient_type", "to", "context"})
#: Reasons that mean a value out of Meta's limits (131009) rather than a missing or unknown member (100).
_VALUE_WORDS = ("characters", "at most", " to ", "used by another", "within", "must be one of")


def new_wamid(to: str) -> str:
    """A wamid shaped like Meta's: ``wamid.`` and base64 that begins with the recipient's digits."""
    raw = (
        b"\x18\x0c" + to.encode("ascii") + b"\x15\x02\x00\x11\x18\x12" + secrets.token_hex(9).upper().encode()
    )
    return "wamid." + base64.b64encode(raw).decode("ascii").rstrip("=")
