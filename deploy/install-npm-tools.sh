#!/usr/bin/env bash
# Installs the npm tools the tests use, pinned, into a cache folder outside
# the checkout (so a clean clone does not download them again), and prints
# the folder. Today one: the `oai-pmh` harvester (npm's OAI-PMH client,
# which tests/integration/test_oai_provider.cpp runs against our face).
# Idempotent: a present, matching install costs one file read.
set -euo pipefail

dir="${TRIBUTARY_NPM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tributary/npm}"
want="oai-pmh@2.0.3"
stamp="$dir/.installed"

if [ -x "$dir/node_modules/.bin/oai-pmh" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "$dir"
  exit 0
fi
mkdir -p "$dir"
# npm writes its progress to stderr; the folder is the one line on stdout.
npm install --silent --no-audit --no-fund --prefix "$dir" "$want" >&2
echo "$want" > "$stamp"
echo "$dir"
