#!/usr/bin/env bash
# The README's first command: install what the demo needs (scripts/setup-demo.sh:
# no test tools), build the demo images,
# and run spcd in the foreground with the bundled demo set. Ctrl-C stops spcd;
# the containers it keeps keep running (that is the point). spcd's log shows as
# readable lines on a terminal (JSON when piped; see docs/how-to/operate-a-host.md#logs).
# Remove the containers with
#   docker rm -f $(docker ps -aq --filter label=spcd.instance=demo)
# On a Podman host, `SPCD_ENGINE=podman npm run demo` (and `podman` for `docker`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-demo.sh
STATE="${SPCD_DEMO_STATE:-/var/lib/spcd-demo}"
SOCK="${SPCD_DEMO_SOCKET:-/run/spcd-demo/spcd.sock}"
mkdir -p "$STATE" /run/spcd-demo/libvirt /var/lib/spcd-demo/libvirt
overrides=()
cli=(/usr/bin/docker)
columns='{{.Names}}\t{{.Image}}\t{{.Status}}\t{{.Label "spcd.set"}}\t{{.Label "spcd.generation"}}'
if [ "${SPCD_ENGINE:-}" = podman ]; then
  # A Podman host (docs/how-to/run-on-podman.md): Podman's API service, the
  # demo images copied into it, and the hypervisor without an init process.
  bash scripts/podman/ensure-podman.sh
  bash scripts/podman/load-images.sh spcd-demo/service:1 spcd-demo/service:2 spcd-demo/service:3
  export SPCD_DOCKER_SOCKET=/run/podman/podman.sock CONTAINERS_CONF=/run/spcd-podman/containers.conf
  cli=(podman)
  columns='{{.Names}}\t{{.Image}}\t{{.Status}}'
  overrides=(--overrides container-sets/hosts/podman.yaml)
# This VM cannot start --privileged containers with Docker (see docs/how-to/operate-a-host.md).
elif ! /usr/bin/docker run --rm --privileged spcd-demo/service:1 true >/dev/null 2>&1; then
  echo "demo: --privileged does not start on this host; using container-sets/hosts/no-privileged.yaml"
  overrides=(--overrides container-sets/hosts/no-privileged.yaml)
fi
(
  # Once spcd has converged, show what it keeps running.
  for _ in $(seq 1 120); do
    n=$("${cli[@]}" ps -q --filter label=spcd.instance=demo --filter status=running | wc -l)
    [ "$n" -ge 3 ] && break
    sleep 0.5
  done
  echo
  echo "=== containers spcd keeps running (label spcd.instance=demo) ==="
  "${cli[@]}" ps --filter label=spcd.instance=demo \
    --format "table $columns"
  echo "=== try: npx spcctl --socket $SOCK status   (Ctrl-C stops spcd, not the containers) ==="
) &
exec bin/spcd.js --instance demo --sets container-sets/demo "${overrides[@]}" \
  --state-dir "$STATE" --socket "$SOCK" "$@"
