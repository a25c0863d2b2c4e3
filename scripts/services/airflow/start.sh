#!/usr/bin/env bash
# Starts a real Airflow 3 deployment on loopback for the integration tests:
#   PostgreSQL (own cluster in $AIRFLOW_PG_DATA, 127.0.0.1:$AIRFLOW_PG_PORT, database `airflow`,
#   recreated empty at every start), `airflow db migrate`, then api-server (127.0.0.1:
#   $AIRFLOW_API_PORT), scheduler (LocalExecutor), dag-processor and triggerer, each in its own
#   process group with its PID in $CI_RUN_DIR/$AIRFLOW_DEPLOYMENT-<name>.pid. The scheduler and the triggerer
#   run with --skip-serve-logs (their log servers would listen on every interface; all processes
#   share one log folder anyway).
# Settings: env.sh (every one overridable from the environment); the resulting client settings are
# written to $AIRFLOW_HOME/airflow.env (KEY=VALUE lines). Extra variables of the caller's
# environment (AIRFLOW_CONN_*, ...) reach every Airflow process.
# Idempotent: a deployment whose processes are all alive and whose API answers is reused.
# Why PostgreSQL, not SQLite: four processes write to the database at once (the triggerer's on_kill
# races a new task try in the scenarios we test); SQLite serializes them and locks.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/../common.sh"
. "$HERE/env.sh"
REPO="$(cd "$HERE/../../.." && pwd)"
VENV_BIN="${VENV_BIN:-$REPO/.venv/bin}"
AIRFLOW="$VENV_BIN/airflow"
PYTHON="$VENV_BIN/python"
PG_BIN="${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}"
PROCS=(api-server scheduler dag-processor triggerer)
LOGDIR="$AIRFLOW_HOME/service-logs"

up() { "$PYTHON" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1] + '/api/v2/monitor/health', timeout=3)" "$AIRFLOW_URL"; }
all_alive() {
  local p
  for p in postgres "${PROCS[@]}"; do
    [ -s "$CI_RUN_DIR/$AIRFLOW_DEPLOYMENT-$p.pid" ] && alive "$(cat "$CI_RUN_DIR/$AIRFLOW_DEPLOYMENT-$p.pid")" || return 1
  done
}

if all_alive && up 2>/dev/null; then echo "airflow already up on $AIRFLOW_URL"; exit 0; fi
[ -x "$AIRFLOW" ] || { echo "no airflow at $AIRFLOW: run 'make venv' first" >&2; exit 1; }
[ -x "$PG_BIN/postgres" ] || { echo "no PostgreSQL server: run scripts/services/airflow/install.sh" >&2; exit 1; }
# a half-running deployment (some process died): stop what is left, start afresh
bash "$HERE/stop.sh" >/dev/null 2>&1 || true
mkdir -p "$AIRFLOW_HOME" "$AIRFLOW__CORE__DAGS_FOLDER" "$AIRFLOW__CORE__PLUGINS_FOLDER" "$TORCHX_LOCAL_ROOT" "$TORCHX_AF_WORK" "$LOGDIR"

# -- PostgreSQL ------------------------------------------------------------------------------
as_pg=()
if [ "$(id -u)" = 0 ]; then as_pg=(setpriv --reuid=postgres --regid=postgres --init-groups --); fi
if [ ! -s "$AIRFLOW_PG_DATA/PG_VERSION" ]; then
  mkdir -p "$AIRFLOW_PG_DATA"
  [ "$(id -u)" = 0 ] && chown postgres:postgres "$AIRFLOW_PG_DATA"
  "${as_pg[@]}" "$PG_BIN/initdb" -D "$AIRFLOW_PG_DATA" -U postgres --auth=trust -E UTF8 >"$LOGDIR/initdb.log" 2>&1 \
    || { cat "$LOGDIR/initdb.log" >&2; exit 1; }
fi
rm -f "$AIRFLOW_PG_DATA/postmaster.pid"  # stale after a hard stop (stop.sh stopped any live one)
[ "$(id -u)" = 0 ] && touch "$LOGDIR/postgres.log" && chown postgres "$LOGDIR/postgres.log"
setsid "${as_pg[@]}" "$PG_BIN/postgres" -D "$AIRFLOW_PG_DATA" -h 127.0.0.1 -p "$AIRFLOW_PG_PORT" \
  -k "$AIRFLOW_PG_DATA" -c fsync=off -c full_page_writes=off -c max_connections=200 \
  >"$LOGDIR/postgres.log" 2>&1 < /dev/null &
echo $! > "$CI_RUN_DIR/$AIRFLOW_DEPLOYMENT-postgres.pid"
psql() { "$PG_BIN/psql" -h 127.0.0.1 -p "$AIRFLOW_PG_PORT" -U postgres -v ON_ERROR_STOP=1 -qAt "$@"; }
pg_up() { psql -c 'select 1' postgres; }
if ! wait_for "PostgreSQL on 127.0.0.1:$AIRFLOW_PG_PORT" 60 pg_up; then tail -20 "$LOGDIR/postgres.log" >&2; exit 1; fi
psql -c 'DROP DATABASE IF EXISTS airflow' postgres
psql -c 'CREATE DATABASE airflow' postgres

# -- Airflow -----------------------------------------------------------------------------------
env | grep -E '^(AIRFLOW_HOME|AIRFLOW__|AIRFLOW_CONN_|TORCHX_LOCAL_ROOT|TORCHX_AF_WORK)' | sort > "$AIRFLOW_HOME/airflow.env"
if ! "$AIRFLOW" db migrate >"$LOGDIR/migrate.log" 2>&1; then tail -40 "$LOGDIR/migrate.log" >&2; exit 1; fi
export PATH="$VENV_BIN:$PATH"
start_proc() {
  local name="$1"; shift
  setsid "$AIRFLOW" "$@" >"$LOGDIR/$name.log" 2>&1 < /dev/null &
  echo $! > "$CI_RUN_DIR/$AIRFLOW_DEPLOYMENT-$name.pid"
}
start_proc api-server api-server --host 127.0.0.1 --port "$AIRFLOW_API_PORT"
start_proc scheduler scheduler --skip-serve-logs
start_proc dag-processor dag-processor
start_proc triggerer triggerer --skip-serve-logs
up_or_dead() { up 2>/dev/null || ! all_alive; }
if ! wait_for "the Airflow API on $AIRFLOW_URL" 300 up_or_dead || ! all_alive; then
  for p in "${PROCS[@]}"; do echo "== $p" >&2; tail -15 "$LOGDIR/$p.log" >&2; done
  bash "$HERE/stop.sh" >&2 || true
  exit 1
fi
echo "airflow up on $AIRFLOW_URL (home $AIRFLOW_HOME; PIDs in $CI_RUN_DIR/$AIRFLOW_DEPLOYMENT-*.pid)"
