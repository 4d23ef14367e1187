"""The ``[nats]`` settings of a gateway on NATS JetStream (environment: ``MOGATEWAY_NATS__<NAME>``).

``Settings.nats`` keeps the table as given; :func:`parse_settings` validates it when a JetStream queue
starts (``edges.queue.jetstream``), so a gateway on the embedded queue never reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from mogateway.config import describe_error

__all__ = ["NatsSettings", "parse_settings"]


class NatsSettings(BaseModel):
    """The ``[nats]`` settings (environment: ``MOGATEWAY_NATS__<NAME>``), with defaults for production."""

    model_config = ConfigDict(extra="forbid")

    stream: str = Field(default="MOGATEWAY_MO", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    subject: str = Field(default="mogateway.mo", pattern=r"^[A-Za-z0-9_.-]{1,128}$")
    consumer: str = Field(default="mogateway-dispatch", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    #: Stream replicas: 3 on a 3-node NATS cluster survives the loss of one NATS server.
    replicas: int = Field(default=1, ge=1, le=5)
    storage: Literal["file", "memory"] = "file"
    #: An MO still in the stream after this long is dropped by NATS; the journal and sweeper still have it.
    max_age_s: float = Field(default=3 * 86400, gt=0)
    max_msgs: int = Field(default=-1, ge=-1)
    max_bytes: int = Field(default=-1, ge=-1)
    #: How long NATS remembers a Nats-Msg-Id to drop a second publish of the same MO.
    duplicate_window_s: float = Field(default=120.0, gt=0)
    #: Unacknowledged this long (no in_progress either) → delivered to another node: how long a dead
    #: node's MOs wait. A live node refreshes an MO it holds after ack_wait_s / 3 (see the module).
    ack_wait_s: float = Field(default=6.0, ge=1)
    max_ack_pending: int = Field(default=20_000, ge=1)
    node_max_pending: int = Field(default=2_000, ge=1)
    max_hold_s: float = Field(default=600.0, ge=1)
    fetch_batch: int = Field(default=256, ge=1, le=10_000)
    connect_timeout_s: float = Field(default=10.0, gt=0)
    #: The sweeper re-publishes unfinished MOs unchanged for this long (a node died before publishing).
    sweep_after_s: float = Field(default=60.0, gt=0)
    sweep_interval_s: float = Field(default=10.0, gt=0)
    sweep_page: int = Field(default=1000, ge=1)
    #: Node registry: a KV bucket of heartbeats that expire after node_ttl_s.
    nodes_bucket: str = Field(default="mogateway_nodes", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    heartbeat_s: float = Field(default=2.0, gt=0)
    node_ttl_s: float = Field(default=15.0, gt=0)
    #: Replies for a bind another node holds go to ``<reply_subject>.<node name>``.
    reply_subject: str = Field(default="mogateway.reply", pattern=r"^[A-Za-z0-9_.-]{1,128}$")

    @model_validator(mode="after")
    def _consistent(self) -> NatsSettings:
        if self.node_ttl_s <= self.heartbeat_s:
            raise ValueError("node_ttl_s must be longer than heartbeat_s")
        if self.node_max_pending > self.max_ack_pending:
            self.node_max_pending = self.max_ack_pending
        return self


def parse_settings(raw: Mapping[str, Any]) -> NatsSettings:
    """Validate ``raw``; raise ValueError with one line naming the bad setting and its variable."""
    try:
        return NatsSettings.model_validate({str(k).lower(): v for k, v in raw.items()})
    except ValidationError as exc:
        raise ValueError(describe_error(exc, within=("nats",))) from None
