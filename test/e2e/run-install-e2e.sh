#!/usr/bin/env bash
# `npm run e2e:install`: builds two Debian packages of this checkout (the
# version, and the same version +e2e2 as the "newer build" to upgrade to),
# the demo images, the systemd image, the spcd image (from the first
# package, as spcd-e2e/spcd) and a signed apt repository of the first
# package (scripts/package/build-repo.sh), then runs test/install/: install.test.ts
# (systemd as PID 1 in a container, the host's engine through its socket) and
# daemonset.test.ts (the DaemonSet's pod spec run from the image, the in-test
# Kubernetes API server over HTTPS).
# The packages are compressed with gzip -1 (SPCD_DEB_BUILDDEB_ARGS): they are
# installed once and thrown away, and lintian is not run on them (`npm run
# package` builds the xz one and runs it). Each is reused while the checkout
# is unchanged (build-deb.sh), so a warm run is the test alone.
#
# Last line: installed=1 upgraded_restarts=0 removed_left_running=N purged=1 daemonset_pod_ready=... inflight_finished_by=drain killed_finished_by=journal apt_forgeries_refused=3
set -euo pipefail
cd "$(dirname "$0")/../.."
CACHE="${SPCD_PACKAGE_CACHE:-$PWD/.cache/package}"
T0=$(date +%s)
export SPCD_DEB_BUILDDEB_ARGS="${SPCD_DEB_BUILDDEB_ARGS:--Zgzip -z1}"
export SPCD_DEB_LINTIAN="${SPCD_DEB_LINTIAN:-0}"
old=$(bash scripts/package/build-deb.sh --out "$CACHE/e2e-old" | tail -n 1)
next=$(bash scripts/package/build-deb.sh --version-suffix +e2e2 --out "$CACHE/e2e-next" | tail -n 1)
echo "$old"
echo "$next"
bash scripts/build-demo-images.sh
old_deb=$(sed -n 's/^deb=\([^ ]*\).*/\1/p' <<<"$old")
# the first package in a signed apt repository (the build machine's local key): the host installs from it
repo_line=$(bash scripts/package/build-repo.sh --out "$CACHE/e2e-repo" "$old_deb" | tail -n 1)
echo "$repo_line"
image=$(SPCD_IMAGE_NAME=spcd-e2e/spcd bash scripts/package/build-image.sh "$old_deb" | tail -n 1)
echo "$image"
result="$CACHE/e2e-install.result"
dset="$CACHE/e2e-daemonset.result"
rm -f "$result" "$dset"
SPCD_INSTALL_REPO="$CACHE/e2e-repo" \
  SPCD_DAEMONSET_IMAGE=$(sed -n 's/^image=\([^ ]*\).*/\1/p' <<<"$image") \
  SPCD_DAEMONSET_RESULT="$dset" \
  SPCD_INSTALL_DEB_NEXT=$(sed -n 's/^deb=\([^ ]*\).*/\1/p' <<<"$next") \
  SPCD_INSTALL_RESULT="$result" \
  npx vitest run --project install
echo "seconds=$(($(date +%s) - T0))"
[ -s "$dset" ] && cat "$dset"
# the install test's line, with the DaemonSet test's readiness (not-run if it did not run)
ready=$(sed -n 's/^daemonset_pod_ready=\([^ ]*\).*/\1/p' "$dset" 2>/dev/null || true)
sed "s/daemonset_pod_ready=[^ ]*/daemonset_pod_ready=${ready:-not-run}/" "$result"
