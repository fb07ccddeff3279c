#!/usr/bin/env bash
# Runs the whole test suite: the static checks of docker/, then the unit tests and the
# integration binary against the real development database (started once for the run). Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
# docker/ cannot be run here (no Docker engine is needed for the tests): check it statically.
python3 scripts/check-docker.py
exec cargo test --locked --workspace "$@"
