#!/usr/bin/env bash
# netdiv compose lab: one LoadGen node and three sut-nodes in containers on
# a private bridge network, one benchmark run, logs left on the host.
#
#   bash deploy/compose/lab.sh up [options] [-- more loadgen-node run flags]
#   bash deploy/compose/lab.sh build [--bin-dir DIR] [--image TAG]
#   bash deploy/compose/lab.sh down --project NAME
#
# `up` builds the release binaries (or takes --bin-dir), builds the image
# FROM scratch out of them and the libraries they link, starts the lab under
# a unique compose project, waits for the LoadGen to exit, saves every
# container's output next to the MLPerf logs, prints where they are and
# the result line, removes the containers and the network (the image
# stays) and exits with the LoadGen's status. See README.md.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
COMPOSE_FILE="$HERE/docker-compose.yml"
NODE_SERVICES=(sut-node-1 sut-node-2 sut-node-3)

usage() {
    cat <<'EOF'
usage: lab.sh up [options] [-- more `loadgen-node run` flags]
       lab.sh build [--bin-dir DIR] [--image TAG]
       lab.sh down --project NAME

up options:
  --bin-dir DIR        use sut-node and loadgen-node from DIR (no cargo build)
  --output DIR         host folder for the logs [deploy/compose/logs/PROJECT];
                       must not hold a previous run
  --project NAME       compose project name [netdiv-lab-DATE-PID]
  --image TAG          image to build and run [$LAB_IMAGE or netdiv-lab:latest]
  --scenario S         Offline|Server|SingleStream|MultiStream [Offline]
  --mode M             PerformanceOnly|AccuracyOnly|... [PerformanceOnly]
  --transport T        grpc|quic [grpc]
  --nodes N            sut-nodes the LoadGen uses, 1 to 3 [3]
  --timeout SECONDS    stop waiting for the LoadGen after this long [300]
  --stop-node-after SECONDS NAME
                       `docker-compose stop` sut-node NAME (SIGTERM: it drains
                       and declines new samples) SECONDS after the LoadGen
                       has connected to every node
  --kill-node-after SECONDS NAME
                       the same with SIGKILL (`docker-compose kill`)
  --check              also fail (exit 1) if the run is not VALID or a sample
                       was not completed exactly once (check-exactly-once.py)
  --keep               leave the containers and network up (lab.sh down ...)

Environment: LAB_SCENARIO, LAB_MODE, LAB_TRANSPORT, LAB_NODES, LAB_IMAGE,
LAB_LOADGEN_ARGS, ... as in docker-compose.yml; flags win.
EOF
}

say() { echo "lab: $*"; }
die() {
    echo "lab: error: $*" >&2
    exit 2
}

# --- docker ---------------------------------------------------------------

COMPOSE=()
need_docker() {
    command -v docker >/dev/null 2>&1 ||
        die "docker is not installed (needs Docker Engine and docker-compose)"
    if command -v docker-compose >/dev/null 2>&1; then
        COMPOSE=(docker-compose)
    elif docker compose version >/dev/null 2>&1; then
        COMPOSE=(docker compose)
    else
        die "neither docker-compose nor the docker compose plugin is installed"
    fi
    local err
    if ! err=$(docker info 2>&1 >/dev/null); then
        die "cannot reach the Docker daemon (is it running, may you use it?): ${err##*$'\n'}"
    fi
}

dc() { "${COMPOSE[@]}" --project-name "$PROJECT" --file "$COMPOSE_FILE" "$@"; }

# Container ids of this project (of one service with $1), straight from
# docker: each docker-compose call costs a second of Python start-up.
project_cids() {
    local filters=(--filter "label=com.docker.compose.project=$PROJECT")
    [[ -z "${1:-}" ]] || filters+=(--filter "label=com.docker.compose.service=$1")
    docker ps --all --quiet --no-trunc "${filters[@]}"
}

# --- image ----------------------------------------------------------------

build_binaries() {
    command -v cargo >/dev/null 2>&1 ||
        die "cargo not found: install Rust, or give --bin-dir DIR with prebuilt binaries"
    say "building the release binaries (cargo build --release -p sut-node -p loadgen-node)"
    (cd "$REPO" && cargo build --release -p sut-node -p loadgen-node)
    BIN_DIR="${CARGO_TARGET_DIR:-$REPO/target}/release"
}

# Copies $1 to $2 (a path inside the rootfs), without debug info when
# `strip` is there (a smaller image; symbols stay for backtraces).
put() {
    mkdir -p "$(dirname "$2")"
    if [[ "$3" == binary ]] && command -v strip >/dev/null 2>&1; then
        strip --strip-debug -o "$2" "$1"
    else
        cp -L "$1" "$2"
    fi
    chmod 0755 "$2"
}

# Every library `ldd` lists for $1, and the loader, at the same paths.
put_libraries() {
    local program=$1 rootfs=$2 line path
    local out
    out=$(ldd "$program" 2>&1) || {
        # A static binary needs nothing more.
        [[ "$out" == *"not a dynamic executable"* || "$out" == *"statically linked"* ]] && return 0
        die "ldd $program failed: $out"
    }
    [[ "$out" == *"not found"* ]] && die "$program needs libraries this host lacks:"$'\n'"$out"
    while read -r line; do
        case "$line" in
        *"=> "/*) path=${line#*=> } ;;
        /*) path=$line ;;
        *) continue ;; # linux-vdso.so.1 and the like: from the kernel
        esac
        path=${path%% (*}
        [[ -e "$rootfs$path" ]] || put "$path" "$rootfs$path" library
    done <<<"$out"
}

build_image() {
    command -v ldd >/dev/null 2>&1 || die "ldd not found (needed to collect the binaries' libraries)"
    local bin
    for bin in sut-node loadgen-node; do
        [[ -x "$BIN_DIR/$bin" ]] || die "$BIN_DIR/$bin not found or not executable (build it, or fix --bin-dir)"
    done
    CONTEXT=$(mktemp -d "${TMPDIR:-/tmp}/netdiv-lab-image.XXXXXX")
    local rootfs="$CONTEXT/rootfs" start=$SECONDS
    mkdir -p "$rootfs"/{usr/local/bin,bin,etc,tmp,logs,lab}
    chmod 1777 "$rootfs/tmp"
    chmod 0777 "$rootfs/logs"
    for bin in sut-node loadgen-node; do
        put "$BIN_DIR/$bin" "$rootfs/usr/local/bin/$bin" binary
        put_libraries "$BIN_DIR/$bin" "$rootfs"
    done
    # A POSIX shell and sleep for the entrypoint scripts of the compose file.
    local tool path
    for tool in dash:sh sleep:sleep; do
        path=$(command -v "${tool%%:*}") || die "${tool%%:*} not found on this host (the image needs it)"
        put "$path" "$rootfs/bin/${tool#*:}" library
        put_libraries "$path" "$rootfs"
    done
    # glibc reads Docker's /etc/hosts, then DNS (127.0.0.11 on the lab
    # network); with no nsswitch.conf it would try DNS first.
    printf 'hosts: files dns\npasswd: files\ngroup: files\n' >"$rootfs/etc/nsswitch.conf"
    printf 'root:x:0:0:root:/tmp:/bin/sh\nnetdiv:x:1000:1000:netdiv:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/tmp:/bin/sh\n' >"$rootfs/etc/passwd"
    printf 'root:x:0:\nnetdiv:x:1000:\nnogroup:x:65534:\n' >"$rootfs/etc/group"
    say "building image $IMAGE from $BIN_DIR (FROM scratch, $(du -sh "$rootfs" | cut -f1) root fs)"
    # The classic builder: it needs no buildx, and nothing is pulled.
    if ! DOCKER_BUILDKIT=0 docker build --file "$HERE/Dockerfile" --tag "$IMAGE" \
        --label "org.netdiv.lab.source=$BIN_DIR" "$CONTEXT" >"$CONTEXT/build.log" 2>&1; then
        cat "$CONTEXT/build.log" >&2
        die "docker build failed"
    fi
    rm -rf "$CONTEXT"
    CONTEXT=""
    say "image $IMAGE built in $((SECONDS - start)) s"
}

# --- up -------------------------------------------------------------------

BIN_DIR=""
OUTPUT=""
PROJECT=""
IMAGE="${LAB_IMAGE:-netdiv-lab:latest}"
SCENARIO="${LAB_SCENARIO:-Offline}"
MODE="${LAB_MODE:-PerformanceOnly}"
TRANSPORT="${LAB_TRANSPORT:-grpc}"
NODES="${LAB_NODES:-3}"
TIMEOUT=300
NODE_ACTION=""
NODE_AFTER=""
NODE_VICTIM=""
CHECK=0
KEEP=0
EXTRA=()
CONTEXT=""
WORK=""
STARTED=0
COLLECTED=0
LOADGEN_CID=""
VICTIM_CID=""
NODE_LOSS_PID=""
BG_PIDS=()

parse_options() {
    while (($#)); do
        case "$1" in
        --bin-dir) BIN_DIR=${2:?--bin-dir needs DIR}; shift 2 ;;
        --output) OUTPUT=${2:?--output needs DIR}; shift 2 ;;
        --project) PROJECT=${2:?--project needs NAME}; shift 2 ;;
        --image) IMAGE=${2:?--image needs TAG}; shift 2 ;;
        --scenario) SCENARIO=${2:?--scenario needs a scenario}; shift 2 ;;
        --mode) MODE=${2:?--mode needs a mode}; shift 2 ;;
        --transport) TRANSPORT=${2:?--transport needs grpc or quic}; shift 2 ;;
        --nodes) NODES=${2:?--nodes needs N}; shift 2 ;;
        --timeout) TIMEOUT=${2:?--timeout needs SECONDS}; shift 2 ;;
        --stop-node-after | --kill-node-after)
            (($# >= 3)) || die "$1 needs SECONDS and a node name (sut-node-1..3)"
            NODE_ACTION=${1#--}
            NODE_ACTION=${NODE_ACTION%%-*}
            NODE_AFTER=$2
            NODE_VICTIM=$3
            shift 3
            ;;
        --check) CHECK=1; shift ;;
        --keep) KEEP=1; shift ;;
        --) shift; EXTRA=("$@"); break ;;
        -h | --help) usage; exit 0 ;;
        *) die "unknown option $1 (lab.sh --help)" ;;
        esac
    done
    [[ -z "$BIN_DIR" || -d "$BIN_DIR" ]] || die "--bin-dir $BIN_DIR is not a folder"
    [[ -z "$BIN_DIR" ]] || BIN_DIR=$(cd "$BIN_DIR" && pwd)
    [[ "$TRANSPORT" == grpc || "$TRANSPORT" == quic ]] || die "--transport must be grpc or quic, not $TRANSPORT"
    [[ "$NODES" =~ ^[123]$ ]] || die "--nodes must be 1, 2 or 3, not $NODES"
    [[ "$TIMEOUT" =~ ^[0-9]+$ && "$TIMEOUT" -gt 0 ]] || die "--timeout must be a whole number of seconds"
    if [[ -n "$NODE_ACTION" ]]; then
        [[ "$NODE_AFTER" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--$NODE_ACTION-node-after: $NODE_AFTER is not a number of seconds"
        local i ok=0
        for ((i = 1; i <= NODES; i++)); do [[ "$NODE_VICTIM" == "sut-node-$i" ]] && ok=1; done
        ((ok)) || die "--$NODE_ACTION-node-after: $NODE_VICTIM is not one of the running nodes (sut-node-1..$NODES)"
        ((NODES > 1)) || die "--$NODE_ACTION-node-after needs another node to take over (--nodes 2 or 3)"
    fi
}

# SIGTERM to the nodes, so their logs end with how they stopped.
stop_nodes() {
    ((STARTED)) || return 0
    ((!KEEP)) || return 0
    local cids
    cids=$(project_cids 2>/dev/null) || return 0
    # shellcheck disable=SC2086 # one id a word
    [[ -z "$cids" ]] || docker stop --time 45 $cids >/dev/null 2>&1 || true
}

# Saves every container's output into the output folder, once.
collect_logs() {
    ((STARTED && !COLLECTED)) || return 0
    COLLECTED=1
    local service cid
    for service in "${NODE_SERVICES[@]}" loadgen; do
        cid=$(project_cids "$service" 2>/dev/null | head -n1 || true)
        [[ -n "$cid" ]] || continue
        if [[ "$service" == loadgen ]]; then
            docker logs "$cid" >"$OUTPUT/loadgen.stdout" 2>"$OUTPUT/loadgen.stderr" || true
        else
            docker logs "$cid" >"$OUTPUT/$service.log" 2>&1 || true
        fi
    done
    docker ps --all --filter "label=com.docker.compose.project=$PROJECT" \
        --format 'table {{.Names}}\t{{.Status}}' >"$OUTPUT/containers.txt" 2>&1 || true
}

teardown() {
    local status=$?
    set +e
    local pid
    for pid in ${BG_PIDS[@]+"${BG_PIDS[@]}"}; do
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    ((COLLECTED)) || stop_nodes
    collect_logs
    if ((STARTED)); then
        if ((KEEP)); then
            say "containers left running: bash $0 down --project $PROJECT"
        else
            dc down --remove-orphans --timeout 45 >/dev/null 2>&1 ||
                echo "lab: warning: could not remove project $PROJECT; try: bash $0 down --project $PROJECT" >&2
        fi
    fi
    [[ -z "$CONTEXT" ]] || rm -rf "$CONTEXT"
    [[ -z "$WORK" ]] || rm -rf "$WORK"
    exit "$status"
}

# Runs in the background: once the LoadGen has connected to every node
# (its log has an event="nodes_connected" record), waits
# NODE_AFTER seconds and stops or kills NODE_VICTIM.
node_loss() {
    local deadline=$((SECONDS + TIMEOUT))
    until [[ "$(docker logs "$LOADGEN_CID" 2>&1)" == *nodes_connected* ]]; do
        ((SECONDS < deadline)) || return 0
        [[ "$(docker inspect -f '{{.State.Running}}' "$LOADGEN_CID" 2>/dev/null)" == true ]] || return 0
        sleep 0.2
    done
    sleep "$NODE_AFTER"
    [[ "$(docker inspect -f '{{.State.Running}}' "$LOADGEN_CID" 2>/dev/null)" == true ]] || return 0
    # docker itself, not docker-compose: no second of Python start-up.
    if [[ "$NODE_ACTION" == stop ]]; then
        say "stopping $NODE_VICTIM (SIGTERM: it drains, new samples go elsewhere) ${NODE_AFTER}s into the run"
        : >"$WORK/node-loss-fired"
        docker stop --time 45 "$VICTIM_CID" >/dev/null
    else
        say "killing $NODE_VICTIM (SIGKILL) ${NODE_AFTER}s into the run"
        : >"$WORK/node-loss-fired"
        docker kill "$VICTIM_CID" >/dev/null
    fi
    say "$NODE_VICTIM is down"
}

cmd_up() {
    parse_options "$@"
    need_docker
    command -v timeout >/dev/null 2>&1 || die "timeout (coreutils) not found"
    [[ -n "$BIN_DIR" ]] || build_binaries
    [[ -n "$PROJECT" ]] || PROJECT="netdiv-lab-$(date +%Y%m%d-%H%M%S)-$$"
    [[ "$PROJECT" =~ ^[a-z0-9][a-z0-9_-]*$ ]] || die "--project: use lower-case letters, digits, - and _ ($PROJECT)"
    [[ -n "$OUTPUT" ]] || OUTPUT="$HERE/logs/$PROJECT"
    mkdir -p "$OUTPUT" || die "cannot create $OUTPUT"
    OUTPUT=$(cd "$OUTPUT" && pwd)
    local f
    for f in mlperf_log_summary.txt mlperf_log_detail.txt issued.txt loadgen.stdout; do
        [[ ! -e "$OUTPUT/$f" ]] || die "$OUTPUT already holds a run ($f); give an empty or new --output"
    done
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/netdiv-lab-run.XXXXXX")
    trap teardown EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    build_image

    # The containers run as you, so the logs on the host are yours.
    export LAB_IMAGE="$IMAGE" LAB_OUTPUT="$OUTPUT" LAB_SCENARIO="$SCENARIO" LAB_MODE="$MODE" \
        LAB_TRANSPORT="$TRANSPORT" LAB_NODES="$NODES" LAB_UID="$(id -u)" LAB_GID="$(id -g)"
    if ((${#EXTRA[@]})); then
        export LAB_LOADGEN_ARGS="${EXTRA[*]}"
    fi
    local services=()
    local i
    for ((i = 1; i <= NODES; i++)); do services+=("sut-node-$i"); done
    say "project $PROJECT: $NODES sut-node(s) over $TRANSPORT, $SCENARIO $MODE, logs in $OUTPUT"
    STARTED=1
    local start=$SECONDS
    dc up --detach --no-deps "${services[@]}" loadgen >"$WORK/up.log" 2>&1 || {
        cat "$WORK/up.log" >&2
        die "docker-compose up failed"
    }
    LOADGEN_CID=$(project_cids loadgen)
    [[ -n "$LOADGEN_CID" ]] || die "no loadgen container after docker-compose up"
    # The LoadGen's output, live.
    docker logs --follow "$LOADGEN_CID" &
    BG_PIDS+=("$!")
    if [[ -n "$NODE_ACTION" ]]; then
        VICTIM_CID=$(project_cids "$NODE_VICTIM")
        [[ -n "$VICTIM_CID" ]] || die "no $NODE_VICTIM container after docker-compose up"
        node_loss &
        NODE_LOSS_PID=$!
        BG_PIDS+=("$NODE_LOSS_PID")
    fi

    # In the background, so that a signal to this script interrupts `wait`
    # and the EXIT trap tears the lab down at once.
    local status how="exited with status" waiter rc=0
    timeout "$TIMEOUT" docker wait "$LOADGEN_CID" >"$WORK/loadgen.status" &
    waiter=$!
    BG_PIDS+=("$waiter")
    wait "$waiter" || rc=$?
    if ((rc == 124)); then
        echo "lab: error: the LoadGen is still running after ${TIMEOUT}s (hung?); killing it" >&2
        docker kill "$LOADGEN_CID" >/dev/null 2>&1 || true
        status=124
        how="timed out (status 124)"
    elif ((rc != 0)); then
        die "docker wait $LOADGEN_CID failed (status $rc)"
    else
        status=$(<"$WORK/loadgen.status")
    fi
    local run_seconds=$((SECONDS - start))
    # Let the log follower print the last lines; the stopper must be done.
    sleep 0.5
    if [[ -n "$NODE_ACTION" ]]; then
        wait "$NODE_LOSS_PID" 2>/dev/null || true
        [[ -e "$WORK/node-loss-fired" ]] ||
            echo "lab: warning: the run ended before --$NODE_ACTION-node-after $NODE_AFTER fired" >&2
    fi
    stop_nodes
    collect_logs

    echo
    if [[ "$how" == "exited with status" ]]; then how="$how $status"; fi
    say "LoadGen $how after ${run_seconds}s (containers up to LoadGen exit)"
    say "logs: $OUTPUT"
    local result="no mlperf_log_summary.txt"
    if [[ -f "$OUTPUT/mlperf_log_summary.txt" ]]; then
        result=$(grep -m1 '^Result is' "$OUTPUT/mlperf_log_summary.txt" || echo "no 'Result is' line (mode $MODE)")
    fi
    say "$result"
    local checked=0
    if command -v python3 >/dev/null 2>&1 && [[ -f "$OUTPUT/issued.txt" ]]; then
        if python3 "$HERE/check-exactly-once.py" "$OUTPUT"; then checked=1; fi
    elif ((CHECK)); then
        echo "lab: error: --check needs python3 and $OUTPUT/issued.txt" >&2
    fi
    if ((CHECK)) && ((status == 0)); then
        if [[ "$MODE" == PerformanceOnly && "$result" != *": VALID"* ]] || ((!checked)); then
            status=1
        fi
    fi
    exit "$status"
}

cmd_build() {
    while (($#)); do
        case "$1" in
        --bin-dir) BIN_DIR=${2:?--bin-dir needs DIR}; shift 2 ;;
        --image) IMAGE=${2:?--image needs TAG}; shift 2 ;;
        -h | --help) usage; exit 0 ;;
        *) die "unknown option $1 (lab.sh --help)" ;;
        esac
    done
    [[ -z "$BIN_DIR" || -d "$BIN_DIR" ]] || die "--bin-dir $BIN_DIR is not a folder"
    [[ -z "$BIN_DIR" ]] || BIN_DIR=$(cd "$BIN_DIR" && pwd)
    need_docker
    [[ -n "$BIN_DIR" ]] || build_binaries
    trap '[[ -z "$CONTEXT" ]] || rm -rf "$CONTEXT"' EXIT
    build_image
}

cmd_down() {
    while (($#)); do
        case "$1" in
        --project) PROJECT=${2:?--project needs NAME}; shift 2 ;;
        -h | --help) usage; exit 0 ;;
        *) die "unknown option $1 (lab.sh --help)" ;;
        esac
    done
    [[ -n "$PROJECT" ]] || die "down needs --project NAME"
    need_docker
    dc down --remove-orphans --timeout 45
}

case "${1:-}" in
up) shift; cmd_up "$@" ;;
build) shift; cmd_build "$@" ;;
down) shift; cmd_down "$@" ;;
-h | --help | help) usage ;;
*) usage >&2; exit 2 ;;
esac
