# shellcheck shell=bash
# Sourced by .ci/run: a throwaway PostgreSQL cluster on loopback for the PostgreSQL store tests.
#
# Installs the Debian `postgresql` package when no server binaries are found, initialises a cluster
# in a temporary folder owned by the `postgres` user (initdb refuses to run as root), starts it on
# 127.0.0.1 with its socket in that folder, exports MEMOREE_TEST_PG_URL and stops the cluster and
# removes the folder when the calling shell exits. Any failure leaves MEMOREE_TEST_PG_URL unset, so
# the PostgreSQL tests skip with their reason instead of failing the run.

memoree_pg_bindir() {
    local found
    found="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
    [ -n "$found" ] && [ -x "$found/initdb" ] && echo "$found"
}

memoree_pg_install() {
    memoree_pg_bindir >/dev/null && return 0
    command -v apt-get >/dev/null || return 1
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    else
        sudo -n apt-get update -qq && sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    fi
}

memoree_pg_as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

memoree_pg_free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

memoree_pg_stop() {
    if [ -n "${MEMOREE_PG_DIR:-}" ] && [ -d "$MEMOREE_PG_DIR" ]; then
        memoree_pg_as_owner "$MEMOREE_PG_BIN/pg_ctl" -D "$MEMOREE_PG_DIR/data" -m immediate stop >/dev/null 2>&1 || true
        rm -rf "$MEMOREE_PG_DIR"
    fi
}

memoree_pg_start() {
    [ -n "${MEMOREE_TEST_PG_URL:-}" ] && return 0
    memoree_pg_install || { echo "postgres: not installable here; PostgreSQL tests will skip" >&2; return 0; }
    MEMOREE_PG_BIN="$(memoree_pg_bindir)"
    MEMOREE_PG_DIR="$(mktemp -d /tmp/memoree-pg.XXXXXX)"
    local port
    port="$(memoree_pg_free_port)"
    if [ "$(id -u)" = 0 ]; then
        chown postgres: "$MEMOREE_PG_DIR"
    fi
    chmod 0700 "$MEMOREE_PG_DIR"
    trap memoree_pg_stop EXIT
    trap 'exit 130' INT  # a signal becomes an exit, so the EXIT trap stops the cluster
    trap 'exit 143' TERM
    if ! memoree_pg_as_owner "$MEMOREE_PG_BIN/initdb" -D "$MEMOREE_PG_DIR/data" -U postgres \
            --auth=trust --encoding=UTF8 --no-sync >"$MEMOREE_PG_DIR/initdb.log" 2>&1; then
        echo "postgres: initdb failed (see below); PostgreSQL tests will skip" >&2
        cat "$MEMOREE_PG_DIR/initdb.log" >&2
        return 0
    fi
    if ! memoree_pg_as_owner "$MEMOREE_PG_BIN/pg_ctl" -D "$MEMOREE_PG_DIR/data" -w -t 60 \
            -l "$MEMOREE_PG_DIR/server.log" \
            -o "-k $MEMOREE_PG_DIR -p $port -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" \
            start >/dev/null; then
        echo "postgres: the server did not start; PostgreSQL tests will skip" >&2
        cat "$MEMOREE_PG_DIR/server.log" >&2 || true
        return 0
    fi
    export MEMOREE_TEST_PG_URL="postgresql://postgres@127.0.0.1:$port/postgres"
    echo "postgres: throwaway cluster at $MEMOREE_TEST_PG_URL" >&2
}
