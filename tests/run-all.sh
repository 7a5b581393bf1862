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
else
  cargo test --workspace --no-fail-fast || status=$?
fi
wait "$llama_cpp" || true
exit "$status"
