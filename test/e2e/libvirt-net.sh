#!/usr/bin/env bash
# The network of the libvirt network test (test/integration/libvirt-net.test.ts):
# a bridge with no uplink and no address on the host, and a DHCP server for it
# (dnsmasq) in a network namespace of its own, attached by a veth pair. Only
# what `up` creates is ever touched; `down` removes all of it.
#
#   libvirt-net.sh up ID ROOT SUBNET MAC=IP...   -> bridge=... netns=... server_ip=... forward_rule=added|not-needed
#   libvirt-net.sh rule add|del|check ID BRIDGE  -> forward_rule=added|removed|present|absent
#   libvirt-net.sh leases ROOT                   -> lease=MAC,IP ... (one per line)
#   libvirt-net.sh down ID ROOT                  -> net_down=ok bridge_left=0 netns_left=0 rule_left=0
#
# ID: [a-z0-9]{1,8}. SUBNET: the first three octets, e.g. 10.251.0 (the server
# is .1, fixed hosts from the MAC=IP arguments, a pool .100-.199).
# Names: bridge spbr-ID, namespace spcd-net-ID, veth spve-ID (bridge port) /
# spvn-ID (in the namespace). ROOT holds dnsmasq's pid file, log and leases.
#
# Docker sets the FORWARD policy to DROP. With br_netfilter loaded and
# net.bridge.bridge-nf-call-iptables=1, frames bridged between the bridge's
# ports go through iptables' FORWARD chain with -i/-o the bridge itself, so
# they are dropped unless one rule lets them through:
#   iptables -I FORWARD -i BRIDGE -o BRIDGE -j ACCEPT
# `up` adds exactly that rule (tagged with a comment naming ID) when the sysctl
# is 1, and `down` deletes it.
set -euo pipefail

die() {
  echo "libvirt-net: $*" >&2
  exit 1
}

names() {
  local id="$1"
  [[ "$id" =~ ^[a-z0-9]{1,8}$ ]] || die "ID must be 1-8 characters of [a-z0-9], not '$id'"
  BR="spbr-$id" NS="spcd-net-$id" VE="spve-$id" VN="spvn-$id" TAG="spcd-e2e-net $id"
}

br_nf() { cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null || echo 0; }

rule_args() { printf '%s\n' FORWARD -i "$1" -o "$1" -m comment --comment "$TAG" -j ACCEPT; }

cmd_rule() {
  local op="$1" br
  names "$2"
  br="$3"
  local args=()
  mapfile -t args < <(rule_args "$br")
  case "$op" in
    add)
      iptables -w 10 -I "${args[@]}"
      echo "forward_rule=added"
      ;;
    del)
      while iptables -w 10 -C "${args[@]}" 2>/dev/null; do iptables -w 10 -D "${args[@]}"; done
      echo "forward_rule=removed"
      ;;
    check)
      if iptables -w 10 -C "${args[@]}" 2>/dev/null; then echo "forward_rule=present"; else echo "forward_rule=absent"; fi
      ;;
    *) die "rule add|del|check, not '$op'" ;;
  esac
}

cmd_up() {
  local id="$1" root="$2" subnet="$3"
  shift 3
  names "$id"
  [[ "$subnet" =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || die "SUBNET must be three octets, e.g. 10.251.0, not '$subnet'"
  command -v dnsmasq >/dev/null || die "no dnsmasq; run scripts/ensure-dnsmasq.sh"
  ! ip link show "$BR" >/dev/null 2>&1 || die "bridge $BR exists already"
  ! ip netns list | grep -qw "$NS" || die "namespace $NS exists already"
  mkdir -p "$root"
  local hosts=() a
  for a in "$@"; do
    [[ "$a" =~ ^([0-9a-f]{2}:){5}[0-9a-f]{2}=$subnet\.[0-9]{1,3}$ ]] || die "host '$a' is not MAC=$subnet.N"
    hosts+=("--dhcp-host=${a%%=*},${a#*=}")
  done
  # The bridge: no address, no uplink; nothing but the VMs' taps and the veth.
  ip link add "$BR" type bridge
  ip link set "$BR" type bridge stp_state 0 forward_delay 0
  echo 1 >"/proc/sys/net/ipv6/conf/$BR/disable_ipv6" 2>/dev/null || true
  ip link set "$BR" up
  ip netns add "$NS"
  ip link add "$VE" type veth peer name "$VN"
  ip link set "$VN" netns "$NS"
  ip link set "$VE" master "$BR"
  ip link set "$VE" up
  ip netns exec "$NS" ip link set lo up
  ip netns exec "$NS" ip addr add "$subnet.1/24" dev "$VN"
  ip netns exec "$NS" ip link set "$VN" up
  local rule=not-needed
  if [ "$(br_nf)" = 1 ]; then
    cmd_rule add "$id" "$BR" >/dev/null
    rule=added
  fi
  # DHCP only (no DNS: port=0), on the veth alone, everything under ROOT.
  ip netns exec "$NS" dnsmasq --conf-file=/dev/null --port=0 --user=root --group=root \
    --interface="$VN" --bind-interfaces --except-interface=lo \
    --dhcp-authoritative --dhcp-range="$subnet.100,$subnet.199,255.255.255.0,1h" \
    --dhcp-option=option:router --dhcp-option=option:dns-server \
    "${hosts[@]}" \
    --dhcp-leasefile="$root/dnsmasq.leases" --pid-file="$root/dnsmasq.pid" \
    --log-dhcp --log-facility="$root/dnsmasq.log"
  echo "bridge=$BR netns=$NS veth=$VE server_ip=$subnet.1 forward_rule=$rule br_netfilter=$(br_nf)"
}

cmd_leases() {
  local root="$1"
  awk '{ print "lease=" $2 "," $3 }' "$root/dnsmasq.leases" 2>/dev/null || true
}

cmd_down() {
  local id="$1" root="$2" pid
  names "$id"
  if [ -s "$root/dnsmasq.pid" ]; then
    pid=$(tr -dc '0-9' <"$root/dnsmasq.pid")
    # Only the dnsmasq this run started (its command line names this ROOT's pid file).
    if [ -n "$pid" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "--pid-file=$root/dnsmasq.pid"; then
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
    fi
  fi
  cmd_rule del "$id" "$BR" >/dev/null
  ip link del "$VE" 2>/dev/null || true
  ip link del "$BR" 2>/dev/null || true
  ip netns del "$NS" 2>/dev/null || true
  local b=0 n=0 r=0
  ! ip link show "$BR" >/dev/null 2>&1 || b=1
  ! ip netns list | grep -qw "$NS" || n=1
  [ "$(cmd_rule check "$id" "$BR")" = forward_rule=absent ] || r=1
  echo "net_down=ok bridge_left=$b netns_left=$n rule_left=$r"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  sub="${1:-}"
  [ -n "$sub" ] || {
    sed -n '2,12p' "$0" >&2
    exit 2
  }
  shift
  case "$sub" in
    up) cmd_up "$@" ;;
    rule) cmd_rule "$@" ;;
    leases) cmd_leases "$@" ;;
    down) cmd_down "$@" ;;
    *) die "unknown subcommand $sub" ;;
  esac
fi
