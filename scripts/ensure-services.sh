#!/usr/bin/env bash
# Make sure PostgreSQL (127.0.0.1:5432) and NATS with JetStream (127.0.0.1:4222) are running, for the
# journal and cluster tests. Idempotent: a service already listening is left alone. A missing server is
# installed from Debian packages (postgresql, nats-server); a freshly installed PostgreSQL is given trust
# authentication on 127.0.0.1 only (a test machine: never run this on a production database host).
# Fails loudly when a service cannot be started; it never skips.
set -euo pipefail

PG_PORT=5432
NATS_PORT="${NATS_PORT:-4222}"
NATS_STORE="${NATS_STORE:-/var/lib/nats-server}"
NATS_LOG="${NATS_LOG:-/var/log/nats-server.log}"
NATS_PIDFILE="${NATS_PIDFILE:-/run/nats-server-$NATS_PORT.pid}"
WAIT_S=30

say() { echo "ensure-services: $*"; }
die() { echo "ensure-services: ERROR: $*" >&2; exit 1; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi; }
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for() { # name port
  local i
  for ((i = 0; i < WAIT_S * 10; i++)); do
    listening "$2" && return 0
    sleep 0.1
  done
  die "$1 is not accepting connections on 127.0.0.1:$2 after ${WAIT_S}s"
}

APT_UPDATED=0
install_packages() {
  [ "$APT_UPDATED" = 1 ] || { as_root apt-get update -q || die "apt-get update failed"; APT_UPDATED=1; }
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q "$@" || die "could not install $*"
}

# ------------------------------------------------------------------------------------------ PostgreSQL
if listening "$PG_PORT"; then
  say "PostgreSQL already running on 127.0.0.1:$PG_PORT"
else
  fresh=0
  if ! command -v pg_ctlcluster >/dev/null || [ -z "$(ls /etc/postgresql 2>/dev/null)" ]; then
    say "installing PostgreSQL"
    install_packages postgresql
    fresh=1
  fi
  version="$(ls /etc/postgresql | sort -V | tail -n 1)"
  [ -n "$version" ] || die "no PostgreSQL cluster under /etc/postgresql"
  if [ "$fresh" = 1 ]; then
    hba="/etc/postgresql/$version/main/pg_hba.conf"
    if ! grep -q "mogateway-tests" "$hba"; then
      as_root sed -i "1i host all all 127.0.0.1/32 trust # mogateway-tests" "$hba"
    fi
  fi
  say "starting PostgreSQL $version"
  as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start ||
    die "pg_ctlcluster could not start PostgreSQL $version (see /var/log/postgresql/)"
  wait_for PostgreSQL "$PG_PORT"
fi
if command -v pg_isready >/dev/null; then
  for ((i = 0; i < WAIT_S * 10; i++)); do
    pg_isready -q -h 127.0.0.1 -p "$PG_PORT" && break
    sleep 0.1
  done
  pg_isready -q -h 127.0.0.1 -p "$PG_PORT" || die "PostgreSQL on 127.0.0.1:$PG_PORT is not ready"
fi

# ------------------------------------------------------------------------------------------ NATS JetStream
if listening "$NATS_PORT"; then
  say "NATS already running on 127.0.0.1:$NATS_PORT"
else
  if [ ! -x /usr/sbin/nats-server ] && ! command -v nats-server >/dev/null; then
    say "installing nats-server"
    install_packages nats-server
  fi
  server="$(command -v nats-server || echo /usr/sbin/nats-server)"
  as_root mkdir -p "$NATS_STORE"
  say "starting NATS with JetStream ($server)"
  # A pid file, not the executable, identifies our server: another nats-server on another port is not it.
  as_root start-stop-daemon --start --oknodo --background --make-pidfile --pidfile "$NATS_PIDFILE" \
    --exec "$server" -- \
    -a 127.0.0.1 -p "$NATS_PORT" -js -sd "$NATS_STORE" -l "$NATS_LOG" ||
    die "could not start nats-server (see $NATS_LOG)"
  wait_for NATS "$NATS_PORT"
fi

# JetStream must be enabled, not just the port open (a nats-server started without -js).
py="$(dirname "$0")/../.venv/bin/python"
if [ -x "$py" ]; then
  "$py" - "$NATS_PORT" <<'EOF' || die "NATS on 127.0.0.1:$NATS_PORT answers but JetStream is not enabled (start it with -js)"
import asyncio, sys
import nats

async def main() -> None:
    nc = await nats.connect(f"nats://127.0.0.1:{sys.argv[1]}", connect_timeout=5, max_reconnect_attempts=1)
    try:
        await nc.jetstream().account_info()
    finally:
        await nc.close()

asyncio.run(main())
EOF
fi
say "PostgreSQL and NATS JetStream are ready"
