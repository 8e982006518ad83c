#!/usr/bin/env bash
# A signed flat apt repository of spcd's packages: what a host installs from
# (docs/how-to/install.md), apt checking the signature before it reads a
# package list.
#
#   usage: build-repo.sh --out DIR [--key-home DIR] DEB...
#
# DIR gets the packages, Packages(.gz), Release (apt-ftparchive), InRelease
# (clear-signed) and Release.gpg (detached), and spcd-archive-keyring.gpg:
# the public key, for apt's `signed-by`. Any repository already in DIR is
# replaced.
#
# The key: SPCD_SIGNING_KEY (a fingerprint in the caller's GNUPGHOME), the
# release key of whoever publishes. Without it, a local build key: made once
# in --key-home (default $CACHE/gnupg), named "spcd local build (not a
# release key)", so that a host can check what it installs came from this
# build machine; the last line says which.
#
# Output (stdout), last line: repo=DIR key=FINGERPRINT key_kind=release|local-build packages=N
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
CACHE="${SPCD_PACKAGE_CACHE:-$repo/.cache/package}"
OUT=""
KEY_HOME="$CACHE/gnupg"
debs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="${2:?}"; shift 2 ;;
    --key-home) KEY_HOME="${2:?}"; shift 2 ;;
    -*) echo "build-repo: unknown argument $1" >&2; exit 2 ;;
    *) debs+=("$1"); shift ;;
  esac
done
[ -n "$OUT" ] || { echo "build-repo: --out DIR is required" >&2; exit 2; }
[ "${#debs[@]}" -gt 0 ] || { echo "build-repo: no .deb given" >&2; exit 2; }
for d in "${debs[@]}"; do [ -f "$d" ] || { echo "build-repo: $d: no such package" >&2; exit 2; }; done
log() { echo "build-repo: $*" >&2; }

# shellcheck source=../lib/debian-package.sh
. "$here/../lib/debian-package.sh"
version() { dpkg-query -W -f '${Package} ${Version}\n' apt-utils 2>/dev/null || true; }
ensure_package ensure-repo-tools apt-ftparchive apt-utils >&2
version() { gpg --version | head -n 1; }
ensure_package ensure-repo-tools gpg gnupg >&2

# The signing key and the GNUPGHOME it lives in.
if [ -n "${SPCD_SIGNING_KEY:-}" ]; then
  kind=release
  key="$SPCD_SIGNING_KEY"
  gpg --batch --list-secret-keys "$key" >/dev/null 2>&1 ||
    { log "SPCD_SIGNING_KEY=$key: no such secret key in ${GNUPGHOME:-~/.gnupg}"; exit 2; }
else
  kind=local-build
  mkdir -p "$KEY_HOME" && chmod 0700 "$KEY_HOME"
  export GNUPGHOME="$KEY_HOME"
  exec 8>"$KEY_HOME/.lock"
  flock 8
  uid='spcd local build (not a release key)'
  if ! gpg --batch --list-secret-keys "$uid" >/dev/null 2>&1; then
    log "making a local build key in $KEY_HOME"
    gpg --batch --quiet --pinentry-mode loopback --passphrase '' --quick-generate-key "$uid" ed25519 sign never 2>&1 | sed 's/^/build-repo: /' >&2
  fi
  key=$(gpg --batch --quiet --with-colons --list-secret-keys "$uid" | awk -F: '$1 == "fpr" { print $10; exit }')
fi

rm -rf "$OUT" && mkdir -p "$OUT"
cp "${debs[@]}" "$OUT/"
(
  cd "$OUT"
  dpkg-scanpackages --multiversion . /dev/null 2>/dev/null >Packages
  gzip -9nk Packages
  apt-ftparchive \
    -o APT::FTPArchive::Release::Origin=spcd \
    -o APT::FTPArchive::Release::Label=spcd \
    -o APT::FTPArchive::Release::Suite=stable \
    -o APT::FTPArchive::Release::Codename=stable \
    release . >"$OUT.Release.tmp"
  mv "$OUT.Release.tmp" Release
  gpg --batch --yes --local-user "$key" --clearsign -o InRelease Release
  gpg --batch --yes --local-user "$key" --armor --detach-sign -o Release.gpg Release
  gpg --batch --export "$key" >spcd-archive-keyring.gpg
)
packages=$(grep -c '^Package: ' "$OUT/Packages")
echo "repo=$OUT key=$key key_kind=$kind packages=$packages"
