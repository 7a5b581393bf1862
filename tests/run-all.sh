#!/usr/bin/env bash
# Runs every test of the workspace: unit tests, and the conformance tests
# that build the official MLPerf LoadGen from its PyPI sdist and compare.
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v cargo-nextest >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast
else
  cargo test --workspace --no-fail-fast
fi
