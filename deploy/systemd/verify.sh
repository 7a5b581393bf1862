#!/usr/bin/env bash
# Checks netdiv's systemd units and example config files, without a running
# systemd: `systemd-analyze verify` on copies of the units whose binary paths
# point at the binaries given here (verify insists that every Exec*= program
# exists and is executable), with the sut-node template instantiated.
#
#   bash deploy/systemd/verify.sh --sut-node-bin target/release/sut-node \
#       --loadgen-node-bin target/release/loadgen-node [--security]
#
# Options (the binary paths can also come from SUT_NODE_BIN and
# LOADGEN_NODE_BIN; without either, target/release/ of this repository):
#   --sut-node-bin PATH      sut-node binary to put into ExecStart
#   --loadgen-node-bin PATH  loadgen-node binary to put into ExecStart
#   --units-dir DIR          where the unit and example files are
#                            [default: the folder of this script]
#   --instance NAME          node name for the template [default: node-a]
#   --security               also print `systemd-analyze security
#                            --offline=yes` for each unit (informational)
#
# systemd-analyze verify exits 0 after many problems it only warns about
# (an unknown or misspelt directive, a value it cannot parse), so any
# output from it counts as a failure, not just its exit status.
#
# When the binaries are the real ones (their --help lists --listen, or
# --sut-node for `loadgen-node run`), every
# flag used in the units and in the example env files must appear in that
# --help, so the examples cannot drift from the command lines.
#
# Exit status: 0 all clean; 1 a check failed; 2 bad usage or missing
# binaries; 77 systemd-analyze is not installed (a test may skip).

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

sut_bin=${SUT_NODE_BIN:-}
loadgen_bin=${LOADGEN_NODE_BIN:-}
units_dir=$here
instance=node-a
security=0

usage() {
    sed -n '2,/^$/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
    exit 2
}

while [ $# -gt 0 ]; do
    case $1 in
        --sut-node-bin) sut_bin=${2:?--sut-node-bin needs a path}; shift 2 ;;
        --loadgen-node-bin) loadgen_bin=${2:?--loadgen-node-bin needs a path}; shift 2 ;;
        --units-dir) units_dir=${2:?--units-dir needs a folder}; shift 2 ;;
        --instance) instance=${2:?--instance needs a name}; shift 2 ;;
        --security) security=1; shift ;;
        -h|--help) usage ;;
        *) echo "verify.sh: unknown argument $1" >&2; usage ;;
    esac
done

analyze=${SYSTEMD_ANALYZE:-$(command -v systemd-analyze || true)}
if [ -z "$analyze" ] || [ ! -x "$analyze" ]; then
    echo "verify.sh: systemd-analyze not found (Debian: apt-get install systemd); nothing checked" >&2
    exit 77
fi

: "${sut_bin:=$repo/target/release/sut-node}"
: "${loadgen_bin:=$repo/target/release/loadgen-node}"
for bin in "$sut_bin" "$loadgen_bin"; do
    if [ ! -f "$bin" ] || [ ! -x "$bin" ]; then
        echo "verify.sh: $bin is not an executable file (build it, or give --sut-node-bin/--loadgen-node-bin)" >&2
        exit 2
    fi
done
sut_bin=$(realpath "$sut_bin")
loadgen_bin=$(realpath "$loadgen_bin")
case "$sut_bin$loadgen_bin" in
    *[[:space:]#\;\\%\$\&]*)
        echo "verify.sh: binary paths must not contain spaces or any of # ; \\ % \$ &" >&2
        exit 2 ;;
esac

units_dir=$(cd "$units_dir" && pwd)
template=sut-node@.service
instance_unit="sut-node@$instance.service"
loadgen_unit=loadgen-node.service
for f in "$template" "$loadgen_unit" sut-node-example.env loadgen-node.env; do
    if [ ! -f "$units_dir/$f" ]; then
        echo "verify.sh: $units_dir/$f is missing" >&2
        exit 2
    fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/netdiv-verify.XXXXXX")
trap 'rm -rf "$work"' EXIT

failures=0
fail() {
    echo "  FAIL: $*"
    failures=$((failures + 1))
}

echo "verify.sh: $("$analyze" --version | head -n 1)"
echo "verify.sh: units from $units_dir"
echo "verify.sh: sut-node = $sut_bin"
echo "verify.sh: loadgen-node = $loadgen_bin"

# Copies with the installed paths (/usr/local/bin as install.sh puts
# them, /usr/bin as the Debian packages do) replaced by the binaries under
# test.
for f in "$template" "$loadgen_unit"; do
    sed -E -e "s#/usr/(local/)?bin/sut-node\\b#$sut_bin#g" \
        -e "s#/usr/(local/)?bin/loadgen-node\\b#$loadgen_bin#g" \
        "$units_dir/$f" >"$work/$f"
    if grep -Eq '=/usr/(local/)?bin/(sut|loadgen)-node' "$work/$f"; then
        fail "$f: an Exec path of a daemon was not replaced: $(grep -En '=/usr/(local/)?bin/(sut|loadgen)-node' "$work/$f" | head -n 1)"
    fi
done

# The search path starts with the copies, so units of the same name
# installed on this machine do not shadow them.
export SYSTEMD_UNIT_PATH="$work:"

check_unit() {
    local unit=$1 what=$2 out rc=0
    out=$("$analyze" verify --man=no "$work/$unit" 2>&1) || rc=$?
    # Messages name the copy; show the file they came from.
    out=${out//$work\//$units_dir\/}
    if [ "$rc" -ne 0 ] || [ -n "$out" ]; then
        fail "systemd-analyze verify $unit ($what): exit status $rc"
        [ -n "$out" ] && printf '%s\n' "$out" | sed 's/^/    /'
        return 0
    fi
    echo "  ok: systemd-analyze verify $unit ($what): no warnings"
}

echo "checking units"
check_unit "$template" "the template"
check_unit "$instance_unit" "the template as node $instance"
check_unit "$loadgen_unit" "one benchmark run"

# What the units promise the daemons and docs/deploy.md: readiness by
# sd_notify, room for the 30 s drain, the per-node files.
echo "checking unit settings"
setting() { # unit key: the last value of key= in unit
    sed -n "s/^$2=//p" "$units_dir/$1" | tail -n 1
}
seconds() { # a systemd time span of s/min units, in seconds
    local v=$1 total=0 n u
    while [[ $v =~ ^[[:space:]]*([0-9]+)[[:space:]]*(s|sec|m|min)?(.*)$ ]]; do
        n=${BASH_REMATCH[1]}; u=${BASH_REMATCH[2]:-s}; v=${BASH_REMATCH[3]}
        case $u in m|min) n=$((n * 60)) ;; esac
        total=$((total + n))
    done
    [ -z "${v//[[:space:]]/}" ] && echo "$total" || echo -1
}
expect() { # unit key value
    local got
    got=$(setting "$1" "$2")
    if [ "$got" = "$3" ]; then
        echo "  ok: $1: $2=$3"
    else
        fail "$1: $2=${got:-<unset>}, expected $3"
    fi
}
expect "$template" Type notify
expect "$template" NotifyAccess main
expect "$template" Restart on-failure
expect "$template" EnvironmentFile "-/etc/netdiv/sut-node/%i.env"
expect "$loadgen_unit" Restart no
expect "$loadgen_unit" EnvironmentFile /etc/netdiv/loadgen-node.env
exec_start=$(setting "$template" ExecStart)
# shellcheck disable=SC2016 # the literal text $SUT_NODE_ARGS
for want in "--name %i" "--config /etc/netdiv/sut-node/%i.toml" '$SUT_NODE_ARGS'; do
    if [[ $exec_start == *"$want"* ]]; then
        echo "  ok: $template: ExecStart has $want"
    else
        fail "$template: ExecStart lacks $want: $exec_start"
    fi
done
stop=$(seconds "$(setting "$template" TimeoutStopSec)")
# NODE_DRAIN_TIMEOUT + 2 x NODE_SERVER_CLOSE_TIMEOUT (proto/src/transport.rs).
if [ "$stop" -ge 47 ]; then
    echo "  ok: $template: TimeoutStopSec ${stop}s covers the 30 s drain and 2 x 8 s server shutdown"
else
    fail "$template: TimeoutStopSec=$(setting "$template" TimeoutStopSec) is under 47 s: SIGKILL could cut the 30 s drain and 2 x 8 s server shutdown short"
fi

# EnvironmentFile syntax: blank lines, comments and NAME=value only.
echo "checking example env files"
for f in sut-node-example.env loadgen-node.env; do
    bad=$(grep -nvE '^[[:space:]]*($|[#;])|^[A-Za-z_][A-Za-z0-9_]*=' "$units_dir/$f" || true)
    if [ -n "$bad" ]; then
        fail "$f: lines systemd's EnvironmentFile= would not read as NAME=value:"
        printf '%s\n' "$bad" | sed 's/^/    /'
    else
        echo "  ok: $f: every line is a comment or NAME=value"
    fi
done

# Every --flag of the units and the env examples (also commented-out
# alternatives) against the real binaries' --help.
flags_in() { # file variable: the --flags of lines (or #-lines) setting variable
    grep -E "^#?[[:space:]]*$2=" "$1" | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u || true
}
check_flags() { # binary help-args marker-flag what flags...
    local bin=$1 help_args=$2 marker=$3 what=$4 help flag missing=()
    shift 4
    help=$("$bin" ${help_args:+"$help_args"} --help 2>&1 || true)
    if [[ $help != *"$marker "* ]]; then
        echo "  skipped: $what flags ($bin does not look real: \`${help_args:+$help_args }--help\` lists no $marker)"
        return 0
    fi
    for flag in "$@"; do
        if ! grep -qE -- "(^|[[:space:],])$flag([[:space:]=,]|$)" <<<"$help"; then
            missing+=("$flag")
        fi
    done
    if [ ${#missing[@]} -gt 0 ]; then
        fail "$what: flags not in \`$(basename "$bin") ${help_args:+$help_args }--help\`: ${missing[*]}"
    else
        echo "  ok: $what: $# flags, all in \`$(basename "$bin") ${help_args:+$help_args }--help\`"
    fi
}
echo "checking flags against the binaries"
mapfile -t sut_flags < <(
    { setting "$template" ExecStart | grep -oE -- '--[a-z][a-z0-9-]*'
      sed -n 's/^Environment="\{0,1\}SUT_NODE_ARGS=//p' "$units_dir/$template" | grep -oE -- '--[a-z][a-z0-9-]*'
      flags_in "$units_dir/sut-node-example.env" SUT_NODE_ARGS; } | sort -u)
check_flags "$sut_bin" "" --listen "sut-node@.service and sut-node-example.env" "${sut_flags[@]}"
mapfile -t loadgen_flags < <(
    { setting "$loadgen_unit" ExecStart | grep -oE -- '--[a-z][a-z0-9-]*'
      flags_in "$units_dir/loadgen-node.env" LOADGEN_ARGS; } | sort -u)
check_flags "$loadgen_bin" run --sut-node "loadgen-node.service and loadgen-node.env" "${loadgen_flags[@]}"

if [ "$security" = 1 ]; then
    echo "security exposure (systemd-analyze security --offline=yes; informational)"
    for unit in "$instance_unit" "$loadgen_unit"; do
        if out=$("$analyze" security --offline=yes "$work/$unit" 2>&1); then
            printf '%s\n' "$out" | grep -E 'Overall exposure' | sed 's/^→ */  /'
            printf '%s\n' "$out" | grep -E '^✗' | sed -e 's/^/    /' -e 's/[[:space:]]*$//'
        else
            echo "  $unit: systemd-analyze security --offline=yes is not supported here:"
            printf '%s\n' "$out" | head -n 3 | sed 's/^/    /'
        fi
    done
fi

if [ "$failures" -gt 0 ]; then
    echo "verify.sh: $failures check(s) failed"
    exit 1
fi
echo "verify.sh: all checks passed"
