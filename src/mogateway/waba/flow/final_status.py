"""The last step: the number as Graph sees it now, which must be CONNECTED for the migration to be done.

Rules this file keeps:
* it runs on every run (a re-run after success only shows the status again);
* a number that is not CONNECTED stops the run (ERROR) without marking it done.
"""

from __future__ import annotations

from mogateway.waba import calls
from mogateway.waba.errors import ExitCode
from mogateway.waba.flow.context import Context
from mogateway.waba.flow.step import FlowStep, PlanInputs, PlannedCall, Rewind
from mogateway.waba.state import Step


class FinalStatus(FlowStep):
    """Show the number as Graph sees it now and mark the migration done."""

    records = (Step.DONE,)
    title = "Final status"

    def plan(self, inputs: PlanInputs) -> list[PlannedCall]:
        return [(calls.get_number_request(inputs.phone_number_id), "always: final status")]

    def act(self, ctx: Context) -> Rewind | None:
        number = ctx.call(Step.DONE, lambda: calls.get_number(ctx.client, ctx.pid))
        if not number.is_connected:
            ctx.stop(
                Step.DONE,
                ExitCode.ERROR,
                f"The number's status is {number.status}, not CONNECTED.",
                "Run again in a few minutes; if it stays so, contact Meta support.",
            )
        if not ctx.state.is_done(Step.DONE):
            ctx.state.mark_done(Step.DONE, f"status {number.status}")
        ctx.save()
        ctx.final = number
        return None
