#!/usr/bin/env bash
# Builds the server and the benchmark harness in release mode and runs the harness. Arguments go
# to threadql-bench (e.g. --quick, --sizes 1000,10000, --mongodb-uri URI, --out FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x ./scripts/install-deps.sh ]; then ./scripts/install-deps.sh; fi
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
cargo build --release --locked --bins
exec "${CARGO_TARGET_DIR:-target}/release/threadql-bench" "$@"
