"""The Graph error rules shipped as data: the file parses, every row can match, every code named is in it."""

from __future__ import annotations

import importlib.resources
import re
from pathlib import Path

import pytest

from mogateway.waba.errors import (
    RULES_FILE,
    ExitCode,
    GraphError,
    Kind,
    Rule,
    classify,
    error_rules,
    parse_rules,
)

ROOT = Path(__file__).resolve().parents[2]
WABA_SOURCES = [*sorted((ROOT / "src/mogateway/waba").rglob("*.py")), ROOT / "src/mogateway/cli/waba.py"]
# WhatsApp's own codes and subcodes (13xxxx, 23xxxxx, 24xxxxx) and the business-use-case throttles.
GRAPH_CODE_RE = re.compile(r"\b(?:13\d{4}|2[34]\d{5}|8000\d)\b")

# The codes docs/waba-migration.md gives an exit status for (section 5), with that status.
DOCUMENTED: list[tuple[int, int | None, ExitCode]] = [
    (190, 463, ExitCode.AUTH),
    (10, None, ExitCode.AUTH),
    (200, None, ExitCode.AUTH),
    (299, None, ExitCode.AUTH),
    (100, 33, ExitCode.NOT_ELIGIBLE),
    (133005, None, ExitCode.TWO_STEP),
    (133008, None, ExitCode.TWO_STEP),
    (133009, None, ExitCode.TWO_STEP),
    (133016, None, ExitCode.REGISTER_BLOCKED),
    (136025, None, ExitCode.CODE),
    (136024, None, ExitCode.CODE),
    *((code, None, ExitCode.UNAVAILABLE) for code in (1, 2, 131000, 133004, 4, 17, 32, 613, 80007, 80008)),
]


def example_of(rule: Rule) -> GraphError:
    """An error this rule is written for."""
    code = rule.code_range[0] if rule.code_range else rule.codes[0]
    return GraphError(http_status=400, code=code, subcode=rule.subcode, message=rule.text or "x")


def is_covered(number: int) -> bool:
    return any(
        number in rule.codes
        or number == rule.subcode
        or (rule.code_range is not None and rule.code_range[0] <= number <= rule.code_range[1])
        for rule in error_rules()
    )


def test_the_shipped_rules_file_is_package_data_and_parses() -> None:
    text = (importlib.resources.files("mogateway") / "data" / RULES_FILE).read_text(encoding="utf-8")
    rules = parse_rules(text)
    assert len(rules) == len(text.strip().splitlines()) - 1  # one rule per row, none dropped
    assert rules == error_rules()
    assert all(rule.classification.meaning and rule.classification.advice for rule in rules)


def test_every_row_is_the_first_match_for_its_own_error() -> None:
    # Most specific first: a row shadowed by an earlier, broader one could never apply.
    rules = error_rules()
    for index, rule in enumerate(rules):
        err = example_of(rule)
        first = next(i for i, r in enumerate(rules) if r.matches(err))
        assert first == index, f"row {index + 2} is shadowed by row {first + 2}"
        assert classify(err) is rule.classification


def test_every_kind_the_code_branches_on_has_a_row() -> None:
    named = {
        match
        for path in WABA_SOURCES
        if path.name != "errors.py"  # the fallbacks for codes no row knows are defined there
        for match in re.findall(r"\bKind\.([A-Z_]+)", path.read_text(encoding="utf-8"))
    }
    assert named, "the flow branches on kinds of error"
    in_rules = {rule.classification.kind.name for rule in error_rules()}
    assert named <= in_rules
    assert {kind.name for kind in Kind} - in_rules == {"UNKNOWN"}


def test_every_graph_code_the_code_and_the_docs_name_has_a_row() -> None:
    docs = (ROOT / "docs/waba-migration.md").read_text(encoding="utf-8")
    texts = [path.read_text(encoding="utf-8") for path in WABA_SOURCES]
    texts.append(docs[docs.index("## 5.") : docs.index("## 7.")])
    named = {int(code) for text in texts for code in GRAPH_CODE_RE.findall(text)}
    assert {133006, 133015, 2388012, 2388103} <= named
    assert sorted(code for code in named if not is_covered(code)) == []


@pytest.mark.parametrize(("code", "subcode", "exit_code"), DOCUMENTED)
def test_documented_codes_give_their_documented_exit_status(
    code: int, subcode: int | None, exit_code: ExitCode
) -> None:
    verdict = classify(GraphError(http_status=400, code=code, subcode=subcode, message="x"))
    assert verdict.kind is not Kind.UNKNOWN
    assert verdict.exit_code is exit_code


def test_a_bad_row_is_refused_with_its_line() -> None:
    header = "codes,subcode,text,kind,retry,exit_status,meaning,advice\n"
    good = "100,,,INVALID_PARAMETER,NEVER,ERROR,A parameter was refused.,Check it.\n"
    assert len(parse_rules(header + good)) == 1
    with pytest.raises(ValueError, match="line 3"):
        parse_rules(header + good + "100,,,NO_SUCH_KIND,NEVER,ERROR,m,a\n")
    with pytest.raises(ValueError, match="line 2"):
        parse_rules(header + ",,,AUTH,NEVER,AUTH,m,a\n")
    with pytest.raises(ValueError, match="line 2"):
        parse_rules(header + "x-y,,,AUTH,NEVER,AUTH,m,a\n")
