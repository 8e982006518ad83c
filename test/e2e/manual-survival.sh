#!/usr/bin/env bash
# Prove by hand, with plain docker (no spcd), that a real qemu guest survives
# stop/rm/run of the libvirt container that started it:
#   1. libvirt 9 (bookworm) starts the guest;
#   2. swap to libvirt 11 (trixie)             -> the guest must survive;
#   3. swap to libvirt 11 again (same image)   -> the guest must survive;
#   4. swap back to libvirt 9 (downgrade)      -> the facts doc's hazard: the
#      guest keeps running but the older libvirt cannot see it.
# After each survival step: qemu PID and start time unchanged, console counter
# continuous (no gap beyond the outage), `virsh domstate` running in the new
# container, suspend/resume through the new daemon.
#
#   usage: manual-survival.sh            (builds or reuses images and guest)
# Environment: SPCD_E2E_CACHE, SPCD_E2E_KEEP=1 (leave everything for a look),
#   SPCD_E2E_SKIP_DOWNGRADE=1.
# Output: one `key=value` line per step and a last line
#   manual_survival=<passed>/<steps> max_api_window_s=<s> max_console_gap_s=<s> downgrade_hazard_confirmed=<0|1>
# Exit status: 0 when every survival step passed, 1 otherwise.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
V="$here/libvirt-vm.sh"
DOCKER="${DOCKER:-/usr/bin/docker}"
[ -x "$DOCKER" ] || DOCKER=docker

note() { echo "manual-survival: $*" >&2; }
kv() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2" | head -n1; }
fmax() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == "nan" || a + 0 >= b + 0) print a; else print b }'; }
sub_s() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

bash "$repo/scripts/libvirt/build-images.sh" bookworm trixie | grep -E '^(image|phase=total)' >&2
bash "$repo/scripts/libvirt/build-guest.sh" | grep '^kernel=' >&2

RUN_ID="${SPCD_E2E_RUN_ID:-$(date +%s)-$$}"
ROOT=$(mktemp -d "/tmp/spcd-e2e-$RUN_ID.XXXX")
GUEST="e2e-$RUN_ID"
watch_pgid=""
pid0=""
GUEST2=""
pid2=""
cleanup() {
  local rc=$?
  [ -n "$watch_pgid" ] && kill -- -"$watch_pgid" 2>/dev/null || true
  if [ "${SPCD_E2E_KEEP:-0}" = 1 ]; then
    note "kept: root $ROOT, guest $GUEST, containers labelled spcd-e2e.run=$RUN_ID"
  else
    [ -n "$GUEST2" ] && bash "$V" cleanup "$ROOT" "$GUEST2" "$RUN_ID" "${pid2:-}" >/dev/null || true
    bash "$V" cleanup "$ROOT" "$GUEST" "$RUN_ID" "${pid0:-}" || true
    rm -rf "$ROOT"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "run_id=$RUN_ID root=$ROOT guest=$GUEST"
bash "$V" prepare-root "$ROOT" >/dev/null
n=0
container="spcd-e2e-lv-$RUN_ID-$n"
bash "$V" run "$ROOT" "$container" spcd-e2e/libvirt:bookworm "$RUN_ID" >/dev/null
bash "$V" wait-api "$container" 60 >/dev/null
t0="$EPOCHREALTIME"
line=$(bash "$V" start-guest "$ROOT" "$container" "$GUEST")
pid0=$(kv qemu_pid "$line")
start0=$(kv qemu_start "$line")
bash "$V" wait-counter "$ROOT" "$GUEST" 3 90 >/dev/null
echo "step=start image=spcd-e2e/libvirt:bookworm qemu_pid=$pid0 qemu_start=$start0 boot_to_counter3_s=$(sub_s "$t0" "$EPOCHREALTIME")"

line=$(bash "$V" console-watch "$ROOT" "$GUEST")
watch_pgid=$(kv watch_pgid "$line")
bash "$V" api-probe "$ROOT" spcd-e2e/libvirt:trixie "$RUN_ID" >/dev/null

# Stop, remove and run the next image; measure; check the guest.
# Prints the step line; returns 0 when the guest survived every check.
swap() {
  local step="$1" image="$2" expect="$3"
  local old="$container" t_stop t_stopped t_rm t_run line api cg
  n=$((n + 1))
  container="spcd-e2e-lv-$RUN_ID-$n"
  sleep 2 # a quiet second or two of console before the outage
  t_stop="$EPOCHREALTIME"
  "$DOCKER" stop -t 10 "$old" >/dev/null
  t_stopped="$EPOCHREALTIME"
  "$DOCKER" rm "$old" >/dev/null
  t_rm="$EPOCHREALTIME"
  bash "$V" run "$ROOT" "$container" "$image" "$RUN_ID" >/dev/null
  t_run="$EPOCHREALTIME"
  local deadline=$((SECONDS + 60))
  until api=$(bash "$V" api-window "$ROOT" "$t_stop" 2>/dev/null); do
    [ "$SECONDS" -lt "$deadline" ] || {
      echo "step=$step ok=0 reason=api-not-back-in-60s"
      return 1
    }
    sleep 0.1
  done
  # Let the console run on for three more lines before measuring its gap.
  local c
  c=$(bash "$V" wait-counter "$ROOT" "$GUEST" 0 5 | sed 's/counter=//')
  bash "$V" wait-counter "$ROOT" "$GUEST" $((c + 3)) 30 >/dev/null || true
  cg=$(bash "$V" console-gap "$ROOT" "$GUEST" "$(awk -v t="$t_stop" 'BEGIN { printf "%.6f", t - 2 }')" "$EPOCHREALTIME" || true)
  line=$(bash "$V" qemu-pid "$ROOT" "$GUEST" "$pid0" || true)
  local pid start alive state sr="skipped" persistent
  pid=$(kv qemu_pid "$line")
  start=$(kv qemu_start "$line")
  alive=$(kv qemu_alive "$line")
  state=$(bash "$V" domstate "$container" "$GUEST" | sed 's/domstate=//' || true)
  persistent=$(bash -c "'$DOCKER' exec '$container' virsh -q -c qemu:///system dominfo '$GUEST' 2>/dev/null" | awk '/^Persistent:/ { print $2 }')
  local ok=1 reason=""
  [ "$pid" = "$pid0" ] || { ok=0; reason+="pid-changed,"; }
  [ "$start" = "$start0" ] || { ok=0; reason+="start-time-changed,"; }
  [ "$alive" = 1 ] || { ok=0; reason+="qemu-dead,"; }
  [ "$(kv counter_missing "$cg")" = 0 ] || { ok=0; reason+="counter-skipped,"; }
  if [ "$expect" = survive ]; then
    [ "$state" = running ] || { ok=0; reason+="domstate-$state,"; }
    if [ "$state" = running ]; then
      sr=$(bash "$V" suspend-resume "$container" "$GUEST" 2>/dev/null | sed 's/suspend_resume=//') || sr=failed
      [ "$sr" = ok ] || { ok=0; reason+="suspend-resume-failed,"; }
    fi
  fi
  echo "step=$step image=$image ok=$ok stop_s=$(sub_s "$t_stop" "$t_stopped") rm_s=$(sub_s "$t_stopped" "$t_rm") run_s=$(sub_s "$t_rm" "$t_run") $api $cg qemu_pid=$pid qemu_start=$start domstate=$state persistent=${persistent:-none} suspend_resume=$sr${reason:+ reason=${reason%,}}"
  LAST_API=$(kv api_back_s "$api")
  LAST_GAP=$(kv console_max_gap_s "$cg")
  [ "$ok" = 1 ]
}

steps=0 passed=0 max_api=0 max_gap=0
for spec in "upgrade-9-to-11 spcd-e2e/libvirt:trixie" "restart-11 spcd-e2e/libvirt:trixie"; do
  set -- $spec
  steps=$((steps + 1))
  LAST_API=nan LAST_GAP=nan
  if swap "$1" "$2" survive; then passed=$((passed + 1)); fi
  max_api=$(fmax "$max_api" "$LAST_API")
  max_gap=$(fmax "$max_gap" "$LAST_GAP")
done

hazard=skipped
if [ "${SPCD_E2E_SKIP_DOWNGRADE:-0}" != 1 ]; then
  hazard=0
  # The facts doc's hazard needs a guest that libvirt 11 started: its status
  # XML carries capability flags libvirt 9 does not know. The first guest was
  # started by libvirt 9, so start a second one here.
  GUEST2="$GUEST-b"
  line=$(bash "$V" start-guest "$ROOT" "$container" "$GUEST2")
  pid2=$(kv qemu_pid "$line")
  start2=$(kv qemu_start "$line")
  bash "$V" wait-counter "$ROOT" "$GUEST2" 2 90 >/dev/null
  echo "step=start-second image=spcd-e2e/libvirt:trixie guest=$GUEST2 qemu_pid=$pid2 qemu_start=$start2"
  LAST_API=nan LAST_GAP=nan
  # Not in $(...): swap must update $container in this shell.
  swap downgrade-11-to-9 spcd-e2e/libvirt:bookworm observe >"$ROOT/probe/downgrade.line" || true
  dline=$(cat "$ROOT/probe/downgrade.line")
  echo "$dline guest=$GUEST"
  line2=$(bash "$V" qemu-pid "$ROOT" "$GUEST2" "$pid2" || true)
  state2=$(bash "$V" domstate "$container" "$GUEST2" | sed 's/domstate=//' || true)
  echo "step=downgrade-11-to-9 guest=$GUEST2 $line2 domstate=$state2"
  # The hazard: qemu lives on (same PID and start time) but libvirt 9 lost it.
  if [ "$state2" = absent ] && [ "$(kv qemu_pid "$line2")" = "$pid2" ] &&
    [ "$(kv qemu_start "$line2")" = "$start2" ] && [ "$(kv qemu_alive "$line2")" = 1 ]; then
    hazard=1
  fi
  logs=$("$DOCKER" logs "$container" 2>&1 || true)
  why=$(grep -m1 -E "capabilities flag|Failed to load config for domain '$GUEST2'" <<<"$logs" | sed 's/^.*error : //' | cut -c1-200 || true)
  echo "downgrade_hazard_confirmed=$hazard libvirt9_log=\"${why//\"/\'}\""
fi

echo "manual_survival=$passed/$steps max_api_window_s=$max_api max_console_gap_s=$max_gap downgrade_hazard_confirmed=$hazard"
[ "$passed" = "$steps" ]
