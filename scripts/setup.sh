#!/usr/bin/env bash
# Create ./.venv and install mogateway into it (editable), with the test tools when called with "test".
# Idempotent and quick when nothing changed: the install is redone only when pyproject.toml changes.
set -euo pipefail
cd "$(dirname "$0")/.."

extras=""
[ "${1:-}" = "test" ] && extras="[test]"
python=${PYTHON:-python3}

if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "mogateway needs Python 3.11 or newer (found: $("$python" --version 2>&1))" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi
stamp=".venv/.installed${extras}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q -e ".${extras}"
  touch "$stamp"
fi
