#!/usr/bin/env bash
# Runs a script of this folder (openai_client.mjs, chat_template_client.mjs: the official `openai` npm client against
# `parallm serve`). Usage: run.sh SCRIPT.mjs PARALLM_BINARY FIXTURES_DIR. Exits 77 (ctest: skipped) without node or
# node_modules.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if ! command -v node >/dev/null 2>&1; then
  echo "SKIPPED: node is not installed"
  exit 77
fi
if [ ! -f "$here/node_modules/openai/package.json" ]; then
  echo "SKIPPED: $here/node_modules is missing; install the client with: npm ci --prefix tests/server/node"
  exit 77
fi
script="$1"
shift
exec node "$here/$script" "$@"
