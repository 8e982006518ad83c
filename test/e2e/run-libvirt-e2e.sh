#!/usr/bin/env bash
# npm run e2e:libvirt — the libvirt end-to-end test on its own (issue #8):
# builds or reuses the libvirt images and the guest (inside the test), runs
# test/integration/libvirt-e2e.test.ts through vitest against the running
# engine, and prints the summary line LAST:
#   vm_survived=<steps passed>/<steps> max_api_window_s=<seconds> downgrade_refused=<0|1>
# Exit status: vitest's (0 when every test passed).
# Environment: SPCD_E2E_CACHE (image/guest cache, default /var/cache/spcd-e2e),
#   SPCD_E2E_FORCE=1 (rebuild the images and the guest), SPCD_E2E_KEEP=1.
set -uo pipefail
cd "$(dirname "$0")/../.."
summary=$(mktemp /tmp/spcd-e2e-summary.XXXXXX)
trap 'rm -f "$summary"' EXIT
t0=$EPOCHREALTIME
SPCD_E2E_SUMMARY="$summary" npx vitest run --project integration test/integration/libvirt-e2e.test.ts 2>&1
rc=$?
awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "e2e_libvirt_wall_s=%.1f\n", b - a }'
if [ -s "$summary" ]; then
  tail -n 1 "$summary"
else
  # The test did not get as far as its summary (e.g. vitest could not start).
  echo "vm_survived=0/4 max_api_window_s=nan downgrade_refused=0"
  [ "$rc" != 0 ] || rc=1
fi
exit "$rc"
