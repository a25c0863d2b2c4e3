#!/usr/bin/env bash
# Installs Debian's headless-capable Chromium for the dashboard's browser tests (tests/dashboard,
# marker `browser`), and nginx for the reverse-proxy test (TLS and a path prefix in front of
# `torchx dashboard`; started by the test itself, never as a system service). Playwright's
# Python package (the `dev` extra) drives Chromium through executable_path=/usr/bin/chromium; no
# browser is ever downloaded by Playwright. Idempotent.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/../common.sh"
apt_install chromium fonts-dejavu-core nginx openssl
