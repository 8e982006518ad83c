#!/usr/bin/env bash
# The upgrade target of nova_compute in the OpenStack end-to-end test
# (docs/openstack-e2e.md): spcd-e2e/openstack:zed with one extra label, so
# spcd sees a new image (a new id) with the same nova inside. Docker's build
# cache makes a repeated build with an unchanged base cost about a second.
#   usage: build-next-image.sh
# Output (stdout): image=spcd-e2e/openstack:zed-next base=<id> id=<id> seconds=...
set -euo pipefail
DOCKER="${DOCKER:-/usr/bin/docker}"
[ -x "$DOCKER" ] || DOCKER=docker
BASE=spcd-e2e/openstack:zed
NEXT=spcd-e2e/openstack:zed-next
t0=$EPOCHREALTIME
base=$("$DOCKER" image inspect -f '{{.Id}}' "$BASE") || {
  echo "build-next-image: $BASE is missing; run scripts/openstack/build-images.sh" >&2
  exit 1
}
printf 'FROM %s\nLABEL spcd-e2e.variant=next spcd-e2e.base=%s\n' "$BASE" "$base" |
  "$DOCKER" build -q --network none -t "$NEXT" - >&2
id=$("$DOCKER" image inspect -f '{{.Id}}' "$NEXT")
awk -v a="$t0" -v b="$EPOCHREALTIME" -v img="$NEXT" -v base="$base" -v id="$id" \
  'BEGIN { printf "image=%s base=%s id=%s seconds=%.1f\n", img, base, id, b - a }'
