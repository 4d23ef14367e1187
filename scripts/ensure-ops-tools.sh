#!/usr/bin/env bash
# Make sure the tools the tests of deploy/ run are installed: systemd-analyze (package systemd) checks the
# unit file, promtool (Debian's prometheus package ships it) runs the alert rules' unit tests.
# Idempotent: a tool already on PATH is left alone; a missing one is installed from Debian packages (as
# root, or through sudo). Fails loudly; never skips.
set -euo pipefail

say() { echo "ensure-ops-tools: $*"; }
die() { echo "ensure-ops-tools: ERROR: $*" >&2; exit 1; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi; }

missing=()
command -v systemd-analyze >/dev/null || missing+=(systemd)
command -v promtool >/dev/null || missing+=(prometheus)
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing ${missing[*]}"
  as_root apt-get update -q || die "apt-get update failed"
  # --no-install-recommends: promtool is all the tests need of prometheus, not its exporters.
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q --no-install-recommends "${missing[@]}" ||
    die "could not install ${missing[*]}"
fi
command -v systemd-analyze >/dev/null || die "systemd-analyze is still missing"
command -v promtool >/dev/null || die "promtool is still missing"
say "$(promtool --version 2>&1 | head -n 1)"
