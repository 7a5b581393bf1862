#!/usr/bin/env bash
# Builds the two daemons in release mode, as the tests and the release
# artefacts use them, and prints where each is, one per line:
#
#   bash deploy/release/build-daemons.sh
#   -> TARGET/release/sut-node
#      TARGET/release/loadgen-node                  (the default build)
#      TARGET/official/release/loadgen-node         (--features official)
#
# TARGET is $CARGO_TARGET_DIR or the workspace's target/. The official
# build (it embeds the official LoadGen; needs g++) shares the default
# build's target directory, so every dependency compiles once for both
# (a target directory of its own compiled them all again: a quarter of an
# hour on a cold 2-CPU machine). Cargo writes both builds' program to the
# same path, so the official one is copied aside and the default build
# then puts its own back (cargo relinks that path even when nothing needs
# compiling). For that second, TARGET/release/loadgen-node is the official
# build: nothing should start it or build into TARGET meanwhile (the
# release test that runs build.sh runs alone).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
target=${CARGO_TARGET_DIR:-target}
[[ $target == /* ]] || target=$repo/$target

cargo build --release -p loadgen-node --bin loadgen-node --features loadgen-node/official >&2
mkdir -p "$target/official/release"
cp -f "$target/release/loadgen-node" "$target/official/release/loadgen-node.new"
mv -f "$target/official/release/loadgen-node.new" "$target/official/release/loadgen-node"
# One invocation for both daemons: one feature resolution, so a checkout
# built by tests/run-all.sh builds nothing again here.
cargo build --release -p loadgen-node --bin loadgen-node -p sut-node --bin sut-node >&2
cmp -s "$target/release/loadgen-node" "$target/official/release/loadgen-node" && {
  echo "build-daemons.sh: cargo left the official loadgen-node at $target/release/loadgen-node" >&2
  exit 1
}
echo "$target/release/sut-node"
echo "$target/release/loadgen-node"
echo "$target/official/release/loadgen-node"
