# shellcheck shell=bash
# Shared steps of the project's Debian image builders (scripts/libvirt/,
# scripts/openstack/): debootstrap a minbase tree into a work folder, install
# packages in it with apt, non-interactively and without starting services,
# slim it, tar it. Sourced, never run; the caller sets `set -euo pipefail` and
# defines `log`.
#
# A build's chroot, while prepared (rootfs_prepare .. rootfs_release):
#   /proc mounted; /usr/sbin/policy-rc.d exits 101, so invoke-rc.d in
#   maintainer scripts starts no service and returns 0; the apt archive cache
#   bind-mounted from the build's cache folder. apt runs with
#   DEBIAN_FRONTEND=noninteractive (debconf answers every question with its
#   preseeded value or its default).

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# The host's own Debian mirror (from /etc/apt/sources.list*), else deb.debian.org.
rootfs_detect_mirror() {
  local m=""
  m=$(grep -hsE '^[[:space:]]*URIs:' /etc/apt/sources.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
    awk '{ for (i = 2; i <= NF; i++) print $i }' | grep -E '/debian/?$' | head -n1 || true)
  if [ -z "$m" ]; then
    m=$(grep -hsE '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
      awk '{ for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { print $i; break } }' | grep -E '/debian/?$' | head -n1 || true)
  fi
  echo "${m:-http://deb.debian.org/debian}"
}

# Installs debootstrap and flock on the host when missing.
rootfs_need_tools() {
  local need=()
  command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
  command -v flock >/dev/null 2>&1 || need+=(util-linux)
  if [ "${#need[@]}" -gt 0 ]; then
    log "installing ${need[*]} from Debian"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
  fi
}

# rootfs_debootstrap ROOT SUITE MIRROR DEBS LOG: a minbase tree in ROOT; DEBS
# caches the downloaded packages. On failure prints the log's tail, returns 1.
rootfs_debootstrap() {
  local root="$1" suite="$2" mirror="$3" debs="$4" logf="$5"
  mkdir -p "$debs"
  if ! debootstrap --variant=minbase --cache-dir="$debs" "$suite" "$root" "$mirror" >>"$logf" 2>&1; then
    log "$suite: debootstrap failed; last lines of $logf:"
    tail -n 30 "$logf" >&2
    return 1
  fi
}

# rootfs_prepare ROOT DEBS: /proc, policy-rc.d, apt's archive cache from DEBS.
rootfs_prepare() {
  local root="$1" debs="$2"
  mount -t proc proc "$root/proc"
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod 755 "$root/usr/sbin/policy-rc.d"
  mkdir -p "$root/var/cache/apt/archives" "$debs"
  mount --bind "$debs" "$root/var/cache/apt/archives"
}

# rootfs_apt ROOT LOG PACKAGE...: apt-get update (once per prepare) and
# install --no-install-recommends. On failure prints the log's tail, returns 1.
rootfs_apt() {
  local root="$1" logf="$2"
  shift 2
  if [ ! -e "$root/var/lib/apt/lists/.spcd-updated" ]; then
    chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get update -q >>"$logf" 2>&1 || {
      log "apt-get update in the chroot failed; last lines of $logf:"
      tail -n 30 "$logf" >&2
      return 1
    }
    touch "$root/var/lib/apt/lists/.spcd-updated"
  fi
  if ! chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" \
    >>"$logf" 2>&1; then
    log "apt-get install $* in the chroot failed; last lines of $logf:"
    tail -n 30 "$logf" >&2
    return 1
  fi
}

# rootfs_release ROOT: undoes rootfs_prepare (safe to call twice).
rootfs_release() {
  local root="$1"
  umount "$root/var/cache/apt/archives" 2>/dev/null || true
  umount "$root/proc" 2>/dev/null || true
  rm -f "$root/usr/sbin/policy-rc.d"
}

# rootfs_cleanup_trap WORK: the EXIT trap text that lazily unmounts and removes WORK.
rootfs_cleanup_trap() {
  printf "umount -l '%s/root/proc' '%s/root/var/cache/apt/archives' 2>/dev/null || true; rm -rf '%s'" "$1" "$1" "$1"
}

# rootfs_slim ROOT: drops package caches, apt lists, docs, man pages, locales,
# and the contents of /dev, /run and /tmp.
rootfs_slim() {
  local root="$1"
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin "$root"/var/lib/apt/lists/* \
    "$root"/var/lib/apt/lists/.spcd-updated \
    "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
    "$root"/usr/share/locale/* "$root"/dev/* "$root"/run/* "$root"/tmp/*
}

# rootfs_tar ROOT TAR: ROOT as an uncompressed tarball, numeric owners, atomically.
rootfs_tar() {
  tar --numeric-owner -C "$1" -cf "$2.part" .
  mv "$2.part" "$2"
}
