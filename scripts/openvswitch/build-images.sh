#!/usr/bin/env bash
# Build the Open vSwitch image of the end-to-end tests locally, with no
# registry: spcd-e2e/openstack:zed (scripts/openstack/build-images.sh, which
# this script calls and which is cached) plus Debian bookworm's
# openvswitch-switch (3.1), neutron-openvswitch-agent (Zed) and OVN (23.03), in one
# `docker build` stage. One image serves openvswitch_db, openvswitch_vswitchd,
# neutron_openvswitch_agent and the OVN containers (ovn_controller,
# ovn_nb_db, ovn_sb_db, ovn_northd); the container's command picks the service.
#
#   usage: build-images.sh
#
# Cached by an input hash (the label spcd-e2e.input-hash): the base image's
# own input hash, this script, image/packages and image/kolla_extend_start.
# The openstack image keeps its own name and inputs; this one is
# spcd-e2e/openvswitch:zed.
#
# Environment:
#   SPCD_E2E_CACHE   cache dir (default /var/cache/spcd-e2e): lock and log
#   SPCD_E2E_MIRROR  Debian mirror (default: the host's apt mirror)
#   SPCD_E2E_FORCE=1 rebuild this image (not the base)
#   DOCKER           docker client (default /usr/bin/docker)
# Output (stdout), machine-readable lines:
#   image=spcd-e2e/openvswitch:zed openvswitch=... neutron=... input_hash=... source=built|cached-image size_bytes=...
#   phase=total seconds=... status=ok|failed
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=../lib/debian-rootfs.sh
. "$repo/scripts/lib/debian-rootfs.sh"

CACHE="${SPCD_E2E_CACHE:-/var/cache/spcd-e2e}"
DOCKER="${DOCKER:-/usr/bin/docker}"
[ -x "$DOCKER" ] || DOCKER=docker
BASE=spcd-e2e/openstack:zed
IMAGE=spcd-e2e/openvswitch:zed
NAME=openvswitch-zed

log() { echo "build-images(openvswitch): $*" >&2; }
[ "$#" -eq 0 ] || {
  echo "usage: build-images.sh" >&2
  exit 2
}
T0=$(now)
mkdir -p "$CACHE/logs" "$CACHE/work"

# The base, from its own (cached) builder; its lines go to stderr here.
"$repo/scripts/openstack/build-images.sh" >&2
MIRROR="${SPCD_E2E_MIRROR:-$(rootfs_detect_mirror)}"

label() { "$DOCKER" image inspect -f "{{index .Config.Labels \"$2\"}}" "$1" 2>/dev/null || true; }
base_hash=$(label "$BASE" spcd-e2e.input-hash)
input_hash=$({
  echo "base=$base_hash mirror=$MIRROR"
  sha256sum "$0" "$here/image/packages" "$here/image/kolla_extend_start" | awk '{ print $1 }'
} | sha256sum | cut -c1-16)

image_line() {
  echo "image=$IMAGE openvswitch=$(label "$IMAGE" spcd-e2e.openvswitch-version)" \
    "neutron=$(label "$IMAGE" spcd-e2e.neutron-version) input_hash=$input_hash source=$1" \
    "size_bytes=$("$DOCKER" image inspect -f '{{.Size}}' "$IMAGE")"
}

exec 9>"$CACHE/lock.$NAME"
flock 9
if [ "${SPCD_E2E_FORCE:-0}" != 1 ] && [ "$(label "$IMAGE" spcd-e2e.input-hash)" = "$input_hash" ]; then
  image_line cached-image
  echo "phase=total seconds=$(elapsed "$T0" "$(now)") status=ok"
  exit 0
fi

ctx=$(mktemp -d "$CACHE/work/$NAME.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
install -m 0755 "$here/image/kolla_extend_start" "$ctx/kolla_extend_start"
grep -vE '^[[:space:]]*(#|$)' "$here/image/packages" >"$ctx/packages"
base_id=$("$DOCKER" image inspect -f '{{.Id}}' "$BASE")
# Kolla's openvswitch user (uid 42476) before apt, so the package reuses it.
# policy-rc.d: the packages' maintainer scripts start no service.
cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM $base_id
COPY packages /tmp/spcd-packages
RUN set -e; groupadd --gid 42476 openvswitch; \\
  useradd --no-create-home --no-log-init --home-dir /var/lib/openvswitch --shell /usr/sbin/nologin \\
    --uid 42476 --gid 42476 --groups kolla openvswitch; \\
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; \\
  echo "deb $MIRROR bookworm main" >/etc/apt/sources.list; \\
  apt-get update -q; \\
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \$(cat /tmp/spcd-packages); \\
  apt-get clean; rm -rf /var/lib/apt/lists/* /tmp/spcd-packages /usr/sbin/policy-rc.d; \\
  mv /usr/local/bin/kolla_extend_start /usr/local/bin/spcd-openstack-extend-start; \\
  rm -rf /var/lib/openvswitch/* /etc/openvswitch/conf.db; \\
  install -d -m 0755 /run/openvswitch /var/lib/openvswitch; \\
  dpkg-query -W -f '\${Version}\n' openvswitch-switch >/tmp/ovs-version
COPY kolla_extend_start /usr/local/bin/kolla_extend_start
DOCKERFILE
logf="$CACHE/logs/$NAME.log"
old=$("$DOCKER" image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)
if ! DOCKER_BUILDKIT=0 "$DOCKER" build --network host -t "$IMAGE-unlabelled" "$ctx" >"$logf" 2>&1; then
  log "docker build of $IMAGE failed; last lines of $logf:"
  tail -n 30 "$logf" >&2
  echo "phase=total seconds=$(elapsed "$T0" "$(now)") status=failed"
  exit 1
fi
ovs_version=$("$DOCKER" run --rm --network none --entrypoint cat "$IMAGE-unlabelled" /tmp/ovs-version | sed -e 's/^[0-9]*://')
neutron_version=$(label "$BASE" spcd-e2e.neutron-version)
printf 'FROM %s\nLABEL spcd-e2e.input-hash="%s" spcd-e2e.base-hash="%s" spcd-e2e.openvswitch-version="%s" spcd-e2e.neutron-version="%s"\n' \
  "$IMAGE-unlabelled" "$input_hash" "$base_hash" "$ovs_version" "$neutron_version" >"$ctx/Dockerfile"
DOCKER_BUILDKIT=0 "$DOCKER" build --network none -q -t "$IMAGE" "$ctx" >>"$logf" 2>&1
"$DOCKER" rmi "$IMAGE-unlabelled" >/dev/null 2>&1 || true
new=$("$DOCKER" image inspect -f '{{.Id}}' "$IMAGE")
if [ -n "$old" ] && [ "$old" != "$new" ]; then "$DOCKER" rmi "$old" >/dev/null 2>&1 || true; fi
image_line built
echo "phase=total seconds=$(elapsed "$T0" "$(now)") status=ok"
