#!/usr/bin/env bash
# Builds the KFP launcher image from this checkout: bash docker/kfp-launcher/build.sh [IMAGE]
# (what `make kfp-launcher-image` runs). IMAGE defaults to torchx-kfp-launcher:latest.
#
# Offline (the default whenever it is prepared): with $KFP_IMAGE_DIR holding what
# `bash scripts/services/kfp-image/install.sh` prepares once (rootfs.tar: a Debian bookworm root
# filesystem with python3; wheels/: every locked dependency; slurm-debs/: the slurm target's
# packages), the build needs no registry and no index: the base image is imported from
# rootfs.tar, pip installs from the wheels alone (--no-index) and our wheel is built with
# UV_OFFLINE=1. Otherwise the base image comes from a registry (BASE_IMAGE, pulled by docker if
# it is not local) and the dependencies from the package index.
#
# Environment knobs (defaults in brackets):
#   KFP_IMAGE_DIR the prepared offline folder  [$CI_STATE_DIR/kfp-image, /var/lib/torchx-ci/kfp-image]
#   OFFLINE       1: offline (fails if not prepared) | 0: registry and index | auto   [auto]
#   TARGET        launcher | slurm                                   [launcher]
#   BASE_IMAGE    a Debian-based image with python3 (3.10+) and its venv module
#                 [offline: torchx-kfp-base:bookworm, imported from rootfs.tar if absent;
#                  online: python:3.11-slim-bookworm]
#   EXTRAS        torchx-suite extras to install                    [kfp,kubernetes,aws]
#   EXTRA_WHEELS  a folder of wheels added to the context            [offline: $KFP_IMAGE_DIR/wheels]
#   EXTRA_DEBS    a folder of .deb files the slurm target installs instead of using apt sources
#                                                                    [offline: $KFP_IMAGE_DIR/slurm-debs]
#   PIP_OPTIONS   extra pip options in the image                     [offline: --no-index]
#   USER_UID      uid of the image's non-root user torchx; the slurm target's jobs run as it [1000]
#   DOCKER        the docker CLI                                      [docker]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
IMAGE="${1:-torchx-kfp-launcher:latest}"
UV="${UV:-$REPO/.tools/bin/uv}"
[ -x "$UV" ] || UV="$(command -v uv)" || { echo "no uv: run 'make venv' first" >&2; exit 1; }
DOCKER="${DOCKER:-docker}"
KFP_IMAGE_DIR="${KFP_IMAGE_DIR:-${CI_STATE_DIR:-/var/lib/torchx-ci}/kfp-image}"
prepared() { [ -s "$KFP_IMAGE_DIR/rootfs.tar" ] && [ -f "$KFP_IMAGE_DIR/wheels/.complete" ]; }
OFFLINE="${OFFLINE:-auto}"
if [ "$OFFLINE" = auto ]; then if prepared; then OFFLINE=1; else OFFLINE=0; fi; fi
if [ "$OFFLINE" = 1 ]; then
  prepared || { echo "OFFLINE=1 but $KFP_IMAGE_DIR holds no rootfs.tar and wheels/: run" \
                     "'bash scripts/services/kfp-image/install.sh' once (it downloads)" >&2; exit 1; }
  BASE_IMAGE="${BASE_IMAGE:-torchx-kfp-base:bookworm}"
  if ! "$DOCKER" image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    "$DOCKER" import --change 'CMD ["/bin/bash"]' "$KFP_IMAGE_DIR/rootfs.tar" "$BASE_IMAGE" >/dev/null
  fi
  EXTRA_WHEELS="${EXTRA_WHEELS:-$KFP_IMAGE_DIR/wheels}"
  if [ -f "$KFP_IMAGE_DIR/slurm-debs/.complete" ]; then EXTRA_DEBS="${EXTRA_DEBS:-$KFP_IMAGE_DIR/slurm-debs}"; fi
  PIP_OPTIONS="${PIP_OPTIONS:---no-index}"
  export UV_OFFLINE=1
else
  BASE_IMAGE="${BASE_IMAGE:-python:3.11-slim-bookworm}"
  if ! "$DOCKER" image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    echo "note: $BASE_IMAGE is not local; docker pulls it from its registry. Without registry" \
         "access, prepare the offline build once: bash scripts/services/kfp-image/install.sh" >&2
  fi
fi
CTX="$(mktemp -d)"; trap 'rm -rf "$CTX"' EXIT
mkdir "$CTX/wheels" "$CTX/debs"
(cd "$REPO" && "$UV" build --quiet --wheel --out-dir "$CTX/wheels")
rm -f "$CTX/wheels/.gitignore"
if [ -n "${EXTRA_WHEELS:-}" ]; then cp "$EXTRA_WHEELS"/*.whl "$CTX/wheels/"; fi
if [ -n "${EXTRA_DEBS:-}" ]; then cp "$EXTRA_DEBS"/*.deb "$CTX/debs/"; fi
"$DOCKER" build --network host --target "${TARGET:-launcher}" \
  --build-arg "BASE_IMAGE=$BASE_IMAGE" \
  --build-arg "EXTRAS=${EXTRAS:-kfp,kubernetes,aws}" \
  --build-arg "PIP_OPTIONS=${PIP_OPTIONS:-}" \
  --build-arg "USER_UID=${USER_UID:-1000}" \
  -f "$HERE/Dockerfile" -t "$IMAGE" "$CTX"
echo "built $IMAGE (from $BASE_IMAGE, $([ "$OFFLINE" = 1 ] && echo offline || echo online))"
