#!/usr/bin/env bash
# Set up and run the whole test suite: installs mogateway with its test tools into ./.venv, starts
# PostgreSQL and NATS JetStream when they are not running (installing them from Debian packages when
# missing), installs Debian's Chromium for the console's browser tests when it is missing, installs the
# independent SMSC used by the interop tests, installs systemd-analyze and promtool for the tests of
# deploy/, builds the pure layers with mypyc (installing gcc and the interpreter's headers when missing),
# runs pytest on the compiled build (the default; a whole run in one process per core) with lint and
# types checked beside the build and the suite, and, for a whole run, beside them too the tests of the
# compiled layers again on their pure-Python source (MOGATEWAY_PURE=1): the fallback.
# Extra arguments go to pytest (e.g. scripts/test.sh tests/core -q).
set -euo pipefail
cd "$(dirname "$0")/.."

# The install first (no build yet), and the services the tests talk to.
MOGATEWAY_PURE=1 bash scripts/setup.sh test
[ -f scripts/ensure-services.sh ] && bash scripts/ensure-services.sh

# Beside the build and the suite, in the background (they wait on processes and sockets much of the
# time, and the build runs on one core, so together they end sooner than one after the other;
# docs/benchmarks.md §0.17, §0.21): ruff and mypy, and for a whole run the compiled layers' tests again
# on their pure-Python source (MOGATEWAY_PURE=1: such a process never loads an extension module, not
# even one the build moves in meanwhile; tests/test_compiled.py, which needs the build, runs in the
# suite). Their output is printed after the suite's; any failure fails the run.
logs=$(mktemp -d)
lint_pid=""
pure_pid=""
# Interrupted (Ctrl-C), the run stops what it started in the background too (by its pid; each has ended
# already when the run ends by itself).
trap 'for pid in $lint_pid $pure_pid; do kill "$pid" 2>/dev/null || true; done; rm -rf "$logs"' EXIT
( .venv/bin/ruff check src tests bench examples && .venv/bin/ruff format --check src tests bench examples && .venv/bin/mypy ) >"$logs/lint" 2>&1 &
lint_pid=$!
# A whole run's tests run in one process per core (pytest-xdist, `--dist loadfile`: a test file's tests
# in one process, so a module's shared gateway starts once); most of the suite waits on gateways it
# started, so two processes on two cores end it in about half the time (docs/benchmarks.md §0.21).
# Between 2 and 4 by default; MOGATEWAY_TEST_JOBS=N chooses N, and 1 runs it in this process as
# before. xdist's processes must collect the same test ids (`pytest --collect-only -q` twice, compare).
cores=$(nproc 2>/dev/null || echo 2)
jobs=${MOGATEWAY_TEST_JOBS:-$((cores < 2 ? 2 : cores > 4 ? 4 : cores))}
parallel=()
if [ "$#" -eq 0 ] && [ "$jobs" != "1" ]; then
  parallel=(-n "$jobs" --dist loadfile)
fi
pure_tests=(tests/core tests/smpp tests/journal tests/edges)
if [ "$#" -eq 0 ]; then
  MOGATEWAY_PURE=1 .venv/bin/python -m pytest -q -p no:cacheprovider "${pure_tests[@]}" >"$logs/pure" 2>&1 &
  pure_pid=$!
fi
# Then the build (the suite runs on it), and what the suite's other tests need.
bash scripts/ensure-compiler.sh
MOGATEWAY_PURE=0 MOGATEWAY_COMPILE_REQUIRED=1 bash scripts/setup.sh test
bash scripts/ensure-browser.sh
bash scripts/ensure-ops-tools.sh
if [ -f tests/interop/package.json ] && [ ! -d tests/interop/node_modules ]; then
  (cd tests/interop && npm install --no-audit --no-fund --silent)
fi

echo "== pytest (ruff, mypy${pure_pid:+ and the pure-Python pass} beside it)"
set +e
MOGATEWAY_PURE=0 .venv/bin/python -m pytest "${parallel[@]}" "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here" >&2
  rc=1
fi
echo "== ruff and mypy"
lint_rc=0
wait "$lint_pid" || lint_rc=$?
cat "$logs/lint"
[ "$lint_rc" -ne 0 ] && [ "$rc" -eq 0 ] && rc=$lint_rc
if [ -n "$pure_pid" ]; then
  echo "== pytest, pure Python: the compiled layers' tests on their source"
  pure_rc=0
  wait "$pure_pid" || pure_rc=$?
  cat "$logs/pure"
  if [ "$pure_rc" -eq 5 ]; then
    echo "pytest collected no tests: that is a failure here" >&2
    pure_rc=1
  fi
  [ "$pure_rc" -ne 0 ] && [ "$rc" -eq 0 ] && rc=$pure_rc
fi
exit "$rc"
