#!/usr/bin/env bash
# Stages what the package and the image ship, in a folder of its own (never
# the work tree): the build output (npm run build: dist/ with its
# build-info.json), bin/, package.json, templates/, healthchecks/, the
# production dependencies (`npm ci --omit=dev --ignore-scripts`: koffi ships
# prebuilt binaries; the other install scripts are optional native builds
# (cpu-features, ssh2's) or a notice (protobufjs)), the running node binary
# (Debian 12's nodejs is 18, below package.json's engines floor: see
# docs/decisions/0042-package-bundles-node.md), and the shell completion
# scripts (`spcctl completion bash|zsh`).
#
#   usage: stage.sh DIR      (DIR/lib is /usr/lib/spcd, DIR/completion the scripts)
#
# The dependencies are cached by package-lock.json's hash in $CACHE/deps-<hash>.
set -euo pipefail
out="${1:?usage: stage.sh DIR}"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
CACHE="${SPCD_PACKAGE_CACHE:-$repo/.cache/package}"
log() { echo "stage: $*" >&2; }

arch=$(dpkg --print-architecture)
case "$arch" in
  amd64) koffi_dir=linux_x64 ;;
  arm64) koffi_dir=linux_arm64 ;;
  *) log "no koffi build named for $arch"; exit 1 ;;
esac

(cd "$repo" && npm run --silent build)

# production dependencies, once per lock file
lockhash=$(cat "$repo/package-lock.json" "$0" | sha256sum | cut -c1-16)
deps="$CACHE/deps-$lockhash"
if [ ! -d "$deps/node_modules" ]; then
  log "npm ci --omit=dev --ignore-scripts (production dependencies)"
  rm -rf "$CACHE"/deps-* && mkdir -p "$deps.part"
  cp "$repo/package.json" "$repo/package-lock.json" "$deps.part/"
  (cd "$deps.part" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
  nm="$deps.part/node_modules"
  # koffi: only this architecture's prebuilt binary
  find "$nm/koffi/build/koffi" -mindepth 1 -maxdepth 1 -type d ! -name "$koffi_dir" -exec rm -rf {} +
  # bare-*: native addons for the Bare runtime (tar-fs's), which node never loads
  rm -rf "$nm"/bare-*/prebuilds
  # the optional native builds never ran (--ignore-scripts): drop their sources
  rm -rf "$nm/cpu-features" "$nm/ssh2/lib/protocol/crypto/src" "$nm/ssh2/lib/protocol/crypto/binding.gyp"
  # what a running node never reads
  find "$nm" -type f \( -name '*.map' -o -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' -o -name '*.ts.map' \
    -o -iname 'CHANGELOG*' -o -iname 'HISTORY*' -o -name '*.markdown' -o -name '.npmignore' -o -name '.eslintrc*' \
    -o -name '.editorconfig' -o -name '.travis.yml' -o -name '.gitattributes' -o -name 'Makefile' -o -name '*.gyp' -o -name '*.gypi' \) -delete
  find "$nm" -type f \( -iname 'README*' -o -name '*.html' -o -name 'inc-version.sh' \) -delete
  find "$nm" -type d -name '.husky' -prune -exec rm -rf {} +
  find "$nm" -type d \( -name '.github' -o -name 'test' -o -name 'tests' -o -name '__tests__' -o -name 'example' -o -name 'examples' -o -name 'docs' -o -name 'benchmark' \) -prune -exec rm -rf {} +
  # no stray execute bits on non-scripts, no setuid, no group/world writes
  find "$nm" -type f -exec chmod a-x,go-w {} +
  find "$nm" -type d -exec chmod 0755 {} +
  mv "$deps.part" "$deps"
fi

rm -rf "$out" && mkdir -p "$out/lib" "$out/completion/bash" "$out/completion/zsh"
lib="$out/lib"
cp -a "$repo/package.json" "$repo/bin" "$repo/dist" "$repo/templates" "$repo/healthchecks" "$lib/"
cp -a "$deps/node_modules" "$lib/node_modules"
install -m 0755 "$(command -v node)" "$lib/node"
chmod 0755 "$lib"/bin/*.js
find "$lib/healthchecks" -type f -name 'healthcheck_*' -exec chmod 0755 {} +
find "$lib/healthchecks" -type f ! -name 'healthcheck_*' -exec chmod 0644 {} +
find "$lib/dist" -type f -name "*.map" -delete
find "$lib/dist" -type f -exec chmod 0644 {} +
# named as bash-completion and zsh look them up: completions/<command>, _<command>
node "$repo/bin/spcctl.js" completion bash >"$out/completion/bash/spcctl"
node "$repo/bin/spcctl.js" completion zsh >"$out/completion/zsh/_spcctl"
cp "$repo/dist/build-info.json" "$out/build-info.json"
log "staged $(du -sm "$lib" | cut -f1) MB in $lib ($(cat "$out/build-info.json"))"
