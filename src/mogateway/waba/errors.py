"""Typed Graph API errors, the stop of a migration, and what each Graph error means for it.

Rules this file keeps:
* Meta asks clients to branch on ``code`` (and, for migration errors, ``error_subcode``) and the
  ``details`` text, never on titles alone. Several 2388103 variants share one subcode and differ
  only in their title, so a rule matches code, then subcode, then a piece of the text;
* the rules are data, ``mogateway/data/graph_errors.csv`` (its columns and sources are in
  ``GRAPH_ERRORS_PROVENANCE.md`` next to it), read once. They are tried in file order, most specific
  first, and the first match wins. Every row carries the message for the user, what to do next,
  whether the tool may retry by itself, and the exit status a script can branch on;
* a code no row matches is UNKNOWN, retried only when Graph flags it ``is_transient`` or answers 5xx;
* every stop of the flow is a :class:`MigrationStopped` carrying the exit status, the meaning and
  what to do.
"""

from __future__ import annotations

import csv
import enum
import functools
import importlib.resources
import io
from dataclasses import dataclass
from typing import Any, Final

RULES_FILE: Final = "graph_errors.csv"


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
    CALLBACK_NOT_VERIFIED = "callback_not_verified"
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
        """Look this error up in the rules (:func:`classify`)."""
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


# ------------------------------------------------------------------------------ classification


@dataclass(frozen=True)
class Rule:
    """One row of the rules file: codes to match, an optional text fragment, and the classification."""

    codes: tuple[int, ...]
    classification: Classification
    subcode: int | None = None
    text: str | None = None
    code_range: tuple[int, int] | None = None

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


def parse_rules(text: str) -> tuple[Rule, ...]:
    """Rules from the CSV text of the rules file, in file order; ``ValueError`` names a bad row."""
    rules = []
    for line, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        try:
            low, dash, high = row["codes"].partition("-")
            classification = Classification(
                Kind[row["kind"]],
                row["meaning"],
                row["advice"],
                Retry[row["retry"]],
                ExitCode[row["exit_status"]],
            )
            rules.append(
                Rule(
                    codes=() if dash else tuple(int(code) for code in row["codes"].split()),
                    classification=classification,
                    subcode=int(row["subcode"]) if row["subcode"] else None,
                    text=row["text"] or None,
                    code_range=(int(low), int(high)) if dash else None,
                )
            )
        except (KeyError, ValueError, TypeError) as exc:
            raise ValueError(f"{RULES_FILE} line {line}: {exc!r}") from None
        if not (rules[-1].codes or rules[-1].code_range) or not (row["meaning"] and row["advice"]):
            raise ValueError(f"{RULES_FILE} line {line}: codes, meaning and advice are required")
    return tuple(rules)


@functools.cache
def error_rules() -> tuple[Rule, ...]:
    """The shipped rules, read once."""
    resource = importlib.resources.files("mogateway") / "data" / RULES_FILE
    return parse_rules(resource.read_text(encoding="utf-8"))


_SUPPORT = "If it persists, contact Meta support and quote the fbtrace_id."
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
    """Return the classification of the first rule matching ``err``.

    An unknown code is retried only when Graph itself flags it ``is_transient`` or answers 5xx.
    """
    for rule in error_rules():
        if rule.matches(err):
            return rule.classification
    if err.is_transient or err.http_status >= 500:
        return _UNKNOWN_TRANSIENT
    return _UNKNOWN
