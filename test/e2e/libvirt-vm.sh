#!/usr/bin/env bash
# Helpers for the libvirt end-to-end test: run a libvirt container with the
# flags VM survival needs, define/start the tiny guest, read the qemu PID and
# start time, stamp the console counter, probe the libvirt API, and clean up
# exactly what a run created. Usable as a command (one subcommand per call,
# machine-readable `key=value` lines on stdout, 0 on success) or sourced.
#
#   libvirt-vm.sh prepare-root ROOT                   -> root=... guest_dir=...
#   libvirt-vm.sh run ROOT CONTAINER IMAGE [RUN_ID]   -> container_id=...
#   libvirt-vm.sh wait-api CONTAINER [DEADLINE_S]     -> api_ready_s=...
#   libvirt-vm.sh start-guest ROOT CONTAINER NAME [BRIDGE MAC [KERNEL_ARGS]] -> qemu_pid=... qemu_start=...
#   libvirt-vm.sh qemu-pid ROOT NAME [KNOWN_PID]      -> qemu_pid=... qemu_start=... qemu_alive=0|1 pid_source=pidfile|known
#   libvirt-vm.sh wait-counter ROOT NAME MIN [DEADLINE_S] -> counter=N
#   libvirt-vm.sh domstate CONTAINER NAME             -> domstate=running|paused|...|absent
#   libvirt-vm.sh suspend-resume CONTAINER NAME       -> suspend_resume=ok
#   libvirt-vm.sh console-watch ROOT NAME             -> watch_pgid=...   (stamps in ROOT/probe/NAME.stamps)
#   libvirt-vm.sh api-probe ROOT IMAGE RUN_ID         -> probe_container=...  (ROOT/probe/api.log: "<start> <end> ok|fail")
#   libvirt-vm.sh console-gap ROOT NAME FROM TO       -> console_max_gap_s=... counter_from=... counter_to=... counter_missing=...
#   libvirt-vm.sh api-window ROOT T_STOP              -> api_down_s=... api_back_s=...
#   libvirt-vm.sh cleanup ROOT NAME RUN_ID [QEMU_PID] -> cleanup=ok ...
#
# Layout under ROOT (a host directory owned by one test run):
#   ROOT/run/libvirt          bound to /run/libvirt
#   ROOT/var/lib/libvirt      bound to /var/lib/libvirt; guest files and the
#                             console log live in its spcd-e2e/ subdirectory
#   ROOT/probe                the API probe's and the console watcher's output
# Every container a run creates carries the label spcd-e2e.run=RUN_ID.
set -euo pipefail

E2E_HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
E2E_REPO="$(cd "$E2E_HERE/../.." && pwd)"
# SPCD_ENGINE=podman: the same helpers through Podman's command line (its
# settings from CONTAINERS_CONF, as the lane's service has them).
ENGINE="${SPCD_ENGINE:-docker}"
if [ "$ENGINE" = podman ]; then DOCKER="${DOCKER:-podman}"; else DOCKER="${DOCKER:-/usr/bin/docker}"; fi
command -v "$DOCKER" >/dev/null 2>&1 || DOCKER=docker
CACHE="${SPCD_E2E_CACHE:-/var/cache/spcd-e2e}"
GUEST_DIR_IN=/var/lib/libvirt/spcd-e2e

e2e_die() {
  echo "libvirt-vm: $*" >&2
  exit 1
}

# The docker run flags of the facts doc (docs/explanation/libvirt-proof.md), with an
# explicit capability list because --privileged cannot start on this kind of VM.
libvirt_run_flags() {
  local root="$1"
  printf '%s\n' --pid=host --net=host \
    --cap-add ALL --cap-drop SYS_RESOURCE \
    -v /sys/fs/cgroup:/sys/fs/cgroup \
    --tmpfs /sys/fs/cgroup/unified \
    -v "$root/run/libvirt:/run/libvirt" \
    -v "$root/var/lib/libvirt:/var/lib/libvirt"
  # Podman refuses an init process in a container of the host's PID namespace.
  if [ "$ENGINE" != podman ]; then printf '%s\n' --init; fi
  # Not in the facts doc's list: without it a persistently defined domain
  # comes back transient after the swap (the definition stayed in the old
  # container's /etc/libvirt/qemu). Kolla binds it (nova_libvirt_qemu volume).
  # Guests with a NIC on a host bridge (libvirt-net.sh): libvirt opens /dev/net/tun.
  if [ "${SPCD_E2E_TUN:-0}" = 1 ]; then
    printf '%s\n' --device /dev/net/tun
  fi
  if [ "${SPCD_E2E_BIND_ETC_QEMU:-0}" = 1 ]; then
    mkdir -p "$root/etc/libvirt/qemu"
    printf '%s\n' -v "$root/etc/libvirt/qemu:/etc/libvirt/qemu"
  fi
}

cmd_prepare_root() {
  local root="$1"
  mkdir -p "$root/run/libvirt" "$root/var/lib/libvirt/spcd-e2e" "$root/probe"
  [ -s "$CACHE/guest/vmlinuz" ] && [ -s "$CACHE/guest/initrd.img" ] ||
    e2e_die "no guest in $CACHE/guest; run scripts/libvirt/build-guest.sh"
  cp "$CACHE/guest/vmlinuz" "$CACHE/guest/initrd.img" "$root/var/lib/libvirt/spcd-e2e/"
  echo "root=$root guest_dir=$root/var/lib/libvirt/spcd-e2e"
}

cmd_run() {
  local root="$1" name="$2" image="$3" run_id="${4:-manual}"
  local flags=()
  mapfile -t flags < <(libvirt_run_flags "$root")
  local id
  id=$("$DOCKER" run -d --name "$name" --label "spcd-e2e.run=$run_id" "${flags[@]}" "$image")
  mkdir -p "$root/probe" && echo "$id" >>"$root/probe/containers"
  echo "container_id=$id"
}

# virsh inside the container; qemu:///system through the bound /run/libvirt.
e2e_virsh() {
  local container="$1"
  shift
  timeout 30 "$DOCKER" exec "$container" virsh -q -c qemu:///system "$@"
}

cmd_wait_api() {
  local container="$1" deadline="${2:-60}"
  local t0="$EPOCHREALTIME"
  while :; do
    if e2e_virsh "$container" version --daemon >/dev/null 2>&1; then
      awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "api_ready_s=%.2f\n", b - a }'
      return 0
    fi
    awk -v a="$t0" -v b="$EPOCHREALTIME" -v d="$deadline" 'BEGIN { exit !(b - a > d) }' &&
      e2e_die "libvirt API in $container did not answer within ${deadline}s"
    sleep 0.1
  done
}

# Field 22 of /proc/PID/stat (start time in clock ticks since boot). The
# command name may hold spaces, so count fields after the last ')'.
e2e_start_time() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat="${stat##*) }"
  awk '{ print $20 }' <<<"$stat"
}

cmd_qemu_pid() {
  local root="$1" name="$2" known="${3:-}"
  local pidfile="$root/run/libvirt/qemu/$name.pid" pid start alive=0 source=pidfile
  if [ -s "$pidfile" ]; then
    pid=$(tr -dc '0-9' <"$pidfile")
  elif [ -n "$known" ]; then
    pid="$known" source=known
  else
    e2e_die "no pid file $pidfile"
  fi
  start=$(e2e_start_time "$pid" || echo 0)
  if [ "$start" != 0 ] && { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -q "guest=$name"; then alive=1; fi
  echo "qemu_pid=$pid qemu_start=$start qemu_alive=$alive pid_source=$source"
}

e2e_console_log() { echo "$1/var/lib/libvirt/spcd-e2e/$2.console.log"; }

e2e_last_counter() {
  local log
  log=$(e2e_console_log "$1" "$2")
  { grep -a -o 'counter [0-9]*' "$log" 2>/dev/null || true; } | tail -n1 | awk '{ print $2 }'
}

cmd_wait_counter() {
  local root="$1" name="$2" min="$3" deadline="${4:-90}"
  local t0="$EPOCHREALTIME" n
  while :; do
    n=$(e2e_last_counter "$root" "$name")
    if [ -n "$n" ] && [ "$n" -ge "$min" ]; then
      echo "counter=$n"
      return 0
    fi
    awk -v a="$t0" -v b="$EPOCHREALTIME" -v d="$deadline" 'BEGIN { exit !(b - a > d) }' &&
      e2e_die "console counter of $name did not reach $min within ${deadline}s (last: ${n:-none})"
    sleep 0.2
  done
}

cmd_start_guest() {
  local root="$1" container="$2" name="$3"
  shift 3
  local gd="$root/var/lib/libvirt/spcd-e2e"
  : >"$gd/$name.console.log"
  bash "$E2E_REPO/scripts/libvirt/render-guest-xml.sh" "$name" \
    "$GUEST_DIR_IN/vmlinuz" "$GUEST_DIR_IN/initrd.img" "$GUEST_DIR_IN/$name.console.log" "$@" >"$gd/$name.xml"
  e2e_virsh "$container" define "$GUEST_DIR_IN/$name.xml" >&2
  e2e_virsh "$container" start "$name" >&2
  cmd_qemu_pid "$root" "$name"
}

# domstate=absent only when this container's daemon answers and does not know
# the domain; domstate=api-down (exit 1) when the daemon does not answer.
cmd_domstate() {
  local container="$1" name="$2" s
  if s=$(e2e_virsh "$container" domstate "$name" 2>/dev/null); then
    echo "domstate=$(echo "$s" | head -n1 | tr ' ' '_')"
  elif e2e_virsh "$container" version --daemon >/dev/null 2>&1; then
    echo "domstate=absent"
  else
    echo "domstate=api-down"
    return 1
  fi
}

cmd_suspend_resume() {
  local container="$1" name="$2" s
  e2e_virsh "$container" suspend "$name" >/dev/null || e2e_die "suspend failed"
  s=$(e2e_virsh "$container" domstate "$name" | head -n1)
  [ "$s" = paused ] || e2e_die "after suspend the state is '$s', not paused"
  e2e_virsh "$container" resume "$name" >/dev/null || e2e_die "resume failed"
  s=$(e2e_virsh "$container" domstate "$name" | head -n1)
  [ "$s" = running ] || e2e_die "after resume the state is '$s', not running"
  echo "suspend_resume=ok"
}

# Stamps every console line with the host's arrival time:
#   ROOT/probe/NAME.stamps: "<epoch seconds> counter N"
cmd_console_watch() {
  local root="$1" name="$2"
  local log out
  log=$(e2e_console_log "$root" "$name")
  out="$root/probe/$name.stamps"
  setsid bash -c '
    tail -n +1 -s 0.1 -F "$1" 2>/dev/null | while IFS= read -r line; do
      printf "%s %s\n" "$EPOCHREALTIME" "$line"
    done >>"$2"
  ' watch "$log" "$out" </dev/null >/dev/null 2>&1 &
  echo "watch_pgid=$!"
}

# A separate client container polls `virsh version --daemon` every 50 ms:
#   ROOT/probe/api.log: "<call start> <call end> ok|fail" (epoch seconds)
cmd_api_probe() {
  local root="$1" image="$2" run_id="$3"
  local name="spcd-e2e-probe-$run_id"
  local id
  id=$("$DOCKER" run -d --name "$name" --label "spcd-e2e.run=$run_id" --net=none \
    -v "$root/run/libvirt:/run/libvirt" -v "$root/probe:/probe" \
    --entrypoint /bin/bash "$image" -c '
      while :; do
        t="$EPOCHREALTIME"
        if timeout 5 virsh -q -c qemu:///system version --daemon >/dev/null 2>&1; then r=ok; else r=fail; fi
        echo "$t $EPOCHREALTIME $r" >>/probe/api.log
        sleep 0.05
      done')
  echo "$id" >>"$root/probe/containers"
  echo "probe_container=$name"
}

# The largest interval between two console lines arriving in [FROM, TO], and
# whether the counter skipped or restarted.
cmd_console_gap() {
  local root="$1" name="$2" from="$3" to="$4"
  awk -v from="$from" -v to="$to" '
    $2 == "counter" && $1 >= from && $1 <= to {
      n = $3 + 0 # the console ends lines with \r\n
      if (seen) {
        gap = $1 - last_t
        if (gap > max) { max = gap; at = last_t }
        if (n != last_n + 1) missing += (n > last_n) ? n - last_n - 1 : 1000000
      } else first = n
      seen = 1; last_t = $1; last_n = n; lines++
    }
    END {
      if (!seen) { print "console_max_gap_s=nan counter_lines=0"; exit 1 }
      printf "console_max_gap_s=%.2f console_gap_at=%.2f counter_from=%d counter_to=%d counter_lines=%d counter_missing=%d\n", max, at, first, last_n, lines, missing
    }' "$root/probe/$name.stamps"
}

# From the API probe: api_back_s is T_STOP -> the end of the first call that
# succeeded after the daemon went down (what a client waiting on the API sees);
# api_down_s is the last success before the outage -> that same moment.
cmd_api_window() {
  local root="$1" t_stop="$2"
  awk -v t0="$t_stop" '
    $2 < t0 { next }
    $3 == "ok" && !down { last_ok = $2; next }
    $3 == "fail" { down = 1; next }
    $3 == "ok" && down { back = $2; exit }
    END {
      if (!back) { print "api_back_s=nan"; exit 1 }
      if (!last_ok) last_ok = t0
      printf "api_back_s=%.2f api_down_s=%.2f\n", back - t0, back - last_ok
    }' "$root/probe/api.log"
}

cmd_cleanup() {
  local root="$1" name="$2" run_id="$3" pid="${4:-}"
  local c ids
  if [ -z "$pid" ] && [ -s "$root/run/libvirt/qemu/$name.pid" ]; then
    pid=$(tr -dc '0-9' <"$root/run/libvirt/qemu/$name.pid")
  fi
  # Ask a running libvirt of this run to destroy the guest first.
  for c in $("$DOCKER" ps -q --filter "label=spcd-e2e.run=$run_id"); do
    e2e_virsh "$c" destroy "$name" >/dev/null 2>&1 || true
    e2e_virsh "$c" undefine "$name" >/dev/null 2>&1 || true
  done
  # Then kill its qemu by PID, only if that PID is still our guest's qemu.
  local killed=0
  if [ -n "$pid" ] && { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -q "guest=$name"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
    if [ -d "/proc/$pid" ]; then kill -KILL "$pid" 2>/dev/null || true; fi
    killed=1
  fi
  ids=$("$DOCKER" ps -aq --no-trunc --filter "label=spcd-e2e.run=$run_id")
  for c in $ids; do "$DOCKER" rm -f "$c" >/dev/null 2>&1 || true; done
  # Leftover cgroups: the guest's under machine/, and the removed containers'.
  local removed=0 d
  for d in /sys/fs/cgroup/*/machine/qemu-*-"$name".libvirt-qemu /sys/fs/cgroup/*/machine.slice/machine-qemu*"$name"*; do
    [ -d "$d" ] || continue
    find "$d" -depth -type d -exec rmdir {} + 2>/dev/null && removed=$((removed + 1)) || true
  done
  for c in $ids $(cat "$root/probe/containers" 2>/dev/null || true); do
    # Docker's cgroups, and Podman's (cgroupfs manager): qemu stays in the
    # controllers libvirt does not manage (pids, name=systemd) of the container
    # that started it, so those outlive the container.
    for d in /sys/fs/cgroup/*/docker/"$c" /sys/fs/cgroup/*/libpod_parent/libpod-"$c"; do
      [ -d "$d" ] || continue
      find "$d" -depth -type d -exec rmdir {} + 2>/dev/null && removed=$((removed + 1)) || true
    done
  done
  echo "cleanup=ok qemu_killed=$killed containers_removed=$(echo "$ids" | grep -c . || true) cgroups_removed=$removed"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  sub="${1:-}"
  [ -n "$sub" ] || {
    sed -n '2,30p' "$0" >&2
    exit 2
  }
  shift
  case "$sub" in
    prepare-root) cmd_prepare_root "$@" ;;
    run) cmd_run "$@" ;;
    wait-api) cmd_wait_api "$@" ;;
    start-guest) cmd_start_guest "$@" ;;
    qemu-pid) cmd_qemu_pid "$@" ;;
    wait-counter) cmd_wait_counter "$@" ;;
    domstate) cmd_domstate "$@" ;;
    suspend-resume) cmd_suspend_resume "$@" ;;
    console-watch) cmd_console_watch "$@" ;;
    api-probe) cmd_api_probe "$@" ;;
    console-gap) cmd_console_gap "$@" ;;
    api-window) cmd_api_window "$@" ;;
    cleanup) cmd_cleanup "$@" ;;
    *)
      echo "libvirt-vm: unknown subcommand $sub" >&2
      exit 2
      ;;
  esac
fi
