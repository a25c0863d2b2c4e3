#!/usr/bin/env bash
# Starts dockerd (cgroupfs driver, overlay2) in the background on unix:///var/run/docker.sock,
# records its PID in $CI_RUN_DIR/dockerd.pid and waits until the API answers. Then makes sure the
# registry-free test images exist (make-images.sh; ~1 s the first time, a no-op afterwards).
# Idempotent: a dockerd that already answers on the socket is reused.
# Clients: DOCKER_HOST=unix:///var/run/docker.sock; run images with pull=never.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/../common.sh"
shared_daemon_env
DOCKER_SOCK="${DOCKER_SOCK:-/var/run/docker.sock}"
DOCKER="${DOCKER:-/usr/bin/docker}"
PIDFILE="$CI_RUN_DIR/dockerd.pid"
LOG="$CI_STATE_DIR/dockerd.log"

[ -x /usr/sbin/dockerd ] || bash "$HERE/install.sh"
if "$DOCKER" -H "unix://$DOCKER_SOCK" info >/dev/null 2>&1; then
  echo "dockerd already up on $DOCKER_SOCK"
else
  if [ -s "$PIDFILE" ] && alive "$(cat "$PIDFILE")"; then
    # started by another caller and still coming up: wait for it (a second dockerd would fail
    # and overwrite the PID file of the first)
    echo "dockerd (pid $(cat "$PIDFILE")) is starting; waiting for it"
  else
    # dockerd starts its own containerd child; SIGTERM to dockerd (stop.sh) stops both.
    /usr/sbin/dockerd --exec-opt native.cgroupdriver=cgroupfs --storage-driver overlay2 \
        -H "unix://$DOCKER_SOCK" --pidfile "$CI_RUN_DIR/dockerd.self.pid" >"$LOG" 2>&1 &
    echo $! > "$PIDFILE"
  fi
  # up, or fail fast when dockerd died (wait_for alone would wait for the whole timeout)
  up_or_dead() { "$DOCKER" -H "unix://$DOCKER_SOCK" info >/dev/null 2>&1 || ! alive "$(cat "$PIDFILE")"; }
  if ! wait_for "dockerd on $DOCKER_SOCK" 120 up_or_dead \
      || ! "$DOCKER" -H "unix://$DOCKER_SOCK" info >/dev/null 2>&1; then
    tail -30 "$LOG" >&2; exit 1
  fi
  echo "dockerd up (pid $(cat "$PIDFILE"))"
fi
DOCKER_HOST="unix://$DOCKER_SOCK" DOCKER="$DOCKER" bash "$HERE/make-images.sh"
