#!/usr/bin/env bash
# Installs the Docker engine (Debian docker.io: dockerd 20.10 + containerd + runc) without starting it,
# then builds the registry-free test images (make-images.sh needs a running dockerd, so images are
# made by start.sh on first start, or explicitly with `bash make-images.sh` once dockerd runs).
# Idempotent: already-installed packages are skipped.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/../common.sh"
# busybox-static is the root filesystem of the busybox:latest image (see make-images.sh);
# docker-registry (distribution 2.8) serves 127.0.0.1:5000 for the workspace push test.
apt_install docker.io busybox-static docker-registry
/usr/sbin/dockerd --version
