#!/usr/bin/env bash
# Ray (`ray[default]`, with the dashboard that serves the Jobs API) comes from the project's locked
# venv (`make venv`); nothing to install from apt. Checks it is there.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
RAY="${RAY:-$REPO/.venv/bin/ray}"
[ -x "$RAY" ] || { echo "no ray at $RAY: run 'make venv' first" >&2; exit 1; }
"$RAY" --version
