#!/usr/bin/env bash
# Builds the local demo images from busybox-static (no registry needed).
# Tags of spcd-demo/service: 1, 2, 3 (healthy, differing versions), crash,
# unhealthy, hang (misbehaving on purpose). Skips the build when an image
# with the same input hash exists. Idempotent.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
DOCKER="${DOCKER:-/usr/bin/docker}"
[ -x "$DOCKER" ] || DOCKER=docker
if [ ! -x /bin/busybox ]; then
  echo "build-demo-images: installing busybox-static from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq busybox-static >/dev/null
fi
input_hash=$( (sha256sum /bin/busybox "$here"/demo-image/* "$0") | sha256sum | cut -c1-16)
REPO=spcd-demo/service
build() {
  local tag="$1" version="$2" mode="$3"
  local have
  have=$("$DOCKER" image inspect -f '{{index .Config.Labels "spcd-demo.input-hash"}}' "$REPO:$tag" 2>/dev/null || true)
  if [ "$have" = "$input_hash" ]; then return 0; fi
  local dir; dir=$(mktemp -d)
  mkdir -p "$dir"/bin "$dir"/usr/local/bin "$dir"/etc/spcd-demo "$dir"/tmp "$dir"/proc "$dir"/sys "$dir"/dev "$dir"/run "$dir"/var/lib
  cp /bin/busybox "$dir/bin/busybox"
  for applet in $(/bin/busybox --list); do
    [ -e "$dir/bin/$applet" ] || ln -s busybox "$dir/bin/$applet"
  done
  cp "$here"/demo-image/* "$dir/usr/local/bin/"
  echo "$version" > "$dir/etc/spcd-demo/version"
  echo "$mode" > "$dir/etc/spcd-demo/mode"
  echo "root:x:0:0:root:/root:/bin/sh" > "$dir/etc/passwd"
  echo "root:x:0:" > "$dir/etc/group"
  chmod 1777 "$dir/tmp"
  tar -C "$dir" -c . | "$DOCKER" import \
    -c 'ENV PATH=/usr/local/bin:/bin' \
    -c 'CMD ["/usr/local/bin/demo-service","sleep"]' \
    -c "LABEL spcd-demo.input-hash=$input_hash" \
    -c "LABEL org.opencontainers.image.version=$version" \
    - "$REPO:$tag" >/dev/null
  rm -rf "$dir"
  echo "build-demo-images: built $REPO:$tag"
}
build 1 1 ok
build 2 2 ok
build 3 3 ok
build crash 99 crash
build unhealthy 98 unhealthy
build hang 97 hang
echo "build-demo-images: $REPO tags 1 2 3 crash unhealthy hang are present"
