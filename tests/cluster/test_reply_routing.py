"""A reply for a bind held by another node goes to that node over NATS, and comes back with its refs."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import nats
import pytest
from cluster_harness import NATS_URL

from mogateway.core.dlt import DltIds
from mogateway.core.message import Message, Sender
from mogateway.core.ports import NodeInfo, Reply, ReplyError, ReplySubmitted
from mogateway.edges.cluster.replies import ClusterReplyChannel, NatsRequests, ReplyResponder


class FakeBinds:
    """A node's SMPP reply channel: ``ready`` as the real one, ``send`` records and returns a ref."""

    name = "smpp"
    needs_intent = True

    def __init__(self, binds: dict[str, str], fail: ReplyError | None = None) -> None:
        self.binds = binds  # bind name -> operator
        self.sent: list[Reply] = []
        self.fail = fail

    def ready(self, reply: Reply) -> bool:
        origin = reply.message.origin
        return origin.startswith("smpp:") and origin.split(":", 1)[1] in self.binds

    async def send(self, reply: Reply, handover: Any = None) -> ReplySubmitted:
        if self.fail is not None:
            raise self.fail
        self.sent.append(reply)
        return ReplySubmitted("smpp", 1, [f"smsc-{len(self.sent)}"], "bound")


class Directory:
    def __init__(self, nodes: list[NodeInfo]) -> None:
        self._nodes = nodes

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def nodes(self) -> list[NodeInfo]:
        return self._nodes


def node(name: str, binds: dict[str, str]) -> NodeInfo:
    return NodeInfo(
        name=name,
        address="",
        version="",
        started_at=0,
        seen_at=0,
        binds=[{"name": b, "operator": op, "state": "bound", "transmit": True} for b, op in binds.items()],
    )


@pytest.fixture
async def nc() -> AsyncIterator[Any]:
    try:
        client = await nats.connect(NATS_URL, connect_timeout=3, max_reconnect_attempts=1)
    except Exception as exc:
        pytest.fail(f"NATS is not reachable at {NATS_URL} ({exc}); run `bash scripts/ensure-services.sh`")
    yield client
    await client.close()


def reply(origin: str, operator: str = "") -> Reply:
    sender = Sender(91, 9812, 345678, operator)
    return Reply(Message("m1", "56767", "919812345678", "HI", 0.0, origin, sender=sender), "Thanks")


async def test_a_reply_for_another_nodes_bind_is_sent_by_that_node(nc: Any) -> None:
    prefix = f"mogwt.{secrets.token_hex(4)}.reply"
    a_binds, b_binds = FakeBinds({"airtel-dl": "airtel"}), FakeBinds({"jio-mh": "jio"})
    directory = Directory([node("a", a_binds.binds), node("b", b_binds.binds)])
    responder = ReplyResponder(nc, b_binds, me="b", subject_prefix=prefix)
    await responder.start()
    try:
        on_a = ClusterReplyChannel(
            a_binds, directory, NatsRequests(nc, subject_prefix=prefix, timeout_s=5), me="a"
        )
        # Its own bind: sent locally.
        local = await on_a.send(reply("smpp:airtel-dl"))
        assert local.refs == ["smsc-1"] and len(a_binds.sent) == 1 and not b_binds.sent
        # Node b's bind: sent by b, with b's SMSC ref coming back for delivery receipts.
        remote = await on_a.send(reply("smpp:jio-mh"))
        assert remote.refs == ["smsc-1"] and remote.detail.startswith("via b")
        assert [r.message.origin for r in b_binds.sent] == ["smpp:jio-mh"]
        # A bind gone from every node, but the operator is known: another bind of that operator.
        b_binds.binds["jio-up"] = "jio"
        directory = Directory([node("a", a_binds.binds), node("b", {"jio-up": "jio"})])
        on_a = ClusterReplyChannel(
            a_binds, directory, NatsRequests(nc, subject_prefix=prefix, timeout_s=5), me="a"
        )
        await on_a.send(reply("smpp:jio-mh", operator="jio"))
        assert len(b_binds.sent) == 2
        # No node can send it: a retryable failure, nothing sent.
        with pytest.raises(ReplyError) as info:
            await ClusterReplyChannel(None, directory, NatsRequests(nc, subject_prefix=prefix), me="a").send(
                reply("smpp:vi-ka", operator="vi")
            )
        assert info.value.retryable
    finally:
        await responder.stop()


async def test_the_other_nodes_refusal_comes_back_as_it_was(nc: Any) -> None:
    prefix = f"mogwt.{secrets.token_hex(4)}.reply"
    b_binds = FakeBinds({"jio-mh": "jio"}, fail=ReplyError("ESME_RINVDSTADR", retryable=False))
    directory = Directory([node("a", {}), node("b", b_binds.binds)])
    responder = ReplyResponder(nc, b_binds, me="b", subject_prefix=prefix)
    await responder.start()
    try:
        on_a = ClusterReplyChannel(
            None, directory, NatsRequests(nc, subject_prefix=prefix, timeout_s=5), me="a"
        )
        with pytest.raises(ReplyError, match="ESME_RINVDSTADR") as info:
            await on_a.send(reply("smpp:jio-mh"))
        assert not info.value.retryable
    finally:
        await responder.stop()
    # The node went away: no responder on its subject any more — retryable, it may come back.
    with pytest.raises(ReplyError, match="gone") as gone:
        await on_a.send(reply("smpp:jio-mh"))
    assert gone.value.retryable


async def test_a_replys_dlt_ids_travel_to_the_node_that_sends_it(nc: Any) -> None:
    prefix = f"mogwt.{secrets.token_hex(4)}.reply"
    b_binds = FakeBinds({"jio-mh": "jio"})
    directory = Directory([node("a", {}), node("b", b_binds.binds)])
    responder = ReplyResponder(nc, b_binds, me="b", subject_prefix=prefix)
    await responder.start()
    try:
        on_a = ClusterReplyChannel(
            None, directory, NatsRequests(nc, subject_prefix=prefix, timeout_s=5), me="a"
        )
        ids = DltIds("1201159178420181234", "1107161234567890001")
        await on_a.send(replace(reply("smpp:jio-mh", "jio"), dlt=ids))
        await on_a.send(reply("smpp:jio-mh"))
    finally:
        await responder.stop()
    assert [r.dlt for r in b_binds.sent] == [ids, None]


class CountingDirectory(Directory):
    def __init__(self, nodes: list[NodeInfo]) -> None:
        super().__init__(nodes)
        self.reads = 0

    async def nodes(self) -> list[NodeInfo]:
        self.reads += 1
        return self._nodes


class Answers:
    """NodeRequests answered in memory: the binds of each node, or a refusal."""

    def __init__(self, binds: dict[str, FakeBinds]) -> None:
        self.binds = binds
        self.asked: list[str] = []

    async def ask(self, node: str, request: dict[str, Any]) -> dict[str, Any]:
        from mogateway.edges.cluster.replies import answer_reply

        self.asked.append(node)
        found = self.binds.get(node)
        if found is None:
            return {"error": f"worker {node} holds no bind", "retryable": True}
        return await answer_reply(found, request)


async def test_the_directory_is_read_once_per_view_and_again_after_a_refusal() -> None:
    b_binds, c_binds = FakeBinds({"jio-mh": "jio"}), FakeBinds({"jio-mh": "jio"})
    directory = CountingDirectory([node("a", {}), node("b", b_binds.binds)])
    answers = Answers({"b": b_binds, "c": c_binds})
    on_a = ClusterReplyChannel(None, directory, answers, me="a", view_s=3600)
    for _ in range(50):
        await on_a.send(reply("smpp:jio-mh"))
    # Fifty replies, one read of the directory (it costs a round trip to every node).
    assert directory.reads == 1 and len(b_binds.sent) == 50
    # The bind moves to node c; b no longer holds it and says so: the reply fails retryably, and
    # the next attempt reads the directory again and goes to c.
    directory._nodes = [node("a", {}), node("c", c_binds.binds)]
    answers.binds.pop("b")
    with pytest.raises(ReplyError) as refused:
        await on_a.send(reply("smpp:jio-mh"))
    assert refused.value.retryable and directory.reads == 1
    await on_a.send(reply("smpp:jio-mh"))
    assert directory.reads == 2 and len(c_binds.sent) == 1 and answers.asked[-1] == "c"
