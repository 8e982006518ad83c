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

if ! ping_engine; then
  # A dockerd that was killed hard leaves its pid file; the new one refuses to
  # start while that PID names any live process (PIDs are reused). Remove it
  # when it does not name a running dockerd.
  PIDFILE=/var/run/docker.pid
  if [ -f "$PIDFILE" ]; then
    old=$(cat "$PIDFILE" 2>/dev/null || true)
    if [ -z "$old" ] || [ "$(cat "/proc/$old/comm" 2>/dev/null)" != dockerd ]; then
      echo "ensure-docker: removing the stale $PIDFILE (PID ${old:-none} is not a running dockerd)"
      rm -f "$PIDFILE"
    fi
  fi
  echo "ensure-docker: starting dockerd (log: $LOG)"
  setsid dockerd >"$LOG" 2>&1 < /dev/null &
  for _ in $(seq 1 120); do
    ping_engine && break
    sleep 0.5
  done
fi

if ! ping_engine; then
  echo "ensure-docker: dockerd did not answer on $SOCK within 60 s; see $LOG" >&2
  tail -n 20 "$LOG" >&2 || true
  exit 1
fi
echo "ensure-docker: engine answers on $SOCK"
