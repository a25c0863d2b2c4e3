# Shared helpers for the service scripts. Source it:
#   HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"; . "$HERE/../common.sh"
# CI_RUN_DIR   PID files of daemons started in the background (default /run/torchx-ci)
# CI_STATE_DIR logs, data and image build folders (default /var/lib/torchx-ci)
CI_RUN_DIR="${CI_RUN_DIR:-/run/torchx-ci}"
CI_STATE_DIR="${CI_STATE_DIR:-/var/lib/torchx-ci}"
mkdir -p "$CI_RUN_DIR" "$CI_STATE_DIR"

# shared_daemon_env: drops the caller's TORCHX_* variables before a shared daemon starts. A backend
# daemon (dockerd, slurmd, a Ray head, moto, MLflow) outlives whoever started it and serves every
# later caller, so it must not carry one caller's local-scheduler root or settings: a test that
# started it would otherwise own a process that looks like one of its replicas.
shared_daemon_env() {
  local v
  for v in $(compgen -e); do
    case "$v" in TORCHX_*) unset "$v" ;; esac
  done
}

# alive PID: true while PID exists and is not a zombie.
alive() {
  local s
  s="$(ps -o stat= -p "$1" 2>/dev/null)" || return 1
  [ -n "$s" ] && [ "${s#Z}" = "$s" ]
}

# apt_install PKG...: installs Debian packages once, without starting their services.
apt_install() {
  local missing=() p
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ "${#missing[@]}" -eq 0 ] && return 0
  # policy-rc.d: package post-install scripts must not start daemons (we start them by PID).
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  if [ ! -f "$CI_STATE_DIR/.apt-updated" ]; then
    apt-get update -qq && touch "$CI_STATE_DIR/.apt-updated"
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# stop_pidfile FILE [EXPECTED_COMM] [TIMEOUT_S=20]: SIGTERM the PID in FILE, wait, SIGKILL after
# TIMEOUT_S, remove FILE. A PID that now belongs to another program (stale file) is left alone.
stop_pidfile() {
  local f="$1" comm="${2:-}" timeout="${3:-20}" p now i
  [ -s "$f" ] || return 0
  p="$(cat "$f")"
  if ! alive "$p"; then rm -f "$f"; return 0; fi
  now="$(ps -o comm= -p "$p")"
  if [ -n "$comm" ] && [ "$now" != "$comm" ]; then
    echo "not stopping pid $p from $f: it is '$now', expected '$comm' (stale PID file removed)"
    rm -f "$f"; return 0
  fi
  kill "$p" 2>/dev/null || true
  for i in $(seq 1 $((timeout * 4))); do alive "$p" || break; sleep 0.25; done
  if alive "$p"; then echo "pid $p ignored SIGTERM for ${timeout}s: SIGKILL"; kill -9 "$p" 2>/dev/null || true; fi
  rm -f "$f"
  echo "stopped ${comm:-pid} $p ($f)"
}

# stop_pgroup FILE CMDLINE_PATTERN [TIMEOUT_S=20]: for a daemon started under setsid (its PID is
# its process group): SIGTERM to the group of the PID in FILE, wait until the whole group is gone,
# SIGKILL it after TIMEOUT_S, remove FILE. A PID whose command line does not match
# CMDLINE_PATTERN (a stale file, the PID reused) is left alone.
stop_pgroup() {
  local f="$1" pattern="$2" timeout="${3:-20}" p i
  [ -s "$f" ] || return 0
  p="$(cat "$f")"
  if ! alive "$p"; then rm -f "$f"; return 0; fi
  if ! tr '\0' ' ' < "/proc/$p/cmdline" | grep -q -- "$pattern"; then
    echo "not stopping pid $p from $f: it is not '$pattern' (stale PID file removed)"
    rm -f "$f"; return 0
  fi
  kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true
  for i in $(seq 1 $((timeout * 4))); do pgrep -g "$p" >/dev/null 2>&1 || break; sleep 0.25; done
  if pgrep -g "$p" >/dev/null 2>&1; then
    echo "process group $p ('$pattern') ignored SIGTERM for ${timeout}s: SIGKILL"
    kill -KILL -- "-$p" 2>/dev/null || true
  fi
  rm -f "$f"
  echo "stopped '$pattern' (process group $p, $f)"
}

# wait_for DESCRIPTION TIMEOUT_S CMD...: retries CMD until it succeeds; fails loudly on timeout.
wait_for() {
  local what="$1" timeout="$2" i; shift 2
  for i in $(seq 1 $((timeout * 4))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.25; done
  echo "timed out after ${timeout}s waiting for $what" >&2
  return 1
}
