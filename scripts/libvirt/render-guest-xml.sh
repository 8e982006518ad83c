#!/usr/bin/env bash
# Render guest.xml.in to stdout.
#   usage: render-guest-xml.sh NAME KERNEL INITRD CONSOLE_LOG
# Paths are as the libvirt container sees them.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[ "$#" -eq 4 ] || { echo "usage: render-guest-xml.sh NAME KERNEL INITRD CONSOLE_LOG" >&2; exit 2; }
case "$1$2$3$4" in *[\|\&\\\<\>\'\"]*) echo "render-guest-xml: unsafe character in arguments" >&2; exit 2 ;; esac
sed -e "s|@NAME@|$1|g" -e "s|@KERNEL@|$2|g" -e "s|@INITRD@|$3|g" -e "s|@CONSOLE_LOG@|$4|g" "$here/guest.xml.in"
