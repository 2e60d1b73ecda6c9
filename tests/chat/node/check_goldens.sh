#!/usr/bin/env bash
# Regenerates the chat-template goldens with @huggingface/jinja into a temporary folder and diffs them against
# tests/chat/golden, so a golden edited by hand or a changed conversations.json cannot go unnoticed; then checks
# every expectation in tests/chat/interpreter_cases.json against the same reference.
# Exits 77 (ctest reports "Skipped") when node or tests/chat/node/node_modules is missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if ! command -v node >/dev/null 2>&1; then
  echo "SKIPPED: node is not installed, so the goldens cannot be regenerated"
  exit 77
fi
if [ ! -d "$here/node_modules/@huggingface/jinja" ]; then
  echo "SKIPPED: $here/node_modules is missing; install the reference with: npm ci --prefix tests/chat/node"
  exit 77
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
node "$here/render.mjs" --out "$tmp"
if diff -ru "$here/../golden" "$tmp"; then
  echo "tests/chat/golden matches what @huggingface/jinja renders now"
else
  echo "tests/chat/golden is stale: run node tests/chat/node/render.mjs and commit the result" >&2
  exit 1
fi
node "$here/check_cases.mjs"
