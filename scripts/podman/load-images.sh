#!/usr/bin/env bash
# Copies images from the Docker engine into Podman's store (`docker save` |
# `podman load`), each only when Podman does not hold that image id already.
# Usage: load-images.sh IMAGE...   (references as Docker names them)
set -euo pipefail

SOCK="${SPCD_PODMAN_SOCKET:-/run/podman/podman.sock}"
podman_id() {
  curl -sf --max-time 10 --unix-socket "$SOCK" "http://localhost/v1.41/images/$1/json" |
    sed -n 's/^{"Id":"\([^"]*\)".*/\1/p'
}

missing=()
for ref in "$@"; do
  want=$(docker image inspect --format '{{.Id}}' "$ref")
  [ "$(podman_id "$ref" || true)" = "$want" ] || missing+=("$ref")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "load-images: Podman holds all $# images"
  exit 0
fi
echo "load-images: copying ${missing[*]} into Podman"
docker save "${missing[@]}" | podman load -q >/dev/null
