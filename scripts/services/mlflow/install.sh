#!/usr/bin/env bash
# Installs (never starts) an MLflow tracking server for the MLflow tracker tests, in its own venv
# ($CI_STATE_DIR/mlflow/venv): the full `mlflow` server (Flask/FastAPI, SQLAlchemy, pandas...) is
# kept out of the project's locked venv, which only needs the client (`mlflow-skinny`, extra
# `mlflow`). The server version matches the client's major.minor in uv.lock.
# Idempotent: an existing venv with the pinned version is kept.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/../common.sh"
REPO="$(cd "$HERE/../../.." && pwd)"
MLFLOW_VERSION="${MLFLOW_VERSION:-3.17.2}"
VENV="${MLFLOW_VENV:-$CI_STATE_DIR/mlflow/venv}"
UV="${UV:-$REPO/.tools/bin/uv}"
BASE_PYTHON="${MLFLOW_BASE_PYTHON:-python3}"

if [ -x "$VENV/bin/mlflow" ] && \
   [ "$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("mlflow"))' 2>/dev/null)" = "$MLFLOW_VERSION" ]; then
  echo "mlflow $MLFLOW_VERSION already installed in $VENV"; exit 0
fi
mkdir -p "$(dirname "$VENV")"
if [ -x "$UV" ]; then
  UV_PYTHON_DOWNLOADS=never "$UV" venv -q --python "$BASE_PYTHON" "$VENV"
  UV_PYTHON_DOWNLOADS=never "$UV" pip install -q --python "$VENV/bin/python" "mlflow==$MLFLOW_VERSION"
else
  "$BASE_PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q "mlflow==$MLFLOW_VERSION"
fi
"$VENV/bin/mlflow" --version
