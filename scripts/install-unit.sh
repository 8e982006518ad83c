#!/usr/bin/env bash
# Installs spcd's systemd unit and its config skeleton. Idempotent: running it
# again changes nothing that is already in place, and never overwrites an
# operator's overrides.yaml.
#
#   scripts/install-unit.sh [--root DIR] [--no-group] [--no-reload]
#
# --root DIR   install under DIR (a staging tree or a test); implies --no-reload
#              and creates the group only in DIR/etc/group when that file exists.
set -euo pipefail

ROOT=""
MAKE_GROUP=1
RELOAD=1
while [ $# -gt 0 ]; do
  case "$1" in
    --root) ROOT="${2:?--root needs a directory}"; RELOAD=0; shift 2 ;;
    --no-group) MAKE_GROUP=0; shift ;;
    --no-reload) RELOAD=0; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "install-unit: unknown argument $1" >&2; exit 2 ;;
  esac
done

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
UNIT_SRC="$HERE/systemd/spcd.service"
SETS_SRC="$HERE/container-sets"
ROOT="${ROOT%/}"

say() { echo "install-unit: $*"; }

# 1. the admin group that may use the API socket
if [ "$MAKE_GROUP" = 1 ]; then
  if [ -z "$ROOT" ]; then
    if getent group spcd >/dev/null; then say "group spcd exists"; else groupadd --system spcd; say "created group spcd"; fi
  elif [ -f "$ROOT/etc/group" ]; then
    if grep -q '^spcd:' "$ROOT/etc/group"; then say "group spcd exists in $ROOT/etc/group"; else
      gid=999; while cut -d: -f3 "$ROOT/etc/group" | grep -qx "$gid"; do gid=$((gid - 1)); done
      echo "spcd:x:$gid:" >>"$ROOT/etc/group"; say "added group spcd ($gid) to $ROOT/etc/group"
    fi
  fi
fi

# 2. directories (the unit's StateDirectory=/ConfigurationDirectory= would make
#    them too, but the config must be in place before the first start)
install -d -m 0750 "$ROOT/etc/spcd" "$ROOT/etc/spcd/container-sets" "$ROOT/var/lib/spcd"
install -d -m 0755 "$ROOT/etc/systemd/system"

# 3. the unit: replaced only when it differs
dest="$ROOT/etc/systemd/system/spcd.service"
if [ -f "$dest" ] && cmp -s "$UNIT_SRC" "$dest"; then say "unit up to date"; else
  install -m 0644 "$UNIT_SRC" "$dest"; say "installed $dest"
fi

# 4. the shipped container sets: added when missing, never overwritten
if [ -d "$SETS_SRC" ]; then
  (cd "$SETS_SRC" && find . -type f -name '*.yaml' -print) | while read -r f; do
    target="$ROOT/etc/spcd/container-sets/${f#./}"
    if [ -e "$target" ]; then continue; fi
    install -D -m 0640 "$SETS_SRC/$f" "$target"; say "added container set ${f#./}"
  done
  # the JSON Schemas the sets name on their first line (for editors): kept
  # current, as they describe this spcd's format
  (cd "$SETS_SRC" && find . -type f -name '*.schema.json' -print) | while read -r f; do
    target="$ROOT/etc/spcd/container-sets/${f#./}"
    if [ -f "$target" ] && cmp -s "$SETS_SRC/$f" "$target"; then continue; fi
    install -D -m 0644 "$SETS_SRC/$f" "$target"; say "installed schema ${f#./}"
  done
fi

# 5. an example overrides.yaml, only when there is none
if [ ! -e "$ROOT/etc/spcd/overrides.yaml" ]; then
  cat >"$ROOT/etc/spcd/overrides.yaml" <<'YAML'
# Per-host overrides for spcd (merged over /etc/spcd/container-sets).
# Examples:
# containers:
#   nova_compute:
#     image: registry.local/kolla/nova-compute:2024.2
# values:
#   my_ip: 192.0.2.10
YAML
  chmod 0640 "$ROOT/etc/spcd/overrides.yaml"; say "wrote example overrides.yaml"
fi
if [ -z "$ROOT" ] && getent group spcd >/dev/null; then chgrp -R spcd /etc/spcd; fi

# 6. tell systemd (only on the live system, and only when systemd runs)
if [ "$RELOAD" = 1 ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload
  say "daemon-reload done; start with: systemctl enable --now spcd"
else
  say "not reloading systemd (no --root, or systemd not running); then: systemctl daemon-reload && systemctl enable --now spcd"
fi
