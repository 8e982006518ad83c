#!/usr/bin/env bash
# Builds spcd_<version>_<arch>.deb with Debian's own tooling (debhelper,
# dpkg-buildpackage), then runs lintian on it.
#
#   usage: build-deb.sh [--version-suffix S] [--out DIR]
#
# The source tree is staged under $CACHE/deb (never the work tree):
# stage.sh's lib/ (/usr/lib/spcd: dist, bin, production node_modules, the
# bundled node, templates, healthchecks) and completion scripts, the /usr/bin
# wrappers, /etc/spcd (the shipped sets and an example overrides.yaml:
# conffiles, so an operator's edits survive upgrades), debian/ from this
# folder and debian/spcd.service from systemd/spcd.service with the
# package's paths. --version-suffix makes a newer build of the same version
# (0.1.0+2), for upgrade tests. The Debian version is package.json's.
#
# A build is reused when its inputs are unchanged (the checkout's commit, its
# uncommitted changes and untracked files, package-lock.json, the version
# and suffix, SPCD_DEB_BUILDDEB_ARGS): $OUT/.input-hash. SPCD_DEB_FORCE=1
# rebuilds. SPCD_DEB_LINTIAN=0 skips lintian (test builds).
#
# Output (stdout), last line: deb=PATH deb_kb=K lintian_errors=N lintian_warnings=W source=<built|cached>
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
CACHE="${SPCD_PACKAGE_CACHE:-$repo/.cache/package}"
OUT="$CACHE/out"
SUFFIX=""
while [ $# -gt 0 ]; do
  case "$1" in
    --version-suffix) SUFFIX="${2:?}"; shift 2 ;;
    --out) OUT="${2:?}"; shift 2 ;;
    *) echo "build-deb: unknown argument $1" >&2; exit 2 ;;
  esac
done
log() { echo "build-deb: $*" >&2; }

bash "$here/ensure-tools.sh" >&2
version="$(node -p 'require(process.argv[1]).version' "$repo/package.json")$SUFFIX"
arch=$(dpkg --print-architecture)
work="$CACHE/deb"
src="$work/spcd-$version"
mkdir -p "$work" "$OUT"
exec 9>"$CACHE/lock.deb"
flock 9
deb="spcd_${version}_${arch}.deb"
input_hash=$(cd "$repo" && {
  git rev-parse HEAD 2>/dev/null || echo no-git
  git diff HEAD --binary 2>/dev/null || true
  git ls-files --others --exclude-standard -z 2>/dev/null | xargs -0r sha256sum
  echo "version=$version arch=$arch builddeb=${SPCD_DEB_BUILDDEB_ARGS:-} lintian=${SPCD_DEB_LINTIAN:-1}"
} | sha256sum | cut -c1-16)
if [ "${SPCD_DEB_FORCE:-0}" != 1 ] && [ -f "$OUT/$deb" ] && [ -f "$OUT/.input-hash" ] &&
  [ "$(sed -n 1p "$OUT/.input-hash")" = "$input_hash" ]; then
  echo "$(sed -n 2p "$OUT/.input-hash") source=cached"
  exit 0
fi
rm -rf "$work"/spcd-* "$work"/spcd_* && mkdir -p "$src"

bash "$here/stage.sh" "$src" >&2
info="$src/build-info.json"
commit=$(node -p 'require(process.argv[1]).commit' "$info")
built=$(node -p 'require(process.argv[1]).date' "$info")
rm -f "$info"

# /usr/bin wrappers: the memory flags of bin/spcd.js's first line
# (docs/decisions/0006-memory-budget.md), with the bundled node.
mkdir -p "$src/wrappers"
cat >"$src/wrappers/spcd" <<'SH'
#!/bin/sh
# spcd with its memory budget flags (docs/decisions/0006-memory-budget.md).
MALLOC_ARENA_MAX=2
export MALLOC_ARENA_MAX
exec /usr/lib/spcd/node --optimize-for-size /usr/lib/spcd/bin/spcd.js "$@"
SH
cat >"$src/wrappers/spcctl" <<'SH'
#!/bin/sh
exec /usr/lib/spcd/node /usr/lib/spcd/bin/spcctl.js "$@"
SH
chmod 0755 "$src/wrappers/spcd" "$src/wrappers/spcctl"

# /etc/spcd: what scripts/install-unit.sh puts there, as conffiles
bash "$repo/scripts/install-unit.sh" --root "$src/stage-root" --no-group >&2
mkdir -p "$src/etc"
mv "$src/stage-root/etc/spcd" "$src/etc/spcd"
rm -rf "$src/stage-root"

cp -a "$here/debian" "$src/debian"
# the unit, with the package's paths
sed -e 's|/usr/local/bin/spcd|/usr/bin/spcd|g' "$repo/systemd/spcd.service" >"$src/debian/spcd.service"
grep -q 'ExecStart=/usr/bin/spcd ' "$src/debian/spcd.service" || { log "unit: ExecStart not rewritten"; exit 1; }
# changelog: the version and the build's commit and date
cat >"$src/debian/changelog" <<CL
spcd ($version) unstable; urgency=medium

  * spcd $version, built from commit $commit.

 -- spcd developers <spcd-dev@lists.openstack.org>  $(date -u -R -d "$built" 2>/dev/null || date -u -R)
CL

log "dpkg-buildpackage ($version, $arch)"
(cd "$src" && SOURCE_DATE_EPOCH=$(date -u -d "$built" +%s 2>/dev/null || date +%s) \
  dpkg-buildpackage -b -uc -us >"$work/dpkg-buildpackage.log" 2>&1) || {
  log "dpkg-buildpackage failed; last lines of $work/dpkg-buildpackage.log:"
  tail -n 40 "$work/dpkg-buildpackage.log" >&2
  exit 1
}
rm -f "$OUT"/spcd_*.deb "$OUT/.input-hash"
cp "$work/$deb" "$OUT/$deb"

errors=skipped warnings=skipped
if [ "${SPCD_DEB_LINTIAN:-1}" != 0 ]; then
  lintian --no-tag-display-limit "$OUT/$deb" >"$work/lintian.log" 2>&1 || true
  errors=$(grep -c '^E: ' "$work/lintian.log" || true)
  warnings=$(grep -c '^W: ' "$work/lintian.log" || true)
  if [ "$errors" -gt 0 ] || [ "$warnings" -gt 0 ]; then
    grep -E '^[EW]: ' "$work/lintian.log" | sort | uniq -c | sort -rn | head -n 30 >&2
  fi
fi
kb=$(( ($(stat -c %s "$OUT/$deb") + 1023) / 1024 ))
line="deb=$OUT/$deb deb_kb=$kb lintian_errors=$errors lintian_warnings=$warnings"
printf '%s\n%s\n' "$input_hash" "$line" >"$OUT/.input-hash"
echo "$line source=built"
