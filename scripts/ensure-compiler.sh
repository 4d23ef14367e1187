#!/usr/bin/env bash
# Make sure scripts/compile.py can build the pure layers for the tests: a C compiler and the headers of
# the interpreter the suite runs on (Debian packages gcc and python3-dev). Idempotent: what is there is
# left alone; what is missing is installed (as root, or through sudo). Fails loudly; never skips.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "ensure-compiler: $*"; }
die() { echo "ensure-compiler: ERROR: $*" >&2; exit 1; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi; }

python=${PYTHON:-python3}
[ -x .venv/bin/python ] && python=.venv/bin/python
include=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
missing=()
command -v gcc >/dev/null || missing+=(gcc)
[ -f "$include/Python.h" ] || missing+=(python3-dev)
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing ${missing[*]}"
  as_root apt-get update -q || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q --no-install-recommends "${missing[@]}" ||
    die "could not install ${missing[*]}"
fi
command -v gcc >/dev/null || die "gcc is still missing"
[ -f "$include/Python.h" ] || die "$include/Python.h is still missing (the interpreter's headers)"
say "$(gcc --version | head -n 1)"
