#!/usr/bin/env bash
# Screenshot a local HTML report with headless chromium, offline (all host lookups fail), to check how it looks.
# Usage: scripts/screenshot.sh HTML PNG [WIDTH,HEIGHT]   (default window 1200,2000; the page is cut at HEIGHT)
set -euo pipefail
if [[ $# -lt 2 || $# -gt 3 ]]; then
  echo "usage: $0 HTML PNG [WIDTH,HEIGHT]" >&2
  exit 2
fi
html=$(realpath "$1")
png=$(realpath -m "$2")
size=${3:-1200,2000}
[[ -f $html ]] || { echo "$0: no such file: $1" >&2; exit 2; }
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[[ -n $browser ]] || { echo "$0: chromium not found (apt-get install -y chromium)" >&2; exit 2; }
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --disable-background-networking --disable-component-update --disable-sync --no-first-run \
  --host-resolver-rules="MAP * ~NOTFOUND" --user-data-dir="$profile" \
  --window-size="$size" --screenshot="$png" "file://$html" 2>/dev/null
[[ -s $png ]] || { echo "$0: chromium wrote no screenshot to $png" >&2; exit 1; }
echo "$png"
