#!/usr/bin/env bash
# Prefect (server, CLI, runner) comes from the project's locked venv (`make venv`, prefect extra):
# nothing to install from Debian. Checks that the CLI is there, so a missing one fails early.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
PREFECT_BIN="${PREFECT_BIN:-$REPO/.venv/bin/prefect}"
if [ ! -x "$PREFECT_BIN" ]; then
  echo "note: no prefect CLI at $PREFECT_BIN yet; 'make venv' installs it (prefect extra)"
fi
