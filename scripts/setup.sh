#!/usr/bin/env bash
# Create ./.venv and install mogateway into it (editable), with the test tools when called with "test".
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
  PIP_DISABLE_PIP_VERSION_CHECK=1 .venv/bin/python -m pip install -q -e ".${extras}"
  touch "$stamp"
fi
# The pure layers compiled by mypyc from this source, about a tenth less CPU per MO (scripts/compile.py;
# mogateway.compiled runs them only while they match their source). MOGATEWAY_PURE=1 skips it; without
# a C compiler it says so and mogateway runs as pure Python. MOGATEWAY_COMPILE_REQUIRED=1 makes that fatal.
# MOGATEWAY_BUILD=background returns at once and builds detached (scripts/compile.py --background).
if [ "${MOGATEWAY_PURE:-0}" = "0" ]; then
  if [ "${MOGATEWAY_BUILD:-now}" = "background" ]; then
    .venv/bin/python scripts/compile.py --background
  else
    .venv/bin/python scripts/compile.py --install-mypy ${MOGATEWAY_COMPILE_REQUIRED:+--require}
  fi
fi
