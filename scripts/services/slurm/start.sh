#!/usr/bin/env bash
# Starts a Slurm cluster on this one machine, as root, without systemd:
#   munged (reused when one already answers), [MariaDB + slurmdbd], slurmctld, and N slurmd that
#   act as fake nodes node1..nodeN (all NodeAddr=127.0.0.1).
# Idempotent: a healthy running cluster is reused; missing daemons are (re)started.
# Usage: bash start.sh            (env: SLURM_NODES=4 SLURM_CPUS=2 SLURM_MEM_MB=4000
#                                       SLURM_ACCOUNTING=1 SLURM_CTLD_PORT=6817 SLURM_DBD_PORT=6819
#                                       SLURM_DB_PORT=6829 SLURM_NODE_PORT=6831)
# State (config, spool, logs, database) lives in $CI_STATE_DIR/slurm, PID files in $CI_RUN_DIR/slurm.
# Clients find the cluster through SLURM_CONF=$CI_STATE_DIR/slurm/slurm.conf; /etc/slurm/slurm.conf
# is also pointed there when it is absent or was written by this script.
# Prints `SLURM_CONF=<path>` as its last line. Stop with stop.sh (by PID files).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/../common.sh"
shared_daemon_env

NODES="${SLURM_NODES:-4}"
CPUS="${SLURM_CPUS:-2}"
MEM_MB="${SLURM_MEM_MB:-4000}"
ACCOUNTING="${SLURM_ACCOUNTING:-1}"
CTLD_PORT="${SLURM_CTLD_PORT:-6817}"
DBD_PORT="${SLURM_DBD_PORT:-6819}"
DB_PORT="${SLURM_DB_PORT:-6829}"
NODE_PORT="${SLURM_NODE_PORT:-6831}"
STATE="$CI_STATE_DIR/slurm"
RUN="$CI_RUN_DIR/slurm"
CONF="$STATE/slurm.conf"
export SLURM_CONF="$CONF"

for bin in munged slurmctld slurmd sbatch; do
  command -v "$bin" >/dev/null || { echo "slurm: $bin missing: run scripts/services/slurm/install.sh" >&2; exit 1; }
done
if [ "$ACCOUNTING" = 1 ] && ! command -v slurmdbd >/dev/null; then
  echo "slurm: slurmdbd missing: run scripts/services/slurm/install.sh (or SLURM_ACCOUNTING=0)" >&2; exit 1
fi

# nodes_ready: all N nodes answer and none is down/drained/not responding
nodes_ready() {
  local bad ok
  scontrol ping >/dev/null 2>&1 || return 1
  ok="$(sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 ~ /^(idle|mix|alloc|comp)$/ {print $1}' | sort -u | wc -l)"
  bad="$(sinfo -h -N -o '%t' 2>/dev/null | grep -c -E '\*|down|drain|fail|unk' || true)"
  [ "$ok" -ge "$NODES" ] && [ "$bad" = 0 ]
}

pid_alive() { [ -s "$1" ] && alive "$(cat "$1")"; }

mkdir -p "$STATE/spool/ctld" "$STATE/log" "$RUN"
render() {  # render TEMPLATE -> stdout
  sed -e "s#@HOST@#$(hostname -s)#g" -e "s#@STATE@#$STATE#g" -e "s#@RUN@#$RUN#g" \
      -e "s#@NODES@#$NODES#g" -e "s#@CPUS@#$CPUS#g" -e "s#@MEM_MB@#$MEM_MB#g" \
      -e "s#@CTLD_PORT@#$CTLD_PORT#g" -e "s#@DBD_PORT@#$DBD_PORT#g" -e "s#@DB_PORT@#$DB_PORT#g" \
      -e "s#@PORT_FIRST@#$NODE_PORT#g" -e "s#@PORT_LAST@#$((NODE_PORT + NODES - 1))#g" "$1"
}
if [ "$ACCOUNTING" = 1 ]; then
  ACCT="AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=127.0.0.1\nAccountingStoragePort=$DBD_PORT"
else
  ACCT="AccountingStorageType=accounting_storage/none"
fi
render "$HERE/slurm.conf.in" | sed -e "s#@ACCOUNTING@#$ACCT#" > "$CONF.new"
if pid_alive "$RUN/slurmctld.pid"; then
  if ! cmp -s "$CONF.new" "$CONF"; then
    # started from an older slurm.conf.in (or other settings): restart on the current config
    echo "slurm: the running cluster has an outdated config: restarting it"
    bash "$HERE/stop.sh"
  elif nodes_ready; then
    rm -f "$CONF.new"
    echo "slurm: reusing the running cluster ($CONF)"
    echo "SLURM_CONF=$CONF"
    exit 0
  fi
fi
mv "$CONF.new" "$CONF"
mkdir -p /etc/slurm
if [ ! -e /etc/slurm/slurm.conf ] || grep -q torchx-suite-ci-slurm-conf /etc/slurm/slurm.conf 2>/dev/null; then
  ln -sfn "$CONF" /etc/slurm/slurm.conf
fi

# --- munge: reuse a working munged, else start one (daemonizes; we keep a copy of its PID) ---
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  [ -s /etc/munge/munge.key ] || mungekey --create --force
  mkdir -p /run/munge /var/lib/munge /var/log/munge
  chown munge:munge /etc/munge /etc/munge/munge.key /run/munge /var/lib/munge /var/log/munge
  chmod 700 /etc/munge; chmod 400 /etc/munge/munge.key
  rm -f /run/munge/munge.socket.2 /run/munge/munge.socket.2.lock
  runuser -u munge -- /usr/sbin/munged --force
  wait_for "munged" 10 sh -c 'munge -n | unmunge'
  cp /run/munge/munged.pid "$RUN/munged.pid"
  echo "slurm: munged started (pid $(cat "$RUN/munged.pid"))"
fi

# --- accounting: MariaDB (own datadir, 127.0.0.1:$DB_PORT) then slurmdbd; before slurmctld ---
if [ "$ACCOUNTING" = 1 ]; then
  DB="$STATE/mysql"
  SOCK="$RUN/mysql/mysqld.sock"
  mkdir -p "$RUN/mysql" "$STATE/log/mariadb"; chown mysql:mysql "$RUN/mysql" "$STATE/log/mariadb"
  if ! pid_alive "$RUN/mariadb.pid"; then
    if [ ! -d "$DB/mysql" ]; then
      mkdir -p "$DB"; chown mysql:mysql "$DB"
      mariadb-install-db --user=mysql --datadir="$DB" --auth-root-authentication-method=socket \
        --skip-test-db >"$STATE/log/mariadb-install.log" 2>&1
    fi
    # mariadbd stays in the foreground: background it and record its PID
    /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$DB" --socket="$SOCK" \
      --pid-file="$RUN/mysql/mariadbd.pid" --bind-address=127.0.0.1 --port="$DB_PORT" \
      --log-error="$STATE/log/mariadb/mariadb.log" >"$STATE/log/mariadb.out" 2>&1 &
    echo $! > "$RUN/mariadb.pid"
    wait_for "MariaDB on $SOCK" 60 mysql --socket="$SOCK" -uroot -e 'SELECT 1' \
      || { tail -20 "$STATE/log/mariadb/mariadb.log" "$STATE/log/mariadb.out" >&2; exit 1; }
    mysql --socket="$SOCK" -uroot <<SQL
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmpw';
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmpw';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
FLUSH PRIVILEGES;
SQL
    echo "slurm: MariaDB started (pid $(cat "$RUN/mariadb.pid"))"
  fi
  if ! pid_alive "$RUN/slurmdbd.pid"; then
    render "$HERE/slurmdbd.conf.in" > "$STATE/slurmdbd.conf.new"
    chmod 600 "$STATE/slurmdbd.conf.new"; mv "$STATE/slurmdbd.conf.new" "$STATE/slurmdbd.conf"
    /usr/sbin/slurmdbd                               # daemonizes; reads slurmdbd.conf next to $SLURM_CONF
    wait_for "slurmdbd on 127.0.0.1:$DBD_PORT" 30 bash -c "echo > /dev/tcp/127.0.0.1/$DBD_PORT" \
      || { tail -20 "$STATE/log/slurmdbd.log" >&2; exit 1; }
    echo "slurm: slurmdbd started (pid $(cat "$RUN/slurmdbd.pid"))"
  fi
fi

# --- slurmctld and the fake nodes ---
if ! pid_alive "$RUN/slurmctld.pid"; then
  /usr/sbin/slurmctld -f "$CONF"                     # daemonizes; writes $RUN/slurmctld.pid
  wait_for "slurmctld" 30 scontrol ping || { tail -20 "$STATE/log/slurmctld.log" >&2; exit 1; }
  echo "slurm: slurmctld started (pid $(cat "$RUN/slurmctld.pid"))"
fi
for i in $(seq 1 "$NODES"); do
  n="node$i"
  if ! pid_alive "$RUN/slurmd-$n.pid"; then
    mkdir -p "$STATE/spool/d/$n"
    /usr/sbin/slurmd -f "$CONF" -N "$n"              # daemonizes; writes $RUN/slurmd-$n.pid
  fi
done
if ! wait_for "$NODES idle Slurm nodes" 60 nodes_ready; then
  sinfo -N >&2 || true
  tail -20 "$STATE/log/slurmctld.log" >&2 || true
  exit 1
fi
echo "slurm: $NODES node(s) up"
sinfo -N
echo "SLURM_CONF=$CONF"
