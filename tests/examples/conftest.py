"""Load the examples (they are scripts, not a package) by path."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _load(relative: str) -> ModuleType:
    name = "example_" + relative.replace("/", "_").removesuffix(".py")
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def fastapi_bot() -> ModuleType:
    """examples/fastapi_bot/bot.py"""
    return _load("fastapi_bot/bot.py")


@pytest.fixture(scope="session")
def flask_tracker() -> ModuleType:
    """examples/flask_app/tracker.py"""
    return _load("flask_app/tracker.py")
