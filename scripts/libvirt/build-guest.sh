#!/usr/bin/env bash
# Build the tiny guest of the libvirt end-to-end test, cached:
#   $CACHE/guest/vmlinuz     Debian's cloud kernel (from the package
#                            linux-image-cloud-amd64 depends on; downloaded with
#                            apt-get download and unpacked, never installed)
#   $CACHE/guest/initrd.img  busybox-static + guest/init + guest/net +
#                            guest/dhcp + iputils' ping (/bin/iping, with its
#                            libraries) + the kernel's virtio-net modules,
#                            cpio newc + gzip
#   $CACHE/guest/HASH/       the same two files for this input hash (kept, so
#                            a caller can take exactly the guest it built while
#                            a checkout with other inputs rebuilds guest/)
# The guest has no disk; its init prints "counter N" on ttyS0 once a second.
# With a virtio NIC it also takes an address by DHCP and pings the peers named
# on its kernel command line (spcd.peer=IP[,IP...], see guest/net).
#
#   usage: build-guest.sh
# Environment: SPCD_E2E_CACHE (default /var/cache/spcd-e2e), SPCD_E2E_FORCE=1.
# Output (stdout):
#   phase=guest seconds=... source=built|cached
#   kernel=/var/cache/spcd-e2e/guest/vmlinuz kernel_package=linux-image-... initrd=/var/cache/spcd-e2e/guest/initrd.img input_hash=...
#   guest_dir=/var/cache/spcd-e2e/guest/HASH
# Exit status: 0 on success, 1 on failure.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
CACHE="${SPCD_E2E_CACHE:-/var/cache/spcd-e2e}"
OUT="$CACHE/guest"
log() { echo "build-guest: $*" >&2; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
T0=$(now)

need=()
dpkg-query -W -f '${Status}' busybox-static 2>/dev/null | grep -q 'install ok installed' || need+=(busybox-static)
command -v cpio >/dev/null 2>&1 || need+=(cpio)
[ -x /usr/bin/ping ] && /usr/bin/ping -V >/dev/null 2>&1 || need+=(iputils-ping)
if [ "${#need[@]}" -gt 0 ]; then
  log "installing ${need[*]} from Debian"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi
BUSYBOX=/bin/busybox
IPING=/usr/bin/ping

kernel_pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-/ { print $2; exit }')
if [ -z "$kernel_pkg" ]; then
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  kernel_pkg=$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image-/ { print $2; exit }')
fi
[ -n "$kernel_pkg" ] || { log "cannot resolve linux-image-cloud-amd64"; exit 1; }

hash=$({
  sha256sum "$0" "$here/guest/init" "$here/guest/net" "$here/guest/dhcp" "$BUSYBOX" "$IPING" | awk '{ print $1 }'
  echo "$kernel_pkg"
} | sha256sum | cut -c1-16)

mkdir -p "$OUT"
exec 9>"$CACHE/lock.guest"
flock 9
# Publish $OUT/$hash/{vmlinuz,initrd.img} as $OUT/{vmlinuz,initrd.img} (each by rename).
publish() {
  cp "$OUT/$hash/vmlinuz" "$OUT/vmlinuz.part"
  cp "$OUT/$hash/initrd.img" "$OUT/initrd.img.part"
  mv "$OUT/vmlinuz.part" "$OUT/vmlinuz"
  mv "$OUT/initrd.img.part" "$OUT/initrd.img"
  echo "$hash" >"$OUT/input-hash"
}
report() {
  echo "phase=guest seconds=$(elapsed "$T0" "$(now)") source=$1"
  echo "kernel=$OUT/vmlinuz kernel_package=$kernel_pkg initrd=$OUT/initrd.img input_hash=$hash"
  echo "guest_dir=$OUT/$hash"
}
if [ "${SPCD_E2E_FORCE:-0}" != 1 ] && [ -s "$OUT/$hash/vmlinuz" ] && [ -s "$OUT/$hash/initrd.img" ]; then
  [ "$(cat "$OUT/input-hash" 2>/dev/null)" = "$hash" ] && [ -s "$OUT/vmlinuz" ] && [ -s "$OUT/initrd.img" ] || publish
  report cached
  exit 0
fi

work=$(mktemp -d "$CACHE/guest-work.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The kernel: download the versioned package into the cache, unpack, take vmlinuz.
mkdir -p "$CACHE/debs/guest"
deb=$(ls "$CACHE/debs/guest/${kernel_pkg}_"*.deb 2>/dev/null | head -n1 || true)
if [ -z "$deb" ]; then
  log "downloading $kernel_pkg"
  (cd "$CACHE/debs/guest" && apt-get download -q "$kernel_pkg" >&2)
  deb=$(ls "$CACHE/debs/guest/${kernel_pkg}_"*.deb | head -n1)
fi
dpkg-deb -x "$deb" "$work/kernel"
vmlinuz=$(ls "$work/kernel/boot/vmlinuz-"* | head -n1)
mkdir -p "$OUT/$hash"
install -m 0644 "$vmlinuz" "$OUT/$hash/vmlinuz.part"

# The initramfs: busybox-static, its applets as symlinks, /init, a console node.
ir="$work/initramfs"
mkdir -p "$ir/bin" "$ir/sbin" "$ir/dev" "$ir/proc" "$ir/sys" "$ir/tmp"
cp "$BUSYBOX" "$ir/bin/busybox"
for applet in $("$BUSYBOX" --list); do
  [ -e "$ir/bin/$applet" ] || ln -s busybox "$ir/bin/$applet"
done
install -m 0755 "$here/guest/init" "$ir/init"
install -m 0755 "$here/guest/net" "$ir/bin/spcd-net"
install -m 0755 "$here/guest/dhcp" "$ir/bin/spcd-dhcp"
# iputils' ping for the pinger (guest/net says why), with the libraries it loads.
install -m 0755 "$IPING" "$ir/bin/iping"
for lib in $(ldd "$IPING" | grep -o '/[^ ]*'); do
  mkdir -p "$ir$(dirname "$lib")"
  cp -L "$lib" "$ir$lib"
done
# The virtio-net driver and everything it needs, in load order (dependencies
# first), from each module's own depends= (the package ships no modules.dep).
mkdir -p "$ir/lib/modules"
moddir=$(ls -d "$work/kernel/lib/modules/"*/kernel | head -n1)
order=()
add_module() {
  local name="$1" f dep
  for m in "${order[@]}"; do [ "$m" = "$name" ] && return 0; done
  f=$(find "$moddir" -name "$name.ko" -o -name "${name//_/-}.ko" | head -n1)
  [ -n "$f" ] || { log "module $name not found under $moddir"; exit 1; }
  for dep in $(grep -a -o 'depends=[a-z0-9_,-]*' "$f" | head -n1 | cut -d= -f2 | tr ',' ' '); do
    add_module "${dep//-/_}"
  done
  cp "$f" "$ir/lib/modules/$name.ko"
  order+=("$name")
}
add_module virtio_pci
add_module virtio_net
printf '%s\n' "${order[@]}" >"$ir/lib/modules/load-order"
log "modules: ${order[*]}"
mknod -m 600 "$ir/dev/console" c 5 1
mknod -m 666 "$ir/dev/null" c 1 3
(cd "$ir" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet) | gzip -9 >"$OUT/$hash/initrd.img.part"

mv "$OUT/$hash/vmlinuz.part" "$OUT/$hash/vmlinuz"
mv "$OUT/$hash/initrd.img.part" "$OUT/$hash/initrd.img"
publish
report built
