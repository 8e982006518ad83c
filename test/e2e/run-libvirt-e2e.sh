#!/usr/bin/env bash
# npm run e2e:libvirt — the libvirt end-to-end test on its own (issue #8):
# builds or reuses the libvirt images and the guest (inside the test), runs
# test/integration/libvirt-e2e.test.ts through vitest against the running
# engine, and prints the summary line LAST:
#   vm_survived=<steps passed>/<steps> max_api_window_s=<seconds> downgrade_refused=<0|1>
# With SPCD_E2E_RUNS=N (default 1) it runs the file N times and, before the
# summary (summed over the runs), prints per step the windows' spread:
#   window step=<name> runs=<n> api_back_s=<min>/<median>/<max> spcd_s=<min>/<median>/<max> load=<min>/<max>
# api_back_s is stop -> libvirt API answers (the 50 ms probe), spcd_s the
# window spcd itself reported (docs/explanation/libvirt-proof.md).
# Exit status: 0 when every run passed, else the last failing vitest status.
# Environment: SPCD_E2E_CACHE (image/guest cache, default /var/cache/spcd-e2e),
#   SPCD_E2E_FORCE=1 (rebuild the images and the guest), SPCD_E2E_KEEP=1,
#   SPCD_E2E_NO_WARM=1 (without the warm-qemu-caps task), SPCD_E2E_TRACE=1
#   (libvirtd's timestamped log in the phase timelines),
#   SPCD_ENGINE=podman (the same run on Podman's API service, started by
#   scripts/podman/ensure-podman.sh; the images are built with Docker and
#   copied into Podman; docs/how-to/run-on-podman.md).
set -uo pipefail
cd "$(dirname "$0")/../.."
if [ "${SPCD_ENGINE:-docker}" = podman ]; then
  # Docker builds the images; spcd, the helpers and the test speak to Podman.
  SPCD_DOCKER_SOCKET=/var/run/docker.sock bash scripts/ensure-docker.sh || exit 1
  bash scripts/podman/ensure-podman.sh || exit 1
  export SPCD_DOCKER_SOCKET="${SPCD_PODMAN_SOCKET:-/run/podman/podman.sock}"
  export CONTAINERS_CONF="${SPCD_PODMAN_CONF_DIR:-/run/spcd-podman}/containers.conf"
fi
runs="${SPCD_E2E_RUNS:-1}"
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || {
  echo "run-libvirt-e2e: SPCD_E2E_RUNS must be a positive integer, not '$runs'" >&2
  exit 2
}
summary=$(mktemp /tmp/spcd-e2e-summary.XXXXXX)
all=$(mktemp /tmp/spcd-e2e-steps.XXXXXX)
trap 'rm -f "$summary" "$all"' EXIT
status=0
for i in $(seq 1 "$runs"); do
  : >"$summary"
  t0=$EPOCHREALTIME
  SPCD_E2E_SUMMARY="$summary" npx vitest run --project integration test/integration/libvirt-e2e.test.ts 2>&1
  rc=$?
  awk -v a="$t0" -v b="$EPOCHREALTIME" -v i="$i" -v e="${SPCD_ENGINE:-docker}" 'BEGIN { printf "run=%d engine=%s e2e_libvirt_wall_s=%.1f\n", i, e, b - a }'
  if [ -s "$summary" ]; then
    grep '^step=' "$summary" >>"$all" || true
    echo "run=$i $(tail -n 1 "$summary")"
    tail -n 1 "$summary" | sed "s/^/summary /" >>"$all"
  else
    # The test did not get as far as its summary (e.g. vitest could not start).
    echo "run=$i vm_survived=0/4 max_api_window_s=nan downgrade_refused=0"
    echo "summary vm_survived=0/4 max_api_window_s=nan downgrade_refused=0" >>"$all"
    [ "$rc" != 0 ] || rc=1
  fi
  [ "$rc" = 0 ] || status=$rc
done
if [ "$runs" -gt 1 ]; then
  # min/median/max per step of api_back_s and spcd_s, over the runs that measured them.
  for step in $(grep -o '^step=[^ ]*' "$all" | cut -d= -f2 | awk '!seen[$0]++'); do
    spread() {
      grep "^step=$step " "$all" | grep -o " $1=[^ ]*" | cut -d= -f2 | grep -vi nan | sort -g |
        awk '{ v[NR] = $1 } END {
          if (!NR) { print "nan"; exit }
          m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
          printf "%.2f/%.2f/%.2f", v[1], m, v[NR] }'
    }
    n=$(grep -c "^step=$step " "$all")
    echo "window step=$step runs=$n api_back_s=$(spread api_back_s) spcd_s=$(spread spcd_s) load=$(spread load | awk -F/ '{ print $1 "/" $3 }')"
  done
fi
awk '/^summary / {
    split($2, a, "[=/]"); passed += a[2]; steps += a[3]
    split($3, b, "="); if (b[2] != "nan" && b[2] + 0 > max) max = b[2] + 0; if (b[2] == "nan") nan = 1
    split($4, c, "="); k++; refused = (k == 1 || c[2] + 0 < refused) ? c[2] + 0 : refused
  }
  END { printf "vm_survived=%d/%d max_api_window_s=%s downgrade_refused=%d\n", passed, steps, nan && !max ? "nan" : sprintf("%.2f", max), refused }' "$all"
exit "$status"
