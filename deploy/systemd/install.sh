#!/usr/bin/env bash
# Installs netdiv's binaries, systemd units and example config files.
#
#   sudo bash deploy/systemd/install.sh [--node NAME]...
#   bash deploy/systemd/install.sh --root /tmp/try [--node NAME]...   # dry run
#
# Options:
#   --root DIR     install under DIR instead of / (also: DESTDIR=DIR). Then
#                  no user is created, no owner is changed and systemd is
#                  not told: for packaging, or to look at what it would do.
#   --bin-dir DIR  where the built binaries are [default: target/release
#                  of this repository]
#   --node NAME    also set up node NAME: /etc/netdiv/sut-node/NAME.toml and
#                  NAME.env from the examples (repeat for more nodes)
#
# What it does (existing config files are never overwritten):
#   /usr/local/bin/{sut-node,loadgen-node}      whichever of the two is built
#   /etc/systemd/system/sut-node@.service, loadgen-node.service
#   /etc/netdiv/sut-node/                        per-node NAME.toml / NAME.env
#   /etc/netdiv/sut-node/example.toml, example.env  the examples, for reference
#   /etc/netdiv/loadgen-node.env                 if missing
#   /etc/netdiv/tls/                             root:netdiv 0750, for TLS files
#   /etc/sysusers.d/netdiv.conf                  the system user netdiv
# then creates user netdiv and runs `systemctl daemon-reload` (if systemd
# runs). Services are not enabled or started: see docs/deploy.md.

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

root=${DESTDIR:-/}
bin_dir=$repo/target/release
nodes=()

usage() {
    sed -n '2,/^$/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
    exit 2
}

while [ $# -gt 0 ]; do
    case $1 in
        --root) root=${2:?--root needs a folder}; shift 2 ;;
        --root=*) root=${1#--root=}; shift ;;
        --bin-dir) bin_dir=${2:?--bin-dir needs a folder}; shift 2 ;;
        --node) nodes+=("${2:?--node needs a name}"); shift 2 ;;
        -h|--help) usage ;;
        *) echo "install.sh: unknown argument $1" >&2; usage ;;
    esac
done

for n in "${nodes[@]}"; do
    # The name becomes a unit instance and file names: keep it simple.
    if ! [[ $n =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]]; then
        echo "install.sh: node name '$n': use letters, digits, '.', '_' and '-' only" >&2
        exit 2
    fi
done

mkdir -p "$root"
root=$(cd "$root" && pwd)
live=0
[ "$root" = / ] && live=1
if [ "$live" = 1 ] && [ "$(id -u)" -ne 0 ]; then
    echo "install.sh: installing into / needs root (or give --root DIR for a dry run)" >&2
    exit 2
fi
r() { # a path under the root
    if [ "$root" = / ]; then echo "$1"; else echo "$root$1"; fi
}
say() { echo "install.sh: $*"; }

# Binaries: whichever are built (the LoadGen machine needs only
# loadgen-node, a SUT machine only sut-node).
installed=0
for b in sut-node loadgen-node; do
    if [ -x "$bin_dir/$b" ]; then
        install -D -m 0755 "$bin_dir/$b" "$(r /usr/local/bin/$b)"
        say "installed $(r /usr/local/bin/$b)"
        installed=$((installed + 1))
    else
        say "no $bin_dir/$b: not installed (cargo build --release -p $b)"
    fi
done
if [ "$installed" = 0 ]; then
    echo "install.sh: neither binary is built in $bin_dir" >&2
    exit 1
fi

# Units.
for u in sut-node@.service loadgen-node.service; do
    install -D -m 0644 "$here/$u" "$(r /etc/systemd/system/$u)"
    say "installed $(r /etc/systemd/system/$u)"
done

# The system user both services run as.
install -D -m 0644 /dev/stdin "$(r /etc/sysusers.d/netdiv.conf)" <<'EOF'
# netdiv: the user sut-node@.service and loadgen-node.service run as.
u netdiv - "netdiv MLPerf Network division" /var/lib/netdiv
EOF
say "installed $(r /etc/sysusers.d/netdiv.conf)"

# Config folders and files.
install -d -m 0755 "$(r /etc/netdiv)" "$(r /etc/netdiv/sut-node)"
install -d -m 0750 "$(r /etc/netdiv/tls)"
install -m 0644 "$here/sut-node-example.toml" "$(r /etc/netdiv/sut-node/example.toml)"
install -m 0644 "$here/sut-node-example.env" "$(r /etc/netdiv/sut-node/example.env)"
copy_once() { # source destination
    if [ -e "$2" ]; then
        say "kept $2 (already there)"
    else
        install -m 0644 "$1" "$2"
        say "created $2"
    fi
}
copy_once "$here/loadgen-node.env" "$(r /etc/netdiv/loadgen-node.env)"
for n in "${nodes[@]}"; do
    copy_once "$here/sut-node-example.toml" "$(r "/etc/netdiv/sut-node/$n.toml")"
    copy_once "$here/sut-node-example.env" "$(r "/etc/netdiv/sut-node/$n.env")"
done

if [ "$live" = 0 ]; then
    say "dry run under $root: no user created, no owners changed, systemd not told"
    exit 0
fi

if command -v systemd-sysusers >/dev/null; then
    systemd-sysusers /etc/sysusers.d/netdiv.conf
elif ! getent passwd netdiv >/dev/null; then
    useradd --system --home-dir /var/lib/netdiv --no-create-home \
        --shell /usr/sbin/nologin --user-group netdiv
fi
say "user netdiv: $(id netdiv)"
# TLS keys are readable by the services (group netdiv), no one else.
chown root:netdiv /etc/netdiv/tls
find /etc/netdiv/tls -mindepth 1 -exec chown root:netdiv {} + \
    -exec chmod g+rX,o-rwx {} +

if [ -d /run/systemd/system ]; then
    systemctl daemon-reload
    say "systemctl daemon-reload done"
else
    say "systemd is not running here: run 'systemctl daemon-reload' where it does"
fi
say "next: edit /etc/netdiv/sut-node/NAME.{toml,env} and /etc/netdiv/loadgen-node.env, then see docs/deploy.md"
