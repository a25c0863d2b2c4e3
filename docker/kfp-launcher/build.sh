#!/usr/bin/env bash
# Builds the KFP launcher image from this checkout: bash docker/kfp-launcher/build.sh [IMAGE]
# (what `make kfp-launcher-image` runs). IMAGE defaults to torchx-kfp-launcher:latest.
# Environment knobs (defaults in brackets):
#   TARGET        launcher | slurm                                   [launcher]
#   BASE_IMAGE    a Debian-based image with python3 (3.10+) and its venv module
#                                                                    [python:3.11-slim-bookworm]
#   EXTRAS        torchx-suite extras to install                    [kfp,kubernetes,aws]
#   EXTRA_WHEELS  a folder of wheels added to the context (offline builds: every dependency)
#   EXTRA_DEBS    a folder of .deb files the slurm target installs instead of using apt sources
#   PIP_OPTIONS   extra pip options in the image (offline builds: --no-index)
#   DOCKER        the docker CLI                                      [docker]
# Our wheel is built with uv (UV_OFFLINE=1 builds without a network when hatchling is cached).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
IMAGE="${1:-torchx-kfp-launcher:latest}"
UV="${UV:-$REPO/.tools/bin/uv}"
[ -x "$UV" ] || UV="$(command -v uv)" || { echo "no uv: run 'make venv' first" >&2; exit 1; }
DOCKER="${DOCKER:-docker}"
CTX="$(mktemp -d)"; trap 'rm -rf "$CTX"' EXIT
mkdir "$CTX/wheels" "$CTX/debs"
(cd "$REPO" && "$UV" build --quiet --wheel --out-dir "$CTX/wheels")
rm -f "$CTX/wheels/.gitignore"
if [ -n "${EXTRA_WHEELS:-}" ]; then cp "$EXTRA_WHEELS"/*.whl "$CTX/wheels/"; fi
if [ -n "${EXTRA_DEBS:-}" ]; then cp "$EXTRA_DEBS"/*.deb "$CTX/debs/"; fi
"$DOCKER" build --network host --target "${TARGET:-launcher}" \
  --build-arg "BASE_IMAGE=${BASE_IMAGE:-python:3.11-slim-bookworm}" \
  --build-arg "EXTRAS=${EXTRAS:-kfp,kubernetes,aws}" \
  --build-arg "PIP_OPTIONS=${PIP_OPTIONS:-}" \
  -f "$HERE/Dockerfile" -t "$IMAGE" "$CTX"
echo "built $IMAGE"
