"""The checks of the crash campaign (``bench/chaos.py``): pure functions of what was seen from outside.

What the campaign saw, per MO it sent (each has its own token, text and msisdn, so nothing is ambiguous):
whether the source was acknowledged (HTTP: a batch result with an id; SMPP: a deliver_sm answered
ESME_ROK), every callback request for it (token and ``x-mogateway-message-id``), every message the
gateway stored for its msisdn and that message's timeline (admin API), every ``submit_sm`` the SMSC
simulator received for it and every text message the fake Graph API was sent for it (WhatsApp; the
application's answer names the token and the message id, so each reply says which message it answers),
and the log reply channel's lines. A WhatsApp MO is acknowledged when its webhook was answered 200 (the
answer names its message id).

The checks (the run fails when any of 1-3 is not zero, or when MOs are left unfinished):

1. *missing*: acknowledged MOs that never reached the application.
2. *two ids*: MOs that reached the application (or were acknowledged) under more than one message id.
3. *replies*: for every MO whose answer was recorded (an ``outcome`` of kind ``reply``), exactly one
   reply: SMPP counts ``submit_sm`` at the simulator, WhatsApp the sends at the fake Graph API, HTTP
   counts ``reply_submitted`` in the timeline.
   Missing and duplicated are counted apart, duplicates split into "the same message replied twice"
   (the reply path) and "a second message id replied" (follows from 2). A reply to the wrong msisdn
   counts too.

Reported beside them: replies the gateway records as possibly sent (a state or timeline event whose
name says the outcome is unknown, if the gateway has such a thing), callback redeliveries under the
same id (at-least-once: expected after a kill), messages stored twice, MOs that finished without a reply
(and in which states), reply lines the log channel wrote more than once for one message (the timeline
cannot show those: the first was never recorded), and MOs left unfinished.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "FIGURES",
    "Figures",
    "Observed",
    "SentMo",
    "Stored",
    "evaluate",
    "format_table",
    "possibly_sent",
]

Transport = Literal["http", "smpp", "whatsapp"]
#: Transports whose replies are counted where they arrive (the SMSC simulator, the fake Graph API).
_COUNTED_AT_THE_FAR_END = frozenset({"smpp", "whatsapp"})

#: States in which the gateway still has work to do on a message (docs: recovery resumes these).
UNFINISHED_STATES = frozenset({"queued", "answered", "replying"})
#: A state or timeline event whose name has one of these says a reply's fate is unknown.
POSSIBLY_SENT_MARKERS = ("unknown", "uncertain", "possibly", "maybe", "indeterminate")
#: States of a message whose reply was handed over (and perhaps receipted since).
REPLIED_STATES = frozenset({"replied", "delivered", "undelivered"})


@dataclass(slots=True)
class SentMo:
    """One MO the campaign sent."""

    token: str
    transport: Transport
    msisdn: str
    acknowledged: bool = False
    #: The message ids the gateway named in its acknowledgements (HTTP batch results).
    ack_ids: set[str] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class Stored:
    """One message the gateway stored, as ``GET /v1/messages/{id}`` shows it after the run."""

    id: str
    state: str
    #: Event names of its timeline, in order.
    events: tuple[str, ...]
    #: An outcome of kind ``reply`` was recorded: the application answered with a reply.
    answered: bool

    @property
    def reply_submitted(self) -> int:
        return self.events.count("reply_submitted")


def possibly_sent(stored: Stored) -> bool:
    """Whether the gateway records this message's reply as possibly sent (outcome unknown)."""
    names = (stored.state, *stored.events)
    return any(marker in name for name in names for marker in POSSIBLY_SENT_MARKERS)


@dataclass(slots=True)
class Observed:
    """Everything the campaign saw, keyed by MO token."""

    mos: dict[str, SentMo]
    #: (token, message id) of every callback request, in order.
    calls: list[tuple[str, str]]
    #: Every message the gateway stored for each MO's msisdn (None: it could not be looked up).
    stored: dict[str, list[Stored] | None]
    #: (destination msisdn, token, message id) of every reply that arrived, as its text names them:
    #: SMPP submit_sm at the simulator, WhatsApp text messages at the fake Graph API.
    submits: list[tuple[str, str, str]] = field(default_factory=list)
    #: Replies (submit_sm or Graph sends) whose text does not name an MO of this campaign.
    unreadable_submits: int = 0
    #: Log reply channel: lines written per message id.
    log_replies: collections.Counter[str] = field(default_factory=collections.Counter)
    #: Text messages the fake Graph API was sent (WhatsApp replies), readable or not.
    graph_sends: int = 0


#: The figures in the order they are printed: (attribute, label).
FIGURES: tuple[tuple[str, str], ...] = (
    ("mos", "MOs sent"),
    ("acknowledged", "MOs acknowledged"),
    ("missing", "1. acknowledged, never at the callback"),
    ("two_ids", "2. at the callback under two ids"),
    ("answered", "MOs answered with a reply"),
    ("replies_missing", "3. replies missing"),
    ("replies_duplicated", "3. replies duplicated"),
    ("duplicated_same_id", "   same message replied twice"),
    ("duplicated_second_id", "   a second message id replied"),
    ("wrong_number", "3. replies to a wrong number"),
    ("possibly_sent", "replies recorded as possibly sent"),
    ("possibly_sent_unsent", "   of which never reached SMSC/Graph"),
    ("redeliveries", "callback redeliveries (same id)"),
    ("stored_twice", "MOs stored under two ids"),
    ("no_reply", "finished without a reply"),
    ("log_duplicates", "log channel: reply written twice"),
    ("unfinished", "MOs left unfinished"),
)


@dataclass(slots=True)
class Figures:
    """The campaign's counts for one transport (or all)."""

    transport: str
    mos: int = 0
    acknowledged: int = 0
    missing: int = 0
    two_ids: int = 0
    answered: int = 0
    replies_missing: int = 0
    replies_duplicated: int = 0
    duplicated_same_id: int = 0
    duplicated_second_id: int = 0
    wrong_number: int = 0
    possibly_sent: int = 0
    #: Possibly sent (SMPP, WhatsApp) and in fact never submitted: the at-most-once default's loss (the
    #: kill came between the intent record and the submit_sm or Graph call); ``reply_at_least_once``
    #: would have sent them.
    possibly_sent_unsent: int = 0
    redeliveries: int = 0
    stored_twice: int = 0
    no_reply: int = 0
    log_duplicates: int = 0
    unfinished: int = 0
    #: Final states of the messages that finished without a reply, counted.
    no_reply_states: collections.Counter[str] = field(default_factory=collections.Counter)
    #: A few tokens per failing figure, to look up.
    examples: dict[str, list[str]] = field(default_factory=dict)

    @property
    def check_missing(self) -> bool:
        return self.missing == 0

    @property
    def check_ids(self) -> bool:
        return self.two_ids == 0

    @property
    def check_replies(self) -> bool:
        return self.replies_missing == 0 and self.replies_duplicated == 0 and self.wrong_number == 0

    @property
    def passed(self) -> bool:
        return self.check_missing and self.check_ids and self.check_replies and self.unfinished == 0

    def note(self, figure: str, token: str, keep: int = 5) -> None:
        found = self.examples.setdefault(figure, [])
        if len(found) < keep:
            found.append(token)


def evaluate(observed: Observed, transports: Iterable[Transport] = ("http", "smpp", "whatsapp")) -> Figures:
    """The figures over the MOs of ``transports``."""
    wanted = set(transports)
    figures = Figures("+".join(sorted(wanted)) if len(wanted) > 1 else next(iter(wanted)))
    calls: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for token, message_id in observed.calls:
        calls[token][message_id] += 1
    submits: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    wrong: collections.Counter[str] = collections.Counter()
    for msisdn, token, message_id in observed.submits:
        mo = observed.mos.get(token)
        if mo is None or msisdn != mo.msisdn:
            wrong[token] += 1
        submits[token][message_id] += 1

    for token, mo in observed.mos.items():
        if mo.transport not in wanted:
            continue
        figures.mos += 1
        called = calls.get(token, collections.Counter())
        stored = observed.stored.get(token)
        if mo.acknowledged:
            figures.acknowledged += 1
            if not called:
                figures.missing += 1
                figures.note("missing", token)
        if len(set(called) | mo.ack_ids) > 1:
            figures.two_ids += 1
            figures.note("two_ids", token)
        figures.redeliveries += sum(n - 1 for n in called.values())
        if wrong[token]:
            figures.wrong_number += 1
            figures.note("wrong_number", token)
        if stored is None:  # could not be looked up: it cannot be shown finished
            figures.unfinished += 1
            figures.note("unfinished", token)
            continue
        if len(stored) > 1:
            figures.stored_twice += 1
            figures.note("stored_twice", token)
        if not mo.acknowledged or any(s.state in UNFINISHED_STATES for s in stored):
            figures.unfinished += 1
            figures.note("unfinished", token)
            continue
        _count_replies(figures, mo, stored, submits.get(token, collections.Counter()), observed)
    return figures


def _count_replies(
    figures: Figures,
    mo: SentMo,
    stored: Sequence[Stored],
    submitted: collections.Counter[str],
    observed: Observed,
) -> None:
    """Check 3 for one finished MO."""
    token = mo.token
    if any(possibly_sent(s) for s in stored):
        figures.possibly_sent += 1
        figures.note("possibly_sent", token)
    if mo.transport == "http":
        for s in stored:
            if observed.log_replies[s.id] > 1:
                figures.log_duplicates += 1
                figures.note("log_duplicates", token)
                break
    answered = [s for s in stored if s.answered]
    if not answered:
        figures.no_reply += 1
        figures.no_reply_states.update(s.state for s in stored)
        figures.note("no_reply", token)
        return
    figures.answered += 1
    if mo.transport in _COUNTED_AT_THE_FAR_END:
        per_id = {s.id: submitted[s.id] for s in stored}
        # A submit_sm naming an id the gateway did not store for this msisdn is a reply all the same.
        per_id.update({i: n for i, n in submitted.items() if i not in per_id})
    else:
        per_id = {s.id: s.reply_submitted for s in stored}
    total = sum(per_id.values())
    if total == 0 and mo.transport in _COUNTED_AT_THE_FAR_END and any(possibly_sent(s) for s in stored):
        figures.possibly_sent_unsent += 1
        figures.note("possibly_sent_unsent", token)
    if total == 0:
        if not any(possibly_sent(s) for s in stored):
            figures.replies_missing += 1
            figures.note("replies_missing", token)
        return
    if total > 1:
        figures.replies_duplicated += 1
        figures.note("replies_duplicated", token)
        if any(n > 1 for n in per_id.values()):
            figures.duplicated_same_id += 1
            figures.note("duplicated_same_id", token)
        if sum(1 for n in per_id.values() if n) > 1:
            figures.duplicated_second_id += 1
            figures.note("duplicated_second_id", token)


def format_table(columns: Sequence[Figures]) -> str:
    """The figures as a plain-text table, one column per :class:`Figures`."""
    width = max(len(label) for _, label in FIGURES) + 2
    head = "".ljust(width) + "".join(f"{f.transport:>12}" for f in columns)
    lines = [head, "-" * len(head)]
    for attribute, label in FIGURES:
        lines.append(label.ljust(width) + "".join(f"{getattr(f, attribute):>12,}" for f in columns))
    return "\n".join(lines)
