"""The migration, step by step, resumable: the orchestration the CLI (or a script) drives.

Rules this file keeps:
* every step's outcome is saved before the next step starts, so a run stopped anywhere continues;
* on each run, Graph is asked what it already knows (number on the WABA, verified, connected)
  before a step is repeated, because a run may die after Graph acted but before the save;
* ``register`` is never repeated by the tool (10 per number per 72 h, then a 72 h block), except
  once after Meta's documented 5-minute wait for 133015;
* every stop is a :class:`MigrationStopped` carrying the exit status, the meaning and what to do.
"""

from __future__ import annotations

import enum
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from mogateway.waba import steps
from mogateway.waba.errors import Classification, ExitCode, GraphError, Kind, TransportError, classify
from mogateway.waba.graph import GraphClient, GraphRequest, time_scale
from mogateway.waba.phone import PhoneNumber
from mogateway.waba.state import MigrationState, StateFile, StateFileError, Step

REGISTER_WINDOW_S = 72 * 3600
REGISTER_LIMIT = 10
DELETION_WAIT_S = 300.0
CODE_RE = re.compile(r"^\d{6}$")
PIN_RE = re.compile(r"^\d{6}$")
LANGUAGE_RE = re.compile(r"^[a-z]{2,3}(_[A-Z]{2})?$")
MAX_CALLBACK_URL = 200

T = TypeVar("T")


class Mark(enum.Enum):
    """How a checklist line is shown."""

    OK = "ok"
    FAIL = "fail"
    UNKNOWN = "unknown"
    WARN = "warn"


class MigrationUI(Protocol):
    """What the orchestration needs from a front end (the CLI's is rich; a script's may be silent)."""

    def step(self, title: str) -> None:
        """A step starts."""

    def check(self, mark: Mark, text: str) -> None:
        """One checked fact."""

    def info(self, text: str) -> None:
        """Progress or advice."""

    def interactive(self) -> bool:
        """True when a person can answer prompts."""

    def confirm(self, question: str) -> bool:
        """Ask yes/no (only called when interactive)."""

    def ask(self, prompt: str) -> str:
        """Ask for a line of text (only called when interactive)."""

    def ask_secret(self, prompt: str) -> str:
        """Ask for a hidden line of text (only called when interactive)."""


class MigrationStopped(Exception):
    """The migration cannot go on now; the state file is saved and says where it stopped."""

    def __init__(
        self,
        exit_code: ExitCode,
        title: str,
        advice: str = "",
        *,
        error: GraphError | TransportError | None = None,
    ) -> None:
        super().__init__(title)
        self.exit_code = exit_code
        self.title = title
        self.advice = advice
        self.error = error


@dataclass
class MigrationOptions:
    """What the user asked for. Secrets (PIN, code, verify token) live here, never in the state."""

    waba_id: str
    phone: PhoneNumber
    code_method: str = "SMS"
    language: str = "en_US"
    pin: str | None = None
    code: str | None = None
    new_code: bool = False
    callback_url: str | None = None
    verify_token: str | None = None
    assume_yes: bool = False
    resend_cooldown_s: float = 60.0
    max_code_attempts: int = 5

    def validate(self) -> None:
        """Raise ``MigrationStopped(USAGE)`` for values Graph would refuse anyway."""
        if not self.waba_id.isdigit():
            raise MigrationStopped(
                ExitCode.USAGE, f"--waba-id must be the numeric WABA id, not {self.waba_id!r}"
            )
        if self.code_method not in steps.CODE_METHODS:
            raise MigrationStopped(ExitCode.USAGE, "--code-method must be SMS or VOICE")
        if not LANGUAGE_RE.match(self.language):
            raise MigrationStopped(ExitCode.USAGE, f"--language must look like en_US, not {self.language!r}")
        if self.pin is not None and not PIN_RE.match(self.pin):
            raise MigrationStopped(ExitCode.USAGE, "the PIN must be exactly 6 digits")
        if self.code is not None and normalize_code(self.code) is None:
            raise MigrationStopped(ExitCode.USAGE, "--code must be the 6 digits Meta sent")
        if self.callback_url is not None:
            if not self.callback_url.startswith("https://"):
                raise MigrationStopped(ExitCode.USAGE, "--callback-url must be an https:// URL")
            if len(self.callback_url) > MAX_CALLBACK_URL:
                raise MigrationStopped(ExitCode.USAGE, f"--callback-url is longer than {MAX_CALLBACK_URL}")
            if not self.verify_token:
                raise MigrationStopped(ExitCode.USAGE, "--callback-url needs --verify-token")


def normalize_code(text: str) -> str | None:
    """The 6 digits of a code typed as "123456", "123 456" or "123-456"; None if it is not one."""
    compact = re.sub(r"[\s-]", "", text)
    return compact if CODE_RE.match(compact) else None


class Migration:
    """Runs (or resumes) one migration against Graph, recording each step in a state file."""

    def __init__(
        self, client: GraphClient, options: MigrationOptions, state_file: StateFile, ui: MigrationUI
    ):
        self.client = client
        self.options = options
        self.state_file = state_file
        self.ui = ui
        self.state = self._load_state()
        self._sleep: Callable[[float], None] = time.sleep

    # -- state -----------------------------------------------------------------------------------

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
        self.state_file.save(self.state)

    # -- the flow ------------------------------------------------------------------------------------

    def run(self) -> steps.NumberInfo:
        """Run every step not yet done; returns the number's final status."""
        self.options.validate()
        self.save()
        token = self.preflight()
        self.ensure_migration_requested()
        # A 133006 at register sends the flow back to the code once; more would be a loop.
        for _ in range(2):
            self.sync_with_graph()
            if not self.state.is_done(Step.CODE_VERIFIED):
                self.confirm_ownership()
            if self.state.is_done(Step.REGISTERED) or self.register():
                break
        self.check_subscription(token.app_id or "")
        if self.options.callback_url:
            self.override_callback()
        return self.final_status()

    def preflight(self) -> steps.TokenInfo:
        """Token, WABA, number already there, display name, app subscription, and the checklist."""
        ui, state = self.ui, self.state
        ui.step("Preflight")
        token = self._call(Step.PREFLIGHT, lambda: steps.debug_token(self.client))
        if not token.is_valid:
            self._stop(
                Step.PREFLIGHT,
                ExitCode.AUTH,
                "The access token is not valid (debug_token).",
                classify_auth_advice(),
            )
        ui.check(Mark.OK, f"token valid, app {token.app_id} ({token.app_name or 'unnamed'})")
        if steps.MANAGEMENT_SCOPE not in token.scopes:
            self._stop(
                Step.PREFLIGHT,
                ExitCode.AUTH,
                f"The token lacks {steps.MANAGEMENT_SCOPE}.",
                classify_auth_advice(),
            )
        ui.check(Mark.OK, f"permission {steps.MANAGEMENT_SCOPE}")
        if steps.MESSAGING_SCOPE in token.scopes:
            ui.check(Mark.OK, f"permission {steps.MESSAGING_SCOPE}")
        else:
            ui.check(Mark.WARN, f"permission {steps.MESSAGING_SCOPE} missing (Solution Partners need it)")
        if token.expires_at:
            left = token.expires_at - time.time()
            ui.check(
                Mark.WARN,
                f"token expires in {max(left, 0) / 3600:.1f} h; a System User token that "
                "never expires is safer for a migration",
            )
        if not token.app_id:
            self._stop(
                Step.PREFLIGHT,
                ExitCode.AUTH,
                "debug_token did not name the token's app.",
                classify_auth_advice(),
            )
        if state.app_id and state.app_id != token.app_id:
            ui.check(
                Mark.WARN, f"earlier runs used app {state.app_id}; this token belongs to app {token.app_id}"
            )
        app_id = state.app_id = token.app_id or ""
        if token.waba_targets is not None and self.options.waba_id not in token.waba_targets:
            ui.check(Mark.WARN, f"the token's grants do not list WABA {self.options.waba_id}")

        waba = self._call(Step.PREFLIGHT, lambda: steps.get_waba(self.client, self.options.waba_id))
        review = waba.review_status or "unknown"
        ui.check(
            Mark.OK if review == "APPROVED" else Mark.WARN,
            f"WABA {waba.id} reachable ({waba.name or 'unnamed'}), review status {review}",
        )
        if waba.business_verification_status is not None:
            state.facts.business_verified = waba.business_verification_status == "verified"

        self._find_existing_number()
        apps = self._call(
            Step.PREFLIGHT, lambda: steps.list_subscribed_apps(self.client, self.options.waba_id)
        )
        if steps.is_app_subscribed(apps, app_id):
            ui.check(Mark.OK, f"app {token.app_id} subscribed to the WABA's webhooks")
        else:
            ui.info(
                f"app {token.app_id} is not subscribed to WABA {self.options.waba_id}: subscribing it "
                "(Meta requires a subscribed app before migrating)"
            )
            self._call(Step.PREFLIGHT, lambda: steps.subscribe_app(self.client, self.options.waba_id))
            ui.check(Mark.OK, f"app {token.app_id} subscribed to the WABA's webhooks")
        state.facts.app_subscribed = True

        self._show_checklist()
        if self.options.pin is None and not ui.interactive():
            ui.check(Mark.WARN, "no --pin/--pin-file: the run will stop before register")
        if not state.is_done(Step.PREFLIGHT):
            state.mark_done(Step.PREFLIGHT, f"app {token.app_id}")
        self.save()
        return token

    def _find_existing_number(self) -> None:
        state = self.state
        number: steps.NumberInfo | None = None
        if state.phone_number_id:
            number = self._call(
                Step.PREFLIGHT, lambda: steps.get_number(self.client, state.phone_number_id or "")
            )
        else:
            number = self._call(
                Step.PREFLIGHT,
                lambda: steps.find_number(self.client, self.options.waba_id, state.cc, state.national),
            )
            if number is not None:
                self.ui.info(
                    f"{state.e164} is already on WABA {self.options.waba_id}: resuming with id {number.id}"
                )
                state.phone_number_id = number.id
                state.mark_done(Step.MIGRATION_REQUESTED, f"found on the WABA as {number.id}")
        if number is None:
            self.ui.check(Mark.OK, f"{state.e164} is not yet on WABA {self.options.waba_id}")
            return
        if number.name_status is not None:
            state.facts.display_name_approved = number.name_status in ("APPROVED", "AVAILABLE_WITHOUT_REVIEW")
        self.ui.check(
            Mark.OK,
            f"number id {number.id}: status {number.status}, code "
            f"{number.code_verification_status}, name {number.name_status}",
        )

    def _show_checklist(self) -> None:
        facts = self.state.facts
        self.ui.info("Checklist (what the API cannot check before the migration; ? = not known yet):")
        lines = (
            (
                facts.two_step_disabled,
                "two-step verification disabled at the old provider (WhatsApp Manager)",
            ),
            (facts.payment_method, "payment method on the destination WABA"),
            (facts.business_verified, "business verification complete"),
            (facts.display_name_approved, "display name approved, no name change pending"),
        )
        for known, text in lines:
            self.ui.check({True: Mark.OK, False: Mark.FAIL, None: Mark.UNKNOWN}[known], text)

    def ensure_migration_requested(self) -> None:
        """Step 1: ``POST /<WABA>/phone_numbers`` with ``migrate_phone_number=true``; store the new id."""
        state, opts, ui = self.state, self.options, self.ui
        ui.step("Request the migration")
        if state.is_done(Step.MIGRATION_REQUESTED) and state.phone_number_id:
            ui.check(Mark.OK, f"already requested: phone number id {state.phone_number_id}")
            return
        if not opts.assume_yes:
            if not ui.interactive():
                self._stop(
                    Step.MIGRATION_REQUESTED,
                    ExitCode.USAGE,
                    "Confirmation needed and there is no terminal.",
                    "Add --yes to confirm.",
                )
            if not ui.confirm(f"Migrate {state.e164} into WABA {opts.waba_id} now?"):
                self._stop(
                    Step.MIGRATION_REQUESTED,
                    ExitCode.ABORTED,
                    "Stopped at your request.",
                    "Nothing was changed at Meta by this step.",
                )
        fixed = False
        while True:
            try:
                pid = steps.request_migration(self.client, opts.waba_id, state.cc, state.national)
                break
            except GraphError as err:
                verdict = classify(err)
                if verdict.kind is Kind.ALREADY_EXISTS:
                    ui.info("Meta says the number already exists on the WABA (2388012): looking up its id")
                    found = self._call(
                        Step.MIGRATION_REQUESTED,
                        lambda: steps.find_number(self.client, opts.waba_id, state.cc, state.national),
                    )
                    if found is None:
                        self._fail(Step.MIGRATION_REQUESTED, err, verdict)
                    assert found is not None
                    pid = found.id
                    break
                if verdict.kind is Kind.WEBHOOKS_MISSING and not fixed:
                    ui.info("Meta wants an app subscribed to the WABA first: subscribing, then retrying once")
                    self._call(
                        Step.MIGRATION_REQUESTED, lambda: steps.subscribe_app(self.client, opts.waba_id)
                    )
                    fixed = True
                    continue
                self._learn_from(err)
                self._fail(Step.MIGRATION_REQUESTED, err, verdict)
            except TransportError as err:
                self._fail_transport(Step.MIGRATION_REQUESTED, err)
        state.phone_number_id = pid
        # Meta refuses the migration unless these hold, so an accepted request proves them.
        state.facts.display_name_approved = True
        state.facts.payment_method = True
        state.facts.business_verified = True
        state.mark_done(Step.MIGRATION_REQUESTED, f"phone number id {pid}")
        self.save()
        ui.check(Mark.OK, f"migration requested: new phone number id {pid}")

    def sync_with_graph(self) -> None:
        """Ask Graph how far the number is, and mark as done what Graph already did."""
        state = self.state
        number = self._call(Step.CODE_REQUESTED, lambda: steps.get_number(self.client, self._pid()))
        if number.is_connected:
            for step in (Step.CODE_REQUESTED, Step.CODE_VERIFIED, Step.REGISTERED):
                if not state.is_done(step):
                    state.mark_done(step, "Graph shows the number CONNECTED")
        elif number.is_verified:
            for step in (Step.CODE_REQUESTED, Step.CODE_VERIFIED):
                if not state.is_done(step):
                    state.mark_done(step, "Graph shows the code verified")
        self.save()

    def confirm_ownership(self) -> None:
        """Steps 2 and 3: request the code and verify it (typed, given with --code, or stop for it)."""
        state, opts, ui = self.state, self.options, self.ui
        ui.step("Confirm ownership with a registration code")
        method = state.code_method or opts.code_method
        requested_now = False
        if not state.is_done(Step.CODE_REQUESTED) or opts.new_code:
            if opts.new_code and state.is_done(Step.CODE_REQUESTED):
                self._wait_cooldown()
            method = opts.code_method
            self._request_code(method)
            requested_now = True
        else:
            ui.check(Mark.OK, f"a code was already requested by {method}")
        if opts.code is not None and not requested_now:
            code = normalize_code(opts.code) or ""
            if self._verify(code):
                return
            self._stop(
                Step.CODE_VERIFIED,
                ExitCode.CODE,
                "The code was refused (wrong or expired).",
                "Run again with the right --code XXXXXX, or with --new-code (add --code-method VOICE "
                "for a call) to get a new one.",
            )
        if opts.code is not None and requested_now:
            ui.info("--code ignored: a new code was just requested; enter the new one")
        if not ui.interactive():
            self._stop(
                Step.CODE_VERIFIED,
                ExitCode.NEEDS_CODE,
                f"Waiting for the 6-digit code sent by {method} to {state.e164}.",
                "Run the same command again with --code XXXXXX (same --state file).",
            )
        self._ask_code_loop(method)

    def _ask_code_loop(self, method: str) -> None:
        ui, opts = self.ui, self.options
        wrong = 0
        ui.info("Type the 6 digits, or: r = send again, v = voice call instead, q = stop here")
        while True:
            answer = ui.ask(f"Code sent by {method}").strip().lower()
            if answer == "q":
                self._stop(
                    Step.CODE_VERIFIED,
                    ExitCode.NEEDS_CODE,
                    "Stopped while waiting for the code.",
                    "Run the same command again with --code XXXXXX (same --state file).",
                )
            if answer in ("r", "v"):
                left = self._cooldown_left()
                if left > 0:
                    ui.info(f"Meta limits code requests: you can ask again in {left:.0f} s")
                    continue
                method = "VOICE" if answer == "v" else method
                self._request_code(method)
                continue
            code = normalize_code(answer)
            if code is None:
                ui.info("A code is exactly 6 digits; type it again")
                continue
            if self._verify(code):
                return
            wrong += 1
            if wrong >= opts.max_code_attempts:
                self._stop(
                    Step.CODE_VERIFIED,
                    ExitCode.CODE,
                    f"{wrong} codes refused.",
                    "Run again later with --new-code (add --code-method VOICE for a call).",
                )
            hint = "v for a voice call" if method == "SMS" else "r for a new call"
            ui.info(f"Code refused (wrong or expired). Type it again, r for a new code, or {hint}")

    def _request_code(self, method: str) -> None:
        state = self.state
        try:
            steps.request_code(self.client, self._pid(), method, self.options.language)
        except GraphError as err:
            self._fail(Step.CODE_REQUESTED, err, classify(err))
        except TransportError as err:
            self._fail_transport(Step.CODE_REQUESTED, err)
        state.code_method = method
        state.language = self.options.language
        state.code_requests.append(time.time())
        state.mark_done(Step.CODE_REQUESTED, f"by {method}")
        self.save()
        self.ui.check(Mark.OK, f"code requested by {method} ({self.options.language}) for {state.e164}")
        if method == "SMS":
            self.ui.info(
                "No SMS after a few minutes? Ask for a voice call (v, or --new-code --code-method VOICE)"
            )

    def _verify(self, code: str) -> bool:
        try:
            steps.verify_code(self.client, self._pid(), code)
        except GraphError as err:
            verdict = classify(err)
            if verdict.kind is Kind.CODE_REJECTED:
                self.state.note(Step.CODE_VERIFIED, "error", "code refused", err.reference)
                self.save()
                self.ui.check(Mark.FAIL, f"code refused: {err.details or err.message}")
                return False
            self._fail(Step.CODE_VERIFIED, err, verdict)
        except TransportError as err:
            self._fail_transport(Step.CODE_VERIFIED, err)
        self.state.mark_done(Step.CODE_VERIFIED)
        self.save()
        self.ui.check(Mark.OK, "code verified: ownership of the number confirmed")
        return True

    def _cooldown_left(self) -> float:
        if not self.state.code_requests:
            return 0.0
        cooldown = self.options.resend_cooldown_s * time_scale()
        return max(0.0, self.state.code_requests[-1] + cooldown - time.time())

    def _wait_cooldown(self) -> None:
        left = self._cooldown_left()
        if left > 0:
            self.ui.info(f"Waiting {left:.0f} s before asking Meta for another code")
            self._sleep(left)

    def register(self) -> bool:
        """Step 4: register with the PIN. False when Graph says the code must be verified again."""
        state, ui = self.state, self.ui
        ui.step("Register the number on the Cloud API")
        pin = self._pin()
        now = time.time()
        recent = [t for t in state.register_attempts if now - t < REGISTER_WINDOW_S]
        if len(recent) >= REGISTER_LIMIT:
            self._stop(
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
            self.save()
            try:
                steps.register(self.client, self._pid(), pin)
                break
            except GraphError as err:
                verdict = classify(err)
                if verdict.kind is Kind.NOT_VERIFIED:
                    ui.info("Meta says the number is not verified (133006): requesting a new code")
                    state.undo(Step.CODE_VERIFIED, "register answered 133006")
                    state.undo(Step.CODE_REQUESTED, "register answered 133006")
                    self.save()
                    return False
                if verdict.kind is Kind.DELETION_PENDING and not waited:
                    ui.info("Meta is still deleting an earlier registration (133015): waiting 5 minutes")
                    self._sleep(DELETION_WAIT_S * time_scale())
                    waited = True
                    continue
                if verdict.kind is Kind.TWO_STEP_ON:
                    state.facts.two_step_disabled = False
                self._fail(Step.REGISTERED, err, verdict)
            except TransportError as err:
                # The outcome is unknown: ask Graph instead of registering again.
                number = self._status_after_transport_error(err)
                if number is not None and number.is_connected:
                    break
                self._fail_transport(Step.REGISTERED, err)
        state.facts.two_step_disabled = True
        state.mark_done(Step.REGISTERED)
        self.save()
        ui.check(Mark.OK, "number registered on the Cloud API")
        ui.info(
            "If two-step verification was off, the PIN you gave is now the number's two-step PIN. "
            "Keep it safe: resetting a lost PIN can take days."
        )
        return True

    def _status_after_transport_error(self, err: TransportError) -> steps.NumberInfo | None:
        try:
            return steps.get_number(self.client, self._pid())
        except (GraphError, TransportError):
            return None

    def _pin(self) -> str:
        if self.options.pin is not None:
            return self.options.pin
        if not self.ui.interactive():
            self._stop(
                Step.REGISTERED,
                ExitCode.USAGE,
                "No two-step PIN given for register.",
                "Run the same command again with --pin-file FILE (or --pin).",
            )
        self.ui.info(
            "register needs the number's 6-digit two-step PIN. If two-step verification is off, "
            "choose one: it becomes the new PIN."
        )
        for _ in range(3):
            pin = self.ui.ask_secret("Two-step PIN (6 digits)").strip()
            if PIN_RE.match(pin):
                self.options.pin = pin
                return pin
            self.ui.info("The PIN is exactly 6 digits")
        self._stop(
            Step.REGISTERED, ExitCode.USAGE, "No valid PIN entered.", "Run again with --pin-file FILE."
        )
        raise AssertionError("unreachable")

    def check_subscription(self, app_id: str) -> None:
        """Step 5: *this* app (by id) is among the WABA's subscribed apps; subscribe it if not."""
        ui, waba_id = self.ui, self.options.waba_id
        ui.step("Check webhook subscription")
        apps = self._call(Step.SUBSCRIPTION_CHECKED, lambda: steps.list_subscribed_apps(self.client, waba_id))
        if not steps.is_app_subscribed(apps, app_id):
            ui.info(f"app {app_id} is not among the WABA's subscribed apps: subscribing it")
            self._call(Step.SUBSCRIPTION_CHECKED, lambda: steps.subscribe_app(self.client, waba_id))
            apps = self._call(
                Step.SUBSCRIPTION_CHECKED, lambda: steps.list_subscribed_apps(self.client, waba_id)
            )
            if not steps.is_app_subscribed(apps, app_id):
                self._stop(
                    Step.SUBSCRIPTION_CHECKED,
                    ExitCode.ERROR,
                    f"App {app_id} is still not subscribed to WABA {waba_id}.",
                    "Subscribe it in the app dashboard (WhatsApp › Configuration) and run again.",
                )
        names = ", ".join(a.app_id for a in apps)
        ui.check(Mark.OK, f"app {app_id} is subscribed (subscribed apps: {names})")
        if not self.state.is_done(Step.SUBSCRIPTION_CHECKED):
            self.state.mark_done(Step.SUBSCRIPTION_CHECKED, f"app {app_id}")
        self.save()

    def override_callback(self) -> None:
        """Step 6 (optional): override the WABA's callback URL, after the app is subscribed."""
        state, opts, ui = self.state, self.options, self.ui
        url, verify_token = opts.callback_url or "", opts.verify_token or ""
        ui.step("Override the callback URL")
        if state.is_done(Step.CALLBACK_OVERRIDDEN) and state.callback_url == url:
            ui.check(Mark.OK, f"callback already set to {url}")
            return
        fixed = False
        while True:
            try:
                steps.override_callback(self.client, opts.waba_id, url, verify_token)
                break
            except GraphError as err:
                verdict = classify(err)
                if verdict.kind is Kind.SUBSCRIBE_BEFORE_OVERRIDE and not fixed:
                    ui.info(
                        "Meta wants the app subscribed before an override: subscribing, then retrying once"
                    )
                    self._call(
                        Step.CALLBACK_OVERRIDDEN, lambda: steps.subscribe_app(self.client, opts.waba_id)
                    )
                    fixed = True
                    continue
                self._fail(Step.CALLBACK_OVERRIDDEN, err, verdict)
            except TransportError as err:
                self._fail_transport(Step.CALLBACK_OVERRIDDEN, err)
        state.callback_url = url
        state.mark_done(Step.CALLBACK_OVERRIDDEN, url)
        self.save()
        ui.check(Mark.OK, f"WABA webhooks now go to {url}")

    def final_status(self) -> steps.NumberInfo:
        """Show the number as Graph sees it now and mark the migration done."""
        self.ui.step("Final status")
        number = self._call(Step.DONE, lambda: steps.get_number(self.client, self._pid()))
        if not number.is_connected:
            self._stop(
                Step.DONE,
                ExitCode.ERROR,
                f"The number's status is {number.status}, not CONNECTED.",
                "Run again in a few minutes; if it stays so, contact Meta support.",
            )
        if not self.state.is_done(Step.DONE):
            self.state.mark_done(Step.DONE, f"status {number.status}")
        self.save()
        return number

    # -- helpers ---------------------------------------------------------------------------------

    def _pid(self) -> str:
        if not self.state.phone_number_id:
            raise MigrationStopped(ExitCode.ERROR, "internal: no phone number id in the state")
        return self.state.phone_number_id

    def _call(self, step: Step, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except GraphError as err:
            self._fail(step, err, classify(err))
        except TransportError as err:
            self._fail_transport(step, err)
        raise AssertionError("unreachable")

    def _learn_from(self, err: GraphError) -> None:
        text = err.text.lower()
        facts = self.state.facts
        if "payment account" in text:
            facts.payment_method = False
        elif "messaging for" in text:
            pass
        elif "must be approved" in text:
            facts.business_verified = False
        elif "registered name" in text:
            facts.display_name_approved = False
        elif "two-step" in text:
            facts.two_step_disabled = False

    def _fail(self, step: Step, err: GraphError, verdict: Classification) -> None:
        self.state.note(step, "error", verdict.meaning, err.reference)
        self.save()
        raise MigrationStopped(verdict.exit_code, verdict.meaning, verdict.advice, error=err)

    def _fail_transport(self, step: Step, err: TransportError) -> None:
        self.state.note(step, "error", "Graph unreachable", str(err))
        self.save()
        raise MigrationStopped(
            ExitCode.UNAVAILABLE,
            "Graph could not be reached.",
            "Check the network and run the same command again: it continues where it stopped.",
            error=err,
        )

    def _stop(self, step: Step, code: ExitCode, title: str, advice: str = "") -> None:
        self.state.note(step, "error" if code not in (ExitCode.NEEDS_CODE,) else "info", title)
        self.save()
        raise MigrationStopped(code, title, advice)


def classify_auth_advice() -> str:
    """What to do about a token that cannot be used."""
    return classify(GraphError(http_status=401, code=190, message="")).advice


def plan(
    options: MigrationOptions, phone_number_id: str | None, token: str
) -> list[tuple[GraphRequest, str]]:
    """The calls a run makes, in order, each with when it is made; for ``--dry-run``.

    Ids not known yet appear as ``<PHONE_NUMBER_ID>``, the code as ``<CODE>``; the PIN is shown as
    ``<PIN>`` and the token is redacted by the caller.
    """
    pid = phone_number_id or "<PHONE_NUMBER_ID>"
    waba, cc, national = options.waba_id, options.phone.cc, options.phone.national
    calls: list[tuple[GraphRequest, str]] = [
        (steps.debug_token_request(token), "always: token validity, scopes, app id"),
        (steps.get_waba_request(waba), "always: the destination WABA is reachable"),
        (steps.list_numbers_request(waba), "when no id is saved yet: is the number already on the WABA"),
        (steps.list_subscribed_apps_request(waba), "always: is this app subscribed"),
        (steps.subscribe_app_request(waba), "only if this app is not subscribed"),
        (steps.request_migration_request(waba, cc, national), "unless the number is already on the WABA"),
        (steps.get_number_request(pid), "always: how far Graph already is"),
        (
            steps.request_code_request(pid, options.code_method, options.language),
            "unless a code was requested",
        ),
        (steps.verify_code_request(pid, "<CODE>"), "with the code you type or pass with --code"),
        (steps.register_request(pid, "<PIN>"), "once; never repeated automatically"),
        (steps.list_subscribed_apps_request(waba), "always: this app id is among the subscribed apps"),
    ]
    if options.callback_url:
        calls.append(
            (steps.override_callback_request(waba, options.callback_url, "<VERIFY_TOKEN>"), "--callback-url")
        )
    calls.append((steps.get_number_request(pid), "always: final status"))
    return calls
