#!/usr/bin/env bash
# Set up and run the whole test suite: installs mogateway with its test tools into ./.venv, starts
# PostgreSQL and NATS JetStream when they are not running (installing them from Debian packages when
# missing), installs Debian's Chromium for the console's browser tests when it is missing, installs the
# independent SMSC used by the interop tests, installs systemd-analyze and promtool for the tests of
# deploy/, checks lint and types, runs pytest.
# Extra arguments go to pytest (e.g. scripts/test.sh tests/core -q).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh test
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
.venv/bin/python -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here" >&2
  exit 1
fi
exit "$rc"
