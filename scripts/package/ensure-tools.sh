#!/usr/bin/env bash
# Debian's packaging tools for scripts/package/build-deb.sh: debhelper (and
# dpkg-dev, dpkg-buildpackage) and lintian, from Debian, only when missing.
set -euo pipefail
# shellcheck source=../lib/debian-package.sh
. "$(dirname "$0")/../lib/debian-package.sh"
version() { dpkg-query -W -f '${Package} ${Version}\n' debhelper 2>/dev/null || true; }
ensure_package ensure-package-tools dh debhelper
version() { lintian --version; }
ensure_package ensure-package-tools lintian lintian
version() { dpkg-query -W -f '${Package} ${Version}\n' debootstrap 2>/dev/null || true; }
ensure_package ensure-package-tools debootstrap debootstrap
