"""The CLI's exit codes are defined once (cli/exit_codes.py) and the table in docs/configuration.md lists
exactly those."""

from __future__ import annotations

import re
from pathlib import Path

from mogateway.cli.exit_codes import Exit

DOC = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


def test_the_documented_exit_codes_are_the_enum() -> None:
    section = DOC.read_text().split("## CLI exit codes", 1)[1].split("\n## ", 1)[0]
    documented = {int(m) for m in re.findall(r"^\| (\d+) \|", section, re.M)}
    assert documented == {code.value for code in Exit}
