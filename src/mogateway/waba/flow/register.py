"""Register the number on the Cloud API with the two-step PIN.

Rules this file keeps:
* ``register`` is never repeated by the tool: Meta allows 10 register/deregister calls per number
  per 72 hours, then blocks the number for 72 hours. The only exception is one retry after Meta's
  documented 5-minute wait for 133015 (an earlier registration still being deleted);
* each attempt is counted in the state before the call, so a run that dies mid-call still counts
  it; with 10 attempts in 72 hours in the state, the tool refuses to call register at all;
* when the answer is lost, Graph is asked for the number's status instead of registering again;
* "not verified" (133006) undoes the code steps and sends the flow back to them (once per run);
* the PIN comes from ``--pin``/``--pin-file`` or the hidden prompt; without either the run stops
  before register (USAGE).
"""

from __future__ import annotations

import time

from mogateway.waba import calls
from mogateway.waba.errors import ExitCode, GraphError, Kind, TransportError, classify
from mogateway.waba.flow.context import Context
from mogateway.waba.flow.step import FlowStep, PlanInputs, PlannedCall, Rewind
from mogateway.waba.graph import time_scale
from mogateway.waba.prompts import Mark, ask_pin
from mogateway.waba.state import Step

REGISTER_WINDOW_S = 72 * 3600
REGISTER_LIMIT = 10
DELETION_WAIT_S = 300.0


class Register(FlowStep):
    """Register with the PIN; rewinds to the code when Graph says the number is not verified."""

    records = (Step.REGISTERED,)
    title = "Register the number on the Cloud API"

    def is_done(self, ctx: Context) -> bool:
        # Graph was asked just before, by the code step: a CONNECTED number is marked registered.
        return ctx.state.is_done(Step.REGISTERED)

    def plan(self, inputs: PlanInputs) -> list[PlannedCall]:
        return [
            (calls.register_request(inputs.phone_number_id, "<PIN>"), "once; never repeated automatically")
        ]

    def act(self, ctx: Context) -> Rewind | None:
        state, ui = ctx.state, ctx.ui
        pin = _pin(ctx)
        now = time.time()
        recent = [t for t in state.register_attempts if now - t < REGISTER_WINDOW_S]
        if len(recent) >= REGISTER_LIMIT:
            ctx.stop(
                Step.REGISTERED,
                ExitCode.REGISTER_BLOCKED,
                f"{len(recent)} register attempts in 72 hours from this state file.",
                "Meta blocks the number after 10; wait until the oldest is 72 hours old.",
            )
        if len(recent) >= REGISTER_LIMIT - 3:
            ui.check(Mark.WARN, f"{len(recent)} register attempts in 72 h; Meta blocks the number at 10")
        waited = False
        while True:
            # Counted before the call: a run that dies mid-call still counts the attempt.
            state.register_attempts.append(time.time())
            ctx.save()
            try:
                calls.register(ctx.client, ctx.pid, pin)
                break
            except GraphError as err:
                verdict = classify(err)
                if verdict.kind is Kind.NOT_VERIFIED:
                    ui.info("Meta says the number is not verified (133006): requesting a new code")
                    state.undo(Step.CODE_VERIFIED, "register answered 133006")
                    state.undo(Step.CODE_REQUESTED, "register answered 133006")
                    ctx.save()
                    return Rewind(Step.CODE_REQUESTED, "register answered 133006")
                if verdict.kind is Kind.DELETION_PENDING and not waited:
                    ui.info("Meta is still deleting an earlier registration (133015): waiting 5 minutes")
                    ctx.sleep(DELETION_WAIT_S * time_scale())
                    waited = True
                    continue
                if verdict.kind is Kind.TWO_STEP_ON:
                    state.facts.two_step_disabled = False
                ctx.fail(Step.REGISTERED, err, verdict)
            except TransportError as err:
                # The outcome is unknown: ask Graph instead of registering again.
                number = _status_or_none(ctx)
                if number is not None and number.is_connected:
                    break
                ctx.fail_transport(Step.REGISTERED, err)
        state.facts.two_step_disabled = True
        state.mark_done(Step.REGISTERED)
        ctx.save()
        ui.check(Mark.OK, "number registered on the Cloud API")
        ui.info(
            "If two-step verification was off, the PIN you gave is now the number's two-step PIN. "
            "Keep it safe: resetting a lost PIN can take days."
        )
        return None


def _status_or_none(ctx: Context) -> calls.NumberInfo | None:
    try:
        return calls.get_number(ctx.client, ctx.pid)
    except (GraphError, TransportError):
        return None


def _pin(ctx: Context) -> str:
    """The PIN from the options, else asked (and kept for a second register in this run)."""
    if ctx.options.pin is not None:
        return ctx.options.pin
    if not ctx.ui.interactive():
        ctx.stop(
            Step.REGISTERED,
            ExitCode.USAGE,
            "No two-step PIN given for register.",
            "Run the same command again with --pin-file FILE (or --pin).",
        )
    pin = ask_pin(ctx.ui)
    if pin is None:
        ctx.stop(Step.REGISTERED, ExitCode.USAGE, "No valid PIN entered.", "Run again with --pin-file FILE.")
    ctx.options.pin = pin
    return pin
