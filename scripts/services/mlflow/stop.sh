#!/usr/bin/env bash
# Stops the MLflow server that start.sh started on $MLFLOW_PORT: the process group of the recorded
# PID (start.sh ran it under setsid: the server and its web worker only), SIGKILL after 20 s.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/../common.sh"
stop_pgroup "$CI_RUN_DIR/mlflow-${MLFLOW_PORT:-15000}.pid" "mlflow server" 20
