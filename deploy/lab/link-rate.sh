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
exec "$(dirname "$0")/run-as-root.sh" link-rate "$@"
