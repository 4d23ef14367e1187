"""After register: this app receives the WABA's webhooks, optionally at an overriding callback URL.

Rules this file keeps:
* the subscription check runs on every run and looks for *this* app (by the token's app id), not
  just any app: another app's subscription does not bring the messages here;
* an app that is not subscribed is subscribed, then looked for again; still missing stops the run;
* the callback override runs only with ``--callback-url`` (and ``--verify-token``), and again only
  when the URL changed; when Meta wants the app subscribed first, it is subscribed and the
  override retried once. The verify token is never saved;
* after the override, the URL must answer Meta's handshake itself (``waba.handshake``: the verify
  token's challenge echoed, a wrong token refused): checked on every run until it passes once for the
  URL, and again whenever the URL changes. Meta sends the same GET when it takes the override, but a
  gateway started later, or with another verify token, would fail it only at Meta's next check.
"""

from __future__ import annotations

from mogateway.waba import calls
from mogateway.waba.errors import ExitCode, GraphError, Kind, TransportError, classify
from mogateway.waba.flow.context import Context
from mogateway.waba.flow.step import FlowStep, PlanInputs, PlannedCall, Rewind
from mogateway.waba.handshake import check_handshake
from mogateway.waba.options import MigrationOptions
from mogateway.waba.prompts import Mark
from mogateway.waba.state import Step


class CheckSubscription(FlowStep):
    """*This* app (by id) is among the WABA's subscribed apps; subscribe it if not."""

    records = (Step.SUBSCRIPTION_CHECKED,)
    title = "Check webhook subscription"

    def plan(self, inputs: PlanInputs) -> list[PlannedCall]:
        request = calls.list_subscribed_apps_request(inputs.options.waba_id)
        return [(request, "always: this app id is among the subscribed apps")]

    def act(self, ctx: Context) -> Rewind | None:
        ui, waba_id, app_id = ctx.ui, ctx.options.waba_id, ctx.state.app_id or ""
        apps = ctx.call(Step.SUBSCRIPTION_CHECKED, lambda: calls.list_subscribed_apps(ctx.client, waba_id))
        if not calls.is_app_subscribed(apps, app_id):
            ui.info(f"app {app_id} is not among the WABA's subscribed apps: subscribing it")
            ctx.call(Step.SUBSCRIPTION_CHECKED, lambda: calls.subscribe_app(ctx.client, waba_id))
            apps = ctx.call(
                Step.SUBSCRIPTION_CHECKED, lambda: calls.list_subscribed_apps(ctx.client, waba_id)
            )
            if not calls.is_app_subscribed(apps, app_id):
                ctx.stop(
                    Step.SUBSCRIPTION_CHECKED,
                    ExitCode.ERROR,
                    f"App {app_id} is still not subscribed to WABA {waba_id}.",
                    "Subscribe it in the app dashboard (WhatsApp › Configuration) and run again.",
                )
        names = ", ".join(a.app_id for a in apps)
        ui.check(Mark.OK, f"app {app_id} is subscribed (subscribed apps: {names})")
        if not ctx.state.is_done(Step.SUBSCRIPTION_CHECKED):
            ctx.state.mark_done(Step.SUBSCRIPTION_CHECKED, f"app {app_id}")
        ctx.save()
        return None


class OverrideCallback(FlowStep):
    """Send the WABA's webhooks to ``--callback-url`` instead of the app's default URL."""

    records = (Step.CALLBACK_OVERRIDDEN,)
    title = "Override the callback URL"

    def applies(self, options: MigrationOptions) -> bool:
        return bool(options.callback_url)

    def is_done(self, ctx: Context) -> bool:
        state = ctx.state
        return state.is_done(Step.CALLBACK_OVERRIDDEN) and state.callback_url == ctx.options.callback_url

    def done_line(self, ctx: Context) -> str | None:
        return f"callback already set to {ctx.options.callback_url}"

    def plan(self, inputs: PlanInputs) -> list[PlannedCall]:
        opts = inputs.options
        request = calls.override_callback_request(opts.waba_id, opts.callback_url or "", "<VERIFY_TOKEN>")
        return [(request, "--callback-url")]

    def act(self, ctx: Context) -> Rewind | None:
        state, opts, ui = ctx.state, ctx.options, ctx.ui
        url, verify_token = opts.callback_url or "", opts.verify_token or ""
        fixed = False
        while True:
            try:
                calls.override_callback(ctx.client, opts.waba_id, url, verify_token)
                break
            except GraphError as err:
                verdict = classify(err)
                if verdict.kind is Kind.SUBSCRIBE_BEFORE_OVERRIDE and not fixed:
                    ui.info(
                        "Meta wants the app subscribed before an override: subscribing, then retrying once"
                    )
                    ctx.call(Step.CALLBACK_OVERRIDDEN, lambda: calls.subscribe_app(ctx.client, opts.waba_id))
                    fixed = True
                    continue
                ctx.fail(Step.CALLBACK_OVERRIDDEN, err, verdict)
            except TransportError as err:
                ctx.fail_transport(Step.CALLBACK_OVERRIDDEN, err)
        state.callback_url = url
        state.mark_done(Step.CALLBACK_OVERRIDDEN, url)
        if state.is_done(Step.WEBHOOK_VERIFIED):
            state.undo(Step.WEBHOOK_VERIFIED, "the callback URL changed: its handshake is checked again")
        ctx.save()
        ui.check(Mark.OK, f"WABA webhooks now go to {url}")
        return None


class VerifyWebhook(FlowStep):
    """The callback URL answers Meta's handshake for the verify token (the gateway is listening)."""

    records = (Step.WEBHOOK_VERIFIED,)
    title = "Check the webhook handshake"

    def applies(self, options: MigrationOptions) -> bool:
        return bool(options.callback_url)

    def is_done(self, ctx: Context) -> bool:
        state = ctx.state
        return (
            state.is_done(Step.WEBHOOK_VERIFIED)
            and state.is_done(Step.CALLBACK_OVERRIDDEN)
            and state.callback_url == ctx.options.callback_url
        )

    def done_line(self, ctx: Context) -> str | None:
        return f"{ctx.options.callback_url} already answered the handshake"

    def plan(self, inputs: PlanInputs) -> list[PlannedCall]:
        return []  # a GET to the callback URL itself, not to Graph

    def act(self, ctx: Context) -> Rewind | None:
        url = ctx.options.callback_url or ""
        check = check_handshake(url, ctx.options.verify_token or "")
        if not check.ok:
            ctx.stop(
                Step.WEBHOOK_VERIFIED,
                ExitCode.ERROR if check.reachable else ExitCode.UNAVAILABLE,
                f"The callback URL does not answer Meta's handshake: {check.reason}.",
                "Start the gateway with a [whatsapp] table whose verify_token is the --verify-token "
                "given (GET /v1/whatsapp/webhook must answer), make the URL reachable, then run the "
                "same command again: it continues here.",
            )
        ctx.state.mark_done(Step.WEBHOOK_VERIFIED, url)
        ctx.save()
        ctx.ui.check(Mark.OK, check.reason)
        return None
