#!/usr/bin/env bash
# A newcomer's first minute, timed: a fresh clone of REPO (default: this checkout), `./scripts/serve.sh
# --port PORT` in it, and the seconds until /healthz first answers 200 (polled every 0.2 s, for at most
# 10 minutes); then the gateway is stopped (by its pid) and the clone left in place for its logs
# (serve.log; .venv/compile.log for the build started in the background). docs/benchmarks.md §0.16.
#
#     bench/first_answer.sh PORT [REPO] [VAR=value...]     e.g. bench/first_answer.sh 18931 . MOGATEWAY_PURE=1
set -u
port=${1:?usage: bench/first_answer.sh PORT [REPO] [VAR=value...]}
repo=$(cd "${2:-$(dirname "$0")/..}" && pwd)
shift $(($# < 2 ? $# : 2))
dir=$(mktemp -d)
git clone -q "$repo" "$dir/repo" && cd "$dir/repo" || exit 1
start=$(date +%s.%N)
env "$@" ./scripts/serve.sh --port "$port" >"$dir/serve.log" 2>&1 &
pid=$!
for _ in $(seq 1 3000); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/healthz")" = 200 ] && break
  kill -0 "$pid" 2>/dev/null || { echo "serve.sh ended before answering: $dir/serve.log" >&2; exit 1; }
  sleep 0.2
done
end=$(date +%s.%N)
installed=$(stat -c %Y .venv/.installed 2>/dev/null || echo "${start%.*}")
echo "first /healthz answer after $(echo "$end - $start" | bc) s; setup ended $((installed - ${start%.*})) s in ($dir)"
kill "$pid"
wait "$pid" 2>/dev/null
