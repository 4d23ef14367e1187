"""Typed Graph API errors and the table that says what each one means for a migration.

Meta asks clients to branch on ``code`` (and, for migration errors, ``error_subcode``) and the
``details`` text, never on titles alone. Several 2388103 variants share one subcode and differ only
in their title, so the table below matches code, then subcode, then a piece of the text, most
specific first. Every row carries the message for the user, what to do next, whether the tool may
retry by itself, and the exit status a script can branch on.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class ExitCode(enum.IntEnum):
    """Exit statuses of ``mogateway waba migrate``; stable, scripts branch on them."""

    OK = 0
    """The number is registered on the Cloud API (or a dry run finished)."""
    ERROR = 1
    """An error the tool does not know; the message has the Graph code and fbtrace_id."""
    USAGE = 2
    """Bad arguments, a state file for another number, a missing PIN or token."""
    NEEDS_CODE = 3
    """Waiting for the 6-digit code: run again with ``--code XXXXXX`` and the same state file."""
    AUTH = 4
    """Token invalid, expired or lacking permissions (190, 0, 10, 200-299)."""
    NOT_ELIGIBLE = 5
    """Meta refuses the migration: wrong id, WABA not approved, no payment method, name not approved..."""
    TWO_STEP = 6
    """Two-step verification PIN problem at register (133005, 133008, 133009)."""
    REGISTER_BLOCKED = 7
    """Register limit reached (133016): the number is blocked for 72 hours; stop."""
    CODE = 8
    """Registration code refused (136025 wrong/expired) or code request refused (136024)."""
    UNAVAILABLE = 9
    """Graph unreachable, transient or throttled after all retries; running again continues."""
    ABORTED = 10
    """The user answered no at a confirmation."""
    INTERRUPTED = 130
    """Ctrl-C; the state file is saved, running again continues."""


class Retry(enum.Enum):
    """Whether and how the tool may repeat a failed call by itself."""

    NEVER = "never"
    BACKOFF = "backoff"  # transient or throttled: exponential backoff, a few times
    FIX_THEN_ONCE = "fix_then_once"  # the tool can fix the cause (subscribe the app) and retry once
    WAIT_ONCE = "wait_once"  # wait a documented time (133015: 5 minutes), then retry once
    RESUME = "resume"  # not an error for the flow: continue from what already exists


class Kind(enum.Enum):
    """What went wrong, in the terms the orchestration branches on."""

    AUTH = "auth"
    PERMISSION = "permission"
    NOT_FOUND = "not_found"
    INVALID_PARAMETER = "invalid_parameter"
    ALREADY_EXISTS = "already_exists"
    NOT_MIGRATING = "not_migrating"
    WEBHOOKS_MISSING = "webhooks_missing"
    SUBSCRIBE_BEFORE_OVERRIDE = "subscribe_before_override"
    NOT_ELIGIBLE = "not_eligible"
    CODE_REQUEST_REFUSED = "code_request_refused"
    CODE_REJECTED = "code_rejected"
    NOT_VERIFIED = "not_verified"
    TWO_STEP_ON = "two_step_on"
    PIN_LOCKED = "pin_locked"
    DELETION_PENDING = "deletion_pending"
    REGISTER_LIMIT = "register_limit"
    NOT_REGISTERED = "not_registered"
    TRANSIENT = "transient"
    THROTTLED = "throttled"
    POLICY = "policy"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Classification:
    """What a Graph error means for the user and for the flow."""

    kind: Kind
    meaning: str
    advice: str
    retry: Retry
    exit_code: ExitCode


class GraphError(Exception):
    """An error answered by the Graph API, with every field of Meta's error envelope."""

    def __init__(
        self,
        *,
        http_status: int,
        code: int,
        message: str,
        subcode: int | None = None,
        type: str | None = None,
        details: str | None = None,
        user_title: str | None = None,
        user_msg: str | None = None,
        fbtrace_id: str | None = None,
        is_transient: bool = False,
        method: str = "",
        path: str = "",
    ) -> None:
        super().__init__(message)
        self.http_status = http_status
        self.code = code
        self.subcode = subcode
        self.message = message
        self.type = type
        self.details = details
        self.user_title = user_title
        self.user_msg = user_msg
        self.fbtrace_id = fbtrace_id
        self.is_transient = is_transient
        self.method = method
        self.path = path

    @classmethod
    def from_response(
        cls, http_status: int, body: Any, *, method: str = "", path: str = "", trace_header: str | None = None
    ) -> GraphError:
        """Build from a response body; a body that is not Graph's envelope still gives a useful error."""
        err = body.get("error") if isinstance(body, dict) else None
        if not isinstance(err, dict):
            return cls(
                http_status=http_status,
                code=-1,
                message=f"HTTP {http_status} without a Graph error body",
                fbtrace_id=trace_header,
                is_transient=http_status >= 500,
                method=method,
                path=path,
            )
        data = err.get("error_data")
        details = data.get("details") if isinstance(data, dict) else None
        return cls(
            http_status=http_status,
            code=_int(err.get("code"), -1),
            subcode=_int(err.get("error_subcode"), None),
            message=str(err.get("message", "")),
            type=_str(err.get("type")),
            details=_str(details),
            user_title=_str(err.get("error_user_title")),
            user_msg=_str(err.get("error_user_msg")),
            fbtrace_id=_str(err.get("fbtrace_id")) or trace_header,
            is_transient=bool(err.get("is_transient", False)),
            method=method,
            path=path,
        )

    @property
    def text(self) -> str:
        """All the human text Graph sent, joined; used to tell apart variants sharing one subcode."""
        parts = [self.message, self.user_title, self.user_msg, self.details]
        return " | ".join(p for p in parts if p)

    @property
    def reference(self) -> str:
        """``code/subcode`` plus the trace id, the line to quote to Meta support."""
        ident = f"{self.code}/{self.subcode}" if self.subcode is not None else str(self.code)
        trace = f", fbtrace_id {self.fbtrace_id}" if self.fbtrace_id else ""
        return f"Graph error {ident}{trace}"

    def classify(self) -> Classification:
        """Look this error up in :data:`ERROR_TABLE`."""
        return classify(self)

    def __str__(self) -> str:
        return f"{self.reference}: {self.text}"


class TransportError(Exception):
    """Graph could not be reached or did not answer (connection refused, reset, timeout)."""

    def __init__(self, message: str, *, method: str = "", path: str = "", request_sent: bool = True) -> None:
        super().__init__(message)
        self.method = method
        self.path = path
        # False when the connection failed before the request left: repeating it is always safe.
        self.request_sent = request_sent


def _int(value: Any, default: int | None) -> Any:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class Rule:
    """One row of the table: codes to match, an optional text fragment, and the classification."""

    codes: tuple[int, ...]
    classification: Classification
    subcode: int | None = None
    text: str | None = None
    code_range: tuple[int, int] | None = field(default=None)

    def matches(self, err: GraphError) -> bool:
        """True when ``err`` is this row's error."""
        if self.code_range is not None:
            if not self.code_range[0] <= err.code <= self.code_range[1]:
                return False
        elif err.code not in self.codes:
            return False
        if self.subcode is not None and err.subcode != self.subcode:
            return False
        return self.text is None or self.text.lower() in err.text.lower()


def _c(kind: Kind, meaning: str, advice: str, retry: Retry, exit_code: ExitCode) -> Classification:
    return Classification(kind, meaning, advice, retry, exit_code)


_AUTH_ADVICE = (
    "Create a System User token that never expires, with whatsapp_business_management and "
    "whatsapp_business_messaging, put it in the token variable, and run the same command again "
    "(it continues from the state file)."
)
_SUPPORT = "If it persists, contact Meta support and quote the fbtrace_id."

# Most specific first: rows with subcode and text, then subcode, then code only.
ERROR_TABLE: tuple[Rule, ...] = (
    Rule(
        (100,),
        subcode=2388012,
        classification=_c(
            Kind.ALREADY_EXISTS,
            "The number already exists in the destination WABA.",
            "Resuming with the existing phone number id.",
            Retry.RESUME,
            ExitCode.NOT_ELIGIBLE,
        ),
    ),
    Rule(
        (100,),
        subcode=2388091,
        classification=_c(
            Kind.NOT_MIGRATING,
            "The number cannot receive a registration code: it is not being migrated.",
            "Request the migration first, or use the normal add → verify → register flow for new numbers.",
            Retry.NEVER,
            ExitCode.NOT_ELIGIBLE,
        ),
    ),
    Rule(
        (100,),
        subcode=2388093,
        classification=_c(
            Kind.NOT_MIGRATING,
            "The number cannot verify a registration code: it is not being migrated.",
            "Request the migration first, or use the normal add → verify → register flow for new numbers.",
            Retry.NEVER,
            ExitCode.NOT_ELIGIBLE,
        ),
    ),
    Rule(
        (100,),
        subcode=2388103,
        text="webhooks",
        classification=_c(
            Kind.WEBHOOKS_MISSING,
            "No app is subscribed to webhooks on the destination WABA.",
            "Subscribing this app to the WABA, then retrying once.",
            Retry.FIX_THEN_ONCE,
            ExitCode.NOT_ELIGIBLE,
        ),
    ),
    Rule(
        (100,),
        subcode=2388103,
        text="Cannot migrate phone number",
        classification=_c(
            Kind.WEBHOOKS_MISSING,
            "Meta cannot migrate the number; usually no app is subscribed to the WABA.",
            "Subscribing this app to the WABA, then retrying once.",
            Retry.FIX_THEN_ONCE,
            ExitCode.NOT_ELIGIBLE,
        ),
    ),
    Rule(
        (100,),
        subcode=2388103,
        text="add this phone number",
        classification=_c(
            Kind.NOT_ELIGIBLE,
            "The number is not registered on any WhatsApp Business account: nothing to migrate.",
            "Add it as a new number (add → verify → register); no migration is needed. Check the number too.",
            Retry.NEVER,
            ExitCode.NOT_ELIGIBLE,
        ),
    ),
    Rule(
        (100,),
        subcode=2388103,
        text="Registered name",
        classification=_c(
            Kind.NOT_ELIGIBLE,
            "The display name is not approved, or a name change is pending at the source.",
            "Wait for the display name to be approved (WhatsApp Manager › Phone numbers), then run again.",
            Retry.NEVER,
            ExitCode.NOT_ELIGIBLE,
        ),
    ),
    Rule(
        (100,),
        subcode=2388103,
        text="not set up correctly",
        classification=_c(
            Kind.NOT_ELIGIBLE,
            "The source WABA (at the old provider) is not set up correctly.",
            "Ask the old provider to check the source WABA, or contact Meta support.",
            Retry.NEVER,
            ExitCode.NOT_ELIGIBLE,
        ),
    ),
    Rule(
        (100,),
        subcode=2388103,
        text="payment account",
        classification=_c(
            Kind.NOT_ELIGIBLE,
            "The destination WABA has no payment method.",
            "Add a payment method to the destination WABA (Business settings › WhatsApp accounts › Payment), "
            "then run again.",
            Retry.NEVER,
            ExitCode.NOT_ELIGIBLE,
        ),
    ),
    Rule(
        (100,),
        subcode=2388103,
        text="different Business Manager",
        classification=_c(
            Kind.NOT_ELIGIBLE,
            "The number belongs to a different business portfolio than the destination WABA.",
            "Migrate into a WABA of the same business portfolio.",
            Retry.NEVER,
            ExitCode.NOT_ELIGIBLE,
        ),
    ),
    Rule(
        (100,),
        subcode=2388103,
        text="Messaging For",
        classification=_c(
            Kind.NOT_ELIGIBLE,
            "The 'Messaging For' request is not approved.",
            "The client must accept the Messaging-For request in Business Suite, then run again.",
            Retry.NEVER,
            ExitCode.NOT_ELIGIBLE,
        ),
    ),
    Rule(
        (100,),
        subcode=2388103,
        text="must be approved",
        classification=_c(
            Kind.NOT_ELIGIBLE,
            "The destination WABA is not approved (business verification or WABA review).",
            "Complete business verification and the WABA review, then run again.",
            Retry.NEVER,
            ExitCode.NOT_ELIGIBLE,
        ),
    ),
    Rule(
        (100,),
        subcode=2388103,
        text="Two-step",
        classification=_c(
            Kind.TWO_STEP_ON,
            "Two-step verification is still on for this number.",
            "Ask the owner of the source WABA to turn two-step verification off in WhatsApp Manager and to "
            "confirm the e-mail Meta sends, then run again.",
            Retry.NEVER,
            ExitCode.TWO_STEP,
        ),
    ),
    Rule(
        (100,),
        subcode=2388103,
        text="error migrating",
        classification=_c(
            Kind.TRANSIENT,
            "Meta had an error migrating this number.",
            "Run again later. " + _SUPPORT,
            Retry.BACKOFF,
            ExitCode.UNAVAILABLE,
        ),
    ),
    Rule(
        (100,),
        subcode=2388103,
        classification=_c(
            Kind.NOT_ELIGIBLE,
            "Meta refuses to migrate this number.",
            "Read Meta's text above; fix the cause and run again. " + _SUPPORT,
            Retry.NEVER,
            ExitCode.NOT_ELIGIBLE,
        ),
    ),
    Rule(
        (100,),
        text="must be subscribed",
        classification=_c(
            Kind.SUBSCRIBE_BEFORE_OVERRIDE,
            "The app must be subscribed to the WABA before overriding the callback.",
            "Subscribing this app to the WABA, then retrying the override once.",
            Retry.FIX_THEN_ONCE,
            ExitCode.NOT_ELIGIBLE,
        ),
    ),
    Rule(
        (100,),
        subcode=33,
        classification=_c(
            Kind.NOT_FOUND,
            "The id does not exist or this token cannot see it.",
            "Check that --waba-id is the destination WABA id (not the business id or a phone number id) "
            "and that the system user is assigned to that WABA "
            "(Business settings › System users › Assign assets).",
            Retry.NEVER,
            ExitCode.NOT_ELIGIBLE,
        ),
    ),
    Rule(
        (100,),
        classification=_c(
            Kind.INVALID_PARAMETER,
            "A parameter was refused.",
            "Check the value Meta names in the details.",
            Retry.NEVER,
            ExitCode.ERROR,
        ),
    ),
    Rule(
        (2494100,),
        classification=_c(
            Kind.TRANSIENT,
            "The number is in maintenance mode.",
            "Try again in a few minutes.",
            Retry.BACKOFF,
            ExitCode.UNAVAILABLE,
        ),
    ),
    Rule(
        (136024,),
        classification=_c(
            Kind.CODE_REQUEST_REFUSED,
            "Meta did not send a registration code.",
            "Wait before requesting again; try --code-method VOICE; check the line accepts international "
            "SMS and calls, without IVR or call forwarding.",
            Retry.NEVER,
            ExitCode.CODE,
        ),
    ),
    Rule(
        (136025,),
        classification=_c(
            Kind.CODE_REJECTED,
            "The registration code was refused (wrong or expired).",
            "Enter the code again, or request a new one (--new-code).",
            Retry.NEVER,
            ExitCode.CODE,
        ),
    ),
    Rule(
        (133006,),
        classification=_c(
            Kind.NOT_VERIFIED,
            "The number must be verified before it is registered.",
            "Going back to request a registration code.",
            Retry.RESUME,
            ExitCode.CODE,
        ),
    ),
    Rule(
        (133005,),
        classification=_c(
            Kind.TWO_STEP_ON,
            "Two-step verification PIN mismatch: two-step verification is still on.",
            "Ask the owner of the source WABA to turn two-step verification off in WhatsApp Manager (Meta "
            "confirms by e-mail), or pass the PIN in use with --pin. Then run again. Each register attempt "
            "counts toward the limit of 10 per 72 hours, so the tool does not retry by itself.",
            Retry.NEVER,
            ExitCode.TWO_STEP,
        ),
    ),
    Rule(
        (133008,),
        classification=_c(
            Kind.PIN_LOCKED,
            "Too many wrong PIN attempts.",
            "Wait the time given in the details, then run again.",
            Retry.NEVER,
            ExitCode.TWO_STEP,
        ),
    ),
    Rule(
        (133009,),
        classification=_c(
            Kind.PIN_LOCKED,
            "PIN attempts were too fast.",
            "Wait the time given in the details, then run again.",
            Retry.NEVER,
            ExitCode.TWO_STEP,
        ),
    ),
    Rule(
        (133015,),
        classification=_c(
            Kind.DELETION_PENDING,
            "The number was deleted recently and the deletion is not complete.",
            "Waiting 5 minutes, then trying once more.",
            Retry.WAIT_ONCE,
            ExitCode.UNAVAILABLE,
        ),
    ),
    Rule(
        (133016,),
        classification=_c(
            Kind.REGISTER_LIMIT,
            "More than 10 register/deregister requests in 72 hours: the number is blocked.",
            "Stop. Do not call register or deregister for 72 hours, then run again.",
            Retry.NEVER,
            ExitCode.REGISTER_BLOCKED,
        ),
    ),
    Rule(
        (133000,),
        classification=_c(
            Kind.NOT_ELIGIBLE,
            "A previous deregistration failed.",
            "Deregister the number, then run again.",
            Retry.NEVER,
            ExitCode.NOT_ELIGIBLE,
        ),
    ),
    Rule(
        (133010,),
        classification=_c(
            Kind.NOT_REGISTERED,
            "The number is not registered.",
            "Running the register step.",
            Retry.RESUME,
            ExitCode.ERROR,
        ),
    ),
    Rule(
        (131031,),
        classification=_c(
            Kind.POLICY,
            "The account is locked (for example a PIN mismatch).",
            "Check the Health Status API and contact Meta support.",
            Retry.NEVER,
            ExitCode.NOT_ELIGIBLE,
        ),
    ),
    Rule(
        (131009,),
        classification=_c(
            Kind.INVALID_PARAMETER,
            "A parameter value is invalid.",
            "Check the value Meta names in the details.",
            Retry.NEVER,
            ExitCode.ERROR,
        ),
    ),
    Rule(
        (190, 0),
        classification=_c(
            Kind.AUTH, "The access token is expired or invalid.", _AUTH_ADVICE, Retry.NEVER, ExitCode.AUTH
        ),
    ),
    Rule(
        (10,),
        classification=_c(
            Kind.PERMISSION,
            "The token lacks a permission.",
            "Give the token whatsapp_business_management (and whatsapp_business_messaging) and assign the "
            "system user to the WABA (Business settings › System users › Assign assets).",
            Retry.NEVER,
            ExitCode.AUTH,
        ),
    ),
    Rule(
        (),
        code_range=(200, 299),
        classification=_c(
            Kind.PERMISSION,
            "Permission denied; often the system user is not assigned to the WABA.",
            "Assign the system user to the WABA (Business settings › System users › Assign assets) with full "
            "control, and check the token's permissions.",
            Retry.NEVER,
            ExitCode.AUTH,
        ),
    ),
    Rule(
        (104,),
        classification=_c(
            Kind.AUTH, "No access token reached Graph.", _AUTH_ADVICE, Retry.NEVER, ExitCode.AUTH
        ),
    ),
    Rule(
        (1, 2, 131000, 133004),
        classification=_c(
            Kind.TRANSIENT,
            "Meta's service had a temporary problem.",
            "Run again later. " + _SUPPORT,
            Retry.BACKOFF,
            ExitCode.UNAVAILABLE,
        ),
    ),
    Rule(
        (4, 17, 32, 613, 80007, 80008),
        classification=_c(
            Kind.THROTTLED,
            "Graph is throttling this app or WABA.",
            "Wait (up to an hour for WABA limits) and run again; the state file keeps your progress.",
            Retry.BACKOFF,
            ExitCode.UNAVAILABLE,
        ),
    ),
    Rule(
        (),
        code_range=(80001, 80014),
        classification=_c(
            Kind.THROTTLED,
            "Graph is throttling this business use case.",
            "Wait and run again; the state file keeps your progress.",
            Retry.BACKOFF,
            ExitCode.UNAVAILABLE,
        ),
    ),
    Rule(
        (368,),
        classification=_c(
            Kind.POLICY,
            "Blocked by Meta for a policy reason.",
            "Stop and contact Meta support.",
            Retry.NEVER,
            ExitCode.NOT_ELIGIBLE,
        ),
    ),
    Rule(
        (200000, 300),
        classification=_c(
            Kind.NOT_ELIGIBLE,
            "The number cannot be added to the WABA.",
            "Read the details above. " + _SUPPORT,
            Retry.NEVER,
            ExitCode.NOT_ELIGIBLE,
        ),
    ),
)

_UNKNOWN = Classification(
    Kind.UNKNOWN, "Graph returned an error this tool does not know.", _SUPPORT, Retry.NEVER, ExitCode.ERROR
)
_UNKNOWN_TRANSIENT = Classification(
    Kind.TRANSIENT,
    "Graph reported a temporary error.",
    "Run again later. " + _SUPPORT,
    Retry.BACKOFF,
    ExitCode.UNAVAILABLE,
)


def classify(err: GraphError) -> Classification:
    """Return the first row of :data:`ERROR_TABLE` matching ``err``.

    An unknown code is retried only when Graph itself flags it ``is_transient`` or answers 5xx.
    """
    for rule in ERROR_TABLE:
        if rule.matches(err):
            return rule.classification
    if err.is_transient or err.http_status >= 500:
        return _UNKNOWN_TRANSIENT
    return _UNKNOWN
