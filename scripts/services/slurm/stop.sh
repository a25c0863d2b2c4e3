#!/usr/bin/env bash
# Stops what start.sh started, by PID file only (never by name). Keeps state, spool and database
# together in $CI_STATE_DIR/slurm: wipe that whole folder or nothing (job ids restart with the spool,
# and an old database would then answer `sacct` with old rows).
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/../common.sh"
RUN="$CI_RUN_DIR/slurm"
for f in "$RUN"/slurmd-*.pid; do [ -e "$f" ] && stop_pidfile "$f" slurmd; done
stop_pidfile "$RUN/slurmctld.pid" slurmctld
stop_pidfile "$RUN/slurmdbd.pid" slurmdbd
stop_pidfile "$RUN/mariadb.pid" mariadbd 60
stop_pidfile "$RUN/munged.pid" munged     # only present when start.sh started munged itself
exit 0
