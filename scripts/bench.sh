#!/usr/bin/env bash
# Builds the server and the benchmark harness in release mode and runs the harness (see
# BENCHMARKS.md). Arguments go to threadql-bench: --quick, --sizes 1000,10000, --layouts,
# --mongodb-uri URI, --out FILE, ... (`--help` lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh --database-only
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
cargo build --release --locked --workspace --bins
exec "${CARGO_TARGET_DIR:-target}/release/threadql-bench" "$@"
