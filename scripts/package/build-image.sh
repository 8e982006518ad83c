#!/usr/bin/env bash
# Builds spcd's container image, registry.local/spcd/spcd:<version> (the name
# deploy/kubernetes/30-daemonset.yaml runs), from Debian's packages and the
# build output: a Debian bookworm minbase (debootstrap, scripts/lib/
# debian-rootfs.sh) with the spcd .deb installed in it (so the image and the
# package carry the same files: the production dependencies only, the
# bundled node, no compiler). Entrypoint /usr/bin/spcd, the wrapper with the
# unit's memory flags; /usr/local/bin/spcd and spcctl link to the wrappers
# (the DaemonSet's command and readiness probe name those). Root: spcd talks
# to the Docker socket, which is root-equivalent anyway.
#
#   usage: build-image.sh DEB      (SPCD_IMAGE_NAME: another repository name, for tests)
#
# Cached by input hash like scripts/systemd-image/build-image.sh: an image
# whose spcd.input-hash label matches (the .deb's sha256, this script, the
# rootfs library, the mirror) is reused; the minbase tree is kept as a
# tarball in $CACHE/rootfs/ by its own hash. SPCD_E2E_FORCE=1 rebuilds.
#
# Output (stdout), last line:
#   image=NAME image_mb=M rss_mb=R source=<built|cached-image> seconds=S
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
deb="$(realpath "${1:?usage: build-image.sh DEB}")"
CACHE="${SPCD_E2E_CACHE:-/var/cache/spcd-e2e}"
DOCKER="${DOCKER:-/usr/bin/docker}"
[ -x "$DOCKER" ] || DOCKER=docker
SUITE=bookworm
log() { echo "${0##*/}: $*" >&2; }
# shellcheck source=../lib/debian-rootfs.sh
. "$here/../lib/debian-rootfs.sh"
MIRROR="${SPCD_E2E_MIRROR:-$(rootfs_detect_mirror)}"
rootfs_need_tools

T0=$(now)
version=$(dpkg-deb -f "$deb" Version)
IMAGE="${SPCD_IMAGE_NAME:-registry.local/spcd/spcd}:$version"
base_hash=$({
  sha256sum "$here/../lib/debian-rootfs.sh" | awk '{ print $1 }'
  echo "suite=$SUITE mirror=$MIRROR base=1"
} | sha256sum | cut -c1-16)
hash=$({
  sha256sum "$deb" "$0" | awk '{ print $1 }'
  echo "$base_hash"
} | sha256sum | cut -c1-16)

mkdir -p "$CACHE/rootfs" "$CACHE/logs" "$CACHE/debs/$SUITE" "$CACHE/work"
exec 9>"$CACHE/lock.spcd-image"
flock 9

# RSS of spcd in the image: started with no sets on the engine, after 5 s.
measure_rss() {
  local name="spcd-image-rss-$$" rss
  "$DOCKER" rm -f "$name" >/dev/null 2>&1 || true
  "$DOCKER" run -d --name "$name" -v /var/run/docker.sock:/var/run/docker.sock \
    --tmpfs /etc/spcd/container-sets "$IMAGE" --sets /etc/spcd/container-sets --state-dir /var/lib/spcd \
    --socket /run/spcd/spcd.sock --instance "$name" >/dev/null
  sleep 5
  rss=$("$DOCKER" exec "$name" sh -c "awk '/^VmRSS/ { printf \"%.0f\", \$2 / 1024 }' /proc/1/status" 2>/dev/null || echo "?")
  "$DOCKER" rm -f "$name" >/dev/null 2>&1 || true
  echo "$rss"
}
image_mb() { "$DOCKER" image inspect -f '{{.Size}}' "$IMAGE" | awk '{ printf "%.0f", $1 / 1048576 }'; }

have=$("$DOCKER" image inspect -f '{{index .Config.Labels "spcd.input-hash"}}' "$IMAGE" 2>/dev/null || true)
if [ "$have" = "$hash" ] && [ "${SPCD_E2E_FORCE:-0}" != 1 ]; then
  echo "image=$IMAGE image_mb=$(image_mb) rss_mb=$(measure_rss) source=cached-image seconds=$(elapsed "$T0" "$(now)")"
  exit 0
fi

logf="$CACHE/logs/spcd-image.log"
: >"$logf"
work="$CACHE/work/spcd-image.$$"
root="$work/root"
mkdir -p "$work"
# shellcheck disable=SC2064
trap "$(rootfs_cleanup_trap "$work")" EXIT

base="$CACHE/rootfs/spcd-base-$base_hash.tar"
if [ ! -s "$base" ] || [ "${SPCD_E2E_FORCE:-0}" = 1 ]; then
  t0=$(now)
  exec 8>"$CACHE/lock.$SUITE"
  flock 8
  rootfs_debootstrap "$root" "$SUITE" "$MIRROR" "$CACHE/debs/$SUITE" "$logf"
  flock -u 8
  rm -f "$CACHE/rootfs"/spcd-base-*.tar
  rootfs_tar "$root" "$base"
  rm -rf "$root"
  echo "phase=debootstrap seconds=$(elapsed "$t0" "$(now)")"
fi

t0=$(now)
mkdir -p "$root"
tar -C "$root" -xf "$base"
rootfs_prepare "$root" "$CACHE/debs/$SUITE"
cp "$deb" "$root/tmp/spcd.deb"
# dpkg -i: every dependency (libc6, libstdc++6, passwd) is in minbase
if ! chroot "$root" env DEBIAN_FRONTEND=noninteractive dpkg -i /tmp/spcd.deb >>"$logf" 2>&1; then
  log "dpkg -i spcd.deb failed; last lines of $logf:"
  tail -n 30 "$logf" >&2
  exit 1
fi
rootfs_release "$root"
ln -sf /usr/bin/spcd "$root/usr/local/bin/spcd"
ln -sf /usr/bin/spcctl "$root/usr/local/bin/spcctl"
# a container has no systemd: the unit and its enablement are of no use here
rm -rf "$root/lib/systemd/system/spcd.service" "$root/etc/systemd/system/multi-user.target.wants/spcd.service"
: >"$root/etc/machine-id"
rootfs_slim "$root"
mkdir -p "$root/run/spcd" "$root/run/spcd-ro" "$root/var/lib/spcd"
echo "phase=install seconds=$(elapsed "$t0" "$(now)")"

t0=$(now)
info="$root/usr/lib/spcd/dist/build-info.json"
commit=$(sed -n 's/.*"commit":"\([^"]*\)".*/\1/p' "$info")
created=$(sed -n 's/.*"date":"\([^"]*\)".*/\1/p' "$info")
tar --numeric-owner -C "$root" -cf - . | "$DOCKER" import \
  -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  -c 'ENV NODE_ENV=production' \
  -c 'ENTRYPOINT ["/usr/bin/spcd"]' \
  -c "LABEL spcd.input-hash=$hash" \
  -c "LABEL org.opencontainers.image.title=spcd" \
  -c "LABEL org.opencontainers.image.version=$version" \
  -c "LABEL org.opencontainers.image.revision=$commit" \
  -c "LABEL org.opencontainers.image.created=$created" \
  -c "LABEL org.opencontainers.image.licenses=Apache-2.0" \
  - "$IMAGE" >/dev/null
echo "phase=import seconds=$(elapsed "$t0" "$(now)")"
echo "image=$IMAGE image_mb=$(image_mb) rss_mb=$(measure_rss) source=built seconds=$(elapsed "$T0" "$(now)")"
