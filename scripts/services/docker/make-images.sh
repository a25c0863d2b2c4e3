#!/usr/bin/env bash
# Builds the test images without any registry, from Debian packages already on the machine:
#   busybox:latest   (~2 MB) root filesystem = the busybox-static binary + its applet links,
#                    imported with `docker import`; also tagged docker.io/library/busybox:latest,
#                    the name moto's Batch backend looks up (it would try to pull otherwise).
#   --with-python    additionally debian-py:bookworm (~260 MB, 35 s-2 min): debootstrap minbase +
#                    python3, for workloads that need an interpreter. Not used by the test suite;
#                    it downloads from the Debian mirror, so run it at setup time only.
# Idempotent: an existing image is kept (FORCE=1 rebuilds). Needs a running dockerd.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/../common.sh"
DOCKER="${DOCKER:-/usr/bin/docker}"
export DOCKER_HOST="${DOCKER_HOST:-unix:///var/run/docker.sock}"
W="$CI_STATE_DIR/images"; mkdir -p "$W"

has_image() { "$DOCKER" image inspect "$1" >/dev/null 2>&1; }

if [ "${FORCE:-0}" = 1 ] || ! has_image busybox:latest; then
  # the static build: the image has no libc (Debian's dynamic `busybox` package would not run)
  apt_install busybox-static
  R="$W/busybox-rootfs"; rm -rf "$R"; mkdir -p "$R/bin" "$R/tmp" "$R/etc" "$R/root"
  chmod 1777 "$R/tmp"
  cp /bin/busybox "$R/bin/busybox"
  # Link every applet except "busybox" itself (that link would overwrite the binary).
  for a in $("$R/bin/busybox" --list); do [ "$a" = busybox ] || ln -sf busybox "$R/bin/$a"; done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' > "$R/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' > "$R/etc/group"
  tar -C "$R" -c . | "$DOCKER" import --change 'CMD ["/bin/sh"]' --change 'ENV PATH=/bin' - busybox:latest >/dev/null
  echo "imported busybox:latest"
fi
has_image docker.io/library/busybox:latest || "$DOCKER" tag busybox:latest docker.io/library/busybox:latest

if [ "${1:-}" = --with-python ] && { [ "${FORCE:-0}" = 1 ] || ! has_image debian-py:bookworm; }; then
  apt_install debootstrap
  MIRROR="${DEBIAN_MIRROR:-$(grep -hoE '^URIs: *[a-z]+://[^ ]+/debian$' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1 | sed 's/^URIs: *//')}"
  [ -x "$W/debroot/usr/bin/python3" ] || debootstrap --variant=minbase --include=python3 bookworm "$W/debroot" $MIRROR >/dev/null
  tar -C "$W/debroot" -c . | "$DOCKER" import --change 'CMD ["/bin/bash"]' - debian-py:bookworm >/dev/null
  echo "imported debian-py:bookworm"
fi
"$DOCKER" images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E 'busybox|debian-py' || true
