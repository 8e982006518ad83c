#!/usr/bin/env bash
# Build the OpenStack image of the end-to-end tests locally, with no registry,
# from Debian bookworm's packages (OpenStack Zed) and Kolla's runtime files.
#
#   usage: build-images.sh
#
# Two stages, each cached by an input hash (docs/reference/openstack-test-images.md):
#  1. spcd-e2e/openstack-rootfs:zed  debootstrap (minbase) + apt-get install of
#     image/packages in a chroot (scripts/openstack/rootfs.sh), tarred to
#     $CACHE/rootfs/openstack-zed-<hash>.tar and `docker import`ed. Slow (the
#     apt step downloads ~300 MiB); its hash covers rootfs.sh, image/packages,
#     image/users, image/debconf.preseed, scripts/lib/debian-rootfs.sh, the
#     suite and the mirror.
#  2. spcd-e2e/openstack:zed  stage 1 plus Kolla's runtime files, read from
#     $SPCD_KOLLA_DIR (default ../shared/peers/kolla-2024.1 beside the
#     repository, never copied into it), our image/kolla_extend_start and
#     image/nova-compute; ENTRYPOINT dumb-init --single-child --, CMD
#     kolla_start. Seconds (`docker build` with the local stage-1 image).
# Labels: spcd-e2e.input-hash, spcd-e2e.rootfs-hash, org.opencontainers.image.version
#   (nova's version) and spcd-e2e.<package>-version for the main packages.
#
# Environment:
#   SPCD_E2E_CACHE   cache dir (default /var/cache/spcd-e2e)
#   SPCD_E2E_MIRROR  Debian mirror (default: the host's apt mirror)
#   SPCD_E2E_FORCE=1 rebuild both stages from scratch
#   SPCD_KOLLA_DIR   Kolla's runtime files (set_configs.py, start.sh, ...)
#   DOCKER           docker client (default /usr/bin/docker)
# Output (stdout), one machine-readable line per fact:
#   phase=<debootstrap+apt|tar|import|kolla-layer> seconds=...
#   image=spcd-e2e/openstack:zed nova=... keystone=... ... input_hash=... source=built|cached-image size_bytes=...
#   phase=total seconds=... status=ok|failed
# Progress and tool output go to stderr and $CACHE/logs/openstack-zed.log.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=../lib/debian-rootfs.sh
. "$repo/scripts/lib/debian-rootfs.sh"
# shellcheck source=rootfs.sh
. "$here/rootfs.sh"

CACHE="${SPCD_E2E_CACHE:-/var/cache/spcd-e2e}"
DOCKER="${DOCKER:-/usr/bin/docker}"
[ -x "$DOCKER" ] || DOCKER=docker
KOLLA="${SPCD_KOLLA_DIR:-$repo/../shared/peers/kolla-2024.1}"
SUITE=bookworm
NAME=openstack-zed
BASE=spcd-e2e/openstack-rootfs:zed
IMAGE=spcd-e2e/openstack:zed
KOLLA_FILES="set_configs.py start.sh copy_cacerts.sh sudoers healthcheck_curl healthcheck_filemod healthcheck_listen healthcheck_port healthcheck_socket"

log() { echo "build-images: $*" >&2; }
[ "$#" -eq 0 ] || {
  echo "usage: build-images.sh" >&2
  exit 2
}
for f in $KOLLA_FILES; do
  [ -f "$KOLLA/$f" ] || {
    log "Kolla's runtime file $KOLLA/$f is missing (set SPCD_KOLLA_DIR to a copy of kolla docker/base/)"
    exit 1
  }
done
rootfs_need_tools
MIRROR="${SPCD_E2E_MIRROR:-$(rootfs_detect_mirror)}"
T0=$(now)

# Stage 2's files, staged first: its hash is the hash of exactly what goes in.
mkdir -p "$CACHE/rootfs" "$CACHE/logs" "$CACHE/work"
ctx=$(mktemp -d "$CACHE/work/$NAME-layer.XXXXXX")
work=""
cleanup() {
  rm -rf "$ctx"
  if [ -n "$work" ]; then eval "$(rootfs_cleanup_trap "$work")"; fi
}
trap cleanup EXIT
install -m 0755 "$KOLLA/set_configs.py" "$ctx/kolla_set_configs"
install -m 0755 "$KOLLA/start.sh" "$ctx/kolla_start"
install -m 0755 "$KOLLA/copy_cacerts.sh" "$ctx/kolla_copy_cacerts"
for f in healthcheck_curl healthcheck_filemod healthcheck_listen healthcheck_port healthcheck_socket; do
  install -m 0755 "$KOLLA/$f" "$ctx/$f"
done
install -m 0440 "$KOLLA/sudoers" "$ctx/sudoers"
install -m 0755 "$here/image/kolla_extend_start" "$ctx/kolla_extend_start"
install -m 0755 "$here/image/nova-compute" "$ctx/nova-compute"
# This image's ebtables-nft 1.8.9 cannot delete the Linux bridge agent's
# among rules on this kernel: the wrapper (no template values in it) goes
# first in PATH, as /usr/local/sbin/ebtables (docs/explanation/openstack-network.md).
install -m 0755 "$repo/templates/neutron/ebtables-among-delete.j2" "$ctx/ebtables"

rootfs_hash=$({
  sha256sum "$here/rootfs.sh" "$here/image/packages" "$here/image/users" "$here/image/debconf.preseed" \
    "$repo/scripts/lib/debian-rootfs.sh" | awk '{ print $1 }'
  echo "suite=$SUITE mirror=$MIRROR"
} | sha256sum | cut -c1-16)
input_hash=$({
  echo "$rootfs_hash"
  sha256sum "$0" | awk '{ print $1 }'
  (cd "$ctx" && find . -type f -printf '%m %p\n' | sort && find . -type f -print0 | sort -z | xargs -0 sha256sum)
} | sha256sum | cut -c1-16)

label() { "$DOCKER" image inspect -f "{{index .Config.Labels \"$2\"}}" "$1" 2>/dev/null || true; }
image_line() {
  local l="image=$IMAGE" k
  for k in nova keystone glance placement neutron mariadb rabbitmq memcached; do
    l="$l $k=$(label "$IMAGE" "spcd-e2e.$k-version")"
  done
  echo "$l packages=$(label "$IMAGE" spcd-e2e.package-count) input_hash=$input_hash source=$1" \
    "size_bytes=$("$DOCKER" image inspect -f '{{.Size}}' "$IMAGE")"
}
replace_old() { # IMAGE OLD_ID: drops the image a rebuild replaced (harmless while in use).
  local new
  new=$("$DOCKER" image inspect -f '{{.Id}}' "$1")
  if [ -n "$2" ] && [ "$2" != "$new" ]; then "$DOCKER" rmi "$2" >/dev/null 2>&1 || true; fi
}

exec 9>"$CACHE/lock.$NAME"
flock 9
force="${SPCD_E2E_FORCE:-0}"
if [ "$force" != 1 ] && [ "$(label "$IMAGE" spcd-e2e.input-hash)" = "$input_hash" ]; then
  image_line cached-image
  echo "phase=total seconds=$(elapsed "$T0" "$(now)") status=ok"
  exit 0
fi

# Stage 1: the rootfs image.
tar="$CACHE/rootfs/$NAME-$rootfs_hash.tar"
meta="$CACHE/rootfs/$NAME-$rootfs_hash.env"
if [ "$force" = 1 ] || [ "$(label "$BASE" spcd-e2e.input-hash)" != "$rootfs_hash" ]; then
  if [ "$force" = 1 ] || [ ! -s "$tar" ] || [ ! -s "$meta" ]; then
    logf="$CACHE/logs/$NAME.log"
    : >"$logf"
    work="$CACHE/work/$NAME.$$"
    rm -rf "$work"
    mkdir -p "$work"
    log "debootstrap $SUITE from $MIRROR and apt-get install (log: $logf)"
    t0=$(now)
    if ! openstack_rootfs "$work/root" "$SUITE" "$MIRROR" "$CACHE/debs/$NAME" "$logf" "$work/meta"; then
      rootfs_release "$work/root"
      log "the rootfs build failed; last lines of $logf:"
      tail -n 30 "$logf" >&2
      echo "phase=total seconds=$(elapsed "$T0" "$(now)") status=failed"
      exit 1
    fi
    echo "phase=debootstrap+apt seconds=$(elapsed "$t0" "$(now)")"
    t0=$(now)
    rm -f "$CACHE/rootfs/$NAME"-*.tar "$CACHE/rootfs/$NAME"-*.env
    rootfs_tar "$work/root" "$tar"
    mv "$work/meta" "$meta"
    rm -rf "$work"
    work=""
    echo "phase=tar seconds=$(elapsed "$t0" "$(now)") tar_bytes=$(stat -c %s "$tar")"
  fi
  t0=$(now)
  old=$("$DOCKER" image inspect -f '{{.Id}}' "$BASE" 2>/dev/null || true)
  "$DOCKER" import -c "LABEL spcd-e2e.input-hash=$rootfs_hash" "$tar" "$BASE" >/dev/null
  replace_old "$BASE" "$old"
  echo "phase=import seconds=$(elapsed "$t0" "$(now)")"
fi

# Stage 2: Kolla's contract on top, with docker build from the local image.
nova_version="" keystone_version="" glance_version="" placement_version="" neutron_version=""
mariadb_version="" rabbitmq_version="" memcached_version="" package_count=""
while IFS='=' read -r k v; do
  case "$k" in
    python3_nova) nova_version="$v" ;;
    python3_keystone) keystone_version="$v" ;;
    python3_glance) glance_version="$v" ;;
    python3_placement) placement_version="$v" ;;
    python3_neutron) neutron_version="$v" ;;
    mariadb_server) mariadb_version="$v" ;;
    rabbitmq_server) rabbitmq_version="$v" ;;
    memcached) memcached_version="$v" ;;
    package_count) package_count="$v" ;;
  esac
done <"$meta"
t0=$(now)
base_id=$("$DOCKER" image inspect -f '{{.Id}}' "$BASE")
cat >"$ctx/Dockerfile" <<EOF
FROM $base_id
COPY kolla_set_configs kolla_start kolla_copy_cacerts kolla_extend_start nova-compute healthcheck_curl healthcheck_filemod healthcheck_listen healthcheck_port healthcheck_socket /usr/local/bin/
COPY sudoers /etc/sudoers.d/kolla
COPY ebtables /usr/local/sbin/ebtables
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
LABEL org.opencontainers.image.version="$nova_version" \\
  spcd-e2e.input-hash="$input_hash" spcd-e2e.rootfs-hash="$rootfs_hash" spcd-e2e.suite="$SUITE" \\
  spcd-e2e.nova-version="$nova_version" spcd-e2e.keystone-version="$keystone_version" \\
  spcd-e2e.glance-version="$glance_version" spcd-e2e.placement-version="$placement_version" \\
  spcd-e2e.neutron-version="$neutron_version" spcd-e2e.mariadb-version="$mariadb_version" \\
  spcd-e2e.rabbitmq-version="$rabbitmq_version" spcd-e2e.memcached-version="$memcached_version" \\
  spcd-e2e.package-count="$package_count"
ENTRYPOINT ["dumb-init", "--single-child", "--"]
CMD ["kolla_start"]
EOF
old=$("$DOCKER" image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)
if ! DOCKER_BUILDKIT=0 "$DOCKER" build --network none -q -t "$IMAGE" "$ctx" >/dev/null; then
  log "docker build of $IMAGE failed"
  echo "phase=total seconds=$(elapsed "$T0" "$(now)") status=failed"
  exit 1
fi
replace_old "$IMAGE" "$old"
echo "phase=kolla-layer seconds=$(elapsed "$t0" "$(now)")"
image_line built
echo "phase=total seconds=$(elapsed "$T0" "$(now)") status=ok"
