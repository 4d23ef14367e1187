"""The state groups of core/timeline.py, pinned state by state, and every reader of states pinned to them.

The table below is the second, deliberate listing: a new state fails here until someone says which groups
it belongs to; the reader checks then carry that decision to the console, the CLI and the API. And no
module outside the timeline may spell out a list of states of its own (the source scan at the end)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.console import Console

from mogateway.api.console.render import render
from mogateway.cli.messages import _styled
from mogateway.core.contract import OutcomeKind
from mogateway.core.timeline import (
    FAILED_STATES,
    FINAL_STATES,
    NO_REPLY_STATES,
    REPLAYABLE_STATES,
    REPLIED_STATES,
    STATES,
    TABLE,
    UNFINISHED_STATES,
    UNSENT_STATES,
    EventKind,
    State,
    state_for_outcome,
    tone,
)

SRC = Path(__file__).resolve().parents[2] / "src" / "mogateway"

GROUPS = {
    "unfinished": UNFINISHED_STATES,
    "final": FINAL_STATES,
    "replayable": REPLAYABLE_STATES,
    "replied": REPLIED_STATES,
    "unsent": UNSENT_STATES,
    "no_reply": NO_REPLY_STATES,
    "failed": FAILED_STATES,
}

S = State
#: state -> (its groups, its tone). Decide both for a new state here.
EXPECTED: dict[State, tuple[frozenset[str], str]] = {
    S.QUEUED: (frozenset({"unfinished"}), "waiting"),
    S.ANSWERED: (frozenset({"unfinished"}), "waiting"),
    S.REPLYING: (frozenset({"unfinished"}), "waiting"),
    S.REPLIED: (frozenset({"final", "replayable", "replied"}), "good"),
    S.DELIVERED: (frozenset({"final", "replayable", "replied"}), "good"),
    S.UNDELIVERED: (frozenset({"final", "replayable", "replied", "failed"}), "bad"),
    S.REPLY_FAILED: (frozenset({"final", "replayable", "unsent", "failed"}), "bad"),
    S.REPLY_UNKNOWN: (frozenset({"final", "replayable", "unsent"}), "unsure"),
    S.REPLY_BLOCKED: (frozenset({"final", "replayable", "unsent", "failed"}), "bad"),
    S.NO_REPLY: (frozenset({"final", "replayable", "no_reply"}), "good"),
    S.TIMED_OUT: (frozenset({"final", "replayable", "no_reply", "failed"}), "bad"),
    S.HTTP_ERROR: (frozenset({"final", "replayable", "no_reply", "failed"}), "bad"),
    S.BAD_RESPONSE: (frozenset({"final", "replayable", "no_reply", "failed"}), "bad"),
    S.FAILED: (frozenset({"final", "replayable", "no_reply", "failed"}), "bad"),
    S.UNROUTABLE: (frozenset({"final", "replayable", "no_reply", "failed"}), "bad"),
    S.REJECTED: (frozenset({"final", "no_reply", "failed"}), "bad"),
}


def test_every_state_is_decided_here() -> None:
    assert set(EXPECTED) == set(State)


@pytest.mark.parametrize("state", list(State))
def test_every_state_is_in_exactly_its_groups_and_reads_in_its_tone(state: State) -> None:
    groups, expected_tone = EXPECTED[state]
    assert {name for name, members in GROUPS.items() if state in members} == groups
    assert tone(state) == tone(state.value) == expected_tone


def test_the_groups_divide_the_states() -> None:
    assert tuple(State) == STATES and len(set(STATES)) == len(State)
    assert UNFINISHED_STATES.isdisjoint(FINAL_STATES) and set(State) == UNFINISHED_STATES | FINAL_STATES
    # Every final state says what became of the reply: it left, it did not (surely), or there was none.
    assert REPLIED_STATES | UNSENT_STATES | NO_REPLY_STATES == FINAL_STATES
    assert sum(map(len, (REPLIED_STATES, UNSENT_STATES, NO_REPLY_STATES))) == len(FINAL_STATES)
    assert FAILED_STATES <= FINAL_STATES
    with pytest.raises(ValueError, match="not a state"):
        tone("dispatching")


def _reached_by(kind: EventKind) -> set[State]:
    return {after for (k, _), step in TABLE.items() if k is kind for after in step.moves.values()}


def test_the_groups_agree_with_the_transition_table() -> None:
    # No reply: the callback's outcomes other than a reply, and refusal at intake.
    no_answer = {state_for_outcome(k) for k in OutcomeKind if k is not OutcomeKind.REPLY}
    assert no_answer | _reached_by(EventKind.REJECTED) == NO_REPLY_STATES
    # Replied: where a submitted reply goes, and where its receipts take it.
    assert _reached_by(EventKind.REPLY_SUBMITTED) | _reached_by(EventKind.DELIVERY) == REPLIED_STATES
    # Unsent: where a reply that was not handed over (surely) ends.
    unsent = {EventKind.REPLY_FAILED, EventKind.REPLY_UNKNOWN, EventKind.REPLY_BLOCKED}
    assert set().union(*(_reached_by(kind) for kind in unsent)) == UNSENT_STATES
    # Replayable: exactly the states a replay is allowed in.
    assert {s for s in TABLE[(EventKind.REPLAY, None)].moves if s is not None} == REPLAYABLE_STATES
    # Unfinished: exactly what recovery resumes.
    assert TABLE[(EventKind.RECOVERED, None)].keeps == UNFINISHED_STATES


# ------------------------------------------------------------------------------- the readers


@pytest.mark.parametrize("state", list(State))
def test_the_cli_colours_every_state_by_its_tone(state: State) -> None:
    colour = {"waiting": "yellow", "good": "green", "unsure": "magenta", "bad": "red"}[tone(state)]
    assert _styled(state.value) == f"[{colour}]{state.value}[/{colour}]"
    assert _styled("a_state_of_a_newer_gateway") == "a_state_of_a_newer_gateway"  # shown, uncoloured


def test_the_cli_list_help_names_every_state() -> None:
    from typer.testing import CliRunner

    from mogateway.cli import app

    shown = CliRunner().invoke(app, ["messages", "list", "--help"], env={"COLUMNS": "400"}).stdout
    assert all(state.value in shown for state in State) and "dispatching" not in shown


def test_the_console_filter_offers_exactly_the_states() -> None:
    # (That the page's handler passes these is checked on a running gateway: tests/cli/test_cli_states.py.)
    page = render("messages.html", {"q": {}, "states": [s.value for s in STATES], "found": []})
    offered = re.findall(r'<option value="([a-z_]+)"', page)
    assert offered == [s.value for s in STATES]


@pytest.mark.parametrize("state", list(State))
def test_the_console_message_page_reads_the_groups(state: State) -> None:
    message = {"id": "m1", "state": state.value, "received_at": None, "timeline": [], "reply": None}
    page = render("message.html", {"message": message, "summary": {}, "details": lambda e: []})
    assert ("nothing was sent to the sender" in page) is (state in NO_REPLY_STATES)
    assert f'class="state big {tone(state)}" data-state="{state.value}"' in page


@pytest.mark.parametrize("state", list(State))
def test_the_console_test_result_reads_the_tone(state: State) -> None:
    result = {"client": {"name": "c"}, "message": {"id": "m1", "state": state.value}, "summary": {}}
    assert f'class="result {tone(state)}"' in render("_test_result.html", {"result": result})


def test_the_console_stylesheet_colours_tones_not_states() -> None:
    css = (SRC / "api" / "static" / "console" / "console.css").read_text()
    coloured = set(re.findall(r"\.state\.([a-z_]+)", css)) - {"big"}
    assert coloured == {"good", "bad", "unsure"}


def test_no_module_spells_out_a_list_of_states() -> None:
    """Outside the timeline (and the journal's SQL migrations, which are history), a file that names three
    or more states by hand keeps a list of its own: take the group from core/timeline.py instead.
    (The names that are also outcome kinds are left out: stats and the SMPP receipts count those.)"""
    names = {s.value for s in State} - {k.value for k in OutcomeKind}
    found = {}
    for path in SRC.rglob("*"):
        if path.suffix not in (".py", ".html", ".css", ".js") or path.name == "timeline.py":
            continue
        text = path.read_text(encoding="utf-8")
        named = {m.group(2) for m in re.finditer(r"""(["'])([a-z_]+)\1""", text)} & names
        if len(named) >= 3:
            found[str(path.relative_to(SRC))] = sorted(named)
    assert found == {}


def test_the_api_documents_every_state() -> None:
    from mogateway.api.openapi import MessageOut, Replayed, StoredOut

    for model in (MessageOut, Replayed):
        assert set(model.model_json_schema()["$defs"]["State"]["enum"]) == {s.value for s in State}
    stored = StoredOut.model_json_schema()
    assert set(stored["$defs"]["State"]["enum"]) == {s.value for s in State}
    assert {"const": "invalid", "type": "string"} in stored["properties"]["state"]["anyOf"]


def test_a_printed_list_keeps_the_state_whole_on_80_columns() -> None:
    from mogateway.cli.messages import messages_table

    console = Console(width=80, record=True, color_system=None)
    row = {"id": "01JD7ZK3M4Q9X8V2N6T5R1B0CA", "received_at": "2001-01-02T03:04:05+05:30"}
    row |= {"msisdn": "919812345678", "shortcode": "56767", "message": "x" * 200, "reply": "y"}
    rows = [row | {"state": state.value} for state in State]
    console.print(messages_table(rows, 80))
    lines = console.export_text().splitlines()
    assert all(len(line) <= 80 for line in lines)
    for state, line in zip(State, lines[1:], strict=True):
        assert f"01JD7ZK3M4Q9X8V2N6T5R1B0CA 2001-01-02 919812345678 {state.value} " in line
