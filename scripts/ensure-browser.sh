#!/usr/bin/env bash
# Make sure Debian's Chromium is at /usr/bin/chromium for the console's browser tests (Playwright drives
# it; Playwright's own browser download is not used). Idempotent: an installed Chromium is left alone;
# a missing one is installed from Debian packages (as root, or through sudo). Fails loudly; never skips.
set -euo pipefail

CHROMIUM=/usr/bin/chromium
say() { echo "ensure-browser: $*"; }
die() { echo "ensure-browser: ERROR: $*" >&2; exit 1; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi; }

if [ ! -x "$CHROMIUM" ]; then
  say "installing chromium"
  as_root apt-get update -q || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q chromium fonts-dejavu-core ||
    die "could not install chromium"
fi
[ -x "$CHROMIUM" ] || die "$CHROMIUM is still missing"
"$CHROMIUM" --version 2>/dev/null | head -n 1 | sed 's/^/ensure-browser: /' || die "$CHROMIUM does not start"
