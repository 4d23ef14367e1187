"""docs/scaling.md's "Setting it up", as written: its shell block runs in bash on two nodes sharing a
PostgreSQL database and a NATS JetStream server, and the doc's promises about it hold; its "`[nats]`
settings" table is the one the real settings loader reads from ``MOGATEWAY_NATS__<NAME>``.

The test changes only what a test must: the database URL (a throwaway database of its own), the NATS
URLs (the three servers of the doc are this machine's one server, named three times), the stream's
replicas (3 cannot be placed on one NATS server: 1), the names of the stream, consumer, subjects and
node bucket (its own, exported beside the doc's ``MOGATEWAY_NATS__REPLICAS``: tests run in parallel on
one NATS), the tokens (the doc's ``...``), and the listening address and port (loopback and a free
port, not 0.0.0.0 and 8080); ``serve`` becomes ``exec serve`` so that the process the test started is
the gateway, stopped by its pid. The first node keeps the doc's name, ``gw-1``; the second drops the
``MOGATEWAY_NODE_NAME`` line to take the default the doc gives. Both nodes run the block at once, so
their two ``mogateway migrate`` runs race, as the doc says they may (from any node, serialised)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from cluster_harness import NATS_URL, _delete_nats_names, free_port

import mogateway as mogateway_package
from markdown_doc import MarkdownDoc
from mogateway.cli.supervisor import worker_count
from mogateway.config.nats import NatsSettings, parse_settings
from mogateway.config.settings import load_settings
from mogateway.edges.storage import migrations
from mogateway.testing.recorder import Answer, CallbackRecorder
from postgres_databases import throwaway_database

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DOC = MarkdownDoc("docs/scaling.md")
SETUP = "## Setting it up"
NATS_TABLE = "### `[nats]` settings (`MOGATEWAY_NATS__<NAME>`)"
ADMIN_TOKEN = "scaling-admin-" + secrets.token_hex(8)
INGEST_TOKEN = "scaling-ingest-" + secrets.token_hex(8)
REPLY = "Thanks for voting"

# The doc's values the test replaces (asserted present, so a changed doc says so here).
DOC_DATABASE = "postgresql://mogateway:...@db.internal/mogateway"
DOC_QUEUE = "nats://n1:4222,nats://n2:4222,nats://n3:4222"
DOC_REPLICAS = "export MOGATEWAY_NATS__REPLICAS=3"
DOC_NODE_NAME = "export MOGATEWAY_NODE_NAME=gw-1"
DOC_TOKENS = "export MOGATEWAY_ADMIN_TOKEN=... MOGATEWAY_INGEST_TOKEN=..."
DOC_SERVE = "mogateway serve --host 0.0.0.0"


# ------------------------------------------------------------------------------------------ the doc


def section(heading: str) -> str:
    """The text under ``heading`` (its whole line), up to the next heading of its level or a higher one."""
    return DOC.section(heading)


def setup_block() -> str:
    """The one shell block of "Setting it up"."""
    (block,) = re.findall(r"```sh\n(.*?)```", section(SETUP), flags=re.S)
    return str(block)


def nats_table() -> dict[str, str]:
    """The ``[nats]`` table: each setting's name -> its default as the doc writes it (a row naming
    several settings gives their defaults in the same order, comma-separated)."""
    rows = [line for line in section(NATS_TABLE).splitlines() if line.startswith("| `")]
    table: dict[str, str] = {}
    for row in rows:
        names_cell, default_cell = (cell.strip() for cell in row.strip("|").split("|")[:2])
        names = re.findall(r"`([a-z_]+)`", names_cell)
        defaults = [d.strip().strip("`") for d in default_cell.split(",")]
        assert len(defaults) == len(names), f"a row of the [nats] table lost its shape: {row}"
        table.update(zip(names, defaults, strict=True))
    return table


def doc_default(text: str) -> Any:
    """A default as the table writes it, as the settings hold it."""
    if text == "unlimited":
        return -1
    if days := re.fullmatch(r"(\d+) days", text):
        return int(days[1]) * 86400
    if re.fullmatch(r"\d+", text):
        return int(text)
    return text


def other_value(name: str, default: Any) -> str:
    """A valid value of setting ``name`` other than its default, as an environment variable spells it."""
    if name == "storage":
        return "memory"
    if isinstance(default, bool) or not isinstance(default, int | float | str):
        raise AssertionError(f"[nats] {name}: a default of a kind this test does not know: {default!r}")
    if isinstance(default, str):
        return default + "2"
    if isinstance(default, int):
        return str(default + 1 if default >= 0 else 1000)
    return str(default * 2)


# ------------------------------------------------------------------------------------------ the nodes


def node_script(database: str, names: dict[str, str], node_name: str | None, port: int) -> str:
    """The doc's block for one node: its values replaced as the module says; ``node_name`` None drops
    the ``MOGATEWAY_NODE_NAME`` line (the default name)."""
    block = setup_block()
    for doc_text in (DOC_DATABASE, DOC_QUEUE, DOC_REPLICAS, DOC_NODE_NAME, DOC_TOKENS, DOC_SERVE):
        assert block.count(doc_text) == 1, f"'Setting it up' no longer has {doc_text!r}: adapt the test"
    block = block.replace(DOC_DATABASE, database)
    block = block.replace(DOC_QUEUE, ",".join([NATS_URL] * 3))
    own_names = "".join(f"\nexport MOGATEWAY_NATS__{k.upper()}={v}" for k, v in names.items())
    block = block.replace(DOC_REPLICAS, "export MOGATEWAY_NATS__REPLICAS=1" + own_names)
    if node_name is None:
        block = re.sub(rf"^{re.escape(DOC_NODE_NAME)}.*\n", "", block, flags=re.M)
    else:
        block = block.replace(DOC_NODE_NAME, f"export MOGATEWAY_NODE_NAME={node_name}")
    block = block.replace(
        DOC_TOKENS, f"export MOGATEWAY_ADMIN_TOKEN={ADMIN_TOKEN} MOGATEWAY_INGEST_TOKEN={INGEST_TOKEN}"
    )
    # exec: the serving process is the one the test started, stopped by its pid.
    block = block.replace(DOC_SERVE, f"exec mogateway serve --host 127.0.0.1 --port {port}")
    return "set -euo pipefail\n" + block


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without any MOGATEWAY_* setting of the developer's shell, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MOGATEWAY_")}
    env.update(extra)
    return env


def node_refuses_to_start(
    mogateway: str, workdir: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """``mogateway serve`` on ``env``, which must exit at once with an error; what it said."""
    refused = subprocess.run(
        [mogateway, "serve", "--host", "127.0.0.1", "--port", str(free_port())],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode != 0, refused.stderr
    return refused


@dataclass
class NodeProcess:
    """A node's script in bash; the ``exec`` at its end makes it the ``mogateway serve`` process."""

    process: subprocess.Popen[bytes]
    url: str
    workdir: Path

    def output(self) -> str:
        return (self.workdir / "node.out").read_text(errors="replace")

    def stderr(self) -> str:
        return (self.workdir / "node.stderr").read_text(errors="replace")

    def stop(self) -> None:
        """SIGTERM and wait (a graceful stop); SIGKILL to its process group if it does not stop."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(40)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)


def operator_env() -> dict[str, str]:
    """The shell of an operator with the program's virtual environment on the PATH and nothing of the
    gateway set; callbacks to this machine allowed (the test's application listens on loopback)."""
    env = clean_env(MOGATEWAY_ALLOW_PRIVATE_CALLBACKS="true")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', os.defpath)}"
    return env


def start_node(workdir: Path, script: str, port: int) -> NodeProcess:
    """Run a node's script in bash in ``workdir`` (its output in ``node.out`` and ``node.stderr``)."""
    workdir.mkdir()
    with (workdir / "node.out").open("wb") as out, (workdir / "node.stderr").open("wb") as err:
        process = subprocess.Popen(
            ["bash", "-c", script],
            cwd=workdir,
            env=operator_env(),
            stdout=out,
            stderr=err,
            start_new_session=True,  # its own process group: stop() reaches every worker
        )
    return NodeProcess(process, f"http://127.0.0.1:{port}", workdir)


def wait_serving(node: NodeProcess, timeout: float = 90.0) -> None:
    """Poll ``/healthz`` until the node answers; fail with what it said if it exits or never answers."""
    deadline = time.monotonic() + timeout
    while True:
        if node.process.poll() is not None:
            raise AssertionError(f"the node exited with {node.process.returncode}: {node.stderr()}")
        try:
            if httpx.get(node.url + "/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"the node did not answer within {timeout} s: {node.stderr()}")
        time.sleep(0.1)


def node_names(url: str) -> tuple[list[str], dict[str, Any]]:
    """``GET /v1/nodes`` with the admin token: the names it lists, and the whole answer."""
    resp = httpx.get(url + "/v1/nodes", headers={"authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=10)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    return sorted(n["name"] for n in body["nodes"]), body


async def queue_config(names: dict[str, str]) -> tuple[Any, Any, Any]:
    """The JetStream stream, consumer and node bucket the nodes made, as NATS reports them."""
    import nats

    nc = await nats.connect(NATS_URL, connect_timeout=5)
    try:
        js = nc.jetstream()
        stream = (await js.stream_info(names["stream"])).config
        consumer = (await js.consumer_info(names["stream"], names["consumer"])).config
        bucket = (await js.stream_info(f"KV_{names['nodes_bucket']}")).config
        return stream, consumer, bucket
    finally:
        await nc.close()


async def add_newer_migration(database: str) -> None:
    """Record a migration newer than this mogateway's (a newer release ran ``migrate``)."""
    conn = await asyncpg.connect(database, timeout=10)
    try:
        await conn.execute(
            "INSERT INTO schema_migrations (version, name) VALUES ($1, 'from_a_newer_release')",
            migrations.LATEST + 1,
        )
    finally:
        await conn.close()


@pytest.fixture
def names() -> Iterator[dict[str, str]]:
    """The test's own JetStream names; the stream and node bucket are deleted afterwards."""
    run = secrets.token_hex(4)
    own = {
        "stream": f"MOGW_DOC_{run}",
        "subject": f"mogwdoc.{run}.mo",
        "consumer": f"dispatch_{run}",
        "nodes_bucket": f"mogwdoc_nodes_{run}",
        "reply_subject": f"mogwdoc.{run}.reply",
    }
    try:
        yield own
    finally:
        asyncio.run(_delete_nats_names(own["stream"], own["nodes_bucket"]))


# ------------------------------------------------------------------------------------------ the tests


def test_the_nats_table_is_what_the_loader_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every setting of the ``[nats]`` table exists with the default the doc gives, none is missing from
    the table, and each one set as ``MOGATEWAY_NATS__<NAME>`` (the block's ``REPLICAS=3`` too) reaches
    the validated settings through the real loader."""
    table = nats_table()
    fields = NatsSettings.model_fields
    assert sorted(table) == sorted(fields), "the [nats] table and the settings differ"
    defaults = NatsSettings()
    for name, text in table.items():
        assert getattr(defaults, name) == doc_default(text), f"[nats] {name}: the doc says {text!r}"

    exports = re.findall(r"^export (MOGATEWAY_NATS__[A-Z_]+)=(\S+)", setup_block(), flags=re.M)
    assert exports == [("MOGATEWAY_NATS__REPLICAS", "3")], exports
    monkeypatch.setenv(*exports[0])
    assert parse_settings(load_settings().nats).replicas == 3

    given = {name: other_value(name, getattr(defaults, name)) for name in table}
    for name, value in given.items():
        monkeypatch.setenv(f"MOGATEWAY_NATS__{name.upper()}", value)
    loaded = parse_settings(load_settings().nats)
    for name, value in given.items():
        expected = float(value) if re.fullmatch(r"[\d.]+", value) else value
        assert getattr(loaded, name) == expected, f"MOGATEWAY_NATS__{name.upper()}={value} was not read"


def test_two_nodes_set_up_as_written_share_the_work(tmp_path: Path, names: dict[str, str]) -> None:
    """The block on two nodes at once: both migrate runs end on the latest schema with each migration
    of the doc's directory applied once, and ``--check`` then passes; ``GET /v1/nodes`` (admin token)
    lists both nodes' workers with the fields the doc lists; the stream, consumer and node bucket are
    the ones the doc describes; an MO pushed to node A is called back (by either node) and replied, as
    node B reads it from the shared journal. Around it, the doc's refusals: on a schema behind,
    ``--check`` exits 6 and a node will not start, naming ``mogateway migrate``; on a newer one, both
    refuse too."""
    started = time.monotonic()
    with ExitStack() as stack:
        app = stack.enter_context(CallbackRecorder.in_thread(Answer.text(REPLY)))
        database = stack.enter_context(throwaway_database("mogw_docscale", migrate=False))

        # Before `mogateway migrate`: --check exits 6, and a node refuses to start, naming the command.
        behind = clean_env(MOGATEWAY_DATABASE=database, MOGATEWAY_QUEUE=NATS_URL)
        behind.update({f"MOGATEWAY_NATS__{k.upper()}": v for k, v in names.items()})
        mogateway = str(Path(sys.executable).parent / "mogateway")
        check = subprocess.run(
            [mogateway, "migrate", "--check"], env=behind, capture_output=True, text=True, timeout=60
        )
        (behind_code,) = re.findall(
            r"^mogateway migrate --check +# exit (\d+) when the schema is behind", setup_block(), re.M
        )
        assert check.returncode == int(behind_code) == 6, check.stdout + check.stderr
        assert "run `mogateway migrate`" in check.stderr
        refused = node_refuses_to_start(mogateway, tmp_path, behind)
        assert "schema version 0" in refused.stderr and "mogateway migrate" in refused.stderr

        # The block, on two nodes at once.
        port_a, port_b = free_port(), free_port()
        node_a = start_node(tmp_path / "a", node_script(database, names, "gw-1", port_a), port_a)
        stack.callback(node_a.stop)
        node_b = start_node(tmp_path / "b", node_script(database, names, None, port_b), port_b)
        stack.callback(node_b.stop)
        wait_serving(node_a)
        wait_serving(node_b)

        # Each migration applied once between the two runs; both end on the latest schema, and --check
        # (the block's next line) says so.
        outputs = [node_a.output(), node_b.output()]
        applied = [
            line.removeprefix("applied ") for out in outputs for line in re.findall(r"^applied .*", out, re.M)
        ]
        assert sorted(applied) == [f"{m.version:04d}_{m.name}" for m in migrations.MIGRATIONS], outputs
        # "applies <package directory>/NNNN_*.sql": the files there are the ones applied.
        (where,) = re.findall(r"^mogateway migrate +# applies (\S+)/NNNN_\*\.sql", setup_block(), re.M)
        shipped = sorted(p.name for p in (Path(mogateway_package.__file__).parents[1] / where).glob("*.sql"))
        assert [f"{name}.sql" for name in sorted(applied)] == shipped, where
        latest = migrations.LATEST
        for out in outputs:
            assert re.search(rf"^schema is at version {latest}( \(already up to date\))?$", out, re.M), out
            assert f"schema is up to date (version {latest})" in out, out

        # GET /v1/nodes (admin token): both nodes, each worker a node named <node>/w<i> (docs/scaling.md,
        # "Workers on one machine"); node B by the default name the block's comment gives.
        count = worker_count(0)  # serve's default: one worker per core

        def workers(base: str) -> list[str]:
            return [base] if count == 1 else [f"{base}/w{i}" for i in range(count)]

        (default,) = re.findall(rf"^{re.escape(DOC_NODE_NAME)} .*; default (\S+)$", setup_block(), re.M)
        assert "<hostname>" in default and "<port>" in default, default
        name_b = default.replace("<hostname>", socket.gethostname()).replace("<port>", str(port_b))
        wanted = sorted(workers("gw-1") + workers(name_b))
        deadline = time.monotonic() + 30
        listed, body = node_names(node_b.url)
        while listed != wanted and time.monotonic() < deadline:
            time.sleep(0.2)
            listed, body = node_names(node_b.url)
        assert listed == wanted, body
        assert httpx.get(node_a.url + "/v1/nodes", timeout=10).status_code == 401
        documented = {"name", "address", "version", "started_at", "queue_lag", "held", "waiting", "binds"}
        for node in body["nodes"]:
            assert documented <= set(node), node
            assert node["binds"] == []  # no [smpp] binds configured on these nodes

        # NATS JetStream holds the work: one work-queue stream refusing new publishes when full, and one
        # durable pull consumer, with the table's defaults.
        stream, consumer, bucket = asyncio.run(queue_config(names))
        assert stream.subjects == [names["subject"]]
        assert (stream.retention, stream.discard, stream.storage) == (
            "workqueue",
            "new",
            "file",
        )
        assert (stream.num_replicas, stream.max_msgs, stream.max_bytes) == (1, -1, -1)
        assert (stream.max_age, stream.duplicate_window) == (3 * 86400, 120)
        assert consumer.durable_name == names["consumer"] and consumer.deliver_subject is None  # pull
        assert (consumer.ack_wait, consumer.max_ack_pending) == (6, 20000)
        # The heartbeats' KV bucket: its entries expire after node_ttl_s (15 s).
        assert bucket.max_age == 15

        # An MO pushed to node A is called back (by either node) and replied; node B sees it so.
        created = httpx.post(
            node_a.url + "/v1/clients",
            json={"name": "tv vote", "shortcodes": ["56767"], "callback_url": app.url},
            headers={"authorization": f"Bearer {ADMIN_TOKEN}"},
            timeout=10,
        )
        assert created.status_code == 201, created.text
        pushed = httpx.post(
            node_a.url + "/v1/inbound",
            json={"shortcode": "56767", "msisdn": "919812345678", "message": "VOTE 7"},
            headers={"authorization": f"Bearer {INGEST_TOKEN}"},
            timeout=10,
        )
        assert pushed.status_code == 202, pushed.text
        message_id = pushed.json()["id"]
        (call,) = app.wait_for_calls(1, timeout=60)
        assert call.headers["x-mogateway-message-id"] == message_id
        assert call.json()["message"] == "VOTE 7"
        deadline = time.monotonic() + 60
        while True:
            message = httpx.get(
                f"{node_b.url}/v1/messages/{message_id}",
                headers={"authorization": f"Bearer {ADMIN_TOKEN}"},
                timeout=10,
            ).json()
            if message.get("state") == "replied" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert message["state"] == "replied", message
        assert [e["event"] for e in message["timeline"]].count("reply_submitted") == 1, message
        assert len(app.calls) == 1

        # A schema newer than this mogateway: --check fails, and a node refuses to start, saying so.
        asyncio.run(add_newer_migration(database))
        check = subprocess.run(
            [mogateway, "migrate", "--check"], env=behind, capture_output=True, text=True, timeout=60
        )
        assert check.returncode == 1 and "newer" in check.stderr, check.stdout + check.stderr
        refused = node_refuses_to_start(mogateway, tmp_path, behind)
        assert f"schema version {migrations.LATEST + 1}, newer" in refused.stderr, refused.stderr
        assert "upgrade mogateway" in refused.stderr
    assert time.monotonic() - started < 120
