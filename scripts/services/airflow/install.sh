#!/usr/bin/env bash
# Installs (never starts) what the real Airflow deployment of the tests needs from Debian:
# PostgreSQL 15 (server binaries only: start.sh makes its own cluster). Airflow itself and the
# psycopg2 driver come from the project's locked venv (`make venv`: extras `airflow`, `dev`).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/../common.sh"
apt_install postgresql
