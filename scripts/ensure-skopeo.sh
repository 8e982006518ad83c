#!/usr/bin/env bash
# skopeo and GnuPG (Debian's `skopeo` and `gnupg` packages) for verifying
# image signatures (docs/how-to/require-signed-images.md): spcd runs
# `skopeo inspect --raw` and `skopeo standalone-verify` with a keyring
# imported by `gpg`; the tests also make a key (gpg-agent) and sign with
# `skopeo standalone-sign`. No service is started. Idempotent.
set -euo pipefail
# shellcheck source=lib/debian-package.sh
. "$(dirname "$0")/lib/debian-package.sh"
version() { skopeo --version 2>&1 | head -n 1; }
ensure_package ensure-skopeo skopeo skopeo
version() { gpg --version 2>&1 | head -n 1; }
ensure_package ensure-skopeo gpg-agent gnupg
