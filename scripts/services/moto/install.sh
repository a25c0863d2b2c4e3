#!/usr/bin/env bash
# moto (with its server extra) comes from the project's locked venv (`make venv`, dev extra); its
# Batch backend runs jobs as real containers on the Docker engine, so this installs the engine.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$HERE/../docker/install.sh"
