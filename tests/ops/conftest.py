"""Fixtures of the operations tests (backup, restore, doctor, deploy/): real gateways as ``mogateway
serve`` subprocesses, from the gateway tests' harness."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
