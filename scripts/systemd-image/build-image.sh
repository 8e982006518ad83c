#!/usr/bin/env bash
# Build spcd-e2e/systemd:bookworm: a Debian bookworm minbase with systemd as
# /sbin/init, iproute2 (ss) and curl, for the test that starts spcd under
# systemd/spcd.service with systemd as PID 1 (these machines have no systemd
# running). No Node and no spcd inside: the test mounts them.
#
#   usage: build-image.sh
#
# Cached like scripts/kolla-runtime/build-image.sh: an image whose
# spcd-e2e.input-hash label matches (this script, the rootfs library, the
# mirror) is reused; the rootfs tarball in $CACHE/rootfs/ is re-imported if
# the image was removed. SPCD_E2E_FORCE=1 rebuilds. Cold: about 3 minutes.
#
# Output (stdout): phase=<name> seconds=<n> lines and a final
#   image=spcd-e2e/systemd:bookworm source=<built|cached-image|cached-rootfs> seconds=<total>
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
CACHE="${SPCD_E2E_CACHE:-/var/cache/spcd-e2e}"
DOCKER="${DOCKER:-/usr/bin/docker}"
[ -x "$DOCKER" ] || DOCKER=docker
IMAGE=spcd-e2e/systemd:bookworm
SUITE=bookworm
log() { echo "${0##*/}: $*" >&2; }
# shellcheck source=../lib/debian-rootfs.sh
. "$here/../lib/debian-rootfs.sh"
MIRROR="${SPCD_E2E_MIRROR:-$(rootfs_detect_mirror)}"
rootfs_need_tools

T0=$(now)
hash=$({
  sha256sum "$0" "$here/../lib/debian-rootfs.sh" | awk '{ print $1 }'
  echo "suite=$SUITE mirror=$MIRROR"
} | sha256sum | cut -c1-16)

mkdir -p "$CACHE/rootfs" "$CACHE/logs" "$CACHE/debs/$SUITE" "$CACHE/work"
exec 9>"$CACHE/lock.systemd-image"
flock 9

have=$("$DOCKER" image inspect -f '{{index .Config.Labels "spcd-e2e.input-hash"}}' "$IMAGE" 2>/dev/null || true)
if [ "$have" = "$hash" ] && [ "${SPCD_E2E_FORCE:-0}" != 1 ]; then
  echo "image=$IMAGE source=cached-image seconds=$(elapsed "$T0" "$(now)")"
  exit 0
fi

tar="$CACHE/rootfs/systemd-$hash.tar"
import() {
  "$DOCKER" import \
    -c 'ENV container=docker' \
    -c 'CMD ["/sbin/init"]' \
    -c "LABEL spcd-e2e.input-hash=$hash" \
    "$tar" "$IMAGE" >/dev/null
}
if [ -s "$tar" ] && [ "${SPCD_E2E_FORCE:-0}" != 1 ]; then
  import
  echo "image=$IMAGE source=cached-rootfs seconds=$(elapsed "$T0" "$(now)")"
  exit 0
fi

logf="$CACHE/logs/systemd-image.log"
: >"$logf"
work="$CACHE/work/systemd-image.$$"
root="$work/root"
mkdir -p "$work"
# shellcheck disable=SC2064
trap "$(rootfs_cleanup_trap "$work")" EXIT
t0=$(now)
# The package cache is shared with the other bookworm builds: take their lock too.
exec 8>"$CACHE/lock.$SUITE"
flock 8
rootfs_debootstrap "$root" "$SUITE" "$MIRROR" "$CACHE/debs/$SUITE" "$logf"
echo "phase=debootstrap seconds=$(elapsed "$t0" "$(now)")"
t0=$(now)
rootfs_prepare "$root" "$CACHE/debs/$SUITE"
rootfs_apt "$root" "$logf" systemd systemd-sysv iproute2 curl
rootfs_release "$root"
flock -u 8
echo "phase=packages seconds=$(elapsed "$t0" "$(now)")"
t0=$(now)
# A fresh machine id at each boot; no getty on a container's console.
: >"$root/etc/machine-id"
chroot "$root" systemctl mask getty.target console-getty.service systemd-logind.service >/dev/null 2>&1 || true
rootfs_slim "$root"
rm -f "$CACHE/rootfs"/systemd-*.tar
rootfs_tar "$root" "$tar"
import
echo "phase=assemble seconds=$(elapsed "$t0" "$(now)")"
echo "image=$IMAGE source=built seconds=$(elapsed "$T0" "$(now)")"
