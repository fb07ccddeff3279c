#!/usr/bin/env bash
# Runs the threadql server. With no THREADQL_MONGODB_URI it starts the embedded development
# database (data in ./threadql-data). Extra arguments go to `threadql serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${THREADQL_MONGODB_URI:-}" ]; then
  ./scripts/install-deps.sh --database-only
fi
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
exec cargo run --release --locked --bin threadql -- serve "$@"
