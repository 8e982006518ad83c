#!/usr/bin/env bash
# Install (from Debian's docker.io) and start a Docker engine if none answers.
# Idempotent: a running engine that we did not start is left alone.
set -euo pipefail

SOCK="${SPCD_DOCKER_SOCKET:-/var/run/docker.sock}"
LOG="${SPCD_DOCKERD_LOG:-/var/log/spcd-dockerd.log}"

ping_engine() {
  curl -sf --max-time 2 --unix-socket "$SOCK" http://localhost/_ping >/dev/null 2>&1
}

if ping_engine; then
  echo "ensure-docker: engine answers on $SOCK"
  exit 0
fi

need_apt=()
command -v dockerd >/dev/null 2>&1 || need_apt+=(docker.io)
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
if [ "${#need_apt[@]}" -gt 0 ]; then
  echo "ensure-docker: installing ${need_apt[*]} from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# A dockerd that was killed hard leaves its pid file; the new one refuses to
# start while that PID names any live process (PIDs are reused). Remove it
# when it does not name a running dockerd (gone, another program, or a zombie
# not yet reaped).
drop_stale_pidfile() {
  local pidfile=/var/run/docker.pid old state
  [ -f "$pidfile" ] || return 0
  old=$(cat "$pidfile" 2>/dev/null || true)
  state=$(awk '{ print $3 }' "/proc/$old/stat" 2>/dev/null || true)
  if [ -z "$old" ] || [ "$(cat "/proc/$old/comm" 2>/dev/null)" != dockerd ] || [ "$state" = Z ]; then
    echo "ensure-docker: removing the stale $pidfile (PID ${old:-none} is not a running dockerd)"
    rm -f "$pidfile"
  fi
}

if ! ping_engine; then
  # Right after a hard kill the old dockerd's containerd may still hold its
  # socket, and the new dockerd gives up on it: start again (3 tries in 60 s).
  pid="" starts=0
  : >"$LOG"
  for _ in $(seq 1 120); do
    ping_engine && break
    if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
      [ "$starts" -lt 3 ] || break
      drop_stale_pidfile
      echo "ensure-docker: starting dockerd (log: $LOG)"
      setsid dockerd >>"$LOG" 2>&1 </dev/null &
      pid=$!
      starts=$((starts + 1))
    fi
    sleep 0.5
  done
fi
if ! ping_engine; then
  echo "ensure-docker: dockerd did not answer on $SOCK within 60 s; see $LOG" >&2
  tail -n 20 "$LOG" >&2 || true
  exit 1
fi
echo "ensure-docker: engine answers on $SOCK"
