#!/usr/bin/env bash
# Runs a script on a supported Node (scripts/node.sh; MQGW_NODE=24 picks a major), with
# that Node first on PATH so what it starts (npx, the gateway, vitest's workers) uses it too.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
node=$(bash "$root/scripts/node.sh" ${MQGW_NODE:-})
PATH="$(dirname "$node"):$PATH" exec "$node" "$@"
