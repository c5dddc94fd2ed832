#!/usr/bin/env bash
# Prints the path of a Node.js this project supports (22 or newer, docs/decisions/node.md):
#   scripts/node.sh       the PATH's node when it is 22 or newer, else Node 24
#   scripts/node.sh 24    Node 24 (CI tests on the current LTS whatever the machine has)
# A Node that the machine lacks comes from the npm registry's `node` package (a binary
# package per platform) into the git-ignored .tools/node-<major>/, once.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tools="${MQGW_TOOLS_DIR:-$root/.tools}"
want="${1:-}"

major_of() { "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }

if command -v node >/dev/null; then
  have=$(major_of node)
  if { [ -z "$want" ] && [ "$have" -ge 22 ]; } || [ "$have" = "$want" ]; then
    command -v node; exit 0
  fi
fi
want="${want:-24}"
dir="$tools/node-$want"
bin="$dir/node_modules/node/bin/node"
if [ ! -x "$bin" ] || [ "$(major_of "$bin")" != "$want" ]; then
  echo "mq-gateway setup: fetching Node $want from the npm registry into $dir (once; this machine's node: ${have:-none})" >&2
  mkdir -p "$dir"
  npm install --prefix "$dir" --no-save --no-audit --no-fund --loglevel=error "node@$want" >&2
  echo "mq-gateway setup: Node $("$bin" --version) ready" >&2
fi
echo "$bin"
