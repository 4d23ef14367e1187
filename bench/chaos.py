"""Crash campaign: thousands of MOs over HTTP and SMPP while ``mogateway serve`` is SIGKILLed at random.

    python bench/chaos.py [--seed N] [--mos 20000] [--kills 25] [--transport both] [--binds 1]
                          [--whatsapp-share 0.2] [--callback-delay-ms 100] [--max-seconds 1800]
                          [--json out.json]

Everything is real and on 127.0.0.1: the gateway is a ``mogateway serve`` process on a SQLite journal
(fsynced before every acknowledgement), bound over SMPP to the SMSC simulator of this process and calling
the recording callback application of this process. The campaign uses the gateway only from outside,
as an operator would: its settings file, its signals, its ingest and admin APIs, its bind, its
callbacks and its log.

1. MOs, each with its own token, text and msisdn (``bench/_chaos_traffic.py``), are offered at a
   steady pace: over HTTP by several pushers in batches with source ids; over SMPP in bursts through
   the simulator's store and forward (deliver_sm without an SMSC message id, so a redelivery can only
   be recognised by its content; bursts larger than the gateway's intake batch of 500); with
   ``--whatsapp-share`` that share of the MOs as WhatsApp webhooks (several messages per body, signed
   by the fake Graph API's ``WebhookSender`` like Meta's, delivered again with the same bytes until
   answered 200) to a gateway configured with ``[whatsapp]`` and the fake Graph API (in this process)
   as its ``graph_url``, where their replies arrive. The application holds every callback
   ``--callback-delay-ms`` and answers "ok <token> <message id>"; with the client's
   ``max_concurrency`` the backlog grows to thousands (more than the recovery page of 1,000). The
   simulator answers submit_sm after ``--smsc-latency-ms``, as an SMSC over a network.
2. The gateway is SIGKILLed ``--kills`` times at moments drawn from the seed (``bench/_chaos_kills.py``):
   spread over the run, some at random, some aimed at work in flight (a deliver_sm or an HTTP batch
   stored and not yet answered, a reply at the SMSC not yet confirmed). The seed, the plan and every
   kill are printed. The gateway is started again on the same journal at once. HTTP batches that got
   no answer are pushed again with the same ids until acknowledged; the simulator delivers every
   deliver_sm left unanswered again.
3. After the last restart the run waits until the gateway has drained (every MO acknowledged, nothing
   queued, dispatching or answered), looks up every message stored for every MO's msisdn with its
   timeline, and checks (``bench/_chaos_checks.py``): 1. no acknowledged MO missing at the callback;
   2. no MO at the callback under two message ids; 3. exactly one reply per answered MO (a WhatsApp
   reply counted where it arrives: the fake Graph API's sends for its wamid). It prints a
   table per campaign; the figures reported beside the checks are described there.

Exit status: 0 when checks 1-3 hold and the gateway drained, 1 otherwise, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import logging
import random
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _chaos_checks import Figures, Observed, SentMo, Stored, evaluate, format_table
from _chaos_gateway import SYSTEM_ID, GatewayProcess, write_config
from _chaos_kills import AIMS, Killer, KillRecord, PlannedKill, plan_kills
from _chaos_traffic import Traffic, make_mos, token_of

from mogateway.testing.fake_graph import FakeGraphServer
from mogateway.testing.recorder import CallbackRecorder
from mogateway.testing.smsc import SimulatedSmsc

__all__ = ["CampaignResult", "Options", "run_campaign", "summary"]

UNFINISHED = ("queued", "answered", "replying")
_REPLY_LINE = re.compile(r"^reply (\S+) from ")
_REPLY_TEXT = re.compile(r"^ok (\S+) (\S+)$")


@dataclass
class Options:
    """One campaign's settings (the command-line options)."""

    seed: int
    mos: int = 20_000
    kills: int = 25
    transport: Literal["http", "smpp", "both"] = "both"
    #: Share of the MOs sent as WhatsApp webhooks (0: none, no [whatsapp] table); the rest per --transport.
    whatsapp_share: float = 0.0
    #: WhatsApp messages per webhook body.
    wa_batch: int = 5
    callback_delay_ms: float = 100.0
    #: The client's max_concurrency: with the delay, how fast the backlog drains.
    concurrency: int = 32
    #: MOs offered per second, both transports together.
    rate: float = 600.0
    pushers: int = 4
    batch: int = 25
    #: deliver_sm the simulator keeps unanswered at most, and MOs it is handed at once.
    smpp_window: int = 1000
    smpp_burst: int = 600
    #: How long the simulator takes to answer a submit_sm.
    smsc_latency_ms: float = 20.0
    #: The gateway's SMPP binds to the simulator (2: a bind per worker on a 2-core machine).
    binds: int = 1
    #: "mixed", or a comma-separated list of kinds of kill used in turn (see _chaos_kills).
    aim: str = "mixed"
    max_seconds: float = 1800.0
    workdir: Path | None = None
    #: Run the gateway's code from this source tree (PYTHONPATH), e.g. another branch's src/.
    gateway_src: str = ""
    echo: Callable[[str], None] = print

    def split(self) -> tuple[int, int, int]:
        """MOs over HTTP, over SMPP, as WhatsApp webhooks."""
        n_wa = round(self.mos * self.whatsapp_share)
        rest = self.mos - n_wa
        n_smpp = {"http": 0, "smpp": rest, "both": rest // 2}[self.transport]
        return rest - n_smpp, n_smpp, n_wa


@dataclass
class CampaignResult:
    """What one campaign did and found."""

    options: dict[str, Any]
    kills: list[KillRecord]
    restarts: int
    wall_s: float
    drained: bool
    figures: dict[str, Figures]
    traffic: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    gateway_errors: list[str] = field(default_factory=list)
    workdir: str = ""

    @property
    def passed(self) -> bool:
        return self.drained and self.figures["all"].passed

    @property
    def max_recovered(self) -> int:
        return max((k.recovered or 0 for k in self.kills), default=0)

    def as_json(self) -> dict[str, Any]:
        figures = {}
        for key, f in self.figures.items():
            row = {k: v for k, v in asdict(f).items() if k not in ("examples", "no_reply_states")}
            figures[key] = {**row, "no_reply_states": dict(f.no_reply_states)}
        return {
            "options": self.options,
            "kills": [asdict(k) for k in self.kills],
            "restarts": self.restarts,
            "wall_s": round(self.wall_s, 1),
            "drained": self.drained,
            "passed": self.passed,
            "traffic": self.traffic,
            "figures": figures,
            "examples": self.examples,
            "gateway_errors": self.gateway_errors,
            "workdir": self.workdir,
        }


async def run_campaign(options: Options) -> CampaignResult:
    """Run one campaign (see the module docstring) and return what it found."""
    if options.mos < 1 or options.kills < 0 or options.batch < 1 or options.pushers < 1:
        raise ValueError("mos, batch and pushers must be at least 1, kills at least 0")
    rng = random.Random(options.seed)
    plan = plan_kills(rng, options.kills, options.aim)
    own_dir = options.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="chaos-")) if own_dir else Path(str(options.workdir))
    workdir.mkdir(parents=True, exist_ok=True)
    n_http, n_smpp, n_wa = options.split()
    echo = options.echo
    echo(
        f"seed {options.seed}: {n_http} MOs over HTTP, {n_smpp} over SMPP, {n_wa} as WhatsApp webhooks, "
        f"offered at {options.rate:g} MO/s; "
        f"callback delay {options.callback_delay_ms:g} ms × concurrency {options.concurrency}; "
        f"SMSC latency {options.smsc_latency_ms:g} ms; {options.binds} bind(s); journal and logs in {workdir}"
    )
    echo(f"kill plan (share of MOs at the app/least uptime/aim): {', '.join(map(str, plan))}")
    smsc = SimulatedSmsc(
        system_id=SYSTEM_ID,
        password=SYSTEM_ID,
        outbox_window=options.smpp_window,
        retry_delay_s=0.5,
        submit_delay_s=options.smsc_latency_ms / 1000,
        # Small, so that answers the gateway writes while the simulator stalls stay in the gateway's
        # socket (see _chaos_kills: the deliver_sm aim).
        receive_buffer=4096,
    )
    mos = make_mos(n_http, n_smpp, n_wa)
    graph = FakeGraphServer().start() if n_wa else None
    try:
        return await _campaign(options, plan, rng, workdir, own_dir, smsc, mos, graph)
    finally:
        if graph is not None:
            graph.stop()


async def _campaign(
    options: Options,
    plan: list[PlannedKill],
    rng: random.Random,
    workdir: Path,
    own_dir: bool,
    smsc: SimulatedSmsc,
    mos: dict[str, SentMo],
    graph: FakeGraphServer | None,
) -> CampaignResult:
    echo = options.echo
    async with smsc, aiohttp.ClientSession() as session:
        config = write_config(workdir, smsc.port, options.binds, graph.url if graph else None)
        gateway = GatewayProcess(workdir, config, options.gateway_src)
        traffic = Traffic(
            mos,
            smsc,
            gateway,
            session,
            rate=options.rate,
            pushers=options.pushers,
            batch=options.batch,
            smpp_burst=options.smpp_burst,
            callback_delay_s=options.callback_delay_ms / 1000,
            wa_batch=options.wa_batch,
        )
        async with CallbackRecorder(traffic.answer) as app:
            offering: asyncio.Task[None] | None = None
            try:
                gateway.start()
                await gateway.wait_ready(session)
                await gateway.register_client(
                    session, app.url, options.concurrency, whatsapp=graph is not None
                )
                traffic.up.set()
                killer = Killer(traffic, gateway, session, rng, echo)
                deadline = killer.started + options.max_seconds
                offering = asyncio.create_task(traffic.run())
                await killer.run(plan, deadline)
                drained = await _drain(traffic, gateway, session, offering, deadline)
                wall = time.monotonic() - killer.started
                traffic.settle()
                echo(f"{'drained' if drained else 'NOT drained'} after {wall:.1f} s; looking up every MO")
                observed = await _observe(traffic, gateway, session, app, graph)
            finally:
                if offering is not None:
                    offering.cancel()
                    await asyncio.gather(offering, return_exceptions=True)
                await gateway.stop()
    figures = {t: evaluate(observed, [t]) for t in ("http", "smpp", "whatsapp")}
    figures["all"] = evaluate(observed, ["http", "smpp", "whatsapp"])
    figures["all"].transport = "all"
    result = CampaignResult(
        options={k: v for k, v in asdict(options).items() if k not in ("echo", "workdir")},
        kills=killer.records,
        restarts=gateway.starts - 1,
        wall_s=wall,
        drained=drained,
        figures=figures,
        traffic={
            "http_pushes_repeated": traffic.pushes_repeated,
            "http_found_stored": traffic.found_stored,
            "smpp_redelivered": sum(1 for q in traffic.queued.values() if q.attempts > 1),
            "webhooks_redelivered": traffic.webhooks_redelivered,
            "callbacks": len(observed.calls),
            "submit_sm": len(traffic.smsc.submits),
            "graph_sends": observed.graph_sends,
        },
        examples=_examples(figures["all"], observed),
        gateway_errors=_gateway_errors(gateway),
        workdir=str(workdir),
    )
    if own_dir and result.passed:
        shutil.rmtree(workdir, ignore_errors=True)
    return result


async def _drain(
    traffic: Traffic,
    gateway: GatewayProcess,
    session: aiohttp.ClientSession,
    offering: asyncio.Task[None],
    deadline: float,
) -> bool:
    """Wait until every MO is acknowledged and the gateway has nothing unfinished; False at the deadline."""
    while time.monotonic() < deadline:
        if offering.done() and offering.exception() is not None:
            raise RuntimeError("offering the MOs failed") from offering.exception()
        if offering.done() and traffic.intake_done():
            try:
                pending = [
                    await gateway.admin(session, f"/v1/messages?state={state}&limit=1")
                    for state in UNFINISHED
                ]
            except (aiohttp.ClientError, TimeoutError, OSError, RuntimeError):
                pending = [{"messages": [None]}]
            if not any(p["messages"] for p in pending):
                return True
        await asyncio.sleep(0.25)
    return False


async def _observe(
    traffic: Traffic,
    gateway: GatewayProcess,
    session: aiohttp.ClientSession,
    app: CallbackRecorder,
    graph: FakeGraphServer | None,
) -> Observed:
    """What the checks need: every stored message of every MO's msisdn with its timeline (admin API),
    the application's calls, the simulator's submit_sm, the fake Graph API's sends, the log reply
    channel's lines."""
    stored: dict[str, list[Stored] | None] = {}
    todo = collections.deque(traffic.mos.values())

    async def lookup(mo: SentMo) -> list[Stored] | None:
        try:
            found = await gateway.admin(session, f"/v1/messages?msisdn={mo.msisdn}&limit=50")
            out = []
            for record in found["messages"]:
                shown = await gateway.admin(session, f"/v1/messages/{record['id']}")
                timeline = shown["timeline"]
                answered = any(e["event"] == "outcome" and e.get("outcome") == "reply" for e in timeline)
                events = tuple(str(e["event"]) for e in timeline)
                out.append(Stored(shown["id"], shown["state"], events, answered))
            return out
        except (aiohttp.ClientError, TimeoutError, OSError, RuntimeError):
            return None

    async def worker() -> None:
        while todo:
            mo = todo.popleft()
            stored[mo.token] = await lookup(mo)

    await asyncio.gather(*(worker() for _ in range(8)))
    calls = []
    for call in app.calls:
        try:
            token = token_of(call.json()["message"])
        except (ValueError, KeyError, TypeError):
            token = "?"
        calls.append((token, call.headers.get("x-mogateway-message-id", "?")))
    submits, unreadable = [], 0
    for submit in traffic.smsc.submits:
        found = _REPLY_TEXT.match(submit.pdu.short_message.decode("latin-1"))
        if found is None:
            unreadable += 1
        else:
            submits.append((submit.pdu.destination_addr.lstrip("+"), found.group(1), found.group(2)))
    graph_sends = 0
    if graph is not None:
        async with session.get(graph.url + "/__fake/messages") as resp:
            sends = orjson.loads(await resp.read())["data"]
        graph_sends = len(sends)
        for send in sends:
            found = _REPLY_TEXT.match(str(send.get("text", "")))
            if found is None:
                unreadable += 1
            else:
                submits.append((str(send["to"]), found.group(1), found.group(2)))
    log_replies: collections.Counter[str] = collections.Counter()
    for record in gateway.log_records():
        line = _REPLY_LINE.match(str(record.get("msg", "")))
        if line and record.get("logger") == "mogateway.replies":
            log_replies[line.group(1)] += 1
    return Observed(traffic.mos, calls, stored, submits, unreadable, log_replies, graph_sends)


def _examples(figures: Figures, observed: Observed) -> dict[str, list[dict[str, Any]]]:
    """For each failing figure, a few MOs with everything seen of them (for fault reports)."""
    calls: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for token, message_id in observed.calls:
        calls[token][message_id] += 1
    submits: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for _, token, message_id in observed.submits:
        submits[token][message_id] += 1
    out: dict[str, list[dict[str, Any]]] = {}
    for figure, tokens in figures.examples.items():
        rows = []
        for token in tokens:
            mo = observed.mos[token]
            stored = observed.stored.get(token) or []
            rows.append(
                {
                    "token": token,
                    "msisdn": mo.msisdn,
                    "acknowledged": mo.acknowledged,
                    "ack_ids": sorted(mo.ack_ids),
                    "callbacks": dict(calls.get(token, {})),
                    "submit_sm": dict(submits.get(token, {})),
                    "log_replies": {s.id: observed.log_replies[s.id] for s in stored},
                    "stored": [{"id": s.id, "state": s.state, "timeline": list(s.events)} for s in stored],
                }
            )
        out[figure] = rows
    return out


def _gateway_errors(gateway: GatewayProcess, keep: int = 10) -> list[str]:
    seen: collections.Counter[str] = collections.Counter()
    for record in gateway.log_records():
        if record.get("level") in ("error", "critical"):
            seen[str(record.get("msg", ""))[:200]] += 1
    return [f"{n}× {msg}" for msg, n in seen.most_common(keep)]


# ------------------------------------------------------------------------------------------ report


def summary(result: CampaignResult, *, examples: int = 2) -> str:
    """The campaign's table: what ran, each check's count per transport, the verdict, and on failure a
    few MOs of each failing figure with what the gateway shows of them."""
    o = result.options
    figures = result.figures
    columns = [f for key in ("http", "smpp", "whatsapp", "all") if (f := figures[key]).mos or key == "all"]
    aims = collections.Counter(k.aim for k in result.kills)
    phases = collections.Counter(k.phase for k in result.kills)
    t = result.traffic
    lines = [
        f"seed {o['seed']}  MOs {figures['all'].mos:,}  kills {len(result.kills)} "
        f"({', '.join(f'{n} {a}' for a, n in aims.items())}; "
        f"{', '.join(f'{n} {p}' for p, n in phases.items())})  restarts {result.restarts}  "
        f"largest recovery {result.max_recovered:,}  wall {result.wall_s:.1f} s",
        f"HTTP batch pushes repeated {t.get('http_pushes_repeated', 0)} "
        f"(MOs found already stored {t.get('http_found_stored', 0)}), "
        f"deliver_sm redelivered {t.get('smpp_redelivered', 0)}, "
        f"webhooks delivered again {t.get('webhooks_redelivered', 0)}, callbacks {t.get('callbacks', 0):,}, "
        f"submit_sm {t.get('submit_sm', 0):,}, Graph sends {t.get('graph_sends', 0):,}",
        format_table(columns),
    ]
    a = figures["all"]
    if a.no_reply_states:
        lines.append("finished without a reply, by state: " + json.dumps(dict(a.no_reply_states)))
    verdict = [
        f"1 {'ok' if a.check_missing else 'FAILED'}",
        f"2 {'ok' if a.check_ids else 'FAILED'}",
        f"3 {'ok' if a.check_replies else 'FAILED'}",
        f"drained {'ok' if result.drained and not a.unfinished else 'FAILED'}",
    ]
    lines.append("checks: " + ", ".join(verdict) + f"  ->  {'PASSED' if result.passed else 'FAILED'}")
    for figure, rows in result.examples.items():
        for row in rows[:examples]:
            lines.append(f"  {figure}: {json.dumps(row)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = Options(seed=0)
    add = parser.add_argument
    add("--seed", type=int, default=None, help="random seed (default: drawn, and printed)")
    add("--mos", type=int, default=defaults.mos, help="MOs per campaign, over both transports")
    add("--kills", type=int, default=defaults.kills, help="SIGKILLs per campaign")
    add("--transport", choices=("http", "smpp", "both"), default=defaults.transport)
    add(
        "--whatsapp-share",
        type=float,
        default=defaults.whatsapp_share,
        help="share of the MOs sent as signed WhatsApp webhooks (0-1; the rest per --transport)",
    )
    add("--wa-batch", type=int, default=defaults.wa_batch, help="WhatsApp messages per webhook body")
    add("--callback-delay-ms", type=float, default=defaults.callback_delay_ms, help="the app's delay")
    add("--concurrency", type=int, default=defaults.concurrency, help="the client's max_concurrency")
    add("--rate", type=float, default=defaults.rate, help="MOs offered per second")
    add("--pushers", type=int, default=defaults.pushers, help="concurrent HTTP pushers")
    add("--batch", type=int, default=defaults.batch, help="MOs per HTTP batch")
    add("--smpp-window", type=int, default=defaults.smpp_window, help="deliver_sm unanswered at most")
    add("--smpp-burst", type=int, default=defaults.smpp_burst, help="MOs handed to the SMSC at once")
    add("--smsc-latency-ms", type=float, default=defaults.smsc_latency_ms, help="submit_sm answer delay")
    add("--binds", type=int, default=defaults.binds, help="the gateway's SMPP binds to the simulator")
    add("--aim", default=defaults.aim, help=f"'mixed' or a comma-separated list of {', '.join(AIMS)}")
    add("--max-seconds", type=float, default=defaults.max_seconds, help="bound on each campaign's time")
    add("--campaigns", type=int, default=1, help="campaigns to run, with seeds seed, seed+1, ...")
    add("--workdir", type=Path, default=None, help="keep journals and logs under this directory")
    add("--json", type=Path, default=None, help="write every campaign's result here")
    add("--gateway-src", default="", help="run the gateway's code from this src/ directory")
    args = parser.parse_args(argv)
    # The fake Graph API's server logs every request a killed gateway dropped half-way: expected here.
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    if args.mos < 1 or args.kills < 0 or args.campaigns < 1 or args.rate <= 0 or args.concurrency < 1:
        parser.error("--mos, --campaigns, --concurrency at least 1; --kills at least 0; --rate above 0")
    if args.binds < 1:
        parser.error("--binds at least 1")
    if not 0 <= args.whatsapp_share <= 1 or args.wa_batch < 1:
        parser.error("--whatsapp-share between 0 and 1; --wa-batch at least 1")
    try:
        plan_kills(random.Random(0), 1, args.aim)
    except ValueError as exc:
        parser.error(str(exc))
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 1_000_000)
    results = []
    for number in range(args.campaigns):
        options = Options(
            seed=seed + number,
            mos=args.mos,
            kills=args.kills,
            transport=args.transport,
            whatsapp_share=args.whatsapp_share,
            wa_batch=args.wa_batch,
            callback_delay_ms=args.callback_delay_ms,
            concurrency=args.concurrency,
            rate=args.rate,
            pushers=args.pushers,
            batch=args.batch,
            smpp_window=args.smpp_window,
            smpp_burst=args.smpp_burst,
            smsc_latency_ms=args.smsc_latency_ms,
            binds=args.binds,
            aim=args.aim,
            max_seconds=args.max_seconds,
            workdir=args.workdir / f"seed-{seed + number}" if args.workdir else None,
            gateway_src=args.gateway_src,
            echo=lambda line: print(line, flush=True),
        )
        result = asyncio.run(run_campaign(options))
        results.append(result)
        print("\n" + summary(result), flush=True)
        for line in result.gateway_errors:
            print(f"gateway logged: {line}")
        if not result.passed:
            print(f"journal and logs kept in {result.workdir}", flush=True)
    if args.json:
        args.json.write_text(json.dumps([r.as_json() for r in results], indent=1))
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
