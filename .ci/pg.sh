#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests (and for trying several workers on one study by hand):
#   .ci/pg.sh start   start it if it is not running; prints its URL (postgresql://...)
#   .ci/pg.sh url     prints the URL of the running server
#   .ci/pg.sh stop    stops it (the data stays in $AUTOTUNE_PG_DIR until `rm -rf`)
# Debian's package (apt-get install postgresql) provides the binaries. It listens on 127.0.0.1 only, on a
# free port, with trust authentication: a test fixture, not a server for anything else. As root the server
# runs as the `postgres` user (PostgreSQL refuses to run as root).
set -euo pipefail
DIR=${AUTOTUNE_PG_DIR:-/tmp/autotune-pg-$(id -u)}
BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
if [ -z "$BIN" ]; then
  echo "PostgreSQL is not installed: apt-get install -y postgresql" >&2
  exit 1
fi
as_owner() {  # run a PostgreSQL binary as the data directory's owner
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
url() { echo "postgresql://postgres@127.0.0.1:$(cat "$DIR/port")/postgres"; }
running() { [ -f "$DIR/data/postmaster.pid" ] && as_owner "$BIN/pg_ctl" -D "$DIR/data" status >/dev/null 2>&1; }
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
case "${1:-start}" in
  start)
    if running; then url; exit 0; fi
    mkdir -p "$DIR"
    [ "$(id -u)" = 0 ] && chown postgres "$DIR"
    if [ ! -f "$DIR/data/PG_VERSION" ]; then
      as_owner "$BIN/initdb" -D "$DIR/data" -U postgres --auth=trust -E UTF8 >"$DIR/initdb.log" 2>&1 \
        || { cat "$DIR/initdb.log" >&2; exit 1; }
    fi
    free_port >"$DIR/port"
    as_owner "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 60 \
      -o "-h 127.0.0.1 -p $(cat "$DIR/port") -k $DIR -c max_connections=200" start >/dev/null \
      || { cat "$DIR/server.log" >&2; exit 1; }
    url ;;
  url) running && url ;;
  stop) if running; then as_owner "$BIN/pg_ctl" -D "$DIR/data" -m fast -w stop >/dev/null; fi ;;
  *) echo "usage: $0 start|url|stop" >&2; exit 2 ;;
esac
