#!/usr/bin/env bash
# Vendors GraphiQL and React into assets/graphiql from the npm registry, at the versions pinned
# below: checks each tarball against its pinned npm integrity, copies the built files and each
# package's LICENSE, and rewrites assets/graphiql/README.md with every file's origin and sha256.
# Needs Node and npm. To update: change a version, run it once with the new integrity left as is,
# paste the integrity it reports, run it again, then rename the files in src/graphiql.rs and
# src/graphiql.html and run ./scripts/test.sh (the browser test drives the new GraphiQL).
set -euo pipefail
cd "$(dirname "$0")/.."

GRAPHIQL=3.8.3
REACT=18.3.1

# npm's integrity (sha512) of each package tarball.
declare -A INTEGRITY=(
  ["graphiql@$GRAPHIQL"]="sha512-cuPDYtXVKV86Pu5PHBX642Odi/uVEE2y1Jxq5rGO/Qy1G2lRp7ZZ7a/T30RzxhuLSWo9zUbzq0P3U49//H0Ugw=="
  ["react@$REACT"]="sha512-wS+hAgJShR0KhEvPJArfuPVN1+Hz1t0Y6n5jLrGQbkb4urgPE/0Rve+1kMB1v/oWgHgm4WIcV+i7F2pTVj+2iQ=="
  ["react-dom@$REACT"]="sha512-5m4nQKp+rZRb09LNH59GM4BxTh9251/ylbKIbpe7TpGxfJ+9kv6BLkLBXIjjspbgbnIBNqlI23tRnTWT0snUIw=="
)

# package@version, the file in its tarball, the name it is vendored (and served) under. Names
# carry the version, so browsers may cache them forever.
FILES=(
  "graphiql@$GRAPHIQL graphiql.min.js graphiql-$GRAPHIQL.min.js"
  "graphiql@$GRAPHIQL graphiql.min.css graphiql-$GRAPHIQL.min.css"
  "graphiql@$GRAPHIQL LICENSE LICENSE-graphiql-$GRAPHIQL.txt"
  "react@$REACT umd/react.production.min.js react-$REACT.production.min.js"
  "react@$REACT LICENSE LICENSE-react-$REACT.txt"
  "react-dom@$REACT umd/react-dom.production.min.js react-dom-$REACT.production.min.js"
  "react-dom@$REACT LICENSE LICENSE-react-dom-$REACT.txt"
)

DEST="assets/graphiql"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

for package in "${!INTEGRITY[@]}"; do
  echo "==> npm pack $package"
  tarball="$(cd "$work" && npm pack --silent "$package")"
  actual="sha512-$(node -e 'const c = require("crypto"), fs = require("fs");
    process.stdout.write(c.createHash("sha512").update(fs.readFileSync(process.argv[1])).digest("base64"))' "$work/$tarball")"
  if [ "$actual" != "${INTEGRITY[$package]}" ]; then
    echo "$package: the tarball's integrity is $actual, not the pinned ${INTEGRITY[$package]}" >&2
    exit 1
  fi
  mkdir -p "$work/$package"
  tar -xzf "$work/$tarball" -C "$work/$package"
done

rm -rf "$DEST"
mkdir -p "$DEST"
rows=""
for entry in "${FILES[@]}"; do
  read -r package source name <<<"$entry"
  cp "$work/$package/package/$source" "$DEST/$name"
  size="$(wc -c <"$DEST/$name" | tr -d ' ')"
  sum="$(sha256sum "$DEST/$name" | cut -d' ' -f1)"
  rows+="| \`$name\` | \`$package\` | \`$source\` | $size | \`$sum\` |"$'\n'
done

cat >"$DEST/README.md" <<EOF
# Vendored GraphiQL

threadql serves GraphiQL at \`/\` from its own binary (\`src/graphiql.rs\` embeds these files), so
the page works without internet access. The files are copied unchanged from the npm packages
below by \`scripts/vendor-graphiql.sh\`, which checks each tarball against its pinned npm
integrity and writes this file; a unit test checks every sha256 below against the embedded bytes.

\`graphiql-$GRAPHIQL.min.js\` is GraphiQL's UMD bundle: it expects \`window.React\` and
\`window.ReactDOM\` and bundles everything else it uses, among them \`graphql\`, CodeMirror 5 and the
\`graphql-ws\` client (\`graphql-transport-ws\` protocol) for subscriptions. The stylesheet embeds
its fonts as \`data:\` URLs. All three packages are MIT-licensed; their licenses are the
\`LICENSE-*\` files, also served under \`/graphiql/\`.

| file | package | file in the package | bytes | sha256 |
| --- | --- | --- | --- | --- |
$rows
EOF
# No trailing blank line after the table.
sed -i -e :a -e '/^\n*$/{$d;N;ba' -e '}' "$DEST/README.md"

echo "==> vendored into $DEST:"
ls -l "$DEST"
