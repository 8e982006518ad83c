# Helpers for scripts that build Debian images with debootstrap (sourced).
# log/now/elapsed print progress and timings; detect_mirror picks the host's
# Debian mirror from its apt sources, else deb.debian.org.

log() { echo "${0##*/}: $*" >&2; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

detect_mirror() {
  local m=""
  m=$(grep -hsE '^[[:space:]]*URIs:' /etc/apt/sources.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
    awk '{ for (i = 2; i <= NF; i++) print $i }' | grep -E '/debian/?$' | head -n1 || true)
  if [ -z "$m" ]; then
    m=$(grep -hsE '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
      awk '{ for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { print $i; break } }' | grep -E '/debian/?$' | head -n1 || true)
  fi
  echo "${m:-http://deb.debian.org/debian}"
}
