#!/usr/bin/env bash
# Render guest.xml.in to stdout.
#   usage: render-guest-xml.sh NAME KERNEL INITRD CONSOLE_LOG [BRIDGE MAC [KERNEL_ARGS]]
# Paths are as the libvirt container sees them. With BRIDGE and MAC the guest
# gets one virtio NIC on that host bridge (qemu's own virtio-net, no vhost),
# ACPI (so it has the HPET and ACPI PM clocks, which count right in a starved
# TCG guest; Nova's guests have ACPI too), and KERNEL_ARGS (e.g. "spcd.peer=10.251.0.11,10.251.0.12") are appended to
# its kernel command line. Without them the output is the guest as before.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[ "$#" -eq 4 ] || [ "$#" -eq 6 ] || [ "$#" -eq 7 ] || {
  echo "usage: render-guest-xml.sh NAME KERNEL INITRD CONSOLE_LOG [BRIDGE MAC [KERNEL_ARGS]]" >&2
  exit 2
}
case "$*" in *[\|\&\\\<\>\'\"]*) echo "render-guest-xml: unsafe character in arguments" >&2; exit 2 ;; esac
args=(-e "s|@NAME@|$1|g" -e "s|@KERNEL@|$2|g" -e "s|@INITRD@|$3|g" -e "s|@CONSOLE_LOG@|$4|g")
if [ "$#" -ge 6 ]; then
  [[ "$5" =~ ^[A-Za-z0-9_.-]{1,15}$ ]] || { echo "render-guest-xml: bad bridge name '$5'" >&2; exit 2; }
  [[ "$6" =~ ^([0-9a-f]{2}:){5}[0-9a-f]{2}$ ]] || { echo "render-guest-xml: bad MAC '$6'" >&2; exit 2; }
  nic="    <interface type='bridge'><mac address='$6'/><source bridge='$5'/><model type='virtio'/><driver name='qemu'/></interface>"
  args+=(-e "s|^    <memballoon |$nic\\n&|" -e "s|^  </os>|&\\n  <features><acpi/></features>|")
  [ -z "${7:-}" ] || args+=(-e "s|<cmdline>\\(.*\\)</cmdline>|<cmdline>\\1 $7</cmdline>|")
fi
sed "${args[@]}" "$here/guest.xml.in"
