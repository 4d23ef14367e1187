"""Preflight: before anything changes at Meta, check the token, the WABA, the number and the app.

Rules this file keeps:
* it runs on every run, since the token may have expired or changed between runs;
* it stops with AUTH when the token is invalid, lacks ``whatsapp_business_management`` or names no app;
* a number already on the destination WABA is resumed with its id (looked up by the saved id, or
  found by listing the WABA's numbers), so a second migration is never requested;
* it subscribes this app to the WABA's webhooks when it is not (Meta refuses the migration of a
  Cloud API number otherwise);
* it ends with the checklist of what the API cannot check: ✓ known good, ✗ known bad, ? unknown.
"""

from __future__ import annotations

import time

from mogateway.waba import calls
from mogateway.waba.errors import ExitCode, GraphError, classify
from mogateway.waba.flow.context import Context
from mogateway.waba.flow.step import FlowStep, PlanInputs, PlannedCall, Rewind
from mogateway.waba.prompts import Mark
from mogateway.waba.state import Step


class Preflight(FlowStep):
    """Token, WABA, number already there, display name, app subscription, and the checklist."""

    records = (Step.PREFLIGHT,)
    title = "Preflight"

    def plan(self, inputs: PlanInputs) -> list[PlannedCall]:
        waba = inputs.options.waba_id
        return [
            (calls.debug_token_request(inputs.token), "always: token validity, scopes, app id"),
            (calls.get_waba_request(waba), "always: the destination WABA is reachable"),
            (calls.list_numbers_request(waba), "when no id is saved yet: is the number already on the WABA"),
            (calls.list_subscribed_apps_request(waba), "always: is this app subscribed"),
            (calls.subscribe_app_request(waba), "only if this app is not subscribed"),
        ]

    def act(self, ctx: Context) -> Rewind | None:
        ui, state, waba_id = ctx.ui, ctx.state, ctx.options.waba_id
        token = ctx.call(Step.PREFLIGHT, lambda: calls.debug_token(ctx.client))
        if not token.is_valid:
            ctx.stop(
                Step.PREFLIGHT, ExitCode.AUTH, "The access token is not valid (debug_token).", _auth_advice()
            )
        ui.check(Mark.OK, f"token valid, app {token.app_id} ({token.app_name or 'unnamed'})")
        if calls.MANAGEMENT_SCOPE not in token.scopes:
            ctx.stop(
                Step.PREFLIGHT, ExitCode.AUTH, f"The token lacks {calls.MANAGEMENT_SCOPE}.", _auth_advice()
            )
        ui.check(Mark.OK, f"permission {calls.MANAGEMENT_SCOPE}")
        if calls.MESSAGING_SCOPE in token.scopes:
            ui.check(Mark.OK, f"permission {calls.MESSAGING_SCOPE}")
        else:
            ui.check(Mark.WARN, f"permission {calls.MESSAGING_SCOPE} missing (Solution Partners need it)")
        if token.expires_at:
            left = token.expires_at - time.time()
            ui.check(
                Mark.WARN,
                f"token expires in {max(left, 0) / 3600:.1f} h; a System User token that "
                "never expires is safer for a migration",
            )
        if not token.app_id:
            ctx.stop(
                Step.PREFLIGHT, ExitCode.AUTH, "debug_token did not name the token's app.", _auth_advice()
            )
        if state.app_id and state.app_id != token.app_id:
            ui.check(
                Mark.WARN, f"earlier runs used app {state.app_id}; this token belongs to app {token.app_id}"
            )
        app_id = state.app_id = token.app_id
        if token.waba_targets is not None and waba_id not in token.waba_targets:
            ui.check(Mark.WARN, f"the token's grants do not list WABA {waba_id}")

        waba = ctx.call(Step.PREFLIGHT, lambda: calls.get_waba(ctx.client, waba_id))
        review = waba.review_status or "unknown"
        ui.check(
            Mark.OK if review == "APPROVED" else Mark.WARN,
            f"WABA {waba.id} reachable ({waba.name or 'unnamed'}), review status {review}",
        )
        if waba.business_verification_status is not None:
            state.facts.business_verified = waba.business_verification_status == "verified"

        _find_existing_number(ctx)
        apps = ctx.call(Step.PREFLIGHT, lambda: calls.list_subscribed_apps(ctx.client, waba_id))
        if not calls.is_app_subscribed(apps, app_id):
            ui.info(
                f"app {app_id} is not subscribed to WABA {waba_id}: subscribing it "
                "(Meta requires a subscribed app before migrating)"
            )
            ctx.call(Step.PREFLIGHT, lambda: calls.subscribe_app(ctx.client, waba_id))
        ui.check(Mark.OK, f"app {app_id} subscribed to the WABA's webhooks")
        state.facts.app_subscribed = True

        _show_checklist(ctx)
        if ctx.options.pin is None and not ui.interactive():
            ui.check(Mark.WARN, "no --pin/--pin-file: the run will stop before register")
        if not state.is_done(Step.PREFLIGHT):
            state.mark_done(Step.PREFLIGHT, f"app {app_id}")
        ctx.save()
        return None


def _find_existing_number(ctx: Context) -> None:
    state, waba_id = ctx.state, ctx.options.waba_id
    number: calls.NumberInfo | None = None
    if state.phone_number_id:
        pid = state.phone_number_id
        number = ctx.call(Step.PREFLIGHT, lambda: calls.get_number(ctx.client, pid))
    else:
        number = ctx.call(
            Step.PREFLIGHT, lambda: calls.find_number(ctx.client, waba_id, state.cc, state.national)
        )
        if number is not None:
            ctx.ui.info(f"{state.e164} is already on WABA {waba_id}: resuming with id {number.id}")
            state.phone_number_id = number.id
            state.mark_done(Step.MIGRATION_REQUESTED, f"found on the WABA as {number.id}")
    if number is None:
        ctx.ui.check(Mark.OK, f"{state.e164} is not yet on WABA {waba_id}")
        return
    if number.name_status is not None:
        state.facts.display_name_approved = number.name_status in ("APPROVED", "AVAILABLE_WITHOUT_REVIEW")
    ctx.ui.check(
        Mark.OK,
        f"number id {number.id}: status {number.status}, code "
        f"{number.code_verification_status}, name {number.name_status}",
    )


def _show_checklist(ctx: Context) -> None:
    facts = ctx.state.facts
    ctx.ui.info("Checklist (what the API cannot check before the migration; ? = not known yet):")
    lines = (
        (facts.two_step_disabled, "two-step verification disabled at the old provider (WhatsApp Manager)"),
        (facts.payment_method, "payment method on the destination WABA"),
        (facts.business_verified, "business verification complete"),
        (facts.display_name_approved, "display name approved, no name change pending"),
    )
    for known, text in lines:
        ctx.ui.check({True: Mark.OK, False: Mark.FAIL, None: Mark.UNKNOWN}[known], text)


def _auth_advice() -> str:
    """What to do about a token that cannot be used (the advice for Graph's 190)."""
    return classify(GraphError(http_status=401, code=190, message="")).advice
