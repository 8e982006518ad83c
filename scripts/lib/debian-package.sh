# shellcheck shell=bash
# One Debian package the project's tests need, installed only when missing,
# with no service started: sourced by scripts/ensure-*.sh.
#
#   ensure_package TAG BINARY PACKAGE [SERVICE]
#
# If BINARY is on PATH: prints "TAG: <version>" (from the caller's `version`
# function) and returns. Otherwise apt-get installs PACKAGE with
# --no-install-recommends under a policy-rc.d that exits 101 ("action not
# allowed"), so no postinst starts a service; should a service manager start
# SERVICE anyway, it is stopped and disabled (it must never hold a port).

ensure_package() {
  local tag="$1" binary="$2" package="$3" service="${4:-}"
  if command -v "$binary" >/dev/null 2>&1; then
    echo "$tag: $(version)"
    return 0
  fi
  echo "$tag: installing Debian's $package package${service:+ (its service is not started)}"
  export DEBIAN_FRONTEND=noninteractive
  local policy=/usr/sbin/policy-rc.d ours=""
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 0755 "$policy"
    ours=1
  fi
  local rc=0
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends "$package" >/dev/null; } || rc=$?
  if [ -n "$ours" ]; then rm -f "$policy"; fi
  [ "$rc" -eq 0 ] || {
    echo "$tag: apt-get install $package failed (exit $rc)" >&2
    return "$rc"
  }
  if [ -n "$service" ] && command -v systemctl >/dev/null 2>&1 &&
    { systemctl is-active --quiet "$service" || systemctl is-enabled --quiet "$service"; } 2>/dev/null; then
    systemctl disable --now "$service" >/dev/null 2>&1 || true
  fi
  echo "$tag: $(version)"
}
