#!/usr/bin/env bash
# Install (from Debian's podman and runc) and start Podman's REST API service
# on /run/podman/podman.sock, where kolla-ansible's Podman hosts have it, if
# nothing answers there. Idempotent: a service that answers with this
# script's settings is left alone; one this script started with other
# settings is started again (a restart of the service stops no container).
# The service reads a containers.conf and a registries.conf of its own
# (written below, with why), through CONTAINERS_CONF and
# CONTAINERS_REGISTRIES_CONF; the host's /etc/containers is not changed.
set -euo pipefail

SOCK="${SPCD_PODMAN_SOCKET:-/run/podman/podman.sock}"
LOG="${SPCD_PODMAN_LOG:-/var/log/spcd-podman.log}"
CONF_DIR="${SPCD_PODMAN_CONF_DIR:-/run/spcd-podman}"

# The Podman lane's registry (test/integration/upgrade-registry.test.ts): plain
# HTTP on loopback, which Podman refuses unless registries.conf says insecure.
REGISTRY="${SPCD_PODMAN_TEST_REGISTRY:-127.0.0.1:15055}"

ping_service() {
  curl -sf --max-time 2 --unix-socket "$SOCK" http://localhost/_ping >/dev/null 2>&1
}

need_apt=()
command -v podman >/dev/null 2>&1 || need_apt+=(podman)
command -v runc >/dev/null 2>&1 || need_apt+=(runc)
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
if [ "${#need_apt[@]}" -gt 0 ]; then
  echo "ensure-podman: installing ${need_apt[*]} from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# - Podman's default rlimits (nofile 1048576) exceed what a host without
#   CAP_SYS_RESOURCE may grant, and every start fails with "error setting
#   rlimit type 7": containers get this shell's hard limits, as Docker's do,
#   but nproc at most 32768, the service's own (Podman lowers it on start).
# - crun refuses a host in cgroup hybrid mode; runc does not.
# - Without systemd as PID 1, Podman manages cgroups itself, and its events go
#   to a file (the events API reads it).
NOFILE=$(ulimit -Hn)
NPROC=$(ulimit -Hu)
if [ "$NPROC" = unlimited ] || [ "$NPROC" -gt 32768 ]; then NPROC=32768; fi
mkdir -p "$CONF_DIR"
cat >"$CONF_DIR/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=$NOFILE:$NOFILE", "nproc=$NPROC:$NPROC"]

[engine]
runtime = "runc"
cgroup_manager = "$([ -d /run/systemd/system ] && echo systemd || echo cgroupfs)"
events_logger = "$([ -d /run/systemd/system ] && echo journald || echo file)"
CONF
export CONTAINERS_CONF="$CONF_DIR/containers.conf"
# The host's registries.conf (short names, mirrors) plus the test registry.
{
  if [ -f /etc/containers/registries.conf ]; then cat /etc/containers/registries.conf; fi
  printf '\n[[registry]]\nlocation = "%s"\ninsecure = true\n' "$REGISTRY"
} >"$CONF_DIR/registries.conf.new"
mv "$CONF_DIR/registries.conf.new" "$CONF_DIR/registries.conf"
export CONTAINERS_REGISTRIES_CONF="$CONF_DIR/registries.conf"

settings=$(cat "$CONF_DIR/containers.conf" "$CONF_DIR/registries.conf" | sha256sum | cut -c1-16)
if ping_service; then
  if [ "$(cat "$CONF_DIR/settings" 2>/dev/null || true)" = "$settings" ]; then
    echo "ensure-podman: Podman answers on $SOCK"
    exit 0
  fi
  # Only a service this script starts (its command line names the socket) is replaced.
  pids=$(pgrep -f "podman system service --time=0 unix://$SOCK" || true)
  if [ -z "$pids" ]; then
    echo "ensure-podman: Podman answers on $SOCK (not started by this script: its settings are its own)"
    exit 0
  fi
  echo "ensure-podman: the service on $SOCK runs with other settings: starting it again"
  kill $pids
  for _ in $(seq 1 40); do
    ping_service || break
    sleep 0.25
  done
fi

mkdir -p "$(dirname "$SOCK")"
rm -f "$SOCK"
echo "ensure-podman: starting podman system service (log: $LOG)"
setsid podman system service --time=0 "unix://$SOCK" >>"$LOG" 2>&1 </dev/null &
for _ in $(seq 1 60); do
  ping_service && break
  sleep 0.5
done
if ! ping_service; then
  echo "ensure-podman: Podman did not answer on $SOCK within 30 s; see $LOG" >&2
  tail -n 20 "$LOG" >&2 || true
  exit 1
fi
echo "$settings" >"$CONF_DIR/settings"
echo "ensure-podman: Podman $(podman --version | awk '{ print $3 }') answers on $SOCK"
