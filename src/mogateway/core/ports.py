"""The ports: the small interfaces the use cases (``service/``) need and the edges implement.

Each protocol is cut to what one kind of caller needs, so a use case depends on no more than it uses:
intake stores messages, the dispatcher applies changes and reads one message, the admin API reads the
history, the registry keeps clients, SMPP binds record receipts. The journals (SQLite, PostgreSQL)
implement all of the stores; the work queues (in-process, NATS JetStream) implement :class:`WorkQueue`;
reply channels (log, HTTP, SMPP, another node's binds) implement :class:`ReplyChannel`.

Rules every implementation keeps (one behavioural suite per port runs against each):

* :meth:`MessageStore.store` returns only after the messages are durably committed. A message whose id
  is stored already is not stored again: its result says ``duplicate`` and carries the stored state.
* :meth:`MessageStore.apply` appends each change's event only where ``core.timeline`` allows it in the
  message's current state, sets the state the table names, and says per change whether it was applied:
  two nodes recording an outcome for one message cannot both succeed.
* An entry of the work queue is acknowledged only once its outcome is durably recorded; an entry never
  acknowledged is handed out again (after a restart, or by JetStream to another node).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import orjson

from mogateway.core.dlt import DltIds
from mogateway.core.immutable import immutable
from mogateway.core.message import Message, Rejection
from mogateway.core.timeline import Change, Event, State

__all__ = [
    "AnswerIncomplete",
    "AnswerMalformed",
    "CallbackTransport",
    "Clock",
    "ConnectFailed",
    "RawAnswer",
    "TransportError",
    "ClientStore",
    "QueueEntry",
    "ConsoleSessionStore",
    "FinishedMessage",
    "Journal",
    "MessageFilter",
    "MessageHistory",
    "MessageRecord",
    "MessageStore",
    "NodeDirectory",
    "NodeInfo",
    "ReceiptStore",
    "Reply",
    "ReplyChannel",
    "ReplyError",
    "ReplySubmitted",
    "RetentionStore",
    "SecretKeyError",
    "SettingStore",
    "StatsRow",
    "StatsStore",
    "Stored",
    "WorkQueue",
]

#: Wall-clock time in unix seconds (``time.time`` in production, a fake one in tests).
Clock = Callable[[], float]


# ------------------------------------------------------------------------------------------ messages


@immutable
class Stored:
    """What :meth:`MessageStore.store` made of one message."""

    id: str
    state: State
    duplicate: bool
    rejection: Rejection | None = None


@immutable
class MessageRecord:
    """A message with where it stands in the journal: its state, when it was stored and last changed,
    the client it was routed to and the reply its application answered."""

    message: Message
    state: State
    stored_at: float
    updated_at: float
    client_id: str | None = None
    reply_text: str | None = None
    #: The worker process that dispatches it (``core.workers``; 0 without workers).
    owner: int = 0

    @property
    def id(self) -> str:
        return self.message.id


@immutable
class MessageFilter:
    """What :meth:`MessageHistory.find` looks for; results come newest first. ``before`` continues a
    listing: (received_at, id) of the last message of the previous page (keyset paging). ``channel``:
    ``sms`` or ``whatsapp`` (``core.message.CHANNELS``, read from the origin), None for both."""

    shortcode: str | None = None
    msisdn: str | None = None
    state: State | None = None
    client_id: str | None = None
    since: float | None = None
    until: float | None = None
    before: tuple[float, str] | None = None
    limit: int = 50
    channel: str | None = None


class MessageStore(Protocol):
    """Storing messages and moving them through their timeline (intake, dispatcher, recovery)."""

    async def store(
        self,
        messages: Sequence[Message],
        owners: Sequence[int] | None = None,
        repeat_since: Sequence[float | None] | None = None,
    ) -> list[Stored]:
        """Store ``messages``; ``owners``, one per message, names the worker process that will dispatch
        each (``core.workers``; all 0 without workers). ``repeat_since``, one per message: a message that
        repeats an MO from its number received since then (the same SMSC id or content, from any
        origin) is that MO, reported as a duplicate under its id (``core.repeats.find_repeats``, decided
        inside the write; None: never)."""
        ...

    async def apply(self, changes: Sequence[Change]) -> list[bool]: ...

    async def get(self, message_id: str) -> MessageRecord | None: ...

    async def touch(self, message_ids: Sequence[str]) -> None:
        """Mark unfinished messages as changed now (no event, no state change): their holder is alive."""
        ...

    async def reassign(self, owners: Mapping[str, int]) -> None:
        """Give unfinished messages (id -> worker) to another worker process; finished ones keep theirs.
        Only while no worker runs (``mogateway.cli.supervisor`` before it starts them)."""
        ...

    async def unfinished(
        self, limit: int, *, after: str = "", older_than: float | None = None, owner: int | None = None
    ) -> list[MessageRecord]:
        """Up to ``limit`` messages not yet finished whose id is greater than ``after``, in id order:
        pass the last id of a page as ``after`` to read the next one. Paging on the unique key never
        repeats or skips a row, however many there are or how they change. ``owner``: only the MOs of
        that worker process."""
        ...


class MessageHistory(Protocol):
    """Reading what happened (admin API, CLI, console)."""

    async def get(self, message_id: str) -> MessageRecord | None: ...

    async def timeline(self, message_id: str) -> list[Event]: ...

    async def history(self, message_id: str) -> tuple[MessageRecord, list[Event]] | None:
        """The message and its whole timeline as they were at one instant (one read transaction), so the
        state shown always agrees with the events shown."""
        ...

    async def find(self, where: MessageFilter) -> list[MessageRecord]: ...

    async def counts_by_state(self) -> dict[str, int]: ...


class ReceiptStore(Protocol):
    """Delivery receipts of replies (SMPP binds)."""

    async def record_deliveries(self, receipts: Sequence[tuple[str, str, str]]) -> list[str | None]:
        """Record receipts ``(ref, status, detail)`` of reply parts; for each, the id of the message
        whose reply part ``ref`` is, or None for an unknown ref."""
        ...

    async def reply_origins(self, refs: Sequence[str]) -> dict[str, str]:
        """The origin of the message whose reply part each of ``refs`` is (unknown refs are left out):
        a WhatsApp status is applied only to a reply of the number it came with."""
        ...


# ------------------------------------------------------------------------------------------ clients


class ClientStore(Protocol):
    """The client registry's storage. Clients are documents the registry owns (``core.clients``)."""

    async def put_client(self, client: Any) -> None: ...

    async def get_client(self, client_id: str) -> Any | None: ...

    async def list_clients(self) -> list[Any]: ...

    async def delete_client(self, client_id: str) -> bool: ...

    async def clients_version(self) -> float: ...


class SecretKeyError(Exception):
    """The stored client secrets cannot be opened with the configured key(s) (``edges.storage.sealing``);
    the message is one line naming the setting, never a secret."""


class SettingStore(Protocol):
    """The gateway's own settings kept with its data (generated tokens)."""

    async def get_setting(self, key: str) -> str | None: ...

    async def set_setting_if_absent(self, key: str, value: str) -> str: ...


# ------------------------------------------------------------------------------------------ retention


@immutable
class FinishedMessage:
    """A finished message as retention exports it: its record, its whole timeline (first entry
    included) and its reply references."""

    record: MessageRecord
    events: tuple[Event, ...]
    reply_refs: tuple[str, ...]


class RetentionStore(Protocol):
    """Deleting old finished messages (``service.retention``) with everything kept under their id
    (timeline events, reply references). An unfinished message is never deleted, whatever its age."""

    async def finished_page(
        self,
        received_since: float,
        received_before: float,
        *,
        after: tuple[float, str] | None = None,
        limit: int = 1000,
    ) -> list[FinishedMessage]:
        """Finished messages received in ``[received_since, received_before)``, ordered by (received
        time, id) — ids compared byte by byte — starting after the key ``after``."""
        ...

    async def delete_finished(
        self, received_before: float, *, received_since: float = 0.0, limit: int = 1000
    ) -> int:
        """Delete up to ``limit`` finished messages received in the range, oldest first; how many."""
        ...

    async def delete_finished_ids(self, message_ids: Sequence[str]) -> int:
        """Delete those of ``message_ids`` that are finished (unknown ids are skipped); how many."""
        ...

    async def seen_whatsapp(self, message_ids: Sequence[str]) -> set[str]:
        """Those of ``message_ids`` that were WhatsApp messages deleted within the replay window."""
        ...

    async def forget_seen_whatsapp(self, received_before: float) -> int:
        """Forget the deleted WhatsApp messages (kept by id for the webhook's replay window) received
        before ``received_before``; how many."""
        ...

    async def reclaim_space(self, max_pages: int) -> int:
        """Give up to ``max_pages`` of the journal's free pages back to the file system (SQLite's
        incremental vacuum); how many. 0 where the engine does it itself (PostgreSQL)."""
        ...

    def sweeping(self) -> AbstractAsyncContextManager[bool]:
        """Whether this process may sweep now; while the block runs, no other process sharing the
        journal is told yes (PostgreSQL: an advisory lock; SQLite: always yes, the gateway lets
        only its first worker sweep)."""
        ...


# ------------------------------------------------------------------------------------------ nodes


@dataclass(slots=True)
class NodeInfo:
    """One node as its heartbeat describes it."""

    name: str
    address: str
    version: str
    started_at: float
    seen_at: float
    queue_lag: int = 0
    held: int = 0
    waiting: int = 0
    binds: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> bytes:
        return orjson.dumps(asdict(self))

    @classmethod
    def from_json(cls, data: bytes) -> NodeInfo:
        doc = orjson.loads(data)
        known = {k: v for k, v in doc.items() if k in cls.__dataclass_fields__}
        return cls(**known)


class NodeDirectory(Protocol):
    """Where nodes announce themselves and find each other."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def nodes(self) -> list[NodeInfo]: ...


# ------------------------------------------------------------------------------------------ stats


@immutable
class StatsRow:
    """One figure of the stats table: how many ``kind`` events ``node`` counted for ``client`` ('' for
    the gateway as a whole) during the ``span`` seconds (1 or 60) that start at ``at`` (unix seconds).

    Rows are absolute totals of their interval, not increments: writing a row again replaces it, so a
    node may write its current minute every few seconds and a repeated write changes nothing.
    """

    span: int
    at: int
    node: str
    client: str
    kind: str
    count: int


class StatsStore(Protocol):
    """Traffic figures (``service.stats``): per-node rollups, shared by every node of a cluster."""

    async def write_stats(
        self, rows: Sequence[StatsRow], forget_before: Mapping[int, int] | None = None
    ) -> None:
        """Insert or replace ``rows``; then delete rows of span ``s`` older than ``forget_before[s]``."""
        ...

    async def read_stats(
        self,
        span: int,
        since: int,
        until: int,
        *,
        node: str | None = None,
        exclude_node: str | None = None,
        by_time: bool = False,
    ) -> list[StatsRow]:
        """Counts of rows of ``span`` with ``since <= at < until``, summed over nodes (only ``node``'s,
        or all but ``exclude_node``'s) per (client, kind), and per ``at`` too when ``by_time``. The
        rows returned have node '' and, unless ``by_time``, ``at == since``."""
        ...


class ConsoleSessionStore(Protocol):
    """The console's signed-in sessions and failed sign-ins, kept in the journal so that every worker
    and every node sees the same ones (``edges.storage.console_sessions``; the rules are in
    ``api.console.sessions``). A session is known by a hash of its id only, never the id itself."""

    async def add_session(self, key: str, token_tag: str, expires_at: float, now: float, keep: int) -> None:
        """Keep a new session, bound to the admin token by ``token_tag``; forget the expired ones, and
        beyond ``keep`` those expiring soonest."""
        ...

    async def session(self, key: str, now: float) -> tuple[float, str, str] | None:
        """(expires_at, flashes, token_tag) of the session ``key`` unless it is unknown or expired at
        ``now``."""
        ...

    async def set_flashes(self, key: str, flashes: str) -> None: ...

    async def end_session(self, key: str) -> None: ...

    async def end_all_sessions(self) -> int:
        """Forget every session (sign out everywhere); how many there were."""
        ...

    async def signin_failures(self, address: str, since: float) -> tuple[int, float | None]:
        """(failed sign-ins from ``address`` after ``since``, the time of the oldest of them)."""
        ...

    async def add_signin_failure(self, address: str, at: float, forget_before: float, keep: int) -> None:
        """Count one failure; forget those at or before ``forget_before`` and the oldest beyond ``keep``."""
        ...


class Journal(
    MessageStore,
    MessageHistory,
    ReceiptStore,
    ClientStore,
    SettingStore,
    StatsStore,
    RetentionStore,
    Protocol,
):
    """Everything durable, in one engine (SQLite, PostgreSQL)."""

    async def open(self) -> None: ...

    def console_sessions(self) -> ConsoleSessionStore:
        """The console's sessions and sign-in throttle, kept in this journal."""
        ...

    def portal(self) -> Any:
        """The client portal's people, sessions and audit, and its client-scoped reads: a
        ``core.portal_store.PortalStore`` (named Any here because that module reads this one's types;
        each journal's ``portal`` is declared with the protocol, so mypy checks it)."""
        ...

    async def close(self) -> None: ...


# ------------------------------------------------------------------------------------------ work queue


class QueueEntry(Protocol):
    """One message the work queue handed to the dispatcher; ``ack`` once its outcome is durably recorded.

    ``redelivered``: the message may have been worked on before (recovery, another node, the sweeper),
    so the dispatcher reads the journal first and does only what is left."""

    item: Message
    redelivered: bool

    async def ack(self) -> None: ...

    async def in_progress(self) -> None: ...


class WorkQueue(Protocol):
    """Messages waiting for dispatch, shared by every dispatcher that takes from it."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def put(self, items: Sequence[Message], redelivered: bool = False, *, generation: str = "") -> None:
        """Queue ``items``. A queue that deduplicates (JetStream) drops a second put of one id within its
        window; ``generation`` names a new entry for the same message (see ``service.sweeper``)."""
        ...

    async def get(self) -> QueueEntry: ...

    def lag(self) -> int: ...


# ------------------------------------------------------------------------------------------ callbacks


@immutable
class RawAnswer:
    """An application's answer as it came: status, content type, at most the capped body.

    ``headers`` (name lowercased, value as sent, in order) are kept only by a transport asked to capture
    them (``Http1Client(capture_headers=True)``: the portal's "test my endpoint"); the dispatcher's
    answers carry none. ``headers_left_out`` counts the headers a capture's bound did not keep."""

    status: int
    content_type: str | None
    body: bytes
    oversized: bool
    content_encoding: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    headers_left_out: int = 0


class TransportError(Exception):
    """Base of what a callback transport raises."""


class ConnectFailed(TransportError):
    """No answer was started: the connection failed, or closed before the first answer byte.

    Trying again is safe as far as HTTP can tell (the callback's message id header lets the application
    recognise the rare repeat of a request it did receive).
    """


class AnswerMalformed(TransportError):
    """The peer answered something that is not HTTP/1.x."""


class AnswerIncomplete(TransportError):
    """The connection closed in the middle of the answer."""


class CallbackTransport(Protocol):
    """POSTs a callback and returns the answer (``edges.http1``). Raises ``core.callback_url.UrlRefused``
    for an address the gateway will not call, ConnectFailed, AnswerMalformed or AnswerIncomplete; the
    caller's cancellation (its deadline) closes the connection."""

    async def post(self, url: str, body: bytes, headers: dict[str, str]) -> RawAnswer: ...


# ------------------------------------------------------------------------------------------ replies


@immutable
class Reply:
    """A session reply on its way out: sent from the MO's shortcode to its sender.

    ``dlt``: the client's DLT ids when the reply matched one of its templates (``service.dlt``); an
    SMPP channel puts them in every part, an HTTP MT channel next to the text."""

    message: Message
    text: str
    dlt: DltIds | None = None

    @property
    def message_id(self) -> str:
        return self.message.id


@immutable
class ReplySubmitted:
    """What a channel did with a reply: its name, the parts, references for delivery receipts."""

    channel: str
    parts: int
    refs: list[str] = field(default_factory=list)
    detail: str = ""


class ReplyError(Exception):
    """A channel could not hand the reply over.

    ``retryable``: nothing went out and trying later may work (no bind now, the MT endpoint is down).
    ``possibly_sent``: the handover was cut off after it began (the session closed before the SMSC
    answered): the reply may have gone out, so it must not be sent again blindly.
    """

    def __init__(self, detail: str, *, retryable: bool = False, possibly_sent: bool = False) -> None:
        super().__init__(detail)
        self.detail = detail
        self.retryable = retryable and not possibly_sent
        self.possibly_sent = possibly_sent


class ReplyChannel(Protocol):
    """How a reply leaves the gateway.

    ``needs_intent``: sending twice would reach the handset twice (SMPP), so the dispatcher records
    ``replying`` before the handover starts; ``send`` calls ``handover`` (once) right before the first
    byte of the reply leaves, and not at all when it fails before that. Channels without it (log, an
    HTTP MT endpoint that deduplicates on the message id) may be asked again after a crash.
    ``ready``: whether a reply to this message could be handed over now (a bind is up), so waiting
    replies hold no resources."""

    name: str
    needs_intent: bool

    def ready(self, reply: Reply) -> bool: ...

    async def send(
        self, reply: Reply, handover: Callable[[], Awaitable[None]] | None = None
    ) -> ReplySubmitted: ...
