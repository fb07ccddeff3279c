#!/usr/bin/env bash
# Installs what threadql needs to build, to run its development database and to run its tests,
# skipping what is already there: make and a C compiler (jemalloc), cmake (to build the database), secantusd-rs (the
# MongoDB-compatible dev server), the Node packages of tests/node (the GraphQL-over-HTTP audit and
# the browser test), Chromium (the GraphiQL browser test drives it headless) and the Python
# packages of the checks and tests (PyYAML, jsonschema, feedparser).
set -euo pipefail
cd "$(dirname "$0")/.."

SECANTUS_VERSION="0.5.3-beta.196"
CARGO_BIN="${CARGO_HOME:-$HOME/.cargo}/bin"
export PATH="$CARGO_BIN:$PATH"

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else
    echo "need root to run: $*" >&2; exit 1; fi
}

# make and a C compiler: the server's allocator (jemalloc) is built from its C sources.
install_c_build_tools() {
  if command -v make >/dev/null 2>&1 && command -v cc >/dev/null 2>&1; then
    return 0
  fi
  echo "==> installing make and a C compiler (jemalloc, the server's allocator, is built from C)"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq make gcc >/dev/null
}

install_secantus() {
  if command -v secantusd-rs >/dev/null 2>&1 && secantusd-rs --help 2>&1 | head -1 | grep -q "$SECANTUS_VERSION"; then
    return 0
  fi

  if ! command -v cmake >/dev/null 2>&1; then
    echo "==> installing cmake (needed to build the development database)"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake >/dev/null
  fi

  echo "==> building the development database secantusd-rs $SECANTUS_VERSION (first time only, ~5-20 minutes)"
  cargo install secantus-mdb --version "=$SECANTUS_VERSION" --locked --ignore-rust-version
}

# The packages of tests/node, exactly as tests/node/package-lock.json pins them; reinstalled
# only when the lock file is newer than the last install.
install_node_test_deps() {
  local dir="tests/node"
  if [ -f "$dir/node_modules/.package-lock.json" ] && ! [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
    return 0
  fi
  if ! command -v npm >/dev/null 2>&1; then
    echo "==> npm not found: skipping the Node test dependencies ($dir); the GraphQL-over-HTTP audit test" \
      "will fail until Node 20+ and npm are installed and this script is run again" >&2
    return 0
  fi
  echo "==> installing the Node test dependencies ($dir: npm ci)"
  (cd "$dir" && npm ci --no-audit --no-fund)
}

# Chromium from the distribution, at /usr/bin/chromium where tests/node/browser.mjs looks for it.
install_chromium() {
  if [ -x /usr/bin/chromium ]; then
    return 0
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "==> apt-get not found: install Chromium as /usr/bin/chromium yourself; the GraphiQL" \
      "browser test fails until it is there" >&2
    return 0
  fi
  echo "==> installing Chromium (for the GraphiQL browser test)"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
}

# PyYAML and jsonschema, for the static checks of docker/ (scripts/check-docker.py).
install_python_check_deps() {
  if python3 -c "import yaml, jsonschema" >/dev/null 2>&1; then
    return 0
  fi
  echo "==> installing PyYAML and jsonschema (for the static checks of docker/)"
  python3 -m pip install --quiet --user pyyaml jsonschema 2>/dev/null \
    || python3 -m pip install --quiet --user --break-system-packages pyyaml jsonschema 2>/dev/null \
    || { as_root apt-get update -qq && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-yaml python3-jsonschema >/dev/null; }
}

# feedparser, which the Atom feed tests parse the feeds with (tests/python/check_feed.py).
install_python_test_deps() {
  if python3 -c "import feedparser" >/dev/null 2>&1; then
    return 0
  fi
  echo "==> installing feedparser (for the Atom feed tests)"
  python3 -m pip install --quiet --user feedparser 2>/dev/null \
    || python3 -m pip install --quiet --user --break-system-packages feedparser 2>/dev/null \
    || { as_root apt-get update -qq && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-feedparser >/dev/null; }
}

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo is required (Rust toolchain 1.95 or newer): https://rustup.rs" >&2
  exit 1
fi

install_c_build_tools
install_secantus
# The server needs only the database; the tests also need Node packages and Chromium.
if [ "${1:-}" = "--database-only" ]; then
  exit 0
fi
install_node_test_deps
install_chromium
install_python_check_deps
install_python_test_deps
