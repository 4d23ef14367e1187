"""When the crash campaign kills the gateway, and how it starts it again.

A kill plan is drawn from the seed before anything runs, so a seed names one schedule. Each kill waits
until a share of the MOs has reached the application (spreading kills over pushing, dispatching and
replying) and the gateway has been up at least a drawn time (0.2-3 s: short ones land right after a
restart, while the recovered backlog is being dispatched again, or even before /healthz answers), then
aims at one kind of moment:

* ``any``: a random jitter of up to 250 ms, then the kill.
* ``deliver_sm``: deliver_sm stored by the gateway and never acknowledged: the simulator stalls while
  a burst is in flight, the admin API shows it stored, the gateway is frozen (SIGSTOP) with unread
  input, and the kill's reset discards the answers it had written (see
  :meth:`Killer._deliver_sm_stored_unanswered`). The SMSC must deliver them again, and each must
  stay the same MO.
* ``batch``: an HTTP batch without its answer whose MOs the admin API shows stored (best effort: the
  gateway is frozen and the kill made only if the answer has not arrived); it is pushed again.
* ``submit_sm``: a reply the simulator has received and not answered yet (``--smsc-latency-ms``): the
  gateway cannot have recorded it as submitted.

An aimed kill whose kind of work is over (or does not show up within 15 s) is made as ``any``.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import aiohttp
from _chaos_gateway import GatewayProcess
from _chaos_traffic import Traffic

__all__ = ["AIMS", "KillRecord", "Killer", "PlannedKill", "plan_kills"]

#: Every kind of moment, and the draw of ``--aim mixed``.
AIMS = ("any", "deliver_sm", "batch", "submit_sm")
_MIXED = ("any", "any", "deliver_sm", "deliver_sm", "batch", "submit_sm")
_AIM_GIVE_UP_S = 15.0
#: How long a frozen gateway's last writes get to reach the simulator and the pushers.
_FREEZE_READ_S = 0.02


@dataclass(frozen=True)
class PlannedKill:
    """One kill of the plan."""

    share: float  # of the MOs at the application first
    uptime: float  # least seconds since the gateway was started
    aim: str  # a name of AIMS
    jitter: float  # "any": seconds to wait at the end

    def __str__(self) -> str:
        wait = f"+{self.jitter * 1000:.0f}ms" if self.aim == "any" else ""
        return f"{self.share:.3f}/{self.uptime:.2f}s/{self.aim}{wait}"


def plan_kills(rng: random.Random, count: int, aim: str) -> list[PlannedKill]:
    """``count`` kills in order. ``aim`` is "mixed" (drawn per kill) or a comma-separated list of
    AIMS used in turn."""
    cycle = None if aim == "mixed" else [a.strip() for a in aim.split(",")]
    if cycle is not None and (not cycle or any(a not in AIMS for a in cycle)):
        raise ValueError(f"--aim: 'mixed' or a comma-separated list of {', '.join(AIMS)}")
    shares = sorted(rng.uniform(0.02, 0.95) for _ in range(count))
    plan = []
    for number, share in enumerate(shares):
        uptime = rng.uniform(0.2, 3.0)
        kind = rng.choice(_MIXED) if cycle is None else cycle[number % len(cycle)]
        plan.append(PlannedKill(share, uptime, kind, rng.uniform(0.0, 0.25)))
    return plan


@dataclass
class KillRecord:
    """One kill as it happened, and the start after it."""

    number: int
    aim: str  # what it hit ("any" when the aim could not be met)
    at_s: float  # since the traffic started
    uptime_s: float
    phase: str  # starting (before /healthz answered), intake, dispatch
    acknowledged: int
    called: int  # MOs at the application so far
    replies: int  # submit_sm at the simulator so far
    deliver_sm_unanswered: int
    submit_sm_unanswered: int
    batches_unanswered: int
    restart_s: float = 0.0  # from the new start to /healthz answering
    recovered: int | None = None  # what the new start logged as recovered

    def line(self) -> str:
        return (
            f"kill {self.number:>2} at {self.at_s:8.2f} s  up {self.uptime_s:5.2f} s  {self.phase:<8} "
            f"{self.aim:<10}  acked {self.acknowledged:>6}  at app {self.called:>6}  "
            f"submit_sm {self.replies:>6}  in flight: deliver_sm {self.deliver_sm_unanswered}, "
            f"batches {self.batches_unanswered}, submit_sm {self.submit_sm_unanswered}  ->  back in "
            f"{self.restart_s:.2f} s, recovered {self.recovered or 0}"
        )


class Killer:
    """Carries out a kill plan against one gateway, starting it again after each kill."""

    def __init__(
        self,
        traffic: Traffic,
        gateway: GatewayProcess,
        session: aiohttp.ClientSession,
        rng: random.Random,
        echo: Callable[[str], None],
    ) -> None:
        self.traffic = traffic
        self.gateway = gateway
        self.session = session
        self.rng = rng
        self.echo = echo
        self.started = time.monotonic()
        self.records: list[KillRecord] = []
        self._starting: asyncio.Task[None] | None = None
        self._killed: set[int] = set()  # starts that were killed
        self._after_kill: list[Callable[[], None]] = []

    async def run(self, plan: Sequence[PlannedKill], deadline: float) -> None:
        """Every kill of ``plan`` (until ``deadline``); returns once the last start answers /healthz."""
        for number, kill in enumerate(plan, 1):
            if not await self._wait_moment(kill, deadline):
                self.echo(f"time is up before kill {number}")
                break
            aim = await self._aim(kill)
            await self._kill_and_restart(number, aim)
        if self._starting is not None:
            await self._starting

    async def _wait_moment(self, kill: PlannedKill, deadline: float) -> bool:
        target = kill.share * len(self.traffic.mos)
        while (
            len(self.traffic.called) < target
            or time.monotonic() - self.gateway.started_at < kill.uptime
            # an aimed kill needs the admin API; "any" may also land in start-up and recovery
            or (kill.aim != "any" and not self.gateway.ready)
        ):
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    async def _aim(self, kill: PlannedKill) -> str:
        """Wait for the kill's kind of moment; returns the kind met (the gateway may be frozen then)."""
        if kill.aim == "any":
            await asyncio.sleep(kill.jitter)
            return "any"
        give_up = time.monotonic() + _AIM_GIVE_UP_S
        while time.monotonic() < give_up:
            if kill.aim == "submit_sm":
                if not self.traffic.smpp:  # no SMPP MOs, no submit_sm
                    break
                if self.traffic.smsc.unanswered_submits():
                    return "submit_sm"
            elif kill.aim == "deliver_sm":
                if self.traffic.smpp_done():
                    break
                if await self._deliver_sm_stored_unanswered():
                    return "deliver_sm"
            elif kill.aim == "batch":
                if self.traffic.http_done():
                    break
                if await self._batch_stored_unanswered():
                    return "batch"
            await asyncio.sleep(0.001)
        return "any"

    async def _stored(self, msisdn: str) -> bool:
        """Whether the admin API shows a message of ``msisdn``."""
        try:
            found = await self.gateway.admin(self.session, f"/v1/messages?msisdn={msisdn}&limit=5")
        except (aiohttp.ClientError, TimeoutError, OSError, RuntimeError):
            return False
        return bool(found["messages"])

    async def _deliver_sm_stored_unanswered(self) -> bool:
        """Stored and never acknowledged, for certain: the simulator stalls (stops reading, with a small
        receive buffer) while deliver_sm are in flight, and once the admin API shows the last of them
        stored, the gateway is frozen and sent an enquire_link it cannot read. Its kill is then a reset
        that discards the answers still in its socket, as a crash with answers in transit does.
        Returns True with the gateway frozen; the simulator reads again after the kill."""
        smsc = self.traffic.smsc
        held = smsc.unanswered()
        if not held:
            return False
        smsc.pause_reading()
        last = held[-1]
        give_up = time.monotonic() + 5.0
        while time.monotonic() < give_up and last in smsc.unanswered():
            if await self._stored(last.source):
                self.gateway.freeze()
                smsc.ping()
                await asyncio.sleep(_FREEZE_READ_S)  # the enquire_link reaches the frozen gateway
                self._after_kill.append(smsc.resume_reading)
                return True
            await asyncio.sleep(0.002)
        smsc.resume_reading()  # answered before the stall, or never stored: try again
        return False

    async def _batch_stored_unanswered(self) -> bool:
        """An HTTP batch still without its answer whose first MO the admin API shows stored; the gateway
        is frozen and the pushers read what it wrote before. True (frozen) if still unanswered. Best
        effort: a response written just before the freeze makes it a miss, and the next one is tried."""
        for number, batch in list(self.traffic.in_flight.items()):
            if not await self._stored(self.traffic.mos[batch[0]].msisdn):
                return False
            if number not in self.traffic.in_flight:
                return False
            self.gateway.freeze()
            await asyncio.sleep(_FREEZE_READ_S)  # whatever it wrote before the freeze is read now
            if number in self.traffic.in_flight:
                return True
            self.gateway.thaw()
            return False
        return False

    async def _kill_and_restart(self, number: int, aim: str) -> None:
        t = self.traffic
        now = time.monotonic()
        phase = "starting" if not self.gateway.ready else "intake" if not t.intake_done() else "dispatch"
        record = KillRecord(
            number=number,
            aim=aim,
            at_s=round(now - self.started, 3),
            uptime_s=round(now - self.gateway.started_at, 3),
            phase=phase,
            acknowledged=t.acknowledged,
            called=len(t.called),
            replies=len(t.smsc.submits),
            deliver_sm_unanswered=len(t.smsc.unanswered()),
            submit_sm_unanswered=t.smsc.unanswered_submits(),
            batches_unanswered=len(t.in_flight),
        )
        t.up.clear()
        self._killed.add(self.gateway.starts)
        await self.gateway.kill()
        while self._after_kill:
            self._after_kill.pop()()
        if self._starting is not None:  # killed before it answered: that start is over
            await asyncio.gather(self._starting, return_exceptions=True)
        self.records.append(record)
        await asyncio.sleep(self.rng.uniform(0.0, 0.5))  # a supervisor's restart delay
        self.gateway.start()
        self._starting = asyncio.create_task(self._until_ready(record, self.gateway.starts))

    async def _until_ready(self, record: KillRecord, start: int) -> None:
        """Wait for the new start to answer, then let the traffic go on; report the kill."""
        try:
            record.restart_s = round(await self.gateway.wait_ready(self.session), 2)
        except RuntimeError:
            if start in self._killed:
                self.echo(record.line() + "  (killed again before it answered)")
                return
            raise
        self.traffic.up.set()
        # Every worker's share of the recovery is logged once all serve (a bounded wait: the traffic
        # goes on meanwhile, and a kill before it ends the wait with the shares logged so far).
        loop = asyncio.get_running_loop()
        until = loop.time() + 30.0
        while not self.gateway.all_serving(start) and start not in self._killed and loop.time() < until:
            await asyncio.sleep(0.05)
        record.recovered = self.gateway.recovered(start)
        self.echo(record.line())
