#!/usr/bin/env bash
# Installs what threadql needs to build and to run its development database, skipping what is
# already there: cmake (to build the database) and secantusd-rs (the MongoDB-compatible dev server).
set -euo pipefail

SECANTUS_VERSION="0.5.3-beta.196"
CARGO_BIN="${CARGO_HOME:-$HOME/.cargo}/bin"
export PATH="$CARGO_BIN:$PATH"

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else
    echo "need root to run: $*" >&2; exit 1; fi
}

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo is required (Rust toolchain 1.85 or newer): https://rustup.rs" >&2
  exit 1
fi

if command -v secantusd-rs >/dev/null 2>&1 && secantusd-rs --help 2>&1 | head -1 | grep -q "$SECANTUS_VERSION"; then
  exit 0
fi

if ! command -v cmake >/dev/null 2>&1; then
  echo "==> installing cmake (needed to build the development database)"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake >/dev/null
fi

echo "==> building the development database secantusd-rs $SECANTUS_VERSION (first time only, ~5-20 minutes)"
cargo install secantus-mdb --version "=$SECANTUS_VERSION" --locked --ignore-rust-version
