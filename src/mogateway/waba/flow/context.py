"""A run in progress: what every step reads and changes, and the one way a step stops.

Rules this file keeps:
* the state is saved before a stop is raised, with the stop noted in its history, so the state
  file always says where a run stopped;
* every stop is a :class:`MigrationStopped` carrying the exit status, the meaning and what to do;
  a Graph error stops with what :func:`classify` says about it, an unreachable Graph with
  UNAVAILABLE (running again continues).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NoReturn, TypeVar

from mogateway.waba.calls import NumberInfo
from mogateway.waba.errors import (
    Classification,
    ExitCode,
    GraphError,
    MigrationStopped,
    TransportError,
    classify,
)
from mogateway.waba.graph import GraphClient
from mogateway.waba.options import MigrationOptions
from mogateway.waba.prompts import MigrationUI
from mogateway.waba.state import MigrationState, StateFile, Step

T = TypeVar("T")


class Context:
    """The Graph client, the options, the state and its file, and the front end of one run."""

    def __init__(
        self,
        client: GraphClient,
        options: MigrationOptions,
        state_file: StateFile,
        state: MigrationState,
        ui: MigrationUI,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.options = options
        self.state_file = state_file
        self.state = state
        self.ui = ui
        self.sleep = sleep
        self.final: NumberInfo | None = None
        """The number as Graph shows it at the end of the flow (set by its last step)."""

    def save(self) -> None:
        """Write the state file now."""
        self.state_file.save(self.state)

    @property
    def pid(self) -> str:
        """The phone number id Meta gave the number on the destination WABA."""
        if not self.state.phone_number_id:
            raise MigrationStopped(ExitCode.ERROR, "internal: no phone number id in the state")
        return self.state.phone_number_id

    def call(self, step: Step, fn: Callable[[], T]) -> T:
        """``fn()``, a Graph call; any error stops the run at ``step``."""
        try:
            return fn()
        except GraphError as err:
            self.fail(step, err, classify(err))
        except TransportError as err:
            self.fail_transport(step, err)

    def fail(self, step: Step, err: GraphError, verdict: Classification) -> NoReturn:
        """Stop at ``step`` for a Graph error, as ``verdict`` says."""
        self.state.note(step, "error", verdict.meaning, err.reference)
        self.save()
        raise MigrationStopped(verdict.exit_code, verdict.meaning, verdict.advice, error=err)

    def fail_transport(self, step: Step, err: TransportError) -> NoReturn:
        """Stop at ``step`` because Graph could not be reached."""
        self.state.note(step, "error", "Graph unreachable", str(err))
        self.save()
        raise MigrationStopped(
            ExitCode.UNAVAILABLE,
            "Graph could not be reached.",
            "Check the network and run the same command again: it continues where it stopped.",
            error=err,
        )

    def stop(self, step: Step, code: ExitCode, title: str, advice: str = "") -> NoReturn:
        """Stop at ``step`` for a reason of the tool's own (``NEEDS_CODE`` is noted as info)."""
        self.state.note(step, "error" if code not in (ExitCode.NEEDS_CODE,) else "info", title)
        self.save()
        raise MigrationStopped(code, title, advice)
