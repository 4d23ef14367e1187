# ruff: noqa: E501
"""Rich WhatsApp answers (core.whatsapp_answer, and judge_response on the WhatsApp channel): every limit
of Meta's, at the limit and one past it; the stored form; SMS unchanged."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from mogateway.core.contract import OutcomeKind, judge_response
from mogateway.core.whatsapp_answer import (
    LIMITS,
    MAX_MESSAGES,
    RICH_MARK,
    RichAnswerError,
    check_answer,
    check_message,
    decode_reply,
    describe,
    encode_reply,
)
from mogateway.core.whatsapp_send import message_request, text_message_request

Message = dict[str, Any]


def buttons(n: int = 3) -> Message:
    return {
        "type": "interactive",
        "interactive": {
            "type": "button",
            "header": {"type": "text", "text": "Your bill"},
            "body": {"text": "Pay now?"},
            "footer": {"text": "Reply any time"},
            "action": {
                "buttons": [
                    {"type": "reply", "reply": {"id": f"b{i}", "title": f"Option {i}"}} for i in range(n)
                ]
            },
        },
    }


def a_list(rows_per_section: tuple[int, ...] = (3,)) -> Message:
    sections = []
    n = 0
    for s, count in enumerate(rows_per_section):
        rows = []
        for _ in range(count):
            rows.append({"id": f"r{n}", "title": f"Row {n}", "description": "about it"})
            n += 1
        sections.append({"title": f"Section {s}", "rows": rows})
    return {
        "type": "interactive",
        "interactive": {
            "type": "list",
            "body": {"text": "Choose a plan"},
            "action": {"button": "Plans", "sections": sections},
        },
    }


def cta() -> Message:
    return {
        "type": "interactive",
        "interactive": {
            "type": "cta_url",
            "body": {"text": "Track your order"},
            "action": {"name": "cta_url", "parameters": {"display_text": "Track", "url": "https://x.in/t"}},
        },
    }


def image() -> Message:
    return {"type": "image", "image": {"link": "https://x.in/bill.png", "caption": "Your bill"}}


def document() -> Message:
    return {"type": "document", "document": {"id": "1234567890", "filename": "bill.pdf", "caption": "Bill"}}


# (name, a valid message, how to put it at a limit, the limit's key)
LIMIT_CASES: list[tuple[str, Callable[[], Message], Callable[[Message, int], None], str]] = [
    ("text body", lambda: {"type": "text", "text": {"body": "hi"}}, lambda m, n: m["text"].update(body="a" * n), "text.body"),
    ("interactive body", buttons, lambda m, n: m["interactive"]["body"].update(text="a" * n), "interactive.body.text"),
    ("header text", buttons, lambda m, n: m["interactive"]["header"].update(text="a" * n), "interactive.header.text"),
    ("footer text", buttons, lambda m, n: m["interactive"]["footer"].update(text="a" * n), "interactive.footer.text"),
    ("button title", buttons, lambda m, n: m["interactive"]["action"]["buttons"][0]["reply"].update(title="a" * n), "button.title"),
    ("button id", buttons, lambda m, n: m["interactive"]["action"]["buttons"][0]["reply"].update(id="a" * n), "button.id"),
    ("list button", a_list, lambda m, n: m["interactive"]["action"].update(button="a" * n), "list.button"),
    ("section title", a_list, lambda m, n: m["interactive"]["action"]["sections"][0].update(title="a" * n), "list.section.title"),
    ("row id", a_list, lambda m, n: m["interactive"]["action"]["sections"][0]["rows"][0].update(id="a" * n), "list.row.id"),
    ("row title", a_list, lambda m, n: m["interactive"]["action"]["sections"][0]["rows"][0].update(title="a" * n), "list.row.title"),
    ("row description", a_list, lambda m, n: m["interactive"]["action"]["sections"][0]["rows"][0].update(description="a" * n), "list.row.description"),
    ("cta display text", cta, lambda m, n: m["interactive"]["action"]["parameters"].update(display_text="a" * n), "cta_url.display_text"),
    ("image caption", image, lambda m, n: m["image"].update(caption="a" * n), "media.caption"),
    ("document filename", document, lambda m, n: m["document"].update(filename="a" * n), "media.filename"),
    ("opaque data", image, lambda m, n: m.update(biz_opaque_callback_data="a" * n), "biz_opaque_callback_data"),
    ("location name", lambda: {"type": "location", "location": {"latitude": 0, "longitude": 0}}, lambda m, n: m["location"].update(name="a" * n), "location.text"),
    ("link", image, lambda m, n: m["image"].update(link="https://x.in/" + "a" * (n - 13)), "url"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "make", "put", "key"), LIMIT_CASES, ids=[c[0] for c in LIMIT_CASES])
def test_each_length_limit_holds_at_the_limit_and_refuses_one_more(
    name: str, make: Callable[[], Message], put: Callable[[Message, int], None], key: str
) -> None:
    limit = LIMITS[key]
    at_limit = make()
    put(at_limit, limit)
    assert check_message(at_limit) is at_limit
    over = make()
    put(over, limit + 1)
    with pytest.raises(RichAnswerError) as err:
        check_message(over)
    assert f"at most {limit}" in err.value.reason or "longer than" in err.value.reason


def test_the_published_limits() -> None:
    # Meta's numbers (the pages named next to each in core/whatsapp_answer.py): a change here is a
    # change of Meta's documentation, not of the code.
    assert LIMITS == {
        "text.body": 4096,
        "interactive.body.text": 1024,
        "interactive.header.text": 60,
        "interactive.footer.text": 60,
        "button.count": 3,
        "button.title": 20,
        "button.id": 256,
        "list.button": 20,
        "list.sections": 10,
        "list.rows": 10,
        "list.section.title": 24,
        "list.row.id": 200,
        "list.row.title": 24,
        "list.row.description": 72,
        "cta_url.display_text": 20,
        "media.caption": 1024,
        "media.filename": 240,
        "biz_opaque_callback_data": 512,
        "location.text": 1000,
        "url": 2000,
    }


def test_three_buttons_but_not_four_nor_none() -> None:
    check_message(buttons(3))
    for n in (0, 4):
        with pytest.raises(RichAnswerError, match=r"1 to 3 buttons"):
            check_message(buttons(n))


def test_button_ids_and_titles_are_unique() -> None:
    same_id = buttons(2)
    same_id["interactive"]["action"]["buttons"][1]["reply"]["id"] = "b0"
    with pytest.raises(RichAnswerError, match="used by another button") as err:
        check_message(same_id)
    assert err.value.path == "whatsapp.interactive.action.buttons[1].reply.id"
    same_title = buttons(2)
    same_title["interactive"]["action"]["buttons"][1]["reply"]["title"] = "Option 0"
    with pytest.raises(RichAnswerError, match="used by another button"):
        check_message(same_title)


def test_ten_rows_in_all_sections_but_not_eleven() -> None:
    check_message(a_list((5, 5)))
    with pytest.raises(RichAnswerError, match="11 rows; at most 10"):
        check_message(a_list((6, 5)))


def test_at_most_ten_sections() -> None:
    many = a_list((1,) * 10)
    check_message(many)
    eleven = a_list((1,) * 10)
    eleven["interactive"]["action"]["sections"].append({"title": "more", "rows": [{"id": "z", "title": "z"}]})
    with pytest.raises(RichAnswerError, match="1 to 10 sections"):
        check_message(eleven)


def test_row_ids_are_unique_across_sections() -> None:
    dup = a_list((1, 1))
    dup["interactive"]["action"]["sections"][1]["rows"][0]["id"] = "r0"
    with pytest.raises(RichAnswerError, match="used by another row"):
        check_message(dup)


def test_several_sections_each_need_a_title_one_section_does_not() -> None:
    one = a_list((2,))
    del one["interactive"]["action"]["sections"][0]["title"]
    check_message(one)
    two = a_list((1, 1))
    del two["interactive"]["action"]["sections"][1]["title"]
    with pytest.raises(RichAnswerError, match="required") as err:
        check_message(two)
    assert err.value.path.endswith("sections[1].title")


def test_a_list_header_is_text_only() -> None:
    m = a_list()
    m["interactive"]["header"] = {"type": "image", "image": {"link": "https://x.in/a.png"}}
    with pytest.raises(RichAnswerError, match="must be one of text"):
        check_message(m)
    b = buttons()
    b["interactive"]["header"] = {"type": "image", "image": {"link": "https://x.in/a.png"}}
    check_message(b)


def test_cta_url_needs_its_name_and_an_http_url() -> None:
    m = cta()
    m["interactive"]["action"]["name"] = "open"
    with pytest.raises(RichAnswerError, match="must be cta_url"):
        check_message(m)
    m = cta()
    m["interactive"]["action"]["parameters"]["url"] = "javascript:alert(1)"
    with pytest.raises(RichAnswerError, match="http"):
        check_message(m)


def test_media_by_link_or_id_never_both_nor_neither() -> None:
    for content in ({"link": "https://x.in/a.png", "id": "1"}, {"caption": "c"}):
        with pytest.raises(RichAnswerError, match="exactly one of id"):
            check_message({"type": "image", "image": content})
    check_message({"type": "video", "video": {"id": "998"}})


def test_audio_and_sticker_take_no_caption() -> None:
    for kind in ("audio", "sticker"):
        check_message({"type": kind, kind: {"link": "https://x.in/a"}})
        with pytest.raises(RichAnswerError, match="not a member"):
            check_message({"type": kind, kind: {"link": "https://x.in/a", "caption": "c"}})
    with pytest.raises(RichAnswerError, match="not a member"):
        check_message({"type": "image", "image": {"link": "https://x.in/a", "filename": "a.png"}})


def test_location_within_the_globe() -> None:
    check_message({"type": "location", "location": {"latitude": 28.6, "longitude": 77.2, "name": "Office"}})
    for lat, lon in ((90.1, 0), (0, -180.5), ("28.6", 77.2), (True, 1)):
        with pytest.raises(RichAnswerError):
            check_message({"type": "location", "location": {"latitude": lat, "longitude": lon}})


def test_contacts_need_a_formatted_name() -> None:
    good = {"name": {"formatted_name": "Help desk"}, "phones": [{"phone": "+911234567890"}]}
    check_message({"type": "contacts", "contacts": [good]})
    with pytest.raises(RichAnswerError, match="formatted_name"):
        check_message({"type": "contacts", "contacts": [{"name": {"first_name": "A"}}]})
    with pytest.raises(RichAnswerError, match="non-empty list"):
        check_message({"type": "contacts", "contacts": []})


def test_reaction_needs_the_message_and_may_remove() -> None:
    check_message({"type": "reaction", "reaction": {"message_id": "wamid.X", "emoji": "👍"}})
    check_message({"type": "reaction", "reaction": {"message_id": "wamid.X", "emoji": ""}})
    with pytest.raises(RichAnswerError, match="message_id"):
        check_message({"type": "reaction", "reaction": {"emoji": "👍"}})


@pytest.mark.parametrize("member", ["to", "messaging_product", "recipient_type", "context"])
def test_members_the_gateway_sets_are_refused(member: str) -> None:
    m: Message = {"type": "text", "text": {"body": "hi"}, member: "x"}
    with pytest.raises(RichAnswerError, match="set by the gateway") as err:
        check_message(m)
    assert err.value.path == f"whatsapp.{member}"


def test_unknown_types_and_members_are_refused_with_their_path() -> None:
    with pytest.raises(RichAnswerError, match="must be one of"):
        check_message({"type": "template", "template": {"name": "x"}})
    with pytest.raises(RichAnswerError, match="has no member image"):
        check_message({"type": "text", "text": {"body": "hi"}, "image": {}})
    m = buttons()
    m["interactive"]["action"]["buttons"][0]["reply"]["payload"] = "x"
    with pytest.raises(RichAnswerError) as err:
        check_message(m)
    assert err.value.path == "whatsapp.interactive.action.buttons[0].reply.payload"


def test_an_answer_is_one_message_or_one_to_five() -> None:
    assert check_answer({"whatsapp": image()}) == (image(),)
    assert len(check_answer({"whatsapp": [image()] * MAX_MESSAGES})) == 5
    for bad in ([], [image()] * 6):
        with pytest.raises(RichAnswerError, match="1 to 5 messages"):
            check_answer({"whatsapp": bad})
    with pytest.raises(RichAnswerError, match="besides whatsapp"):
        check_answer({"whatsapp": image(), "sms": "x"})
    with pytest.raises(RichAnswerError) as err:
        check_answer({"whatsapp": [image(), buttons(4)]})
    assert err.value.path.startswith("whatsapp[1].")


def test_the_stored_form_round_trips_and_never_mixes_with_text() -> None:
    messages = (buttons(), image())
    text = encode_reply(messages)
    assert text.startswith(RICH_MARK)
    assert decode_reply(text) == messages
    assert decode_reply("You said HELLO") is None
    assert describe(messages) == ["interactive button", "image"]
    # A text answer beginning with the mark is stripped of it: it stays a text reply.
    outcome = judge_response(200, "text/plain", (RICH_MARK + '[{"type":"text"}]').encode())
    assert outcome.reply is not None and decode_reply(outcome.reply) is None


# ------------------------------------------------------------------------------------ judge_response


def _json(data: Any) -> bytes:
    return orjson.dumps(data)


def test_whatsapp_json_answer_is_a_rich_reply() -> None:
    answer = {"whatsapp": [buttons(), image()]}
    outcome = judge_response(200, "application/json; charset=utf-8", _json(answer), channel="whatsapp")
    assert outcome.kind is OutcomeKind.REPLY
    assert outcome.reply is not None and decode_reply(outcome.reply) == (buttons(), image())


def test_an_invalid_whatsapp_json_answer_is_a_bad_response_with_the_reason() -> None:
    outcome = judge_response(200, "application/json", _json({"whatsapp": buttons(4)}), channel="whatsapp")
    assert outcome.kind is OutcomeKind.BAD_RESPONSE
    assert (
        outcome.detail == "rich answer: whatsapp.interactive.action.buttons: must be a list of 1 to 3 buttons"
    )
    broken = judge_response(200, "application/json", b"{not json", channel="whatsapp")
    assert broken.kind is OutcomeKind.BAD_RESPONSE and "not JSON" in broken.detail
    big = judge_response(
        200, "application/json", _json({"whatsapp": image()}), oversized=True, channel="whatsapp"
    )
    assert big.kind is OutcomeKind.BAD_RESPONSE and "larger than" in big.detail


def test_on_sms_a_json_answer_stays_a_bad_response() -> None:
    body = _json({"whatsapp": {"type": "text", "text": {"body": "hi"}}})
    for kwargs in ({}, {"channel": "sms"}):
        outcome = judge_response(200, "application/json", body, **kwargs)  # type: ignore[arg-type]
        assert (
            outcome.kind is OutcomeKind.BAD_RESPONSE and outcome.detail == "content type 'application/json'"
        )


def test_text_answers_are_unchanged_on_whatsapp() -> None:
    outcome = judge_response(200, "text/plain", b"Hello\\nthere", channel="whatsapp")
    assert (outcome.kind, outcome.reply) == (OutcomeKind.REPLY, "Hello\nthere")


def test_a_message_request_wraps_the_object_and_a_text_keeps_its_bytes() -> None:
    assert message_request("919812345678", copy.deepcopy(image()), "wamid.A") == _json(
        {
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": "919812345678",
            "type": "image",
            "image": {"link": "https://x.in/bill.png", "caption": "Your bill"},
            "context": {"message_id": "wamid.A"},
        }
    )
    assert text_message_request("91", "hi") == (
        b'{"messaging_product":"whatsapp","recipient_type":"individual","to":"91","type":"text",'
        b'"text":{"preview_url":false,"body":"hi"}}'
    )
