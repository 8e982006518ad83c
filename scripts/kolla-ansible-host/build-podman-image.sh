#!/usr/bin/env bash
# Build spcd-e2e/kolla-ansible-host:bookworm-podman: the kolla-ansible host box
# (build-image.sh) for a host whose kolla-ansible deploys on Podman
# (`kolla_container_engine: podman`):
#   - podman-py, which kolla_container's Podman worker imports. Debian 12 has
#     no python3-podman: Debian 13's (pure Python, pinned below by version and
#     SHA-256 from its Packages index) installs over Debian 12's requests,
#     urllib3, xdg and tomli, and speaks to Podman 4.3's API;
#   - Debian's podman, as the client the units run (`podman start -a`,
#     `podman stop`): containers.conf makes it a remote client of the host's
#     API service, whose socket the test binds in at /run/podman/podman.sock.
#
#   usage: build-podman-image.sh
#
# Cached: an image whose spcd-e2e.input-hash label matches (this script and
# the base image's id) is reused. SPCD_E2E_FORCE=1 rebuilds.
#
# Output (stdout): a final line
#   image=spcd-e2e/kolla-ansible-host:bookworm-podman source=<built|cached-image> seconds=<total>
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
DOCKER="${DOCKER:-/usr/bin/docker}"
[ -x "$DOCKER" ] || DOCKER=docker
IMAGE=spcd-e2e/kolla-ansible-host:bookworm-podman
BASE=spcd-e2e/kolla-ansible-host:bookworm
MIRROR="${SPCD_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
PODMAN_PY=pool/main/p/python-podman/python3-podman_5.4.0.1-2_all.deb
PODMAN_PY_SHA256=cc5b744fcaff6f7671d782e47430ab2f871eaabc3b31787a20f63cee83ed4cfe
T0=$(date +%s)

"$here/build-image.sh" >&2
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

work="spcd-e2e-kolla-ansible-host-podman-build-$$"
trap '"$DOCKER" rm -f "$work" >/dev/null 2>&1 || true' EXIT
"$DOCKER" run --name "$work" -e "URL=$MIRROR/$PODMAN_PY" -e "SHA=$PODMAN_PY_SHA256" "$BASE" /bin/sh -c '
  set -e
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends podman curl ca-certificates \
    python3-requests python3-urllib3 python3-xdg python3-tomli
  curl -sSf --max-time 120 -o /tmp/podman-py.deb "$URL"
  echo "$SHA  /tmp/podman-py.deb" | sha256sum -c -
  dpkg -i /tmp/podman-py.deb
  rm -f /tmp/podman-py.deb
  mkdir -p /etc/containers
  printf "[engine]\nremote = true\nactive_service = \"host\"\n\n[engine.service_destinations.host]\nuri = \"unix:///run/podman/podman.sock\"\n" \
    >/etc/containers/containers.conf
  apt-get clean
  rm -rf /var/lib/apt/lists/*
' >&2
"$DOCKER" commit \
  -c 'ENV container=docker' \
  -c 'CMD ["/sbin/init"]' \
  -c "LABEL spcd-e2e.input-hash=$hash" \
  "$work" "$IMAGE" >/dev/null
echo "image=$IMAGE source=built seconds=$(($(date +%s) - T0))"
