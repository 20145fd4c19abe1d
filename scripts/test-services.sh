#!/usr/bin/env bash
# Make sure the services the test suite needs are there (used by `make test` and CI).
#
#   scripts/test-services.sh [start]   ensure PostgreSQL, Redis and Dovecot (default)
#   scripts/test-services.sh stop      stop the private servers this script started
#
# PostgreSQL must answer at $MAILROOM_TEST_DATABASE_URL
#   (default postgresql+psycopg://postgres@127.0.0.1:5432/test)
# Redis must answer at $MAILROOM_TEST_REDIS_URL (default redis://127.0.0.1:6379/0).
#
# When one does not answer and its URL points at this machine (127.0.0.1/localhost), the
# script starts a private one from Debian's packages, installing them first when they are
# missing and it runs as root:
#   - PostgreSQL: the Debian cluster on that port if there is one and it then answers,
#     otherwise a private trust-auth cluster (initdb/pg_ctl, as the postgres user when
#     root) in .test-services/postgres-PORT/; the database in the URL is created if missing.
#   - Redis: redis-server --daemonize on that port, no persistence, in .test-services/.
# Dovecot (/usr/sbin/dovecot, package dovecot-imapd) is installed when missing and root;
# the tests start their own private Dovecot (tests/support/dovecot.py).
# swaks (package swaks, with Net::SSLeay for TLS), the stock SMTP client the submission port
# tests drive, likewise.
# Chromium (Debian's chromium) for the browser tests, which Playwright drives; never a
# browser build of Playwright's own (`playwright install`).
# Node.js and npm (Debian's nodejs and npm when missing and root) and the npm JMAP client
# the tests drive, installed from tests/js/package-lock.json into tests/js/node_modules.
# Packages are installed with service start-up blocked (policy-rc.d), so no system
# daemons appear on the standard ports.
#
# Silent when everything already answers; otherwise one line per action.  When a service
# still cannot be had: with CI=true it exits 1 with one sentence, otherwise it warns.
# Idempotent: running it again finds everything up and does nothing.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE_DIR="${MAILROOM_TEST_SERVICES_DIR:-$ROOT/.test-services}"
DB_URL="${MAILROOM_TEST_DATABASE_URL:-postgresql+psycopg://postgres@127.0.0.1:5432/test}"
REDIS_URL="${MAILROOM_TEST_REDIS_URL:-redis://127.0.0.1:6379/0}"
CI="${CI:-}"
IS_ROOT=0
[[ "$(id -u)" == 0 ]] && IS_ROOT=1
APT_UPDATED=0
FAILED=()

say() { printf 'test-services: %s\n' "$*"; }

# ---------------------------------------------------------------- URL parsing

# Prints, one per line (empty when absent): scheme host port user password path
# plain-password.  user and password stay percent-encoded, ready to go back into a URL.
parse_url() {
    python3 - "$1" <<'PY'
import sys
from urllib.parse import unquote, urlsplit

u = urlsplit(sys.argv[1])
default_port = {"redis": 6379, "rediss": 6380}.get(u.scheme.split("+")[0], 5432)
for value in (
    u.scheme,
    u.hostname or "127.0.0.1",
    str(u.port or default_port),
    u.username or "",
    u.password or "",
    unquote(u.path.lstrip("/")),
    unquote(u.password or ""),
):
    print(value)
PY
}

redact() { sed -E 's#(://[^:/@]*):[^@]*@#\1:***@#' <<<"$1"; }

is_local() { [[ "$1" == "127.0.0.1" || "$1" == "localhost" || "$1" == "::1" ]]; }

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

wait_for() { # wait_for SECONDS CMD...
    local deadline=$((SECONDS + $1))
    shift
    until "$@"; do
        ((SECONDS >= deadline)) && return 1
        sleep 0.2
    done
}

# ---------------------------------------------------------------------- apt

apt_install() {
    if ((IS_ROOT == 0)) || ! command -v apt-get >/dev/null; then
        return 1
    fi
    mkdir -p "$STATE_DIR"
    local log="$STATE_DIR/apt.log" rc created_policy=0
    if ((APT_UPDATED == 0)); then
        apt-get update -q >>"$log" 2>&1
        APT_UPDATED=1
    fi
    # Keep the packages' own daemons (postgresql@main, redis-server, dovecot) from starting.
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        created_policy=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" \
        >>"$log" 2>&1
    rc=$?
    ((created_policy)) && rm -f /usr/sbin/policy-rc.d
    if ((rc == 0)); then
        say "installed $* (apt-get)"
    else
        say "apt-get install $* failed (see $log)"
    fi
    return $rc
}

# --------------------------------------------------------------- PostgreSQL

PG_HOST='' PG_PORT='' PG_USER='' PG_PASSWORD='' PG_DB=''

pg_libpq_url() { # the URL without SQLAlchemy's "+driver"
    local db="${1:-$PG_DB}" auth="$PG_USER"
    [[ -n "$PG_PASSWORD" ]] && auth="$PG_USER:$PG_PASSWORD"
    printf 'postgresql://%s@%s:%s/%s' "$auth" "$PG_HOST" "$PG_PORT" "$db"
}

pg_bin_dir() {
    local dir="" candidate
    for candidate in /usr/lib/postgresql/*/bin; do # newest major version wins
        [[ -x "$candidate/initdb" ]] || continue
        if [[ -z "$dir" ]] || [[ "$(printf '%s\n%s\n' "$dir" "$candidate" | sort -V |
            tail -n 1)" == "$candidate" ]]; then
            dir="$candidate"
        fi
    done
    if [[ -n "$dir" && -x "$dir/initdb" ]]; then
        printf '%s' "$dir"
    elif command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then
        dirname "$(command -v pg_ctl)"
    else
        return 1
    fi
}

psql_cmd() { # psql_cmd URL SQL; 127 when there is no psql (psql itself exits 0-3)
    local psql
    psql="$(command -v psql || true)"
    [[ -z "$psql" ]] && psql="$(pg_bin_dir 2>/dev/null)/psql"
    [[ -x "$psql" ]] || return 127
    PGCONNECT_TIMEOUT=3 "$psql" "$1" -X -Atq -v ON_ERROR_STOP=1 -c "$2" >/dev/null 2>&1
}

pg_answers() { # the database in the URL accepts a query
    psql_cmd "$(pg_libpq_url)" 'select 1'
    local rc=$?
    if ((rc == 127)); then # no psql here: settle for an open port
        port_open "$PG_HOST" "$PG_PORT"
        return
    fi
    return $rc
}

pg_server_answers() { psql_cmd "$(pg_libpq_url postgres)" 'select 1'; }

pg_create_database() {
    local quoted="${PG_DB//\"/\"\"}"
    psql_cmd "$(pg_libpq_url postgres)" "create database \"$quoted\"" &&
        say "created database $PG_DB on $PG_HOST:$PG_PORT"
}

pg_try_debian_cluster() { # start an existing, stopped Debian cluster on our port
    command -v pg_lsclusters >/dev/null || return 1
    local line version name port status
    while read -r version name port status _; do
        [[ "$port" == "$PG_PORT" && "$status" == down* ]] || continue
        line="$version/$name"
        if pg_ctlcluster --skip-systemctl-redirect "$version" "$name" start >/dev/null 2>&1; then
            if wait_for 10 pg_server_answers; then
                say "started the Debian PostgreSQL cluster $line on port $PG_PORT"
                return 0
            fi
            # It runs but does not let us in (auth): make room for a private cluster.
            pg_ctlcluster --skip-systemctl-redirect "$version" "$name" stop >/dev/null 2>&1
        fi
    done < <(pg_lsclusters --no-header 2>/dev/null)
    return 1
}

pg_base_dir() { # a directory the postgres user can use
    local base="$STATE_DIR/postgres-$PG_PORT"
    mkdir -p "$base" || return 1
    if ((IS_ROOT)); then
        chown postgres:postgres "$base"
        if ! runuser -u postgres -- test -w "$base" 2>/dev/null; then
            # The checkout is not reachable by postgres (e.g. under /root): use /tmp.
            rmdir "$base" 2>/dev/null
            base="/tmp/mailroom-test-services/postgres-$PG_PORT"
            mkdir -p "$base" && chmod 755 /tmp/mailroom-test-services &&
                chown postgres:postgres "$base" || return 1
        fi
    fi
    printf '%s' "$base"
}

as_pg() { # run as the postgres user when root
    if ((IS_ROOT)); then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

pg_start_private() {
    local bin base data
    if ! bin="$(pg_bin_dir)"; then
        apt_install postgresql || return 1
        bin="$(pg_bin_dir)" || return 1
    fi
    if ((IS_ROOT)) && ! id postgres >/dev/null 2>&1; then
        say "no postgres user to run a private PostgreSQL as"
        return 1
    fi
    base="$(pg_base_dir)" || return 1
    data="$base/data"
    if [[ ! -f "$data/PG_VERSION" ]]; then
        rm -rf "$data"
        as_pg "$bin/initdb" -D "$data" -U "${PG_USER:-postgres}" --auth=trust \
            -E UTF8 --locale=C.UTF-8 >"$base/initdb.log" 2>&1 ||
            as_pg "$bin/initdb" -D "$data" -U "${PG_USER:-postgres}" --auth=trust \
                -E UTF8 --locale=C >"$base/initdb.log" 2>&1 || {
            say "initdb failed (see $base/initdb.log)"
            return 1
        }
    fi
    as_pg "$bin/pg_ctl" -D "$data" -l "$base/postgres.log" -w -t 30 start \
        -o "-c listen_addresses=$PG_HOST -p $PG_PORT -k $base -c fsync=off" >/dev/null 2>&1 || {
        say "pg_ctl start failed (see $base/postgres.log)"
        return 1
    }
    say "started a private PostgreSQL ($(basename "$(dirname "$bin")")) on $PG_HOST:$PG_PORT," \
        "data in ${data#"$ROOT"/}"
}

ensure_postgres() {
    local parsed
    parsed="$(parse_url "$DB_URL")" || {
        FAILED+=("MAILROOM_TEST_DATABASE_URL is not a URL: $(redact "$DB_URL").")
        return
    }
    { read -r _; read -r PG_HOST; read -r PG_PORT; read -r PG_USER
      read -r PG_PASSWORD; read -r PG_DB; read -r _; } <<<"$parsed"
    [[ -z "$PG_USER" ]] && PG_USER=postgres
    [[ -z "$PG_DB" ]] && PG_DB=postgres
    pg_answers && return
    if ! pg_server_answers && is_local "$PG_HOST"; then
        if ! port_open "$PG_HOST" "$PG_PORT"; then
            pg_try_debian_cluster || pg_start_private
        fi
    fi
    if ! pg_answers && pg_server_answers; then
        pg_create_database
    fi
    if ! wait_for 5 pg_answers; then
        FAILED+=("PostgreSQL does not answer at $(redact "$DB_URL") and could not be started.")
    fi
}

pg_tool_major() { # the major version of pg_dump or pg_restore on PATH, or nothing
    command -v "$1" >/dev/null && "$1" --version 2>/dev/null | grep -oE '[0-9]+' | head -1
}

ensure_pg_client() { # `mailroom backup` needs pg_dump/pg_restore at least as new as the server
    pg_answers || return
    local psql server dump restore
    psql="$(command -v psql || true)"
    [[ -z "$psql" ]] && psql="$(pg_bin_dir 2>/dev/null)/psql"
    server="$(PGCONNECT_TIMEOUT=3 "$psql" "$(pg_libpq_url)" -X -Atq -c 'show server_version_num' 2>/dev/null)"
    server=$((${server:-0} / 10000))
    dump="$(pg_tool_major pg_dump)" restore="$(pg_tool_major pg_restore)"
    if ((server > 0)) && ((${dump:-0} >= server && ${restore:-0} >= server)); then
        return
    fi
    apt_install "postgresql-client-$server" || apt_install postgresql-client
    dump="$(pg_tool_major pg_dump)" restore="$(pg_tool_major pg_restore)"
    if ! ((${dump:-0} >= server && ${restore:-0} >= server)); then
        FAILED+=("pg_dump/pg_restore $server or newer (package postgresql-client-$server) is not installed and could not be installed.")
    fi
}

# -------------------------------------------------------------------- Redis

R_HOST='' R_PORT='' R_PASSWORD=''

redis_answers() {
    if command -v redis-cli >/dev/null; then
        local args=(-h "$R_HOST" -p "$R_PORT")
        [[ -n "$R_PASSWORD" ]] && args+=(--no-auth-warning -a "$R_PASSWORD")
        [[ "$(timeout 5 redis-cli "${args[@]}" ping 2>/dev/null)" == PONG ]]
        return
    fi
    local reply
    reply="$(
        exec 3<>"/dev/tcp/$R_HOST/$R_PORT" || exit 1
        if [[ -n "$R_PASSWORD" ]]; then
            printf 'AUTH %s\r\n' "$R_PASSWORD" >&3
            read -r -t 3 _ <&3
        fi
        printf 'PING\r\n' >&3
        read -r -t 3 line <&3 && printf '%s' "$line"
    )" 2>/dev/null
    [[ "$reply" == +PONG* ]]
}

redis_start_private() {
    if ! command -v redis-server >/dev/null; then
        apt_install redis-server || return 1
    fi
    local dir="$STATE_DIR/redis-$R_PORT"
    mkdir -p "$dir" || return 1
    local args=(--daemonize yes --bind "$R_HOST" --port "$R_PORT" --save "" --appendonly no
        --dir "$dir" --logfile "$dir/redis.log" --pidfile "$dir/redis.pid")
    [[ -n "$R_PASSWORD" ]] && args+=(--requirepass "$R_PASSWORD")
    redis-server "${args[@]}" >/dev/null 2>&1 || {
        say "redis-server failed to start (see $dir/redis.log)"
        return 1
    }
    wait_for 10 redis_answers &&
        say "started a private Redis on $R_HOST:$R_PORT (${dir#"$ROOT"/})"
}

ensure_redis() {
    local parsed
    parsed="$(parse_url "$REDIS_URL")" || {
        FAILED+=("MAILROOM_TEST_REDIS_URL is not a URL: $(redact "$REDIS_URL").")
        return
    }
    { read -r _; read -r R_HOST; read -r R_PORT; read -r _; read -r _; read -r _
      read -r R_PASSWORD; } <<<"$parsed"
    redis_answers && return
    if is_local "$R_HOST" && ! port_open "$R_HOST" "$R_PORT"; then
        redis_start_private
    fi
    if ! redis_answers; then
        FAILED+=("Redis does not answer at $(redact "$REDIS_URL") and could not be started.")
    fi
}

# ------------------------------------------------------------------ Dovecot

dovecot_binary() {
    command -v dovecot 2>/dev/null || { [[ -x /usr/sbin/dovecot ]] && echo /usr/sbin/dovecot; }
}

ensure_dovecot() {
    dovecot_binary >/dev/null && return
    apt_install dovecot-imapd
    if ! dovecot_binary >/dev/null; then
        FAILED+=("Dovecot (package dovecot-imapd) is not installed and could not be installed.")
    fi
}

# swaks speaks TLS only with Net::SSLeay, which it merely recommends (and apt_install
# installs no recommendations): the submission port tests need both.
swaks_with_tls() {
    command -v swaks >/dev/null && perl -MNet::SSLeay -MIO::Socket::SSL -e 1 2>/dev/null
}

ensure_swaks() {
    swaks_with_tls && return
    apt_install swaks libnet-ssleay-perl libio-socket-ssl-perl
    if ! swaks_with_tls; then
        FAILED+=("swaks with TLS (packages swaks, libnet-ssleay-perl, libio-socket-ssl-perl) is not installed and could not be installed.")
    fi
}

# --------------------------------------------------------------------- stop

stop_private() {
    local dir bin pid
    for dir in "$STATE_DIR"/postgres-* /tmp/mailroom-test-services/postgres-*; do
        [[ -f "$dir/data/postmaster.pid" ]] || continue
        bin="$(pg_bin_dir)" || continue
        as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 &&
            say "stopped the private PostgreSQL in $dir"
    done
    for dir in "$STATE_DIR"/redis-*; do
        [[ -f "$dir/redis.pid" ]] || continue
        pid="$(cat "$dir/redis.pid")"
        if [[ -n "$pid" ]] && kill "$pid" 2>/dev/null; then
            wait_for 10 bash -c "! kill -0 $pid 2>/dev/null"
            say "stopped the private Redis in $dir"
        fi
        rm -f "$dir/redis.pid"
    done
}

ensure_chromium() {
    [[ -x /usr/bin/chromium ]] && return
    apt_install chromium
    if [[ ! -x /usr/bin/chromium ]]; then
        FAILED+=("Chromium (package chromium) is not installed and could not be installed.")
    fi
}

ensure_js_clients() {
    local dir="$ROOT/tests/js"
    if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        apt_install nodejs npm
    fi
    if ! command -v npm >/dev/null; then
        FAILED+=("Node.js and npm (packages nodejs and npm) are not installed and could not be.")
        return
    fi
    [[ -f "$dir/node_modules/.package-lock.json" && "$dir/node_modules/.package-lock.json" -nt "$dir/package-lock.json" ]] && return
    if npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error >/dev/null; then
        say "installed the npm JMAP client of tests/js"
    else
        FAILED+=("npm could not install tests/js (npm ci in tests/js says why).")
    fi
}

# --------------------------------------------------------------------- main

case "${1:-start}" in
start) ;;
stop)
    stop_private
    exit 0
    ;;
*)
    echo "usage: $0 [start|stop]" >&2
    exit 2
    ;;
esac

ensure_postgres
ensure_pg_client
ensure_redis
ensure_dovecot
ensure_swaks
ensure_chromium
ensure_js_clients

if ((${#FAILED[@]})); then
    if [[ "$CI" == true ]]; then
        printf '%s\n' "${FAILED[0]}" >&2
        exit 1
    fi
    for line in "${FAILED[@]}"; do
        say "warning: $line Tests that need it will be skipped or fail."
    done
fi
exit 0
