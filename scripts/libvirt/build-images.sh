#!/usr/bin/env bash
# Build the real libvirt images for the end-to-end test, locally, with no
# registry: debootstrap (minbase) + apt-get install in a chroot + docker import.
#
#   usage: build-images.sh [SUITE...]        (default: bookworm trixie)
#
# Images: spcd-e2e/libvirt:<suite>, CMD libvirtd in the foreground (the
#   libvirt-only test runs it so), and Kolla's container runtime as Kolla's
#   nova-libvirt image has it: kolla_start, kolla_set_configs and
#   kolla_copy_cacerts read from ../shared/peers/kolla-2024.1 beside the
#   repository (SPCD_KOLLA_DIR overrides), python3 and sudo for them, a
#   kolla_extend_start of ours (image/kolla_extend_start), Kolla's users
#   kolla (42400), qemu (42427) and nova (42436) and /var/log/kolla
#   root:kolla 2775 (so a fresh kolla_logs volume is filled as Kolla's
#   images fill it), and SASL as Kolla's nova-libvirt image has it for the TCP
#   listener (saslpasswd2, the DIGEST-MD5 module). The OpenStack test starts it through kolla_start, labels
#   org.opencontainers.image.version=<upstream libvirt version, e.g. 9.0.0>
#   spcd.hypervisor=libvirt
#   spcd-e2e.input-hash=<hash of this script, image/*.conf, suite, mirror>
# Cached twice: an image whose input-hash label matches is reused as is, and
# the rootfs tarball in $CACHE/rootfs/<suite>-<hash>.tar is re-imported if the
# image was removed. SPCD_E2E_FORCE=1 rebuilds from scratch.
#
# Environment:
#   SPCD_E2E_CACHE   cache dir (default /var/cache/spcd-e2e)
#   SPCD_E2E_MIRROR  Debian mirror (default: the host's apt mirror, else
#                    http://deb.debian.org/debian)
#   SPCD_E2E_PARALLEL=0  build the suites one after the other
#   DOCKER           docker client (default /usr/bin/docker)
#
# Output (stdout), one machine-readable line per fact, e.g.
#   phase=debootstrap suite=bookworm seconds=23.4
#   image=spcd-e2e/libvirt:bookworm suite=bookworm libvirt_version=9.0.0 qemu_version=7.2.19 input_hash=... source=built size_bytes=...
# Progress and tool output go to stderr and $CACHE/logs/<suite>.log.
# Exit status: 0 when every image is present, 1 when a build failed, 2 on usage.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
CACHE="${SPCD_E2E_CACHE:-/var/cache/spcd-e2e}"
DOCKER="${DOCKER:-/usr/bin/docker}"
[ -x "$DOCKER" ] || DOCKER=docker
REPO=spcd-e2e/libvirt
PACKAGES="libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients qemu-system-x86 python3 sudo sasl2-bin libsasl2-modules"
KOLLA="${SPCD_KOLLA_DIR:-$here/../../../shared/peers/kolla-2024.1}"
KOLLA_FILES="set_configs.py:kolla_set_configs start.sh:kolla_start copy_cacerts.sh:kolla_copy_cacerts"
for pair in $KOLLA_FILES sudoers:; do
  [ -r "$KOLLA/${pair%%:*}" ] || {
    echo "build-images: missing $KOLLA/${pair%%:*} (Kolla's runtime files are read from ../shared beside the repository; SPCD_KOLLA_DIR overrides)" >&2
    exit 1
  }
done

log() { echo "build-images: $*" >&2; }
# shellcheck source=../lib/debian-rootfs.sh
. "$here/../lib/debian-rootfs.sh"
MIRROR="${SPCD_E2E_MIRROR:-$(rootfs_detect_mirror)}"
rootfs_need_tools

input_hash() {
  local suite="$1"
  {
    sha256sum "$0" "$here/image/qemu.conf" "$here/image/libvirtd.conf" "$here/image/kolla_extend_start" \
      "$here/../lib/debian-rootfs.sh" | awk '{ print $1 }'
    for pair in $KOLLA_FILES sudoers:; do sha256sum "$KOLLA/${pair%%:*}" | awk '{ print $1 }'; done
    echo "suite=$suite mirror=$MIRROR packages=$PACKAGES"
  } | sha256sum | cut -c1-16
}

# Prints the image line for an existing image, from its labels.
image_line() {
  local suite="$1" source="$2"
  "$DOCKER" image inspect -f \
    "image=$REPO:$suite suite=$suite libvirt_version={{index .Config.Labels \"org.opencontainers.image.version\"}} qemu_version={{index .Config.Labels \"spcd-e2e.qemu-version\"}} input_hash={{index .Config.Labels \"spcd-e2e.input-hash\"}} source=$source size_bytes={{.Size}}" \
    "$REPO:$suite"
}

import_tar() {
  local suite="$1" hash="$2" tar="$3" libvirt_version="$4" qemu_version="$5" old new
  old=$("$DOCKER" image inspect -f '{{.Id}}' "$REPO:$suite" 2>/dev/null || true)
  "$DOCKER" import \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'CMD ["/usr/sbin/libvirtd"]' \
    -c "LABEL org.opencontainers.image.version=$libvirt_version" \
    -c "LABEL spcd.hypervisor=libvirt" \
    -c "LABEL spcd-e2e.input-hash=$hash" \
    -c "LABEL spcd-e2e.suite=$suite" \
    -c "LABEL spcd-e2e.qemu-version=$qemu_version" \
    "$tar" "$REPO:$suite" >/dev/null
  # Drop the image this one replaces (fails harmlessly while a container uses it).
  new=$("$DOCKER" image inspect -f '{{.Id}}' "$REPO:$suite")
  if [ -n "$old" ] && [ "$old" != "$new" ]; then "$DOCKER" rmi "$old" >/dev/null 2>&1 || true; fi
}

# Kolla's runtime and users in ROOT, as Kolla's nova-libvirt image has them.
kolla_runtime() {
  local root="$1" pair name uid
  for pair in kolla:42400 qemu:42427 nova:42436; do
    name=${pair%%:*} uid=${pair##*:}
    grep -q "^$name:" "$root/etc/group" || chroot "$root" groupadd --gid "$uid" "$name"
  done
  for pair in qemu:42427 nova:42436; do
    name=${pair%%:*} uid=${pair##*:}
    grep -q "^$name:" "$root/etc/passwd" ||
      chroot "$root" useradd --no-create-home --no-log-init --home-dir "/var/lib/$name" \
        --shell /usr/sbin/nologin --uid "$uid" --gid "$uid" --groups kolla "$name"
  done
  chroot "$root" usermod -a -G qemu nova
  for pair in $KOLLA_FILES; do install -m 0755 "$KOLLA/${pair%%:*}" "$root/usr/local/bin/${pair##*:}"; done
  install -m 0755 "$here/image/kolla_extend_start" "$root/usr/local/bin/kolla_extend_start"
  install -m 0440 "$KOLLA/sudoers" "$root/etc/sudoers.d/kolla"
  install -d -m 2775 -o 0 -g 42400 "$root/var/log/kolla"
  mkdir -p "$root/var/lib/kolla/config_files"
}

build_one() {
  local suite="$1"
  local hash have tar meta work t0 t1
  hash=$(input_hash "$suite")
  mkdir -p "$CACHE/rootfs" "$CACHE/logs" "$CACHE/debs/$suite" "$CACHE/work"
  exec 9>"$CACHE/lock.$suite"
  flock 9
  have=$("$DOCKER" image inspect -f '{{index .Config.Labels "spcd-e2e.input-hash"}}' "$REPO:$suite" 2>/dev/null || true)
  if [ "$have" = "$hash" ] && [ "${SPCD_E2E_FORCE:-0}" != 1 ]; then
    image_line "$suite" cached-image
    return 0
  fi
  tar="$CACHE/rootfs/$suite-$hash.tar"
  meta="$CACHE/rootfs/$suite-$hash.env"
  if [ -s "$tar" ] && [ -s "$meta" ] && [ "${SPCD_E2E_FORCE:-0}" != 1 ]; then
    local libvirt_version qemu_version
    # shellcheck disable=SC1090
    . "$meta"
    t0=$(now)
    import_tar "$suite" "$hash" "$tar" "$libvirt_version" "$qemu_version"
    echo "phase=import suite=$suite seconds=$(elapsed "$t0" "$(now)")"
    image_line "$suite" cached-rootfs
    return 0
  fi

  local logf="$CACHE/logs/$suite.log"
  : >"$logf"
  work="$CACHE/work/$suite.$$"
  rm -rf "$work"
  mkdir -p "$work"
  # shellcheck disable=SC2064
  trap "$(rootfs_cleanup_trap "$work")" EXIT
  log "$suite: debootstrap from $MIRROR (log: $logf)"
  t0=$(now)
  rootfs_debootstrap "$work/root" "$suite" "$MIRROR" "$CACHE/debs/$suite" "$logf" || return 1
  t1=$(now)
  echo "phase=debootstrap suite=$suite seconds=$(elapsed "$t0" "$t1")"

  local root="$work/root"
  t0=$(now)
  # /proc, a policy-rc.d that starts nothing, the package cache across builds.
  rootfs_prepare "$root" "$CACHE/debs/$suite"
  # shellcheck disable=SC2086
  rootfs_apt "$root" "$logf" $PACKAGES || return 1
  # libvirtd refuses to start without its qemu user, even when qemu runs as root.
  grep -q '^libvirt-qemu:' "$root/etc/group" || echo 'libvirt-qemu:x:64055:' >>"$root/etc/group"
  grep -q '^libvirt-qemu:' "$root/etc/passwd" ||
    echo 'libvirt-qemu:x:64055:64055:Libvirt Qemu,,,:/var/lib/libvirt:/usr/sbin/nologin' >>"$root/etc/passwd"
  if [ -f "$root/etc/shadow" ] && ! grep -q '^libvirt-qemu:' "$root/etc/shadow"; then
    echo 'libvirt-qemu:!:19000::::::' >>"$root/etc/shadow"
  fi
  kolla_runtime "$root"
  install -m 0644 "$here/image/qemu.conf" "$root/etc/libvirt/qemu.conf"
  install -m 0644 "$here/image/libvirtd.conf" "$root/etc/libvirt/libvirtd.conf"
  mkdir -p "$root/var/log/libvirt/qemu" "$root/var/lib/libvirt/qemu" "$root/var/cache/libvirt/qemu" \
    "$root/etc/libvirt/qemu" "$root/run/libvirt"
  local libvirt_version qemu_version
  libvirt_version=$(chroot "$root" dpkg-query -W -f '${Version}' libvirt-daemon | sed -e 's/^[0-9]*://' -e 's/-[^-]*$//')
  qemu_version=$(chroot "$root" dpkg-query -W -f '${Version}' qemu-system-x86 | sed -e 's/^[0-9]*://' -e 's/[-+].*$//')
  rootfs_release "$root"
  # Slim the tree: package caches, lists, docs. Keep /usr/share/qemu (firmware).
  rootfs_slim "$root"
  mkdir -p "$root/run/libvirt"
  t1=$(now)
  echo "phase=chroot-install suite=$suite seconds=$(elapsed "$t0" "$t1") libvirt_version=$libvirt_version qemu_version=$qemu_version"

  t0=$(now)
  rm -f "$CACHE/rootfs/$suite"-*.tar "$CACHE/rootfs/$suite"-*.env
  rootfs_tar "$root" "$tar"
  printf 'libvirt_version=%s\nqemu_version=%s\n' "$libvirt_version" "$qemu_version" >"$meta"
  rm -rf "$work"
  t1=$(now)
  echo "phase=tar suite=$suite seconds=$(elapsed "$t0" "$t1") tar_bytes=$(stat -c %s "$tar")"
  t0=$(now)
  import_tar "$suite" "$hash" "$tar" "$libvirt_version" "$qemu_version"
  echo "phase=import suite=$suite seconds=$(elapsed "$t0" "$(now)")"
  image_line "$suite" built
}

if [ "$#" -eq 0 ]; then set -- bookworm trixie; fi
for s in "$@"; do
  case "$s" in bookworm | trixie) ;; *)
    echo "usage: build-images.sh [bookworm|trixie ...]" >&2
    exit 2
    ;;
  esac
done

T0=$(now)
rc=0
if [ "${SPCD_E2E_PARALLEL:-1}" = 1 ] && [ "$#" -gt 1 ]; then
  pids=()
  for s in "$@"; do
    (build_one "$s") &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
else
  # Background + wait, not `(...) || rc=1`: that would turn off set -e inside.
  for s in "$@"; do
    (build_one "$s") &
    wait "$!" || rc=1
  done
fi
echo "phase=total seconds=$(elapsed "$T0" "$(now)") status=$([ "$rc" = 0 ] && echo ok || echo failed)"
exit "$rc"
