#!/usr/bin/env bash
# `npm run e2e:install`: builds two Debian packages of this checkout (the
# version, and the same version +e2e2 as the "newer build" to upgrade to),
# the demo images and the systemd image, then runs test/install/install.test.ts
# (systemd as PID 1 in a container, the host's engine through its socket).
# The packages are compressed with gzip -1 (SPCD_DEB_BUILDDEB_ARGS): they are
# installed once and thrown away, and lintian is not run on them (`npm run
# package` builds the xz one and runs it). Each is reused while the checkout
# is unchanged (build-deb.sh), so a warm run is the test alone.
#
# Last line: installed=1 upgraded_restarts=0 removed_left_running=N purged=1 daemonset_pod_ready=...
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
result="$CACHE/e2e-install.result"
rm -f "$result"
SPCD_INSTALL_DEB=$(sed -n 's/^deb=\([^ ]*\).*/\1/p' <<<"$old") \
  SPCD_INSTALL_DEB_NEXT=$(sed -n 's/^deb=\([^ ]*\).*/\1/p' <<<"$next") \
  SPCD_INSTALL_RESULT="$result" \
  npx vitest run --project install
echo "seconds=$(($(date +%s) - T0))"
cat "$result"
