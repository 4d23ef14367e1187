"""Several worker processes on one machine: who holds which bind, who dispatches for which client, and
which worker owns an MO. Pure rules; ``mogateway.cli.supervisor`` and ``mogateway.node`` apply them.

On the embedded default (one SQLite journal, no shared queue) ``mogateway serve --workers N`` runs N
worker processes. Every worker takes HTTP connections (one port, ``SO_REUSEPORT``) and may store any MO
in the journal they share; the MO is then dispatched — its callback, its reply — by exactly one worker,
its **owner**, recorded with the MO. The rules:

* **Binds.** Bind ``j`` (in the order of the settings) is held by worker ``j mod N``. Every worker
  dispatches (the *dispatchers*), whether it holds a bind or not: share nothing per bind. (Until
  issue 30 only the workers without a bind dispatched when there were any; then every MO of a bind
  crossed between two workers twice, its dispatch hint and its reply, and two processes wrote its
  rows in turns: one bind on two workers cost 33 % more CPU per MO than on one, docs/benchmarks.md
  §0.14.)
* **Clients.** A client is dispatched by one dispatcher (chosen by a stable hash of its id), which keeps
  its concurrency cap and its isolation from other clients exact — unless its cap is at least twice
  the number of dispatchers: then every dispatcher takes a share of its MOs and of its cap (the shares
  add up to the cap, each at least one). With fewer binds than workers, a shared client's SMPP MOs are
  dispatched by the binds' workers within their shares of its cap.
* **Owner of an MO.** An MO that came on an SMPP bind whose worker may dispatch it (routed to a client
  that worker dispatches, or not routed at all) is owned by that worker: the MO, its callback, its
  reply (which leaves on the same bind) and the reply's receipt then stay in one process, and its
  rows are written by one process's group commits. Any other MO
  routed to a client: one of that client's workers, by a stable hash of the MO's id. Not routed
  (unroutable, rejected): any worker, by the same hash. The owner is a pure function of the MO's id,
  the bind it came on, its route and the plan, so the same MO arriving twice (a redelivery, a retried
  push, on any worker) gets the same owner. An MO without a source id gets a fresh id, whose random
  part intake draws until the worker storing the MO owns it, when that worker may dispatch its client
  (``service.intake``): such MOs never cross between workers.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

from mogateway.core.clients import ClientRecord
from mogateway.core.immutable import immutable

__all__ = ["WorkerPlan", "stable_hash"]


def stable_hash(text: str) -> int:
    """A hash of ``text`` that is the same in every process and every run (unlike ``hash``)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


@immutable
class WorkerPlan:
    """The workers of one gateway: how many, and how many binds there are (see the module docstring)."""

    count: int = 1
    binds: int = 0

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError("at least one worker")

    def bind_worker(self, bind_index: int) -> int:
        """The worker that holds the bind at ``bind_index`` of the settings."""
        return _bind_holder(bind_index, self.count)

    @property
    def dispatchers(self) -> tuple[int, ...]:
        """The workers that dispatch: all of them (share nothing per bind, see the module docstring)."""
        return _dispatchers(self.count)

    def workers_for(self, client: ClientRecord) -> tuple[int, ...]:
        """The workers that dispatch ``client``'s MOs."""
        dispatchers = self.dispatchers
        if client.max_concurrency >= 2 * len(dispatchers):
            return dispatchers
        return (dispatchers[stable_hash(client.id) % len(dispatchers)],)

    def owner_of(self, message_id: str, client: ClientRecord | None, bind_index: int | None = None) -> int:
        """The worker that dispatches the MO ``message_id`` routed to ``client`` (None: not routed), which
        came on the bind at ``bind_index`` of the settings (None: not over SMPP, or a bind no longer
        configured)."""
        if self.count == 1:
            return 0
        candidates = self.workers_for(client) if client is not None else tuple(range(self.count))
        if bind_index is not None:
            holder = self.bind_worker(bind_index)
            if holder in candidates:
                return holder
        return candidates[stable_hash(message_id) % len(candidates)]

    def lane_cap(self, client: ClientRecord, worker: int) -> int:
        """How many of ``client``'s callbacks ``worker`` may have in flight: its share of the cap."""
        workers = self.workers_for(client)
        if worker not in workers:
            return 1  # an MO routed here before the client's plan changed: served, one at a time
        share, extra = divmod(client.max_concurrency, len(workers))
        return max(1, share + (1 if workers.index(worker) < extra else 0))


def _bind_holder(bind_index: int, count: int) -> int:
    return bind_index % count


@lru_cache(maxsize=64)
def _dispatchers(count: int) -> tuple[int, ...]:
    """``WorkerPlan.dispatchers``, computed once per plan (it is asked for on every MO's way)."""
    return tuple(range(count))
