"""Every file the package needs at run time that is not Python source ships in the wheel.

The console's and portal's templates, static files, migrations and data files reach an installed
gateway only through ``[tool.setuptools.package-data]`` in pyproject.toml. An editable install (as
``scripts/setup.sh`` makes, and so every other test) reads them from the source tree and cannot notice
a missing pattern: a new templates directory left out would pass the whole suite and fail every page of
an installed gateway at render time. So this compares the patterns with the tracked files."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "mogateway"


def _tracked_data_files() -> set[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--", "."], cwd=PACKAGE, check=True, capture_output=True, text=True
    ).stdout.split()
    return {name for name in listed if not name.endswith(".py")}


def _package_data() -> set[str]:
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    return {
        path.relative_to(PACKAGE).as_posix()
        for pattern in patterns["mogateway"]
        for path in PACKAGE.glob(pattern)
        if path.is_file()
    }


def test_every_tracked_data_file_of_the_package_is_package_data() -> None:
    tracked = _tracked_data_files()
    assert any(name.startswith("api/browser/templates/") for name in tracked)  # the check sees them
    missing = sorted(tracked - _package_data())
    assert not missing, f"add a pattern to [tool.setuptools.package-data] in pyproject.toml for: {missing}"
