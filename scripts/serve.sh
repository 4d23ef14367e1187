#!/usr/bin/env bash
# Set up (first time only) and run the gateway on its embedded default:
# SQLite journal ./mogateway.db, in-process queue, API on http://127.0.0.1:8080.
# Extra arguments go to `mogateway serve` (e.g. --port 9000 --config gateway.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/mogateway serve "$@"
