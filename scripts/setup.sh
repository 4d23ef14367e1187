#!/usr/bin/env bash
# Create ./.venv and install mogateway into it (editable), with the test tools when called with "test",
# with uv when it can be had (seconds), else with pip.
# Idempotent and quick when nothing changed: the install is redone only when pyproject.toml changes.
# Then the compiled layers (scripts/compile.py): built now, or with MOGATEWAY_BUILD=background (what
# scripts/serve.sh sets) started detached at nice 19 while the gateway starts on pure Python.
set -euo pipefail
cd "$(dirname "$0")/.."

extras=""
[ "${1:-}" = "test" ] && extras="[test]"
python=${PYTHON:-python3}
if [ -z "${PYTHON:-}" ] && [ ! -x .venv/bin/python ] && [ -x /usr/bin/python3 ] &&
  /usr/bin/python3 -c 'import sys, ensurepip, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  # A new .venv takes the distribution's interpreter when it is recent enough: Debian's and Ubuntu's
  # are built with profile-guided and link-time optimisation, 8 to 24 % less CPU per MO than a default
  # pyenv build (docs/scaling.md, "The Python it runs on"). PYTHON=... chooses another.
  python=/usr/bin/python3
fi

if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "mogateway needs Python 3.11 or newer (found: $("$python" --version 2>&1))" >&2
  exit 1
fi
if [ -x .venv/bin/python ] && [ -n "${PYTHON:-}" ]; then
  # An explicit PYTHON for an existing .venv made with another interpreter: say so rather than
  # silently keep the old one (the interpreter's build changes the CPU per MO, docs/scaling.md).
  wanted=$("$python" -c 'import os, sys; print(os.path.realpath(sys.executable))')
  have=$(readlink -f .venv/bin/python)
  if [ "$wanted" != "$have" ]; then
    echo "setup: .venv runs $have, but PYTHON asks for $wanted; remove .venv first (rm -rf .venv)" >&2
    exit 1
  fi
fi
if [ ! -x .venv/bin/python ]; then
  if ! "$python" -m venv .venv; then
    rm -rf .venv
    echo "setup: $python could not make a virtual environment (on Debian or Ubuntu: apt-get install python3-venv)" >&2
    exit 1
  fi
  # No pip self-upgrade: the pip a venv comes with installs this project (editable, pyproject), and the
  # upgrade cost a first start several seconds (docs/benchmarks.md, "The first minute").
  echo "setup: .venv made with $(readlink -f .venv/bin/python) ($(.venv/bin/python --version 2>&1))"
fi
stamp=".venv/.installed${extras}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  # uv installs the project and its forty-odd wheels in about 2 s where pip took 20 to 57 s on two shared
  # cores (docs/benchmarks.md §0.17): a `uv` on PATH, else uv's own wheel into .venv by pip (about 1 s).
  # Without uv (no wheel for this platform, no index), pip installs it as before. MOGATEWAY_PIP=1 chooses
  # pip. uv reads neither pip.conf nor PIP_*: an index set in PIP_INDEX_URL/PIP_EXTRA_INDEX_URL is passed on.
  export PIP_DISABLE_PIP_VERSION_CHECK=1
  uv=""
  if [ "${MOGATEWAY_PIP:-0}" = "0" ]; then
    if [ -x .venv/bin/uv ]; then
      uv=.venv/bin/uv
    elif command -v uv >/dev/null 2>&1; then
      uv=$(command -v uv)
    elif .venv/bin/python -m pip install -q uv >/dev/null 2>&1 && [ -x .venv/bin/uv ]; then
      uv=.venv/bin/uv
    fi
  fi
  [ -n "${PIP_INDEX_URL:-}" ] && export UV_INDEX_URL=${UV_INDEX_URL:-$PIP_INDEX_URL}
  [ -n "${PIP_EXTRA_INDEX_URL:-}" ] && export UV_EXTRA_INDEX_URL=${UV_EXTRA_INDEX_URL:-$PIP_EXTRA_INDEX_URL}
  if [ -n "$uv" ] && "$uv" pip install -q --python .venv/bin/python -e ".${extras}"; then
    echo "setup: installed mogateway${extras} into .venv with $("$uv" --version 2>/dev/null || echo uv)"
  else
    [ -n "$uv" ] && echo "setup: uv could not install; installing with pip instead" >&2
    why="uv is not available"
    [ "${MOGATEWAY_PIP:-0}" != "0" ] && why="MOGATEWAY_PIP is set"
    echo "setup: installing mogateway${extras} into .venv with pip ($why; this takes a while)"
    .venv/bin/python -m pip install -q -e ".${extras}"
  fi
  touch "$stamp"
fi
# The pure layers compiled by mypyc from this source, about a tenth less CPU per MO (scripts/compile.py;
# mogateway.compiled runs them only while they match their source). MOGATEWAY_PURE=1 skips it; without
# a C compiler it says so and mogateway runs as pure Python. MOGATEWAY_COMPILE_REQUIRED=1 makes that fatal.
# MOGATEWAY_BUILD=background returns at once and builds detached (scripts/compile.py --background).
# Bytecode. With PYTHONDONTWRITEBYTECODE set (some CI runners and sandboxes set it; this machine's shell
# does), Python never writes the .pyc files it compiles, so every process of the gateway (a supervisor
# and a worker per core), every test's gateway and every CLI command would compile each module it
# imports again: 1.6 s of CPU instead of 0.7 s for a worker's imports here (docs/benchmarks.md §0.21).
# Python reads .pyc files whatever that variable says, so they are written once, here: the installed
# packages after each install, our own source (only what changed) at every setup.
if [ -n "${PYTHONDONTWRITEBYTECODE:-}" ]; then
  if [ ! -f .venv/.bytecode ] || [ "$stamp" -nt .venv/.bytecode ]; then
    site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    .venv/bin/python -m compileall -q -j 0 "$site" >/dev/null 2>&1 || true
    touch .venv/.bytecode
  fi
  .venv/bin/python -m compileall -q -j 0 src/mogateway >/dev/null 2>&1 || true
fi
if [ "${MOGATEWAY_PURE:-0}" = "0" ]; then
  if [ "${MOGATEWAY_BUILD:-now}" = "background" ]; then
    .venv/bin/python scripts/compile.py --background
  else
    .venv/bin/python scripts/compile.py --install-mypy ${MOGATEWAY_COMPILE_REQUIRED:+--require}
  fi
fi
