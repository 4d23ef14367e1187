"""The migration's state file: which steps are done, the ids learnt on the way, never a secret.

Each change is written atomically (temporary file in the same directory, fsync, ``os.replace``,
fsync of the directory), so a run killed at any instant leaves either the previous state or the
new one, never half a file. The token, the PIN, the registration code and the verify token are
never fields of this model, so they cannot reach the file.
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

FORMAT = 1
MAX_STATE_BYTES = 1 << 20


class Step(enum.StrEnum):
    """The steps of a migration, in order."""

    PREFLIGHT = "preflight"
    MIGRATION_REQUESTED = "migration_requested"
    CODE_REQUESTED = "code_requested"
    CODE_VERIFIED = "code_verified"
    REGISTERED = "registered"
    SUBSCRIPTION_CHECKED = "subscription_checked"
    CALLBACK_OVERRIDDEN = "callback_overridden"
    WEBHOOK_VERIFIED = "webhook_verified"
    DONE = "done"


class Event(BaseModel):
    """One line of the history: a step done, an error met, a decision taken."""

    at: float
    step: str
    outcome: str  # "ok", "error", "skipped", "info"
    note: str = ""
    error: str | None = None


class Facts(BaseModel):
    """What the tool has learnt about preconditions the API cannot check directly (None = unknown)."""

    two_step_disabled: bool | None = None
    payment_method: bool | None = None
    business_verified: bool | None = None
    display_name_approved: bool | None = None
    app_subscribed: bool | None = None


class MigrationState(BaseModel):
    """Everything a later run needs to continue a migration where an earlier one stopped."""

    format: int = FORMAT
    waba_id: str
    cc: str
    national: str
    phone_number_id: str | None = None
    app_id: str | None = None
    code_method: str | None = None
    language: str | None = None
    code_requests: list[float] = Field(default_factory=list)
    register_attempts: list[float] = Field(default_factory=list)
    callback_url: str | None = None
    completed: dict[str, float] = Field(default_factory=dict)
    facts: Facts = Field(default_factory=Facts)
    history: list[Event] = Field(default_factory=list)

    @property
    def e164(self) -> str:
        """The number as ``+<cc><national>``."""
        return f"+{self.cc}{self.national}"

    def is_done(self, step: Step) -> bool:
        """True when ``step`` finished in this or an earlier run."""
        return step.value in self.completed

    def mark_done(self, step: Step, note: str = "") -> None:
        """Record that ``step`` finished."""
        now = time.time()
        self.completed[step.value] = now
        self.history.append(Event(at=now, step=step.value, outcome="ok", note=note))

    def undo(self, step: Step, note: str) -> None:
        """Forget that ``step`` finished (Graph says it must be done again)."""
        self.completed.pop(step.value, None)
        self.history.append(Event(at=time.time(), step=step.value, outcome="info", note=note))

    def note(self, step: Step, outcome: str, note: str, error: str | None = None) -> None:
        """Append an event without changing what is done."""
        self.history.append(Event(at=time.time(), step=step.value, outcome=outcome, note=note, error=error))

    def current_step(self) -> Step | None:
        """The first step not yet done, or None when the migration is complete."""
        for step in Step:
            if not self.is_done(step):
                return step
        return None


class StateFileError(Exception):
    """The state file cannot be read, or belongs to another migration."""


class StateFile:
    """Loads and atomically saves a :class:`MigrationState` at ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def exists(self) -> bool:
        """True when a state file is already there."""
        return self.path.exists()

    def load(self) -> MigrationState:
        """Read the state; raise :class:`StateFileError` with a clear message when it is unusable."""
        try:
            with self.path.open("rb") as fh:
                raw = fh.read(MAX_STATE_BYTES + 1)
        except OSError as exc:
            raise StateFileError(f"cannot read state file {self.path}: {exc.strerror}") from None
        if len(raw) > MAX_STATE_BYTES:
            raise StateFileError(f"state file {self.path} is larger than {MAX_STATE_BYTES} bytes")
        try:
            state = MigrationState.model_validate_json(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ())) or "file"
            raise StateFileError(
                f"state file {self.path} is not a migration state ({where}: {first.get('msg')})"
            ) from None
        if state.format != FORMAT:
            raise StateFileError(
                f"state file {self.path} has format {state.format}; this tool reads {FORMAT}"
            )
        return state

    def save(self, state: MigrationState) -> None:
        """Write ``state`` atomically (temp file + fsync + rename + directory fsync), mode 0600."""
        directory = self.path.parent if str(self.path.parent) else Path(".")
        directory.mkdir(parents=True, exist_ok=True)
        data = json.dumps(state.model_dump(mode="json"), indent=2, ensure_ascii=False).encode() + b"\n"
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        _fsync_directory(directory)


def _fsync_directory(directory: Path) -> None:
    # The rename is durable only once the directory entry is on disk; not every platform allows it.
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
