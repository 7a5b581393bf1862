#!/usr/bin/env bash
# What the lab scripts share: check for root, ip and tc, build the nodes and
# the named netdiv-tests program, and run it with the rest of the arguments
# (the nodes it starts are the ones just built).
#
# Usage (from a lab script): exec deploy/lab/run-as-root.sh PROGRAM "$@"
set -euo pipefail
cd "$(dirname "$0")/../.."
program=$1
shift
if [ "$(id -u)" != 0 ]; then
  echo "$program: needs root (network namespaces and tc)" >&2
  exit 1
fi
for tool in ip tc; do
  command -v "$tool" >/dev/null || { echo "$program: $tool is not installed" >&2; exit 1; }
done
cargo build --release -q -p sut-node -p loadgen-node -p netdiv-tests --bin "$program"
export NETDIV_SUT_NODE="$PWD/target/release/sut-node"
export NETDIV_LOADGEN_NODE="$PWD/target/release/loadgen-node"
exec "target/release/$program" "$@"
