#!/usr/bin/env bash
# Installs (never starts) what the integration tests need: every scripts/services/*/install.sh.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
for f in "$HERE"/*/install.sh; do
  [ -f "$f" ] || continue
  echo "== $f"
  bash "$f"
done
