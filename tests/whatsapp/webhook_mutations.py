"""Valid WhatsApp webhooks, mutated: keys dropped, renamed or given another JSON type at any level.

What a mutated body must still give (:func:`expected_wamids`) is written from the webhook's documented
shape only: every message that can still be reached along ``entry[].changes[].value.messages[]`` of a
``messages`` change whose metadata names a phone number id, and that still has an id and a sender
(``from`` digits, or a business-scoped user id), is one message; nothing else is.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

from mogateway.testing.fake_graph import webhooks as wh

PNID = "106540352242922"
Path = tuple[str | int, ...]


def valid_body(tag: str, phone_number_id: str = PNID, business: str = "919876543210") -> dict[str, Any]:
    """A body with one message of each kind Meta sends and two statuses; wamids end in ``tag``."""
    n = iter(range(100))

    def wamid() -> str:
        return f"wamid.MUT{next(n)}.{tag}"

    messages = [
        wh.text("919812300101", "BAL", wamid=wamid()),
        wh.button_reply("919812300102", "b1", "Balance", wamid=wamid()),
        wh.media("919812300103", "image", caption="receipt", wamid=wamid()),
        wh.unrendered("919812300104", wamid=wamid()),
        wh.reaction("919812300105", "wamid.X", "\U0001f44d", wamid=wamid()),
        wh.username_text("IN.1502576394655843", "hi", wamid=wamid()),
    ]
    body = wh.webhook_body(
        messages,
        [wh.status("wamid.OUT1", "delivered", None), wh.status("wamid.OUT2", "read", "919812300101")],
        phone_number_id=phone_number_id,
        display_phone_number=business,
    )
    second = wh.webhook_body(
        [wh.text("919812300106", "HELP", wamid=wamid())],
        phone_number_id=phone_number_id,
        display_phone_number=business,
    )
    return wh.merge(body, second)


def paths(node: Any, prefix: Path = ()) -> list[Path]:
    """Every path to a member of an object or an item of a list inside ``node``."""
    out: list[Path] = []
    if isinstance(node, dict):
        for key, child in node.items():
            out.append((*prefix, key))
            out.extend(paths(child, (*prefix, key)))
    elif isinstance(node, list):
        for i, child in enumerate(node):
            out.append((*prefix, i))
            out.extend(paths(child, (*prefix, i)))
    return out


_OTHER_VALUES: list[Any] = [None, 0, 7, True, "", "x", [], {}, [1], {"a": 1}, 1.5]


def mutate(body: dict[str, Any], ops: list[tuple[int, str, int]]) -> dict[str, Any]:
    """``body`` with each ``(path index, op, value index)`` applied: ``drop`` the member or item,
    ``rename`` the member's key, ``retype`` its value to another JSON type."""
    body = copy.deepcopy(body)
    for where, op, value in ops:
        all_paths = paths(body)
        if not all_paths:
            break
        path = all_paths[where % len(all_paths)]
        parent: Any = body
        for step in path[:-1]:
            parent = parent[step]
        last = path[-1]
        if op == "drop":
            del parent[last]
        elif op == "rename" and isinstance(parent, dict):
            parent[f"{last}_renamed"] = parent.pop(last)
        else:
            parent[last] = copy.deepcopy(_OTHER_VALUES[value % len(_OTHER_VALUES)])
    return body


mutations = st.lists(
    st.tuples(st.integers(0, 10_000), st.sampled_from(["drop", "rename", "retype"]), st.integers(0, 100)),
    min_size=1,
    max_size=4,
)


def _sender(message: dict[str, Any]) -> bool:
    sender = message.get("from")
    if isinstance(sender, str) and sender.removeprefix("+").isascii() and sender.removeprefix("+").isdigit():
        return True
    user_id = message.get("from_user_id")
    return isinstance(user_id, str) and bool(user_id)


def expected_wamids(body: Any, phone_number_id: str | None = None) -> list[str]:
    """The wamids a mutated ``body`` still carries as messages (module docstring), in body order; only
    those of ``phone_number_id`` when it is given."""
    if not isinstance(body, dict) or body.get("object") != "whatsapp_business_account":
        return []
    out: list[str] = []
    entries = body.get("entry")
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, dict) or not isinstance(entry.get("changes"), list):
            continue
        for change in entry["changes"]:
            if not isinstance(change, dict) or change.get("field") != "messages":
                continue
            value = change.get("value")
            if not isinstance(value, dict) or not isinstance(value.get("messages"), list):
                continue
            metadata = value.get("metadata")
            pid = metadata.get("phone_number_id") if isinstance(metadata, dict) else None
            if not isinstance(pid, str) or not pid:
                continue
            if phone_number_id is not None and pid != phone_number_id:
                continue
            for message in value["messages"]:
                if not isinstance(message, dict):
                    continue
                wamid = message.get("id")
                if isinstance(wamid, str) and wamid and _sender(message):
                    out.append(wamid)
    return out
