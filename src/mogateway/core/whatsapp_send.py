"""WhatsApp Cloud API sending, pure: the request bodies (a text part, or any message object a rich answer
holds: ``core.whatsapp_answer``), the text split into parts, the answer read, and what a sender does
about each error. No I/O: the edge (``edges/whatsapp/graph_sender.py``) posts.

Rules (facts in the reference notes on the Cloud API, §2 and §3):

* **Parts.** A text body holds at most 4,096 characters. Meta does not say how it counts, so a part is
  kept within the limit in UTF-16 code units, which is never fewer than code points: a part fits either
  reading. A part never ends inside a surrogate pair, a code point, or (as far as the standard library
  can tell) a grapheme: never before a combining mark, a variation selector, a skin-tone modifier, a tag
  character or a zero-width joiner, never right after a zero-width joiner, never between the two regional
  indicators of a flag. It ends after the last whitespace in its second half when there is one — a blank
  line first, then a line end, then any space — and otherwise as late as it can. Nothing is dropped or
  added: ``"".join(split_text(t)) == t``.
* **Errors by code, not by HTTP status or title** (§3's table) → a :class:`SendAction`. A code the table
  does not name is retried when Graph marks it transient or the HTTP status is 5xx, and fails otherwise.
  An answer without Graph's error envelope: 5xx, 408 and 429 are retried, anything else fails.
"""

from __future__ import annotations

import enum
import unicodedata
from typing import Any, Final

import orjson

from mogateway.core.immutable import immutable

__all__ = [
    "MAX_TEXT_UNITS",
    "SendAction",
    "SendFailure",
    "action_for_code",
    "classify_answer",
    "mark_read_request",
    "message_request",
    "network_failure",
    "parse_send_answer",
    "split_text",
    "text_message",
    "text_message_request",
    "utf16_units",
]

MAX_TEXT_UNITS: Final = 4096


class SendAction(enum.StrEnum):
    """What a sender does after a failed send."""

    FAIL_NOW = "fail_now"  # record as failed with the code and details; never retry
    RETRY_BACKOFF = "retry_backoff"  # retry later, backing off, within the reply's validity
    RETRY_THIS_RECIPIENT = "retry_this_recipient"  # the pair's rate limit: wait, for this person only
    FAIL_AND_ALERT_TOKEN = "fail_and_alert_token"  # the access token is bad: fail, tell the operator
    FAIL_AND_ALERT_OPERATOR = "fail_and_alert_operator"  # account or quality trouble: fail, tell them


_ACTIONS: Final[dict[int, SendAction]] = {
    131047: SendAction.FAIL_NOW,  # more than 24 h since the person last wrote
    131026: SendAction.FAIL_NOW,  # undeliverable
    100: SendAction.FAIL_NOW,  # invalid parameter: a bug on our side
    131009: SendAction.FAIL_NOW,
    131051: SendAction.FAIL_NOW,
    130429: SendAction.RETRY_BACKOFF,  # the number's throughput
    4: SendAction.RETRY_BACKOFF,  # app call rate
    80007: SendAction.RETRY_BACKOFF,  # WABA call rate
    1: SendAction.RETRY_BACKOFF,
    2: SendAction.RETRY_BACKOFF,
    131000: SendAction.RETRY_BACKOFF,
    131056: SendAction.RETRY_THIS_RECIPIENT,
    190: SendAction.FAIL_AND_ALERT_TOKEN,
    131048: SendAction.FAIL_AND_ALERT_OPERATOR,  # spam rate limit: do not hammer
    133010: SendAction.FAIL_AND_ALERT_OPERATOR,  # the number is not registered
    131031: SendAction.FAIL_AND_ALERT_OPERATOR,  # account locked
    368: SendAction.FAIL_AND_ALERT_OPERATOR,  # restricted for policy
}
_RETRY_STATUSES: Final = frozenset({408, 429})
_MAX_DETAIL_CHARS: Final = 1000


@immutable
class SendFailure:
    """A send that did not succeed, and what to do about it. ``code`` is Graph's, or None when there was
    no error envelope (a network error, an answer from something that is not Graph)."""

    action: SendAction
    code: int | None
    title: str
    details: str
    http_status: int | None = None
    #: True when Meta may have taken the message although no wamid came back (the answer was lost or
    #: unreadable): a retry may then deliver it twice.
    maybe_sent: bool = False


def action_for_code(code: int, *, http_status: int | None = None, is_transient: bool = False) -> SendAction:
    """§3's table; for other codes, retry when transient or 5xx, fail otherwise."""
    action = _ACTIONS.get(code)
    if action is not None:
        return action
    if is_transient or (http_status is not None and http_status >= 500):
        return SendAction.RETRY_BACKOFF
    return SendAction.FAIL_NOW


def network_failure(what: str, *, maybe_sent: bool) -> SendFailure:
    """A send that got no HTTP answer: retried with backoff."""
    return SendFailure(SendAction.RETRY_BACKOFF, None, "network error", _clip(what), None, maybe_sent)


def classify_answer(http_status: int, body: bytes) -> SendFailure:
    """The failure an answer other than 2xx means (Graph's envelope when there is one)."""
    error = _envelope(body)
    if error is None:
        if http_status >= 500 or http_status in _RETRY_STATUSES:
            action = SendAction.RETRY_BACKOFF
        else:
            action = SendAction.FAIL_NOW
        return SendFailure(
            action,
            None,
            f"HTTP {http_status}",
            "the answer is not a Graph error",
            http_status,
            http_status >= 500,
        )
    code, title, details, transient = error
    action = action_for_code(code, http_status=http_status, is_transient=transient)
    return SendFailure(action, code, title, details, http_status)


def _envelope(body: bytes) -> tuple[int, str, str, bool] | None:
    """(code, title, details, is_transient) of ``{"error": {...}}``, or None."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return None
    code = error.get("code")
    if not isinstance(code, int) or isinstance(code, bool):
        return None
    title = error.get("error_user_title") or error.get("message")
    details = ""
    data_part = error.get("error_data")
    if isinstance(data_part, dict) and isinstance(data_part.get("details"), str):
        details = data_part["details"]
    elif isinstance(error.get("error_user_msg"), str):
        details = error["error_user_msg"]
    transient = error.get("is_transient") is True
    return code, _clip(title if isinstance(title, str) else ""), _clip(details), transient


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_DETAIL_CHARS else text[: _MAX_DETAIL_CHARS - 1] + "…"


def parse_send_answer(body: bytes) -> str | None:
    """The wamid of a 2xx answer to a send (``messages[0].id``), or None when it has no such shape."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    messages = data.get("messages") if isinstance(data, dict) else None
    if not isinstance(messages, list) or not messages or not isinstance(messages[0], dict):
        return None
    wamid = messages[0].get("id")
    return wamid if isinstance(wamid, str) and wamid else None


def text_message(body: str) -> dict[str, Any]:
    """The message object of a text (no link preview): one part of a text reply."""
    return {"type": "text", "text": {"preview_url": False, "body": body}}


def message_request(to: str, message: dict[str, Any], context_wamid: str | None = None) -> bytes:
    """The JSON body that sends ``message`` (a Cloud API message object without ``to``,
    ``messaging_product``, ``recipient_type`` and ``context``: ``core.whatsapp_answer``) to ``to``
    (digits), as a reply to ``context_wamid`` when given."""
    request: dict[str, Any] = {"messaging_product": "whatsapp", "recipient_type": "individual", "to": to}
    request.update(message)
    if context_wamid:
        request["context"] = {"message_id": context_wamid}
    return orjson.dumps(request)


def text_message_request(to: str, body: str, context_wamid: str | None = None) -> bytes:
    """The JSON body of a text send to ``to`` (digits), as a reply to ``context_wamid`` when given."""
    return message_request(to, text_message(body), context_wamid)


def mark_read_request(wamid: str) -> bytes:
    """The JSON body that marks an inbound message read."""
    return orjson.dumps({"messaging_product": "whatsapp", "status": "read", "message_id": wamid})


# -- splitting ---------------------------------------------------------------------------------------


def utf16_units(text: str) -> int:
    """The length of ``text`` in UTF-16 code units."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


_ZWJ: Final = "\u200d"


def _extends(ch: str) -> bool:
    """True for a code point that belongs to the grapheme before it."""
    code = ord(ch)
    if ch == _ZWJ or 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF:
        return True
    if 0x1F3FB <= code <= 0x1F3FF or 0xE0020 <= code <= 0xE007F:  # skin tones, tag characters
        return True
    return unicodedata.category(ch) in ("Mn", "Me", "Mc")


def _regional(ch: str) -> bool:
    return 0x1F1E6 <= ord(ch) <= 0x1F1FF


def _can_break(text: str, i: int) -> bool:
    """True when a part may end just before ``text[i]`` (0 < i < len(text))."""
    if _extends(text[i]) or text[i - 1] == _ZWJ:
        return False
    if _regional(text[i]) and _regional(text[i - 1]):
        run = 0  # the flags before i: break only between pairs
        j = i - 1
        while j >= 0 and _regional(text[j]):
            run += 1
            j -= 1
        return run % 2 == 0
    return True


def split_text(text: str, limit: int = MAX_TEXT_UNITS) -> list[str]:
    """``text`` in parts of at most ``limit`` UTF-16 units (module docstring); ``[]`` for ``""``."""
    if limit < 2:
        raise ValueError("limit must be at least 2 (a surrogate pair)")
    parts: list[str] = []
    start = 0
    while start < len(text):
        end = _fit(text, start, limit)
        if end >= len(text):
            parts.append(text[start:])
            break
        cut = _best_break(text, start, end)
        parts.append(text[start:cut])
        start = cut
    return parts


def _fit(text: str, start: int, limit: int) -> int:
    """The largest end such that ``text[start:end]`` has at most ``limit`` UTF-16 units."""
    end = min(len(text), start + limit)
    if utf16_units(text[start:end]) <= limit:
        return end
    units = 0
    i = start
    while i < end:
        units += 2 if ord(text[i]) > 0xFFFF else 1
        if units > limit:
            return i
        i += 1
    return i


def _best_break(text: str, start: int, end: int) -> int:
    """Where the part ``text[start:end]`` (too long to end the text) should end."""
    half = start + max(1, (end - start) // 2)
    for separator in ("\n\n", "\n"):
        pos = text.rfind(separator, start, end)
        while pos >= 0 and pos + len(separator) > half:
            cut = pos + len(separator)
            if _whitespace_end(text, cut, separator) and _can_break(text, cut):
                return cut
            pos = text.rfind(separator, start, cut - 1)
    i = end
    while i > half:
        if _whitespace_end(text, i, None) and _can_break(text, i):
            return i
        i -= 1
    i = end
    while i > start + 1 and not _can_break(text, i):
        i -= 1
    # A grapheme longer than a whole part (a pathological run of combining marks) is cut anyway.
    return i if i > start + 1 or _can_break(text, i) else end


def _whitespace_end(text: str, i: int, separator: str | None) -> bool:
    """True when ``text[:i]`` ends with ``separator`` (any whitespace for None) and ``text[i]`` is not
    whitespace: a part ends after a whole whitespace run."""
    if text[i].isspace():
        return False
    if separator is None:
        return text[i - 1].isspace()
    return text[i - len(separator) : i] == separator
