#!/usr/bin/env bash
# A real local image registry (Debian's docker-registry, distribution 2.8) for
# upgrade tests and the upgrade benchmark. Nothing on the internet is used.
#
#   registry.sh start DIR [PORT] [USER PASS]   start on 127.0.0.1:PORT (free port when omitted or 0),
#                                              data and config under DIR; with USER PASS, htpasswd auth.
#                                              Prints the port. Idempotent for a DIR already running.
#   registry.sh stop DIR                       stop it (the data in DIR stays; start again reuses it)
#   registry.sh push DIR TAG...                push spcd-demo/service:TAG as 127.0.0.1:PORT/kolla/demo-service:TAG,
#                                              then drop the local registry tag so the next pull is a real one
#   registry.sh status DIR                     exit 0 when it answers
#
# Docker treats 127.0.0.0/8 as an insecure registry by default: no TLS needed.
set -euo pipefail
DOCKER="${DOCKER:-/usr/bin/docker}"
[ -x "$DOCKER" ] || DOCKER=docker
REPO_PATH="kolla/demo-service"

die() { echo "registry.sh: $*" >&2; exit 1; }

free_port() {
  node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"
}

answers() {
  # 200 without auth, 401 with auth: both mean the registry is up.
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/v2/" 2>/dev/null || true)
  [ "$code" = 200 ] || [ "$code" = 401 ]
}

hash_password() {
  if ! command -v htpasswd >/dev/null 2>&1; then
    echo "registry.sh: installing apache2-utils (htpasswd) from Debian" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq apache2-utils >/dev/null 2>&1 ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq apache2-utils >/dev/null; }
  fi
  # The registry accepts bcrypt entries only.
  htpasswd -nbB "$1" "$2"
}

cmd="${1:-}"; dir="${2:-}"
[ -n "$cmd" ] && [ -n "$dir" ] || die "usage: registry.sh start|stop|push|status DIR ..."
command -v docker-registry >/dev/null 2>&1 || {
  echo "registry.sh: installing docker-registry from Debian" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-registry >/dev/null
}

case "$cmd" in
  start)
    mkdir -p "$dir/data"
    if [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null && answers "$(cat "$dir/port")"; then
      cat "$dir/port"; exit 0
    fi
    port="${3:-0}"
    if [ "$port" = 0 ]; then port=$(free_port); fi
    auth=""
    if [ -n "${4:-}" ]; then
      hash_password "$4" "${5:-}" > "$dir/htpasswd"
      auth="auth:
  htpasswd:
    realm: spcd-test
    path: $dir/htpasswd"
    fi
    cat > "$dir/config.yml" <<EOF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $dir/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
$auth
EOF
    echo "$port" > "$dir/port"
    setsid docker-registry serve "$dir/config.yml" >"$dir/registry.log" 2>&1 < /dev/null &
    echo $! > "$dir/pid"
    for _ in $(seq 1 100); do
      if answers "$port"; then echo "$port"; exit 0; fi
      kill -0 "$(cat "$dir/pid")" 2>/dev/null || break
      sleep 0.05
    done
    tail -5 "$dir/registry.log" >&2 || true
    die "registry on 127.0.0.1:$port did not answer"
    ;;
  stop)
    [ -f "$dir/pid" ] || exit 0
    pid=$(cat "$dir/pid")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid"
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$dir/pid"
    ;;
  status)
    [ -f "$dir/port" ] && answers "$(cat "$dir/port")"
    ;;
  push)
    [ -f "$dir/port" ] || die "$dir has no registry"
    port=$(cat "$dir/port"); shift 2
    export DOCKER_CONFIG="$dir/docker-config"
    mkdir -p "$DOCKER_CONFIG"
    if [ -f "$dir/htpasswd" ] && [ -n "${REGISTRY_USER:-}" ]; then
      printf '%s' "${REGISTRY_PASS:-}" | "$DOCKER" login -u "$REGISTRY_USER" --password-stdin "127.0.0.1:$port" >/dev/null
    fi
    for tag in "$@"; do
      ref="127.0.0.1:$port/$REPO_PATH:$tag"
      "$DOCKER" tag "spcd-demo/service:$tag" "$ref"
      "$DOCKER" push -q "$ref" >/dev/null
      "$DOCKER" rmi "$ref" >/dev/null
    done
    ;;
  *) die "unknown command $cmd" ;;
esac
