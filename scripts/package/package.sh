#!/usr/bin/env bash
# `npm run package`: the Debian package (build-deb.sh) and the container
# image built from it (build-image.sh).
#
# Output, last line:
#   image=NAME image_mb=M deb=PATH deb_kb=K lintian_errors=N image_rss_mb=R
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
echo "image=$(field image "$image_line") image_mb=$(field image_mb "$image_line") deb=$deb" \
  "deb_kb=$(field deb_kb "$deb_line") lintian_errors=$(field lintian_errors "$deb_line")" \
  "image_rss_mb=$(field rss_mb "$image_line")"
