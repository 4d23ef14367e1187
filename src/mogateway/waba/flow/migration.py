"""Run (or resume) one migration: load its state, then walk :data:`~mogateway.waba.flow.FLOW`.

Rules this file keeps:
* a state file belongs to one number and one WABA; a run with another refuses it (USAGE);
* the options are checked and the state saved before the first Graph call;
* each step is asked whether it is done (it may ask Graph) before it runs; a step found done is
  passed, showing its "already" line if it has one;
* a step may send the flow back to an earlier step once per run; a second request to go back is
  not followed (the flow goes on), so a run can never loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from mogateway.waba.calls import NumberInfo
from mogateway.waba.errors import ExitCode, MigrationStopped
from mogateway.waba.flow import FLOW, Context, FlowStep, Rewind
from mogateway.waba.graph import GraphClient
from mogateway.waba.options import MigrationOptions
from mogateway.waba.prompts import Mark, MigrationUI
from mogateway.waba.state import MigrationState, StateFile, StateFileError


class Migration:
    """Runs (or resumes) one migration against Graph, recording each step in a state file."""

    def __init__(
        self,
        client: GraphClient,
        options: MigrationOptions,
        state_file: StateFile,
        ui: MigrationUI,
        *,
        flow: tuple[FlowStep, ...] = FLOW,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.options = options
        self.state_file = state_file
        self.ui = ui
        self.flow = flow
        self.context = Context(client, options, state_file, self._load_state(), ui, sleep)

    @property
    def state(self) -> MigrationState:
        """The migration's state, as saved in the state file."""
        return self.context.state

    def _load_state(self) -> MigrationState:
        phone = self.options.phone
        if not self.state_file.exists():
            return MigrationState(waba_id=self.options.waba_id, cc=phone.cc, national=phone.national)
        try:
            state = self.state_file.load()
        except StateFileError as exc:
            raise MigrationStopped(ExitCode.USAGE, str(exc), "Use another --state file.") from None
        if (state.waba_id, state.cc, state.national) != (self.options.waba_id, phone.cc, phone.national):
            raise MigrationStopped(
                ExitCode.USAGE,
                f"state file {self.state_file.path} is for {state.e164} into WABA {state.waba_id}",
                "Pass the same --waba-id and --phone as the first run, or another --state file.",
            )
        return state

    def save(self) -> None:
        """Write the state file now."""
        self.context.save()

    def run(self) -> NumberInfo:
        """Run every step not yet done; returns the number's final status."""
        ctx, ui = self.context, self.ui
        self.options.validate()
        self.save()
        index, rewound = 0, False
        while index < len(self.flow):
            step = self.flow[index]
            index += 1
            if not step.applies(self.options):
                continue
            if step.is_done(ctx):
                line = step.done_line(ctx)
                if line is not None:
                    ui.step(step.title)
                    ui.check(Mark.OK, line)
                continue
            ui.step(step.title)
            outcome = step.act(ctx)
            if isinstance(outcome, Rewind) and not rewound:
                rewound = True
                index = next(i for i, s in enumerate(self.flow) if outcome.to in s.records)
        if ctx.final is None:
            raise MigrationStopped(ExitCode.ERROR, "internal: the flow ended without a final status")
        return ctx.final
