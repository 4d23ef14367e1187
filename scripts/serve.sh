#!/usr/bin/env bash
# Set up (first time only) and run the gateway on its embedded default:
# SQLite journal ./mogateway.db, in-process queue, API on http://127.0.0.1:8080.
# Extra arguments go to `mogateway serve` (e.g. --port 9000 --config gateway.toml).
# A first start does not wait for the mypyc build of the pure layers (about 100 s on two cores): it starts
# on pure Python while the build runs in the background at nice 19, and the next start runs the build;
# `serve`'s start-up line says which runs (docs/scaling.md, "The compiled layers").
set -euo pipefail
cd "$(dirname "$0")/.."
MOGATEWAY_BUILD=background bash scripts/setup.sh
exec .venv/bin/mogateway serve "$@"
