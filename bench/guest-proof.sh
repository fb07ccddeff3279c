#!/usr/bin/env bash
# Guests' proof of work: how long threadql's worker takes to solve a challenge in headless
# Chromium at each cost (see BENCHMARKS.md, "Guests' proof of work"). For each maxnumber it starts
# `threadql serve` (debug build: the server only hands out challenges; the work is the browser's)
# on its own development database in a temporary folder, with THREADQL_GUESTS=post, and runs
# tests/node/proof-times.mjs against it; the results go to OUT (default
# bench/results/guest-proof.json), one entry per maxnumber.
#
#   bench/guest-proof.sh [OUT] [COUNT]        # COUNT challenges per maxnumber, default 50
#   MAXNUMBERS="100000" bench/guest-proof.sh   # only some costs
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-bench/results/guest-proof.json}"
count="${2:-50}"
maxnumbers="${MAXNUMBERS:-10000 100000 1000000}"
./scripts/install-deps.sh --database-only
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
cargo build --locked --bin threadql
bin="${CARGO_TARGET_DIR:-target}/debug/threadql"
commit="$(git rev-parse --short HEAD)"
lines=()
for max in $maxnumbers; do
  data="$(mktemp -d)"
  port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  THREADQL_LISTEN="127.0.0.1:$port" THREADQL_DATA_DIR="$data" THREADQL_GUESTS=post \
    THREADQL_GUEST_POW_MAXNUMBER="$max" "$bin" serve >"$data/server.log" 2>&1 &
  server=$!
  for _ in $(seq 1 600); do
    curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
    sleep 0.1
  done
  line="$(cd tests/node && node proof-times.mjs "http://127.0.0.1:$port" "$count" | sed -n 's/^PROOF //p')" || true
  kill "$server"
  wait "$server" || true
  rm -rf "$data"
  [ -n "$line" ] || { echo "no result at maxnumber $max" >&2; exit 1; }
  echo "maxnumber $max: $line" | cut -c1-300
  lines+=("$line")
done
joined="$(IFS=,; echo "${lines[*]}")"
printf '{"commit":"%s","cpu":"%s","runs":[%s]}\n' "$commit" \
  "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') x $(nproc)" "$joined" |
  python3 -m json.tool --indent 1 >"$out"
echo "wrote $out"
