"""Root fixtures, shared by every test directory (each directory keeps its own conftest for the rest)."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings as hypothesis_settings

# Property tests have no time limit per example: hypothesis' default (200 ms) is a timed assertion, and
# on a shared machine under the suite's own load an example of a correct test can take longer (a run saw
# a signature round trip fail that way). Speed is measured in bench/, not asserted in tests.
hypothesis_settings.register_profile("mogateway", deadline=None)
hypothesis_settings.load_profile("mogateway")


@pytest.fixture(autouse=True)
def _no_operator_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests build their own settings: a MOGATEWAY_* variable in the developer's shell must not leak in."""
    for name in list(os.environ):
        if name.startswith("MOGATEWAY_"):
            monkeypatch.delenv(name)


def pytest_make_parametrize_id(config: pytest.Config, val: object, argname: str) -> str | None:
    """A secret key generated at collection never shows in a test's id: it would be a different id at
    each collection, and pytest-xdist's processes must collect the same ids (scripts/test.sh,
    MOGATEWAY_TEST_JOBS). Every other value keeps pytest's own id."""
    if isinstance(val, str) and len(val) == 44:
        from mogateway.config.secret_key import parse_key

        try:
            parse_key(val)
        except ValueError:
            return None
        return f"{argname}-generated"
    return None
