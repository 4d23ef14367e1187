"""DLT templates in the pure core (core/dlt.py): ids, parsing, matching, specificity, the chain hash."""

from __future__ import annotations

import hashlib
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mogateway.core.dlt import (
    DEFAULT_VAR_MAX,
    DltInvalid,
    TemplateSet,
    chain_hash,
    check_dlt_id,
    check_tm_id,
    parse_template,
)

T1 = "1107161234567890001"
T2 = "1107161234567890002"
T3 = "1107161234567890003"


# ------------------------------------------------------------------------------------------- ids


def test_dlt_ids_are_19_digits() -> None:
    assert check_dlt_id("1101234567890123456") == "1101234567890123456"
    for bad in (
        "110123456789012345",
        "11012345678901234567",
        "11012345678901234x6",
        "",
        " 1101234567890123456",
    ):
        with pytest.raises(DltInvalid) as caught:
            check_dlt_id(bad, "dlt_pe_id")
        assert caught.value.field == "dlt_pe_id" and "19 digits" in caught.value.reason
    # Non-ASCII digits are digits to str.isdigit but never to an operator.
    with pytest.raises(DltInvalid):
        check_dlt_id("١١٠١٢٣٤٥٦٧٨٩٠١٢٣٤٥٦")


def test_tm_ids_may_be_a_chain() -> None:
    assert check_tm_id("1702158080400000123") == "1702158080400000123"
    assert check_tm_id("1702158080400000123,1602100000000004471") == "1702158080400000123,1602100000000004471"
    for bad in ("", "17021,", "abc", "1702 1602"):
        with pytest.raises(DltInvalid):
            check_tm_id(bad)


def test_the_chain_hash_is_sha256_of_pe_comma_tm() -> None:
    pe, tm = "1101234567890123456", "1702158080400000123"
    expected = hashlib.sha256(b"1101234567890123456,1702158080400000123").hexdigest()
    assert chain_hash(pe, tm) == expected
    assert len(expected) == 64 and expected == expected.lower()


# -------------------------------------------------------------------------------------- parsing


def test_a_template_is_split_into_fixed_text_and_variables() -> None:
    t = parse_template(T1, "  Dear {#var#}, your OTP is {#numeric#}. Call {#cbn#}  ")
    assert t.text == "Dear {#var#}, your OTP is {#numeric#}. Call {#cbn#}"  # stripped like a reply
    assert t.fixed == ("Dear ", ", your OTP is ", ". Call ", "")
    assert t.kinds == ("var", "numeric", "cbn")
    assert t.variables == 3 and t.fixed_chars == len("Dear , your OTP is . Call ")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "is empty"),
        ("   ", "is empty"),
        ("{#var#}", "no fixed text"),
        ("{#var#} {#var#}", "no fixed text"),
        ("Your OTP is {#VAR#}", "'{#VAR#}' at character 13 is not a DLT variable"),
        ("Your OTP is {#var}", "'{#var}' at character 13"),
        ("Your OTP is {var}", "'{var}'"),
        ("Your OTP is ##var##", "'##var##'"),
        ("Your OTP is {# var #}", "'{# var #}'"),
        ("Your OTP is {#otp#}", "'{#otp#}'"),
        ("x" * 2001, "at most 2000"),
    ],
)
def test_malformed_templates_are_refused_with_the_reason(text: str, why: str) -> None:
    with pytest.raises(DltInvalid) as caught:
        parse_template(T1, text)
    assert caught.value.field == "text"
    assert why in caught.value.reason


def test_a_malformed_template_id_is_refused_before_the_text() -> None:
    with pytest.raises(DltInvalid) as caught:
        parse_template("1107", "Hello {#var#}")
    assert caught.value.field == "template_id"


def test_newlines_in_a_template_get_the_replys_unescaping() -> None:
    # The application answers "Bal: 42\\nThanks" and the gateway turns \\n into a line break: a template
    # registered with a literal \\n must compare the same way.
    t = parse_template(T1, "Bal: {#var#}\\nThanks", unescape_newlines=True)
    assert t.match("Bal: 42\nThanks")
    kept = parse_template(T1, "Bal: {#var#}\\nThanks", unescape_newlines=False)
    assert kept.match("Bal: 42\\nThanks") and not kept.match("Bal: 42\nThanks")


# -------------------------------------------------------------------------------------- matching


def test_fixed_text_is_compared_exactly() -> None:
    t = parse_template(T1, "Your balance is {#var#}.")
    assert t.match("Your balance is Rs 42.")
    assert not t.match("your balance is Rs 42.")  # case
    assert not t.match("Your balance is  Rs 42")  # the final full stop
    assert not t.match("Your balance is Rs 42. ")  # a trailing space
    assert not t.match("Your  balance is Rs 42.")


def test_a_variable_holds_1_to_30_characters_of_any_kind() -> None:
    t = parse_template(T1, "Code {#var#} ok")
    assert not t.match("Code  ok")  # empty
    assert t.match("Code x ok")
    assert t.match("Code " + "y" * 30 + " ok")
    assert not t.match("Code " + "y" * 31 + " ok")
    assert t.match("Code a\nb ok")  # any character, a line break too
    assert TemplateSet.compile([(T1, "Code {#var#} ok")], var_max=40).match("Code " + "y" * 31 + " ok")


def test_typed_variables_hold_only_their_kind() -> None:
    otp = parse_template(T1, "OTP {#numeric#} valid")
    assert otp.match("OTP 123456 valid") and not otp.match("OTP 12a456 valid")
    ref = parse_template(T1, "Ref {#alphanumeric#}.")
    assert ref.match("Ref AB12cd.") and ref.match("Ref राम.") and not ref.match("Ref AB-12.")
    link = parse_template(T1, "Track {#url#} now")
    assert link.match("Track https://ex.in/a now") and not link.match("Track ex .in now")
    cbn = parse_template(T1, "Call {#cbn#}")
    assert cbn.match("Call +91-9810012345") and not cbn.match("Call us")


def test_adjacent_variables_share_the_characters_between_them() -> None:
    # The portals' own advice for a long link: {#var#}{#var#} holds 2 to 60 characters.
    t = parse_template(T1, "Link: {#var#}{#var#}")
    assert t.match("Link: " + "u" * 60)
    assert not t.match("Link: " + "u" * 61)
    assert not t.match("Link: u")


def test_the_most_specific_template_wins() -> None:
    templates = TemplateSet.compile(
        [
            (T1, "{#var#} balance is {#var#}."),  # two variables
            (T2, "Your balance is {#var#}."),  # one variable, more fixed text
            (T3, "Your {#var#}"),  # one variable, less fixed text
        ]
    )
    match = templates.match("Your balance is 42.")
    assert match is not None and match.template_id == T2
    match = templates.match("Your order shipped")
    assert match is not None and match.template_id == T3
    match = templates.match("My balance is 42.")
    assert match is not None and match.template_id == T1
    assert templates.match("Nothing like it") is None


def test_a_template_without_variables_is_most_specific() -> None:
    templates = TemplateSet.compile([(T1, "Thanks {#var#}"), (T2, "Thanks for voting")])
    match = templates.match("Thanks for voting")
    assert match is not None and match.template_id == T2


def test_a_typed_variable_beats_an_untyped_one_then_the_smaller_id() -> None:
    templates = TemplateSet.compile([(T1, "Bal {#var#}"), (T2, "Bal {#numeric#}"), (T3, "Bal {#var#}")])
    numeric = templates.match("Bal 42")
    assert numeric is not None and numeric.template_id == T2
    any_text = templates.match("Bal Rs42")
    assert any_text is not None and any_text.template_id == T1  # T1 and T3 tie: the smaller id


def test_why_none_matches_names_the_closest_templates() -> None:
    templates = TemplateSet.compile(
        [(T1, "Your balance is {#var#}."), (T2, "Your OTP is {#numeric#}."), (T3, "Welcome to our store")]
    )
    closest, *_ = templates.explain("Your balance is: 42.")
    assert closest.template_id == T1
    assert "character 16" in closest.reason
    (otp,) = [m for m in templates.explain("Your OTP is 12ab.", limit=3) if m.template_id == T2]
    assert "{#numeric#} (digits 0-9)" in otp.reason
    (long,) = templates.explain("Your balance is " + "9" * 31 + ".", limit=1)
    assert long.reason == "a variable would need more than 30 characters"
    (end,) = templates.explain("Your balance is 42!", limit=1)
    assert "should end with '.'" in end.reason


# -------------------------------------------------------------------------------- property tests

_FIXED = st.text(st.characters(codec="utf-8", exclude_characters="{}#"), min_size=1, max_size=20)
_VALUE_ALPHABET = st.characters(codec="utf-8", exclude_characters="{}#", exclude_categories=("Cs",))


@st.composite
def _template_and_values(draw: st.DrawFn) -> tuple[str, list[str]]:
    count = draw(st.integers(1, 4))
    fixed = [draw(_FIXED) for _ in range(count + 1)]
    # Fixed text has to survive the strip a template gets; a letter at both ends keeps it.
    fixed[0], fixed[-1] = "A" + fixed[0], fixed[-1] + "Z"
    values = [draw(st.text(_VALUE_ALPHABET, min_size=1, max_size=DEFAULT_VAR_MAX)) for _ in range(count)]
    text = fixed[0] + "".join("{#var#}" + piece for piece in fixed[1:])
    reply = fixed[0] + "".join(value + piece for value, piece in zip(values, fixed[1:], strict=True))
    return text, [reply]


@settings(max_examples=300, deadline=None)
@given(_template_and_values())
def test_a_text_built_from_a_template_matches_it(case: tuple[str, list[str]]) -> None:
    text, (reply,) = case
    template = parse_template(T1, text)
    assert template.match(reply), (text, reply)
    assert TemplateSet.compile([(T1, text)], unescape_newlines=False).match(reply) is not None


@settings(max_examples=300, deadline=None)
@given(
    prefix=_FIXED,
    suffix=_FIXED,
    value=st.text(_VALUE_ALPHABET, min_size=DEFAULT_VAR_MAX + 1, max_size=200),
    limit=st.integers(1, DEFAULT_VAR_MAX),
)
def test_a_variable_over_the_limit_does_not_match(prefix: str, suffix: str, value: str, limit: int) -> None:
    template = parse_template(T1, "A" + prefix + "{#var#}" + suffix + "Z")
    reply = "A" + prefix + value + suffix + "Z"
    assert not template.match(reply, DEFAULT_VAR_MAX)
    assert not template.match("A" + prefix + value[: limit + 1] + suffix + "Z", limit)
    assert template.match("A" + prefix + value[:limit] + suffix + "Z", limit)


@settings(max_examples=200, deadline=None)
@given(
    digits=st.text(st.sampled_from("0123456789"), min_size=1, max_size=DEFAULT_VAR_MAX),
    intruder=st.characters(codec="utf-8", exclude_categories=("Nd", "Cs")),
    at=st.integers(0, DEFAULT_VAR_MAX),
)
def test_a_numeric_variable_never_holds_anything_but_digits(digits: str, intruder: str, at: int) -> None:
    template = parse_template(T1, "OTP {#numeric#} ok")
    assert template.match(f"OTP {digits} ok")
    spoiled = digits[:at] + intruder + digits[at:]
    assert not template.match(f"OTP {spoiled} ok")


# ----------------------------------------------------------------------------------- adversarial


def test_an_adversarial_reply_is_matched_in_linear_time() -> None:
    """A regular expression ``A(.{1,30}),(.{1,30}),…B`` backtracks through every way of splitting the
    commas before it finds that the run of 40 x's fits no variable: with 7 variables that takes seconds.
    The bit-set matcher does the same work for every reply of a given length."""
    template = parse_template(T1, "A" + ",".join(["{#var#}"] * 12) + "B")
    reply = "A" + "," * 150 + "x" * 40 + "," * 150 + "B"  # starts and ends right, fits the length window
    started = time.perf_counter()
    for _ in range(20):
        assert not template.match(reply)
    per_call = (time.perf_counter() - started) / 20
    assert per_call < 0.02, f"{per_call * 1000:.1f} ms per call"
    # The same shape with the run cut in two by a comma matches, as quickly.
    assert template.match("A" + "," * 150 + "x" * 20 + "," + "x" * 20 + "," * 150 + "B")


def test_long_replies_against_many_templates_stay_fast() -> None:
    templates = TemplateSet.compile(
        [
            (f"11071612345678{i:05d}", f"Dear {{#var#}}, offer {i} {{#var#}}{{#var#}} ends {{#var#}}.")
            for i in range(500)
        ]
    )
    reply = "Dear " + "a " * 400 + "ends x."
    started = time.perf_counter()
    assert templates.match(reply) is None
    assert len(templates.explain(reply)) == 3  # why not: the closest three of the 500
    assert time.perf_counter() - started < 0.5
