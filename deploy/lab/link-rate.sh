#!/usr/bin/env bash
# The link-rate benchmark: a sut-node in its own network namespace behind a
# veth pair shaped with `tc tbf` (1 and 10 Gbit/s by default), Offline with
# ResNet-50-sized samples over gRPC and QUIC, raw and lz4; prints goodput
# against the shaped rate (docs/benchmarks.md "Link rate").
#
# Needs root (ip netns, tc). Arguments go to the benchmark, e.g.
#   sudo deploy/lab/link-rate.sh --quick                # CI's smoke run
#   sudo deploy/lab/link-rate.sh --rates-mbit 1000 --seconds 20
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "$(id -u)" != 0 ]; then
  echo "link-rate.sh: needs root (network namespaces and tc)" >&2
  exit 1
fi
for tool in ip tc; do
  command -v "$tool" >/dev/null || { echo "link-rate.sh: $tool is not installed" >&2; exit 1; }
done
cargo build --release -q -p sut-node -p loadgen-node -p netdiv-tests --bin link-rate
export NETDIV_SUT_NODE="$PWD/target/release/sut-node"
export NETDIV_LOADGEN_NODE="$PWD/target/release/loadgen-node"
exec target/release/link-rate "$@"
