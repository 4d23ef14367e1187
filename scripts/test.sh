#!/usr/bin/env bash
# Set up and run the whole test suite: installs mogateway with its test tools into ./.venv, starts
# PostgreSQL and NATS JetStream when they are not running (installing them from Debian packages when
# missing), installs Debian's Chromium for the console's browser tests when it is missing, installs the
# independent SMSC used by the interop tests, installs systemd-analyze and promtool for the tests of
# deploy/, builds the pure layers with mypyc (installing gcc and the interpreter's headers when missing),
# checks lint and types, runs pytest on the compiled build (the default), then, for a whole run, the
# tests of the compiled layers again on their pure-Python source (MOGATEWAY_PURE=1): the fallback.
# Extra arguments go to pytest (e.g. scripts/test.sh tests/core -q).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/ensure-compiler.sh
MOGATEWAY_PURE=0 MOGATEWAY_COMPILE_REQUIRED=1 bash scripts/setup.sh test
[ -f scripts/ensure-services.sh ] && bash scripts/ensure-services.sh
bash scripts/ensure-browser.sh
bash scripts/ensure-ops-tools.sh
if [ -f tests/interop/package.json ] && [ ! -d tests/interop/node_modules ]; then
  (cd tests/interop && npm install --no-audit --no-fund --silent)
fi

echo "== ruff"
.venv/bin/ruff check src tests bench examples
echo "== mypy"
.venv/bin/mypy
echo "== pytest"
set +e
MOGATEWAY_PURE=0 .venv/bin/python -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here" >&2
  exit 1
fi
if [ "$rc" -eq 0 ] && [ "$#" -eq 0 ]; then
  echo "== pytest, pure Python: the compiled layers' tests on their source"
  set +e
  MOGATEWAY_PURE=1 .venv/bin/python -m pytest -q tests/core tests/smpp tests/journal tests/edges tests/test_compiled.py
  rc=$?
  set -e
  [ "$rc" -eq 5 ] && { echo "pytest collected no tests: that is a failure here" >&2; exit 1; }
fi
exit "$rc"
