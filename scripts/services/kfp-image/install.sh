#!/usr/bin/env bash
# Prepares, at set-up time, everything the KFP launcher-image test (tests/kfp/test_kfp_image.py)
# needs to build docker/kfp-launcher/Dockerfile OFFLINE (the test itself never touches a network):
#   $KFP_IMAGE_DIR/rootfs.tar   a Debian bookworm root filesystem (debootstrap minbase + python3 +
#                               python3-venv, ~110 MB) from Debian's mirror, imported by the test
#                               with `docker import` as the image's base;
#   $KFP_IMAGE_DIR/wheels/      every locked dependency of `torchx-suite[kfp,aws]` as a wheel
#                               (`uv export` of uv.lock, then `pip wheel`: kfp itself is an sdist
#                               on PyPI, so it is built here, not in the image).
#   $KFP_IMAGE_DIR/slurm-debs/  Debian's slurm-client and munge with the dependencies the rootfs
#                               lacks (`apt-get install --download-only` in a chroot of it), for
#                               the image's `slurm` target;
# Our own wheel is built by the test from the working tree (`uv build --offline`).
# Idempotent: a rootfs is kept; wheels are rebuilt only when the exported requirements change.
# Takes ~2-4 min the first time on 2 cores (debootstrap ~1-2 min, wheels ~1 min).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/../common.sh"
REPO="$(cd "$HERE/../../.." && pwd)"
KFP_IMAGE_DIR="${KFP_IMAGE_DIR:-$CI_STATE_DIR/kfp-image}"
UV="${UV:-$REPO/.tools/bin/uv}"
PIP="${PIP:-$REPO/.tools/bin/pip}"
mkdir -p "$KFP_IMAGE_DIR"

if [ ! -s "$KFP_IMAGE_DIR/rootfs.tar" ]; then
  apt_install debootstrap
  MIRROR="${DEBIAN_MIRROR:-$(grep -hoE '^URIs: *[a-z]+://[^ ]+/debian$' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1 | sed 's/^URIs: *//')}"
  R="$KFP_IMAGE_DIR/rootfs"; rm -rf "$R"
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$R" $MIRROR >/dev/null
  rm -rf "$R"/var/cache/apt/archives/*.deb "$R"/var/lib/apt/lists/*
  tar -C "$R" -cf "$KFP_IMAGE_DIR/rootfs.tar.tmp" . && mv "$KFP_IMAGE_DIR/rootfs.tar.tmp" "$KFP_IMAGE_DIR/rootfs.tar"
  rm -rf "$R"
  echo "made $KFP_IMAGE_DIR/rootfs.tar"
fi

if [ ! -f "$KFP_IMAGE_DIR/slurm-debs/.complete" ]; then
  C="$KFP_IMAGE_DIR/chroot"; rm -rf "$C" "$KFP_IMAGE_DIR/slurm-debs"; mkdir -p "$C" "$KFP_IMAGE_DIR/slurm-debs"
  tar -C "$C" -xf "$KFP_IMAGE_DIR/rootfs.tar"
  cp /etc/resolv.conf "$C/etc/resolv.conf"
  chroot "$C" apt-get update -qq
  chroot "$C" env DEBIAN_FRONTEND=noninteractive apt-get install -qq -y --download-only \
      --no-install-recommends slurm-client munge >/dev/null
  cp "$C"/var/cache/apt/archives/*.deb "$KFP_IMAGE_DIR/slurm-debs/"
  rm -rf "$C"
  touch "$KFP_IMAGE_DIR/slurm-debs/.complete"
  echo "downloaded $(ls "$KFP_IMAGE_DIR/slurm-debs" | wc -l) debs to $KFP_IMAGE_DIR/slurm-debs"
fi

[ -x "$UV" ] && [ -x "$PIP" ] || { echo "no $UV or $PIP: run 'make venv' first" >&2; exit 1; }
REQ="$KFP_IMAGE_DIR/requirements.txt"
(cd "$REPO" && "$UV" export --frozen --no-dev --extra kfp --extra aws --no-emit-project --no-hashes \
    --format requirements-txt --quiet) > "$REQ.new"
if ! cmp -s "$REQ.new" "$REQ" || [ ! -f "$KFP_IMAGE_DIR/wheels/.complete" ]; then
  rm -rf "$KFP_IMAGE_DIR/wheels"; mkdir -p "$KFP_IMAGE_DIR/wheels"
  "$PIP" wheel --quiet --no-deps -r "$REQ.new" -w "$KFP_IMAGE_DIR/wheels"
  touch "$KFP_IMAGE_DIR/wheels/.complete"
  echo "built $(ls "$KFP_IMAGE_DIR/wheels" | wc -l) wheels in $KFP_IMAGE_DIR/wheels"
fi
mv "$REQ.new" "$REQ"
