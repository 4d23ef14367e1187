"""What one step of the migration is: how it tells it is done, what it would send, how it does it.

Rules this file keeps:
* a step is one object in :data:`mogateway.waba.flow.FLOW`; the real run and the dry run both walk
  that list, so a step is added (or changed) in one place;
* ``is_done`` may ask Graph, and records in the state what Graph already did: a run may have died
  after Graph acted but before the state was saved;
* ``plan`` lists every call the step may send, each with when it is sent, secrets as placeholders;
* ``act`` saves each outcome before it returns, and stops only by raising ``MigrationStopped``
  (through :class:`~mogateway.waba.flow.context.Context`); it returns a :class:`Rewind` when Graph
  says an earlier step must be done again.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import ClassVar

from mogateway.waba.flow.context import Context
from mogateway.waba.graph import GraphRequest
from mogateway.waba.options import MigrationOptions
from mogateway.waba.state import Step

PlannedCall = tuple[GraphRequest, str]
"""A call a step may send, with when it is sent (``"always: …"``, ``"only if …"``)."""


@dataclass(frozen=True)
class PlanInputs:
    """What a dry run knows: the options, the saved phone number id (or a placeholder), the token."""

    options: MigrationOptions
    phone_number_id: str
    token: str


@dataclass(frozen=True)
class Rewind:
    """Go back to the step that records ``to`` (allowed once per run, so it cannot loop)."""

    to: Step
    reason: str


class FlowStep(abc.ABC):
    """One step of the migration."""

    records: ClassVar[tuple[Step, ...]]
    """The state steps it marks done, in order; the flow covers every :class:`Step` once, in order."""
    title: ClassVar[str]
    """Shown when the step starts."""

    def applies(self, options: MigrationOptions) -> bool:
        """False for an optional step the user did not ask for."""
        return True

    def is_done(self, ctx: Context) -> bool:
        """True when nothing is left to do (may ask Graph); by default the step always runs."""
        return False

    def done_line(self, ctx: Context) -> str | None:
        """What to show for a step found done, or None to pass it silently."""
        return None

    @abc.abstractmethod
    def plan(self, inputs: PlanInputs) -> list[PlannedCall]:
        """Every call the step may send, in order, each with when it is sent."""

    @abc.abstractmethod
    def act(self, ctx: Context) -> Rewind | None:
        """Do the step (it was not done), saving each outcome."""
