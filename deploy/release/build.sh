#!/usr/bin/env bash
# Release artefacts a GPU server or a LoadGen machine can take, from this
# checkout's own binaries, in one command:
#
#   bash deploy/release/build.sh [--out DIR] [--sut-node-bin PATH]
#        [--loadgen-node-bin PATH] [--no-image]
#
# writes into DIR [target/release-artefacts]:
#   netdiv-VERSION-x86_64-linux.tar.gz  both binaries (the loadgen-node built
#       with the official LoadGen), the systemd units and example configs,
#       the engine-sized node configs, and REQUIREMENTS.txt naming the
#       oldest glibc (and libstdc++) the binaries load with
#   netdiv-sut-node_VERSION_amd64.deb, netdiv-loadgen-node_VERSION_amd64.deb
#       each daemon in /usr/bin with its systemd unit in /lib/systemd/system
#       and its examples in /usr/share/doc/PACKAGE/examples; Depends names
#       the same library versions
#   netdiv-images-VERSION.tar.gz  `docker load -i` takes it: the images
#       netdiv-sut-node:VERSION and netdiv-loadgen-node:VERSION, built FROM
#       scratch out of the binaries and the libraries they link (as the
#       compose lab's image; no registry involved)
#   SHA256SUMS                    `sha256sum -c SHA256SUMS` checks them
#
# Without --sut-node-bin/--loadgen-node-bin it builds both (the
# loadgen-node with --features official, which needs g++). --no-image
# skips the images (no Docker engine).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=$repo/target/release-artefacts
sut_bin=""
loadgen_bin=""
image=1

say() { echo "release: $*" >&2; }
die() {
    echo "release: error: $*" >&2
    exit 2
}

while (($#)); do
    case $1 in
    --out) out=${2:?--out needs DIR}; shift 2 ;;
    --sut-node-bin) sut_bin=${2:?--sut-node-bin needs PATH}; shift 2 ;;
    --loadgen-node-bin) loadgen_bin=${2:?--loadgen-node-bin needs PATH}; shift 2 ;;
    --no-image) image=0; shift ;;
    -h | --help) sed -n '2,/^$/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
    esac
done

version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml")
[[ -n $version ]] || die "no [workspace.package] version in Cargo.toml"
if [[ -z $sut_bin || -z $loadgen_bin ]]; then
    # As tests/run-all.sh builds them, so a checkout it built builds
    # nothing again.
    say "building sut-node and loadgen-node with the official LoadGen (--features official)"
    built=$(bash "$here/build-daemons.sh")
    [[ -n $sut_bin ]] || sut_bin=$(sed -n 1p <<<"$built")
    [[ -n $loadgen_bin ]] || loadgen_bin=$(sed -n 3p <<<"$built")
fi
for bin in "$sut_bin" "$loadgen_bin"; do
    [[ -x $bin ]] || die "$bin is not an executable file"
done
"$loadgen_bin" --help 2>/dev/null | grep -q submission ||
    die "$loadgen_bin is not a loadgen-node"
for tool in objdump tar gzip dpkg-deb sha256sum; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found (Debian: binutils, tar, gzip, dpkg)"
done

mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/netdiv-release.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Binaries without debug info (symbols stay, for backtraces).
mkdir -p "$work/bin"
strip --strip-debug -o "$work/bin/sut-node" "$sut_bin"
strip --strip-debug -o "$work/bin/loadgen-node" "$loadgen_bin"

# The newest symbol version each binary needs of a library: the oldest
# library it loads with.
newest() { # binary prefix (nothing: it needs no such symbol)
    objdump -T "$1" | { grep -o "$2[0-9.]*" || true; } | sort -u -V | tail -n 1 | sed "s/^$2//"
}
glibc=$(for b in "$work"/bin/*; do newest "$b" GLIBC_; done | sort -V | tail -n 1)
glibcxx=$(newest "$work/bin/loadgen-node" GLIBCXX_)
say "version $version; needs glibc >= $glibc${glibcxx:+, libstdc++ with GLIBCXX_$glibcxx}"

examples() { # destination
    mkdir -p "$1/systemd" "$1/llm"
    cp "$repo"/deploy/systemd/*.service "$repo"/deploy/systemd/*.env \
        "$repo"/deploy/systemd/*.toml "$repo"/deploy/systemd/install.sh "$1/systemd/"
    cp "$repo"/deploy/llm/engines/* "$1/llm/"
}

# --- tarball ---------------------------------------------------------------
name=netdiv-$version-x86_64-linux
stage=$work/$name
mkdir -p "$stage"
cp -a "$work/bin" "$stage/bin"
examples "$stage"
cat >"$stage/REQUIREMENTS.txt" <<TXT
netdiv $version for x86_64 Linux.

bin/sut-node and bin/loadgen-node need glibc $glibc or newer (and
libgcc_s). bin/loadgen-node is built with the official MLPerf LoadGen, as
a submission requires${glibcxx:+; it also needs libstdc++ with GLIBCXX_$glibcxx}.
Check a machine with: ldd bin/sut-node bin/loadgen-node

systemd/ holds the units and example configs (systemd/install.sh installs
them, with the binaries copied to /usr/local/bin); llm/ the configs of a
node in front of vLLM, SGLang or TensorRT-LLM and a compose file.
TXT
tar -C "$work" -czf "$out/$name.tar.gz" "$name"
say "wrote $out/$name.tar.gz"

# --- Debian packages -------------------------------------------------------
deb() { # daemon unit...
    local daemon=$1 package=netdiv-$1 root=$work/deb-$1
    shift
    mkdir -p "$root/DEBIAN" "$root/usr/bin" "$root/lib/systemd/system" \
        "$root/usr/share/doc/$package/examples"
    cp "$work/bin/$daemon" "$root/usr/bin/$daemon"
    for unit in "$@"; do
        sed "s#/usr/local/bin/#/usr/bin/#g" "$repo/deploy/systemd/$unit" \
            >"$root/lib/systemd/system/$unit"
    done
    case $daemon in
    sut-node)
        cp "$repo"/deploy/systemd/sut-node-example.* "$repo"/deploy/llm/engines/* \
            "$root/usr/share/doc/$package/examples/"
        depends="libc6 (>= $glibc), libgcc-s1"
        ;;
    loadgen-node)
        cp "$repo/deploy/systemd/loadgen-node.env" "$root/usr/share/doc/$package/examples/"
        depends="libc6 (>= $glibc), libgcc-s1${glibcxx:+, libstdc++6}"
        ;;
    esac
    cat >"$root/DEBIAN/control" <<CONTROL
Package: $package
Version: $version
Architecture: amd64
Maintainer: netdiv developers <netdiv@example.invalid>
Depends: $depends
Section: net
Priority: optional
Description: netdiv $daemon for the MLPerf Inference Network division
 The $daemon daemon of netdiv, with its systemd unit. Example
 configuration files are in /usr/share/doc/$package/examples.
 Needs GLIBC_$glibc${glibcxx:+ and GLIBCXX_$glibcxx}.
CONTROL
    dpkg-deb --root-owner-group -Zgzip --build "$root" "$out/${package}_${version}_amd64.deb" >/dev/null
    say "wrote $out/${package}_${version}_amd64.deb"
}
deb sut-node sut-node@.service
deb loadgen-node loadgen-node.service

# --- container images ------------------------------------------------------
if ((image)); then
    command -v docker >/dev/null 2>&1 || die "docker not found (or give --no-image)"
    sut_image=netdiv-sut-node:$version
    loadgen_image=netdiv-loadgen-node:$version
    bash "$repo/deploy/compose/lab.sh" build --bin-dir "$work/bin" --image "$sut_image" >&2
    printf 'FROM %s\nENTRYPOINT ["/usr/local/bin/loadgen-node"]\nCMD ["--help"]\n' "$sut_image" |
        docker build -q -t "$loadgen_image" - >/dev/null
    docker save "$sut_image" "$loadgen_image" | gzip >"$out/netdiv-images-$version.tar.gz"
    say "wrote $out/netdiv-images-$version.tar.gz ($sut_image, $loadgen_image)"
fi

(cd "$out" && sha256sum -- *.tar.gz *.deb >SHA256SUMS)
say "checksums in $out/SHA256SUMS"
