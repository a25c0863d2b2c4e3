#!/usr/bin/env bash
# Installs (never starts) a one-machine Slurm 22.05+ cluster from Debian packages:
#   munge, slurmctld, slurmd, slurm-client   - the cluster itself (several slurmd act as fake nodes)
#   slurmdbd, mariadb-server                 - accounting, so that `sacct` (the scheduler's fallback
#                                              for jobs that already left `squeue`) works fully
# Idempotent. Start with start.sh, stop with stop.sh. SLURM_ACCOUNTING=0 skips slurmdbd/MariaDB.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/../common.sh"
pkgs=(munge slurmctld slurmd slurm-client)
if [ "${SLURM_ACCOUNTING:-1}" = 1 ]; then pkgs+=(slurmdbd mariadb-server); fi
apt_install "${pkgs[@]}"
