#!/usr/bin/env bash
# The audit demonstration (`loadgen-node audit`) against the compose lab:
# three sut-nodes in containers on the lab's private network, and the
# LoadGen node in a fourth container's network namespace (the host's
# loadgen-node binary entered into it with nsenter, so it can cut itself
# off from a node with iptables and start its own child runs).
#
#   sudo bash deploy/compose/audit.sh [options] [-- more `loadgen-node audit` flags]
#
# Options:
#   --bin-dir DIR     sut-node and loadgen-node to use [cargo build --release]
#   --image TAG       lab image to build [netdiv-lab-audit:latest]
#   --output DIR      the audit's folder [deploy/compose/logs/audit-DATE]
#   --project NAME    compose project name [netdiv-audit-PID]
#   --inference DIR   mlcommons/inference checkout for TEST04
#                     [$NETDIV_INFERENCE_REPO]
#   --caching-nodes   a deliberately broken SUT: every node answers a
#                     repeated sample from a cache (TEST04 must fail)
#
# Needs root (nsenter, iptables in the container's namespace), Docker and
# docker-compose. Exits with the audit's status; audit.json in --output
# holds every step's verdict.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
COMPOSE_FILE="$HERE/docker-compose.yml"

say() { echo "audit: $*"; }
die() {
    echo "audit: error: $*" >&2
    exit 2
}

BIN_DIR=""
IMAGE="netdiv-lab-audit:latest"
OUTPUT=""
PROJECT="netdiv-audit-$$"
INFERENCE="${NETDIV_INFERENCE_REPO:-}"
CACHING=0
while (($#)); do
    case "$1" in
    --bin-dir) BIN_DIR=${2:?--bin-dir needs DIR}; shift 2 ;;
    --image) IMAGE=${2:?--image needs TAG}; shift 2 ;;
    --output) OUTPUT=${2:?--output needs DIR}; shift 2 ;;
    --project) PROJECT=${2:?--project needs NAME}; shift 2 ;;
    --inference) INFERENCE=${2:?--inference needs DIR}; shift 2 ;;
    --caching-nodes) CACHING=1; shift ;;
    --) shift; break ;;
    -h | --help) sed -n '2,22p' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
    esac
done

((EUID == 0)) || die "run as root: the LoadGen node enters a container's network namespace"
for tool in docker nsenter iptables; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found"
done
if command -v docker-compose >/dev/null 2>&1; then
    COMPOSE=(docker-compose)
elif docker compose version >/dev/null 2>&1; then
    COMPOSE=(docker compose)
else
    die "neither docker-compose nor the docker compose plugin is installed"
fi
dc() { "${COMPOSE[@]}" --project-name "$PROJECT" --file "$COMPOSE_FILE" "$@"; }

if [[ -z "$BIN_DIR" ]]; then
    say "building the release binaries"
    (cd "$REPO" && cargo build --release -p sut-node -p loadgen-node)
    BIN_DIR="${CARGO_TARGET_DIR:-$REPO/target}/release"
fi
BIN_DIR=$(cd "$BIN_DIR" && pwd)
OUTPUT=${OUTPUT:-$HERE/logs/audit-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUTPUT"
OUTPUT=$(cd "$OUTPUT" && pwd)

bash "$HERE/lab.sh" build --bin-dir "$BIN_DIR" --image "$IMAGE"

# The nodes' configuration: the lab's, or the broken one that caches.
config="$OUTPUT/sut-node.toml"
if ((CACHING)); then
    sed 's/^\[synthetic\]$/[synthetic]\n# Deliberately broken: a repeated sample is answered from a cache.\ntest_only_response_cache = true/' \
        "$HERE/sut-node.toml" >"$config"
    grep -q '^test_only_response_cache = true' "$config" || die "could not make the caching configuration"
    say "the nodes cache responses (a broken SUT: TEST04 must fail)"
else
    cp "$HERE/sut-node.toml" "$config"
fi
mkdir -p "$OUTPUT/lab"
export LAB_IMAGE="$IMAGE" LAB_OUTPUT="$OUTPUT/lab" LAB_NODE_CONFIG="$config"
export LAB_TRANSPORT=grpc LAB_UID=0 LAB_GID=0

cleanup() { dc down --volumes --remove-orphans >/dev/null 2>&1 || true; }
trap cleanup EXIT
dc up -d sut-node-1 sut-node-2 sut-node-3 >/dev/null
# The LoadGen node's chassis: a container on the lab network that sleeps.
auditor=$(dc run -d --no-deps --entrypoint /bin/sleep loadgen 3600)
auditor=${auditor##*$'\n'}
pid=$(docker inspect -f '{{.State.Pid}}' "$auditor")
[[ "$pid" =~ ^[1-9][0-9]*$ ]] || die "no process for the LoadGen node's container"

nodes=()
for service in sut-node-1 sut-node-2 sut-node-3; do
    cid=$(docker ps --quiet --no-trunc --filter "label=com.docker.compose.project=$PROJECT" \
        --filter "label=com.docker.compose.service=$service" | head -n 1)
    ip=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$cid")
    [[ -n "$ip" ]] || die "$service has no address on the lab network"
    nodes+=(--sut-node "grpc://$ip:7000")
done
in_lab() { nsenter --target "$pid" --net -- "$@"; }

say "waiting for the nodes: ${nodes[*]}"
for ((i = 0; ; i++)); do
    if in_lab "$BIN_DIR/loadgen-node" sysdesc "${nodes[@]}" --output "$OUTPUT/sysdesc.json" \
        >/dev/null 2>"$OUTPUT/sysdesc.err"; then
        break
    fi
    ((i < 120)) || die "the nodes did not answer within 60 s: $(tail -n 3 "$OUTPUT/sysdesc.err")"
    sleep 0.5
done

extra=()
[[ -z "$INFERENCE" ]] || extra+=(--inference "$INFERENCE")
status=0
(cd "$OUTPUT" && in_lab "$BIN_DIR/loadgen-node" audit "${nodes[@]}" --benchmark resnet50 \
    --audit-dir "$OUTPUT" \
    --partition-cmd 'iptables -I OUTPUT -d "$NODE_HOST" -j DROP' \
    --heal-cmd 'iptables -D OUTPUT -d "$NODE_HOST" -j DROP' \
    "${extra[@]}" "$@") || status=$?
for service in sut-node-1 sut-node-2 sut-node-3; do
    dc logs --no-color "$service" >"$OUTPUT/$service.log" 2>&1 || true
done
say "audit record: $OUTPUT/audit.json"
exit "$status"
