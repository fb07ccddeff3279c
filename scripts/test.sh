#!/usr/bin/env bash
# Runs the whole test suite (unit tests and the integration binary against the real development
# database, started once for the run). Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
exec cargo test --locked --workspace "$@"
