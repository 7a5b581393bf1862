#!/usr/bin/env bash
# Installs iperf3 (Debian's package) for the bytes-per-cpu benchmark
# (tests/src/bin/bytes-per-cpu.rs), once: the kernel's own rate of moving
# bytes over a link, the benchmark's yardstick. Prints the program's path.
# Needs root with apt (as CI runs), or an installed iperf3.
set -euo pipefail
if ! command -v iperf3 >/dev/null 2>&1; then
  [ "$(id -u)" -eq 0 ] || { echo "iperf3.sh: iperf3 is missing; install Debian's iperf3 package" >&2; exit 1; }
  exec 9>"${TMPDIR:-/tmp}/netdiv-iperf3-install.lock"
  flock 9
  if ! command -v iperf3 >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends iperf3 >&2 ||
      { apt-get update >&2 && apt-get install -y --no-install-recommends iperf3 >&2; }
  fi
fi
command -v iperf3
