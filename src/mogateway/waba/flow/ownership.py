"""Confirm ownership of the number: request the 6-digit registration code, then verify it.

Rules this file keeps:
* Graph is asked first how far the number is: a number Graph shows verified (or connected) is not
  asked for a code again, since a run may have died after Graph acted but before the save;
* a code is requested once; another only with ``--new-code`` (after the resend cool-down) or ``r``/``v``
  at the prompt;
* the code comes from ``--code``, from the prompt, or the run stops with NEEDS_CODE (exit status 3)
  and says how to continue; a ``--code`` given with a code requested in the same run is ignored;
* a refused code is noted and may be typed again; any other error stops the run.
"""

from __future__ import annotations

import time

from mogateway.waba import calls
from mogateway.waba.errors import ExitCode, GraphError, Kind, TransportError, classify
from mogateway.waba.flow.context import Context
from mogateway.waba.flow.step import FlowStep, PlanInputs, PlannedCall, Rewind
from mogateway.waba.graph import time_scale
from mogateway.waba.options import normalize_code
from mogateway.waba.prompts import CodeDialogEnd, Mark, ask_code
from mogateway.waba.state import Step

_CONTINUE_WITH_CODE = "Run the same command again with --code XXXXXX (same --state file)."


class ConfirmOwnership(FlowStep):
    """Request the code and verify it (typed, given with ``--code``, or stop for it)."""

    records = (Step.CODE_REQUESTED, Step.CODE_VERIFIED)
    title = "Confirm ownership with a registration code"

    def is_done(self, ctx: Context) -> bool:
        """Ask Graph how far the number is, and mark as done what Graph already did."""
        state = ctx.state
        number = ctx.call(Step.CODE_REQUESTED, lambda: calls.get_number(ctx.client, ctx.pid))
        if number.is_connected:
            for step in (Step.CODE_REQUESTED, Step.CODE_VERIFIED, Step.REGISTERED):
                if not state.is_done(step):
                    state.mark_done(step, "Graph shows the number CONNECTED")
        elif number.is_verified:
            for step in (Step.CODE_REQUESTED, Step.CODE_VERIFIED):
                if not state.is_done(step):
                    state.mark_done(step, "Graph shows the code verified")
        ctx.save()
        return state.is_done(Step.CODE_VERIFIED)

    def plan(self, inputs: PlanInputs) -> list[PlannedCall]:
        pid, opts = inputs.phone_number_id, inputs.options
        return [
            (calls.get_number_request(pid), "always: how far Graph already is"),
            (
                calls.request_code_request(pid, opts.code_method, opts.language),
                "unless a code was requested",
            ),
            (calls.verify_code_request(pid, "<CODE>"), "with the code you type or pass with --code"),
        ]

    def act(self, ctx: Context) -> Rewind | None:
        state, opts, ui = ctx.state, ctx.options, ctx.ui
        method = state.code_method or opts.code_method
        requested_now = False
        if not state.is_done(Step.CODE_REQUESTED) or opts.new_code:
            if opts.new_code and state.is_done(Step.CODE_REQUESTED):
                _wait_cooldown(ctx)
            method = opts.code_method
            _request_code(ctx, method)
            requested_now = True
        else:
            ui.check(Mark.OK, f"a code was already requested by {method}")
        if opts.code is not None and not requested_now:
            if _verify(ctx, normalize_code(opts.code) or ""):
                return None
            ctx.stop(
                Step.CODE_VERIFIED,
                ExitCode.CODE,
                "The code was refused (wrong or expired).",
                "Run again with the right --code XXXXXX, or with --new-code (add --code-method VOICE "
                "for a call) to get a new one.",
            )
        if opts.code is not None and requested_now:
            ui.info("--code ignored: a new code was just requested; enter the new one")
        if not ui.interactive():
            ctx.stop(
                Step.CODE_VERIFIED,
                ExitCode.NEEDS_CODE,
                f"Waiting for the 6-digit code sent by {method} to {state.e164}.",
                _CONTINUE_WITH_CODE,
            )
        end = ask_code(
            ui,
            method,
            request_code=lambda method: _request_code(ctx, method),
            verify=lambda code: _verify(ctx, code),
            cooldown_left=lambda: _cooldown_left(ctx),
            max_refused=opts.max_code_attempts,
        )
        if end is CodeDialogEnd.QUIT:
            ctx.stop(
                Step.CODE_VERIFIED,
                ExitCode.NEEDS_CODE,
                "Stopped while waiting for the code.",
                _CONTINUE_WITH_CODE,
            )
        if end is CodeDialogEnd.TOO_MANY_REFUSED:
            ctx.stop(
                Step.CODE_VERIFIED,
                ExitCode.CODE,
                f"{opts.max_code_attempts} codes refused.",
                "Run again later with --new-code (add --code-method VOICE for a call).",
            )
        return None


def _request_code(ctx: Context, method: str) -> None:
    state, language = ctx.state, ctx.options.language
    try:
        calls.request_code(ctx.client, ctx.pid, method, language)
    except GraphError as err:
        ctx.fail(Step.CODE_REQUESTED, err, classify(err))
    except TransportError as err:
        ctx.fail_transport(Step.CODE_REQUESTED, err)
    state.code_method = method
    state.language = language
    state.code_requests.append(time.time())
    state.mark_done(Step.CODE_REQUESTED, f"by {method}")
    ctx.save()
    ctx.ui.check(Mark.OK, f"code requested by {method} ({language}) for {state.e164}")
    if method == "SMS":
        ctx.ui.info("No SMS after a few minutes? Ask for a voice call (v, or --new-code --code-method VOICE)")


def _verify(ctx: Context, code: str) -> bool:
    """True when Graph accepted the code; False when it refused it (wrong or expired)."""
    try:
        calls.verify_code(ctx.client, ctx.pid, code)
    except GraphError as err:
        verdict = classify(err)
        if verdict.kind is not Kind.CODE_REJECTED:
            ctx.fail(Step.CODE_VERIFIED, err, verdict)
        ctx.state.note(Step.CODE_VERIFIED, "error", "code refused", err.reference)
        ctx.save()
        ctx.ui.check(Mark.FAIL, f"code refused: {err.details or err.message}")
        return False
    except TransportError as err:
        ctx.fail_transport(Step.CODE_VERIFIED, err)
    ctx.state.mark_done(Step.CODE_VERIFIED)
    ctx.save()
    ctx.ui.check(Mark.OK, "code verified: ownership of the number confirmed")
    return True


def _cooldown_left(ctx: Context) -> float:
    """Seconds before Meta may be asked for another code."""
    if not ctx.state.code_requests:
        return 0.0
    cooldown = ctx.options.resend_cooldown_s * time_scale()
    return max(0.0, ctx.state.code_requests[-1] + cooldown - time.time())


def _wait_cooldown(ctx: Context) -> None:
    left = _cooldown_left(ctx)
    if left > 0:
        ctx.ui.info(f"Waiting {left:.0f} s before asking Meta for another code")
        ctx.sleep(left)
