#!/usr/bin/env bash
# Starts a local image registry (Debian docker-registry = distribution 2.8) on 127.0.0.1:5000 in the
# background, PID in $CI_RUN_DIR/registry.pid, data in $CI_STATE_DIR/registry. Used to test pushing
# workspace images (image_repo=127.0.0.1:5000/...); dockerd treats 127.0.0.0/8 registries as
# insecure (plain HTTP) by default. Idempotent: a registry that already answers is reused.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/../common.sh"
shared_daemon_env
PORT="${REGISTRY_PORT:-5000}"
listening() { (echo > "/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; }
# up: the port answers GET /v2/ like a registry (Docker-Distribution-Api-Version header)
up() {
  { exec 3<>"/dev/tcp/127.0.0.1/$PORT"; } 2>/dev/null || return 1
  printf 'GET /v2/ HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
  local rc=0; grep -qi '^Docker-Distribution-Api-Version' <&3 || rc=1
  exec 3<&-; return $rc
}
if up; then echo "registry already up on 127.0.0.1:$PORT"; exit 0; fi
if listening; then
  echo "127.0.0.1:$PORT is taken by something that is not an image registry; stop it or set" \
       "REGISTRY_PORT to a free port" >&2
  exit 1
fi
command -v docker-registry >/dev/null || apt_install docker-registry
R="$CI_STATE_DIR/registry"; mkdir -p "$R/data"
cat > "$R/config.yml" <<YML
version: 0.1
log: {level: warn}
storage: {filesystem: {rootdirectory: $R/data}, delete: {enabled: true}}
http: {addr: 127.0.0.1:$PORT}
YML
docker-registry serve "$R/config.yml" >"$R/registry.log" 2>&1 &
echo $! > "$CI_RUN_DIR/registry.pid"
if ! wait_for "registry on 127.0.0.1:$PORT" 20 up; then tail -30 "$R/registry.log" >&2; exit 1; fi
echo "registry up on 127.0.0.1:$PORT (pid $(cat "$CI_RUN_DIR/registry.pid"))"
