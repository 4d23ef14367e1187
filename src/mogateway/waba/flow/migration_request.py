"""Request the migration: ``POST /<WABA>/phone_numbers`` with ``migrate_phone_number=true``.

Rules this file keeps:
* it is done when the state has the number's phone number id (preflight finds it when the number
  is already on the WABA), so a second migration is never requested;
* it asks for confirmation first unless ``--yes``; without a terminal it stops (USAGE) instead;
* "already exists" (2388012) means an earlier request went through: the id is looked up and the
  run goes on;
* "webhooks not set up" (2388103) is fixed by subscribing this app, then retried once;
* an accepted request proves the display name, the payment method and business verification; a
  refusal that names one of them is recorded in the checklist facts.
"""

from __future__ import annotations

from mogateway.waba import calls
from mogateway.waba.errors import ExitCode, GraphError, Kind, TransportError, classify
from mogateway.waba.flow.context import Context
from mogateway.waba.flow.step import FlowStep, PlanInputs, PlannedCall, Rewind
from mogateway.waba.prompts import Mark
from mogateway.waba.state import Facts, Step


class RequestMigration(FlowStep):
    """Ask Meta to move the number into the destination WABA; store the new phone number id."""

    records = (Step.MIGRATION_REQUESTED,)
    title = "Request the migration"

    def is_done(self, ctx: Context) -> bool:
        return ctx.state.is_done(Step.MIGRATION_REQUESTED) and bool(ctx.state.phone_number_id)

    def done_line(self, ctx: Context) -> str | None:
        return f"already requested: phone number id {ctx.state.phone_number_id}"

    def plan(self, inputs: PlanInputs) -> list[PlannedCall]:
        opts = inputs.options
        request = calls.request_migration_request(opts.waba_id, opts.phone.cc, opts.phone.national)
        return [(request, "unless the number is already on the WABA")]

    def act(self, ctx: Context) -> Rewind | None:
        state, opts, ui = ctx.state, ctx.options, ctx.ui
        if not opts.assume_yes:
            if not ui.interactive():
                ctx.stop(
                    Step.MIGRATION_REQUESTED,
                    ExitCode.USAGE,
                    "Confirmation needed and there is no terminal.",
                    "Add --yes to confirm.",
                )
            if not ui.confirm(f"Migrate {state.e164} into WABA {opts.waba_id} now?"):
                ctx.stop(
                    Step.MIGRATION_REQUESTED,
                    ExitCode.ABORTED,
                    "Stopped at your request.",
                    "Nothing was changed at Meta by this step.",
                )
        fixed = False
        while True:
            try:
                pid = calls.request_migration(ctx.client, opts.waba_id, state.cc, state.national)
                break
            except GraphError as err:
                verdict = classify(err)
                if verdict.kind is Kind.ALREADY_EXISTS:
                    ui.info("Meta says the number already exists on the WABA (2388012): looking up its id")
                    found = ctx.call(
                        Step.MIGRATION_REQUESTED,
                        lambda: calls.find_number(ctx.client, opts.waba_id, state.cc, state.national),
                    )
                    if found is None:
                        ctx.fail(Step.MIGRATION_REQUESTED, err, verdict)
                    pid = found.id
                    break
                if verdict.kind is Kind.WEBHOOKS_MISSING and not fixed:
                    ui.info("Meta wants an app subscribed to the WABA first: subscribing, then retrying once")
                    ctx.call(Step.MIGRATION_REQUESTED, lambda: calls.subscribe_app(ctx.client, opts.waba_id))
                    fixed = True
                    continue
                _learn_from(err, state.facts)
                ctx.fail(Step.MIGRATION_REQUESTED, err, verdict)
            except TransportError as err:
                ctx.fail_transport(Step.MIGRATION_REQUESTED, err)
        state.phone_number_id = pid
        # Meta refuses the migration unless these hold, so an accepted request proves them.
        state.facts.display_name_approved = True
        state.facts.payment_method = True
        state.facts.business_verified = True
        state.mark_done(Step.MIGRATION_REQUESTED, f"phone number id {pid}")
        ctx.save()
        ui.check(Mark.OK, f"migration requested: new phone number id {pid}")
        return None


def _learn_from(err: GraphError, facts: Facts) -> None:
    """Record in the checklist facts the precondition a refusal names."""
    text = err.text.lower()
    if "payment account" in text:
        facts.payment_method = False
    elif "messaging for" in text:
        pass  # "'Messaging For' ... must be approved" is not about business verification
    elif "must be approved" in text:
        facts.business_verified = False
    elif "registered name" in text:
        facts.display_name_approved = False
    elif "two-step" in text:
        facts.two_step_disabled = False
