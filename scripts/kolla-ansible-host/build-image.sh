#!/usr/bin/env bash
# Build spcd-e2e/kolla-ansible-host:bookworm: spcd-e2e/systemd:bookworm (systemd
# as /sbin/init) plus Debian's ansible-core, python3-docker, python3-dbus and the
# system bus (dbus: the module talks to systemd through it),
# so that kolla-ansible's own kolla_container module (run from
# ../shared/peers/kolla-ansible-2024.1, never copied here) can create
# containers on the host's engine through a bind-mounted Docker socket and
# write their systemd units into this container's systemd. The docker CLI the
# units run is the host's /usr/bin/docker, bind-mounted by the test.
#
#   usage: build-image.sh
#
# Cached: an image whose spcd-e2e.input-hash label matches (this script and
# the base image's id) is reused. SPCD_E2E_FORCE=1 rebuilds.
#
# Output (stdout): a final line
#   image=spcd-e2e/kolla-ansible-host:bookworm source=<built|cached-image> seconds=<total>
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
DOCKER="${DOCKER:-/usr/bin/docker}"
[ -x "$DOCKER" ] || DOCKER=docker
IMAGE=spcd-e2e/kolla-ansible-host:bookworm
BASE=spcd-e2e/systemd:bookworm
T0=$(date +%s)

"$here/../systemd-image/build-image.sh" >&2
base_id=$("$DOCKER" image inspect -f '{{.Id}}' "$BASE")
hash=$({
  sha256sum "$0" | awk '{ print $1 }'
  echo "base=$base_id"
} | sha256sum | cut -c1-16)

have=$("$DOCKER" image inspect -f '{{index .Config.Labels "spcd-e2e.input-hash"}}' "$IMAGE" 2>/dev/null || true)
if [ "$have" = "$hash" ] && [ "${SPCD_E2E_FORCE:-0}" != 1 ]; then
  echo "image=$IMAGE source=cached-image seconds=$(($(date +%s) - T0))"
  exit 0
fi

work="spcd-e2e-kolla-ansible-host-build-$$"
trap '"$DOCKER" rm -f "$work" >/dev/null 2>&1 || true' EXIT
"$DOCKER" run --name "$work" "$BASE" /bin/sh -c '
  set -e
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends ansible-core python3-docker python3-dbus dbus
  apt-get clean
  rm -rf /var/lib/apt/lists/*
' >&2
"$DOCKER" commit \
  -c 'ENV container=docker' \
  -c 'CMD ["/sbin/init"]' \
  -c "LABEL spcd-e2e.input-hash=$hash" \
  "$work" "$IMAGE" >/dev/null
echo "image=$IMAGE source=built seconds=$(($(date +%s) - T0))"
