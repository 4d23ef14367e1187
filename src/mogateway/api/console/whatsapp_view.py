"""What the console's message page shows of a WhatsApp message: its callback member (``whatsapp`` in
the admin API's message view, ``core.whatsapp_member``) as labelled facts an operator reads.

:func:`whatsapp_facts` turns the member into rows ``(label, value, kind)``: ``kind`` is ``"text"``
(free text the person sent: a caption, a name), ``"id"`` (a wamid, a media id: monospaced), or
``"plain"``. Every value is text rendered by the autoescaping template, never markup: a caption or a
file name with ``<script>`` in it shows as those characters. Only what Meta sent appears (the member
leaves out what is absent); a member of a type this page does not know shows its type alone.
"""

from __future__ import annotations

from typing import Any, Final, Literal

__all__ = ["Fact", "whatsapp_facts"]

FactKind = Literal["text", "id", "plain"]
Fact = tuple[str, str, FactKind]

_MEDIA: Final = ("image", "audio", "video", "document", "sticker")
_SUBTYPES: Final = {"button_reply": "reply button", "list_reply": "list row", "nfm_reply": "Flow answer"}


def _size(n: int) -> str:
    """``303833`` -> ``296.7 KiB (303,833 bytes)``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit} ({n:,} bytes)"
    return f"{n:,} bytes"


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _yes(value: Any) -> bool:
    return value is True


def _add(out: list[Fact], label: str, value: Any, kind: FactKind = "plain") -> None:
    if isinstance(value, str) and value:
        out.append((label, value, kind))
    elif isinstance(value, int | float) and not isinstance(value, bool):
        out.append((label, _number(value), kind))


def _context(member: dict[str, Any], out: list[Fact]) -> None:
    context = member.get("context")
    if not isinstance(context, dict):
        return
    _add(out, "In reply to", context.get("id"), "id")
    if _yes(context.get("frequently_forwarded")):
        out.append(("Forwarded", "many times", "plain"))
    elif _yes(context.get("forwarded")):
        out.append(("Forwarded", "yes", "plain"))


def _referral(member: dict[str, Any], out: list[Fact]) -> None:
    ad = member.get("referral")
    if not isinstance(ad, dict):
        return
    source = " ".join(str(ad[k]) for k in ("source_type", "source_id") if isinstance(ad.get(k), str))
    _add(out, "From an ad", source or "yes")
    _add(out, "Ad headline", ad.get("headline"), "text")
    _add(out, "Ad text", ad.get("body"), "text")
    _add(out, "Ad URL", ad.get("source_url"), "id")
    _add(out, "Ad click id", ad.get("ctwa_clid"), "id")


def _media(obj: dict[str, Any], out: list[Fact]) -> None:
    _add(out, "File name", obj.get("filename"), "text")
    _add(out, "MIME type", obj.get("mime_type"))
    size = obj.get("file_size")
    if isinstance(size, int) and not isinstance(size, bool):
        out.append(("Size", _size(size), "plain"))
    _add(out, "Caption", obj.get("caption"), "text")
    if _yes(obj.get("voice")):
        out.append(("Voice note", "yes", "plain"))
    if _yes(obj.get("animated")):
        out.append(("Animated", "yes", "plain"))
    _add(out, "Media id", obj.get("id"), "id")
    _add(out, "SHA-256", obj.get("sha256"), "id")


def _location(obj: dict[str, Any], out: list[Fact]) -> None:
    lat, lon = obj.get("latitude"), obj.get("longitude")
    if isinstance(lat, int | float) and isinstance(lon, int | float):
        out.append(("Coordinates", f"{_number(lat)}, {_number(lon)}", "id"))
    _add(out, "Place", obj.get("name"), "text")
    _add(out, "Address", obj.get("address"), "text")
    _add(out, "Map URL", obj.get("url"), "id")


def _card(card: dict[str, Any]) -> str:
    name = card.get("name")
    who = name.get("formatted_name") if isinstance(name, dict) else None
    parts: list[str] = []
    for phone in card.get("phones") or ():
        if isinstance(phone, dict) and isinstance(phone.get("phone"), str):
            wa = phone.get("wa_id")
            parts.append(phone["phone"] + (f" (WhatsApp {wa})" if isinstance(wa, str) else ""))
    parts.extend(e["email"] for e in card.get("emails") or () if isinstance(e, dict) and "email" in e)
    org = card.get("org")
    if isinstance(org, dict) and isinstance(org.get("company"), str):
        parts.append(org["company"])
    head = who if isinstance(who, str) and who else "(no name)"
    return head + (": " + ", ".join(parts) if parts else "")


def _interactive(obj: dict[str, Any], out: list[Fact]) -> None:
    kind = obj.get("type")
    for sub in ("button_reply", "list_reply"):
        reply = obj.get(sub)
        if isinstance(reply, dict):
            what = "Button" if sub == "button_reply" else "List row"
            _add(out, f"{what} id", reply.get("id"), "id")
            _add(out, f"{what} title", reply.get("title"), "text")
            _add(out, f"{what} description", reply.get("description"), "text")
    flow = obj.get("nfm_reply")
    if isinstance(flow, dict):
        _add(out, "Flow", flow.get("name"))
        _add(out, "Flow answer", flow.get("response_json"), "id")
    if isinstance(kind, str) and not any(isinstance(obj.get(s), dict) for s in _SUBTYPES):
        out.append(("Interactive type", kind, "plain"))


def _order(obj: dict[str, Any], out: list[Fact]) -> None:
    _add(out, "Catalog", obj.get("catalog_id"), "id")
    for item in obj.get("product_items") or ():
        if not isinstance(item, dict):
            continue
        line = str(item.get("product_retailer_id", "?"))
        if "quantity" in item:
            line += f" × {item['quantity']}"
        if "item_price" in item:
            line += f" at {_number(item['item_price'])} {item.get('currency', '')}".rstrip()
        out.append(("Item", line, "text"))
    _add(out, "Note", obj.get("text"), "text")


def _unsupported(obj: dict[str, Any], out: list[Fact]) -> None:
    _add(out, "What it was", obj.get("type"))
    for error in obj.get("errors") or ():
        if isinstance(error, dict):
            words = " ".join(str(error[k]) for k in ("code", "title") if k in error)
            details = error.get("details")
            out.append(("Meta's error", words + (f": {details}" if details else ""), "text"))


def whatsapp_facts(member: Any) -> list[Fact]:
    """The facts of the callback member ``member`` (a decoded ``whatsapp`` member), in reading order:
    the type, then what the type carries, then its context and referral. ``[]`` for no member."""
    if not isinstance(member, dict):
        return []
    kind = member.get("type") if isinstance(member.get("type"), str) else ""
    obj = member.get(kind)
    out: list[Fact] = []
    label = kind or "unknown"
    if kind == "interactive" and isinstance(obj, dict) and obj.get("type") in _SUBTYPES:
        label = f"interactive ({_SUBTYPES[obj['type']]})"
    elif kind == "audio" and isinstance(obj, dict) and _yes(obj.get("voice")):
        label = "audio (voice note)"
    elif kind == "button":
        label = "button (a template's quick reply)"
    out.append(("WhatsApp type", label, "plain"))
    _add(out, "Profile name", member.get("profile_name"), "text")
    if kind in _MEDIA and isinstance(obj, dict):
        _media(obj, out)
    elif kind == "location" and isinstance(obj, dict):
        _location(obj, out)
    elif kind == "contacts" and isinstance(obj, list):
        for card in obj:
            if isinstance(card, dict):
                out.append(("Contact", _card(card), "text"))
    elif kind == "reaction" and isinstance(obj, dict):
        emoji = obj.get("emoji")
        out.append(("Reaction", emoji if isinstance(emoji, str) and emoji else "(removed)", "text"))
        _add(out, "Reacted to", obj.get("message_id"), "id")
    elif kind == "interactive" and isinstance(obj, dict):
        _interactive(obj, out)
    elif kind == "button" and isinstance(obj, dict):
        _add(out, "Button payload", obj.get("payload"), "id")
        _add(out, "Button text", obj.get("text"), "text")
    elif kind == "order" and isinstance(obj, dict):
        _order(obj, out)
    elif kind == "system" and isinstance(obj, dict):
        _add(out, "Notice", obj.get("type"))
        _add(out, "Notice text", obj.get("body"), "text")
        _add(out, "New WhatsApp id", obj.get("new_wa_id"), "id")
    elif kind in ("unsupported", "unknown") and isinstance(obj, dict):
        _unsupported(obj, out)
    _context(member, out)
    _referral(member, out)
    return out
