#!/usr/bin/env bash
# `npm run package`: the Debian package (build-deb.sh), the container
# image built from it (build-image.sh), and a signed apt repository of it
# (build-repo.sh: SPCD_SIGNING_KEY, or the build machine's local key).
#
# Output, last line:
#   image=NAME image_mb=M deb=PATH deb_kb=K lintian_errors=N image_rss_mb=R repo=DIR key=FPR key_kind=release|local-build
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
field() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<<"$2"; }
deb_line=$(bash "$here/build-deb.sh" "$@" | tail -n 1)
echo "$deb_line"
deb=$(field deb "$deb_line")
[ -f "$deb" ] || { echo "package: no .deb built" >&2; exit 1; }
image_out=$(bash "$here/build-image.sh" "$deb")
echo "$image_out"
image_line=$(tail -n 1 <<<"$image_out")
repo_line=$(bash "$here/build-repo.sh" --out "$(dirname "$deb")/repo" "$deb" | tail -n 1)
echo "$repo_line"
echo "image=$(field image "$image_line") image_mb=$(field image_mb "$image_line") deb=$deb" \
  "deb_kb=$(field deb_kb "$deb_line") lintian_errors=$(field lintian_errors "$deb_line")" \
  "image_rss_mb=$(field rss_mb "$image_line") repo=$(field repo "$repo_line") key=$(field key "$repo_line")" \
  "key_kind=$(field key_kind "$repo_line")"
