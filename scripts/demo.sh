#!/usr/bin/env bash
# The README's first command: install what the demo needs (scripts/setup-demo.sh:
# no test tools), build the demo images,
# and run spcd in the foreground with the bundled demo set. Ctrl-C stops spcd;
# the containers it keeps keep running (that is the point). spcd's log shows as
# readable lines on a terminal (JSON when piped; see docs/how-to/operate-a-host.md#logs).
# Remove the containers with
#   docker rm -f $(docker ps -aq --filter label=spcd.instance=demo)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-demo.sh
STATE="${SPCD_DEMO_STATE:-/var/lib/spcd-demo}"
SOCK="${SPCD_DEMO_SOCKET:-/run/spcd-demo/spcd.sock}"
mkdir -p "$STATE" /run/spcd-demo/libvirt /var/lib/spcd-demo/libvirt
overrides=()
# This VM cannot start --privileged containers (see docs/how-to/operate-a-host.md).
if ! /usr/bin/docker run --rm --privileged spcd-demo/service:1 true >/dev/null 2>&1; then
  echo "demo: --privileged does not start on this host; using container-sets/hosts/no-privileged.yaml"
  overrides=(--overrides container-sets/hosts/no-privileged.yaml)
fi
(
  # Once spcd has converged, show what it keeps running.
  for _ in $(seq 1 120); do
    n=$(/usr/bin/docker ps -q --filter label=spcd.instance=demo --filter status=running | wc -l)
    [ "$n" -ge 3 ] && break
    sleep 0.5
  done
  echo
  echo "=== containers spcd keeps running (label spcd.instance=demo) ==="
  /usr/bin/docker ps --filter label=spcd.instance=demo \
    --format 'table {{.Names}}\t{{.Image}}\t{{.Status}}\t{{.Label "spcd.set"}}\t{{.Label "spcd.generation"}}'
  echo "=== try: npx spcctl --socket $SOCK status   (Ctrl-C stops spcd, not the containers) ==="
) &
exec bin/spcd.js --instance demo --sets container-sets/demo "${overrides[@]}" \
  --state-dir "$STATE" --socket "$SOCK" "$@"
