"""Root fixtures, shared by every test directory (each directory keeps its own conftest for the rest)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _no_operator_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests build their own settings: a MOGATEWAY_* variable in the developer's shell must not leak in."""
    for name in list(os.environ):
        if name.startswith("MOGATEWAY_"):
            monkeypatch.delenv(name)
