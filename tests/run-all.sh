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
status=0
if command -v cargo-nextest >/dev/null 2>&1; then
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
  cargo test --workspace --no-fail-fast || status=$?
fi
wait "$llama_cpp" || true
exit "$status"
