#!/usr/bin/env bash
# An upgrade target for the OpenStack end-to-end test (docs/reference/openstack-test-images.md):
# an image with one extra label, so spcd sees a new image (a new id) with the
# same software inside. Without arguments: spcd-e2e/openstack:zed-next from
# spcd-e2e/openstack:zed (nova_compute's and the Linux bridge agent's
# target). The compute-set upgrade step gives every member's running image
# and a tag of its own (test/e2e/openstack-control-steps.ts). Docker's build
# cache makes a repeated build with an unchanged base cost about a second.
#   usage: build-next-image.sh [BASE NEXT [VARIANT]]   (VARIANT: the label's value, default next)
# Output (stdout): image=NEXT base=<id> id=<id> seconds=...
set -euo pipefail
DOCKER="${DOCKER:-/usr/bin/docker}"
[ -x "$DOCKER" ] || DOCKER=docker
BASE=${1:-spcd-e2e/openstack:zed}
NEXT=${2:-spcd-e2e/openstack:zed-next}
VARIANT=${3:-next}
[ "$BASE" != "$NEXT" ] || {
  echo "build-next-image: BASE and NEXT are both $BASE" >&2
  exit 2
}
t0=$EPOCHREALTIME
base=$("$DOCKER" image inspect -f '{{.Id}}' "$BASE") || {
  echo "build-next-image: $BASE is missing; run scripts/openstack/build-images.sh (or scripts/libvirt/build-images.sh)" >&2
  exit 1
}
printf 'FROM %s\nLABEL spcd-e2e.variant=%s spcd-e2e.base=%s\n' "$BASE" "$VARIANT" "$base" |
  "$DOCKER" build -q --network none -t "$NEXT" - >&2
id=$("$DOCKER" image inspect -f '{{.Id}}' "$NEXT")
awk -v a="$t0" -v b="$EPOCHREALTIME" -v img="$NEXT" -v base="$base" -v id="$id" \
  'BEGIN { printf "image=%s base=%s id=%s seconds=%.1f\n", img, base, id, b - a }'
