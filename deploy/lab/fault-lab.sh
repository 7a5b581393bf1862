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
exec "$(dirname "$0")/run-as-root.sh" fault-lab "$@"
