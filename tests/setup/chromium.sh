#!/usr/bin/env bash
# Installs headless Chromium (Debian's `chromium` package) for the report
# tests (tests/tests/report.rs), once: idempotent, and flock'd so tests
# that call it at the same time install it once. Prints the program's path.
# CI runs as root with apt; elsewhere it needs sudo rights or an installed
# chromium.
set -euo pipefail
find_chromium() {
  command -v chromium || command -v chromium-browser || true
}
found=$(find_chromium)
if [ -z "$found" ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  exec 9>"${TMPDIR:-/tmp}/netdiv-chromium-install.lock"
  flock 9
  found=$(find_chromium)
  if [ -z "$found" ]; then
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y --no-install-recommends chromium >&2 ||
      { $sudo apt-get update >&2 && $sudo apt-get install -y --no-install-recommends chromium >&2; }
    found=$(find_chromium)
  fi
fi
[ -n "$found" ] || { echo "chromium.sh: chromium is not installed and could not be" >&2; exit 1; }
echo "$found"
