#!/usr/bin/env bash
# Build spcd-e2e/kolla-runtime:bookworm: a Debian bookworm minbase with
# python3, bash and sudo, the Kolla service users at Kolla's fixed uids, Kolla's own
# container-side runtime (set_configs.py as /usr/local/bin/kolla_set_configs,
# start.sh as kolla_start, ...) read at build time from
# ../shared/peers/kolla-2024.1/ beside the repository (KOLLA_PEER overrides).
# (sudoers as /etc/sudoers.d/kolla), and a stand-in kolla_extend_start
# (extend_start here). Tests run spcd's generated config.json files through
# it, and bootstrap tasks through its kolla_start.
#
#   usage: build-image.sh
#
# Cached like scripts/libvirt/build-images.sh: an image whose
# spcd-e2e.input-hash label matches (this script, the Kolla files, the mirror)
# is reused; the rootfs tarball in $CACHE/rootfs/ is re-imported if the image
# was removed. SPCD_E2E_FORCE=1 rebuilds.
#
# Output (stdout): phase=<name> seconds=<n> lines and a final
#   image=spcd-e2e/kolla-runtime:bookworm source=<built|cached-image|cached-rootfs> seconds=<total>
# Tool output goes to $CACHE/logs/kolla-runtime.log. Exit 0 when the image is present.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo_root="$(cd "$here/../.." && pwd)"
CACHE="${SPCD_E2E_CACHE:-/var/cache/spcd-e2e}"
DOCKER="${DOCKER:-/usr/bin/docker}"
[ -x "$DOCKER" ] || DOCKER=docker
KOLLA_PEER="${KOLLA_PEER:-$repo_root/../shared/peers/kolla-2024.1}"
IMAGE=spcd-e2e/kolla-runtime:bookworm
SUITE=bookworm
log() { echo "${0##*/}: $*" >&2; }
# shellcheck source=../lib/debian-rootfs.sh
. "$here/../lib/debian-rootfs.sh"
MIRROR="${SPCD_E2E_MIRROR:-$(rootfs_detect_mirror)}"
rootfs_need_tools

# Kolla's users and groups (docker/base in openstack/kolla): name uid.
KOLLA_USERS="kolla:42400 glance:42415 keystone:42425 qemu:42427 mysql:42434 neutron:42435 nova:42436
rabbitmq:42439 memcached:42457 libvirt:42473 openvswitch:42476 placement:42482"
KOLLA_FILES="set_configs.py:kolla_set_configs start.sh:kolla_start copy_cacerts.sh:kolla_copy_cacerts
healthcheck_curl:healthcheck_curl healthcheck_listen:healthcheck_listen healthcheck_port:healthcheck_port
healthcheck_socket:healthcheck_socket healthcheck_filemod:healthcheck_filemod"

for pair in $KOLLA_FILES sudoers:; do
  [ -r "$KOLLA_PEER/${pair%%:*}" ] || {
    log "missing $KOLLA_PEER/${pair%%:*} (Kolla's runtime files are read from ../shared beside the repository)"
    exit 1
  }
done

T0=$(now)
hash=$({
  sha256sum "$0" "$here/../lib/debian-rootfs.sh" "$here/extend_start" | awk '{ print $1 }'
  for pair in $KOLLA_FILES sudoers:; do sha256sum "$KOLLA_PEER/${pair%%:*}" | awk '{ print $1 }'; done
  echo "suite=$SUITE mirror=$MIRROR users=$KOLLA_USERS"
} | sha256sum | cut -c1-16)

mkdir -p "$CACHE/rootfs" "$CACHE/logs" "$CACHE/debs/$SUITE" "$CACHE/work"
exec 9>"$CACHE/lock.kolla-runtime"
flock 9

have=$("$DOCKER" image inspect -f '{{index .Config.Labels "spcd-e2e.input-hash"}}' "$IMAGE" 2>/dev/null || true)
if [ "$have" = "$hash" ] && [ "${SPCD_E2E_FORCE:-0}" != 1 ]; then
  echo "image=$IMAGE source=cached-image seconds=$(elapsed "$T0" "$(now)")"
  exit 0
fi

tar="$CACHE/rootfs/kolla-runtime-$hash.tar"
import() {
  "$DOCKER" import \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'CMD ["kolla_start"]' \
    -c "LABEL spcd-e2e.input-hash=$hash" \
    "$tar" "$IMAGE" >/dev/null
}
if [ -s "$tar" ] && [ "${SPCD_E2E_FORCE:-0}" != 1 ]; then
  import
  echo "image=$IMAGE source=cached-rootfs seconds=$(elapsed "$T0" "$(now)")"
  exit 0
fi

logf="$CACHE/logs/kolla-runtime.log"
: >"$logf"
work="$CACHE/work/kolla-runtime.$$"
root="$work/root"
mkdir -p "$work"
# shellcheck disable=SC2064
trap "umount -l '$root/proc' 2>/dev/null || true; rm -rf '$work'" EXIT
log "debootstrap $SUITE from $MIRROR (log: $logf)"
t0=$(now)
# The package cache is shared with the libvirt images' bookworm build: take its lock too.
exec 8>"$CACHE/lock.$SUITE"
flock 8
debootstrap --variant=minbase --include=python3,sudo --cache-dir="$CACHE/debs/$SUITE" "$SUITE" "$root" "$MIRROR" \
  >>"$logf" 2>&1 || {
  log "debootstrap failed; last lines of $logf:"
  tail -n 30 "$logf" >&2
  exit 1
}
flock -u 8
echo "phase=debootstrap seconds=$(elapsed "$t0" "$(now)")"

t0=$(now)
for pair in $KOLLA_USERS; do
  name=${pair%%:*} id=${pair##*:}
  chroot "$root" groupadd -g "$id" "$name"
  chroot "$root" useradd -M -d "/var/lib/$name" -s /usr/sbin/nologin -u "$id" -g "$id" "$name"
done
for name in $KOLLA_USERS; do
  name=${name%%:*}
  [ "$name" = kolla ] || chroot "$root" usermod -a -G kolla "$name"
done
for pair in $KOLLA_FILES; do
  install -m 0755 "$KOLLA_PEER/${pair%%:*}" "$root/usr/local/bin/${pair##*:}"
done
install -m 0755 "$here/extend_start" "$root/usr/local/bin/kolla_extend_start"
install -m 0440 "$KOLLA_PEER/sudoers" "$root/etc/sudoers.d/kolla"
mkdir -p "$root/var/lib/kolla/config_files" "$root/var/log/kolla"
# As Kolla's base image: the log tree is root:kolla, setgid and group-writable,
# so each service user can make its own folder under it.
chroot "$root" chown root:kolla /var/log/kolla
chmod 2775 "$root/var/log/kolla"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* \
  "$root"/usr/share/man/* "$root"/usr/share/locale/* "$root"/dev/* "$root"/run/* "$root"/tmp/*
tar --numeric-owner -C "$root" -cf "$tar.part" .
rm -f "$CACHE/rootfs"/kolla-runtime-*.tar
mv "$tar.part" "$tar"
echo "phase=assemble seconds=$(elapsed "$t0" "$(now)")"
t0=$(now)
import
echo "phase=import seconds=$(elapsed "$t0" "$(now)")"
echo "image=$IMAGE source=built seconds=$(elapsed "$T0" "$(now)")"
