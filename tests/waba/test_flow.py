"""The one description of the migration: the run and the dry run walk the same steps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mogateway.waba import GraphClient, Mark, Migration, MigrationOptions, StateFile, Step, parse_phone, plan
from mogateway.waba.calls import NumberInfo
from mogateway.waba.flow import FLOW, Context, FlowStep, PlanInputs, PlannedCall, Rewind
from mogateway.waba.graph import GraphRequest

from .conftest import DEST_WABA, PIN, TOKEN, Fake, Hooks

E164 = "919876543210"


class ScriptedUI:
    """A front end whose person types the given answers, in order."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.titles: list[str] = []
        self.lines: list[str] = []

    def step(self, title: str) -> None:
        self.titles.append(title)

    def check(self, mark: Mark, text: str) -> None:
        self.lines.append(f"{mark.value} {text}")

    def info(self, text: str) -> None:
        self.lines.append(text)

    def interactive(self) -> bool:
        return True

    def confirm(self, question: str) -> bool:
        return self.answers.pop(0) == "y"

    def ask(self, prompt: str) -> str:
        return self.answers.pop(0)

    def ask_secret(self, prompt: str) -> str:
        return self.answers.pop(0)


def test_the_flow_records_every_state_step_once_in_order() -> None:
    assert [step for flow_step in FLOW for step in flow_step.records] == list(Step)
    assert len({flow_step.title for flow_step in FLOW}) == len(FLOW)


def test_a_clean_run_sends_exactly_the_calls_the_dry_run_lists(
    fixtures: dict[str, Any], fake: Fake, tmp_path: Path, hooks: Hooks
) -> None:
    # The default world has no app subscribed, so even the "only if" calls are sent.
    fixtures["numbers"][E164]["codes"] = ["482913"]
    fake.http.post("/__fake/reset", json={"fixtures": fixtures})
    options = MigrationOptions(
        waba_id=DEST_WABA,
        phone=parse_phone("+91 98765 43210"),
        callback_url=hooks.url,
        verify_token=hooks.token,
    )
    planned = plan(options, None, TOKEN)
    ui = ScriptedUI("y", "482913", PIN)
    with GraphClient(TOKEN, graph_url=fake.url) as client:
        migration = Migration(client, options, StateFile(tmp_path / "state.json"), ui)
        final = migration.run()
    assert final.is_connected
    pid = migration.state.phone_number_id or ""
    expected = [(r.method, "/" + r.path.replace("<PHONE_NUMBER_ID>", pid)) for r, _ in planned]
    assert [(r["method"], r["path"]) for r in fake.requests()] == expected
    assert ui.titles == [step.title for step in FLOW]


def test_the_dry_run_lists_an_optional_step_only_when_asked_for() -> None:
    options = MigrationOptions(waba_id=DEST_WABA, phone=parse_phone("+91 98765 43210"))
    without = plan(options, None, TOKEN)
    options.callback_url, options.verify_token = "https://hooks.example.com/wa", "v"
    with_override = plan(options, "8001", TOKEN)
    assert len(with_override) == len(without) + 1
    assert [when for _, when in with_override if when == "--callback-url"] == ["--callback-url"]
    assert all("<PHONE_NUMBER_ID>" not in request.path for request, _ in with_override)


class Recorder(FlowStep):
    """A stub step that logs each time it acts; the last one gives the final status."""

    title = "stub"

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def plan(self, inputs: PlanInputs) -> list[PlannedCall]:
        return [(GraphRequest("GET", type(self).__name__), "always")]

    def act(self, ctx: Context) -> Rewind | None:
        self.log.append(type(self).__name__)
        return None


class First(Recorder):
    records = (Step.PREFLIGHT, Step.MIGRATION_REQUESTED, Step.CODE_REQUESTED)


class GoesBack(Recorder):
    records = (Step.CODE_VERIFIED, Step.REGISTERED)

    def act(self, ctx: Context) -> Rewind | None:
        super().act(ctx)
        return Rewind(Step.MIGRATION_REQUESTED, "every time")


class Last(Recorder):
    records = (Step.SUBSCRIPTION_CHECKED, Step.CALLBACK_OVERRIDDEN, Step.WEBHOOK_VERIFIED, Step.DONE)

    def act(self, ctx: Context) -> Rewind | None:
        ctx.final = NumberInfo(id="1", status="CONNECTED")
        return super().act(ctx)


def test_a_step_sends_the_flow_back_once_per_run_never_in_a_loop(tmp_path: Path) -> None:
    log: list[str] = []
    flow = (First(log), GoesBack(log), Last(log))
    options = MigrationOptions(waba_id="1", phone=parse_phone("+91 98765 43210"))
    with GraphClient("t", graph_url="http://127.0.0.1:9") as client:
        migration = Migration(client, options, StateFile(tmp_path / "s.json"), ScriptedUI(), flow=flow)
        assert migration.run().is_connected
    assert log == ["First", "GoesBack", "First", "GoesBack", "Last"]
    assert [request.path for request, _ in plan(options, None, "t", flow=flow)] == [
        "First",
        "GoesBack",
        "Last",
    ]
