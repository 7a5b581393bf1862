#!/usr/bin/env bash
# The multi-chassis fault lab on one machine: the LoadGen node and each
# sut-node in a network namespace of its own, joined by veth pairs to a
# bridge, every link shaped with tc tbf; a Server run with faults on a
# schedule (kill -9, SIGTERM, restart, SIGSTOP/SIGCONT, link down/up, rate
# cut) and every process's memory sampled each second. The default is the
# 600 s soak with a fault every 60 s (docs/benchmarks.md "Soak").
#
# Needs root (ip netns, tc). Arguments go to the program, e.g.
#   sudo deploy/lab/fault-lab.sh                                 # the soak
#   sudo deploy/lab/fault-lab.sh --seconds 60 --every 10 --transport quic
#   sudo deploy/lab/fault-lab.sh --seconds 20 --faults 5:kill:1,8:restart:1
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "$(id -u)" != 0 ]; then
  echo "fault-lab.sh: needs root (network namespaces and tc)" >&2
  exit 1
fi
for tool in ip tc; do
  command -v "$tool" >/dev/null || { echo "fault-lab.sh: $tool is not installed" >&2; exit 1; }
done
cargo build --release -q -p sut-node -p loadgen-node -p netdiv-tests --bin fault-lab
export NETDIV_SUT_NODE="$PWD/target/release/sut-node"
export NETDIV_LOADGEN_NODE="$PWD/target/release/loadgen-node"
exec target/release/fault-lab "$@"
