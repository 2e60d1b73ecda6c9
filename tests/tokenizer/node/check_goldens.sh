#!/usr/bin/env bash
# Regenerates the corpus and the tokenizers.js goldens into a temporary folder and diffs them against the
# committed ones (ctest label `node`). Exits 77 (skipped) when node or node_modules is missing.
# usage: check_goldens.sh FIXTURES_DIR
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
fixtures="$1"
if ! command -v node >/dev/null || [ ! -d "$here/node_modules/@huggingface/tokenizers" ]; then
  echo "SKIPPED: tokenizers.js is not installed; run: npm ci --prefix tests/tokenizer/node"
  exit 77
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 "$here/../make_corpus.py" "$tmp/corpus.jsonl" >/dev/null
cmp "$tmp/corpus.jsonl" "$here/../corpus.jsonl" || { echo "corpus.jsonl is stale: rerun make_corpus.py"; exit 1; }
node "$here/reference.mjs" "$here/../corpus.jsonl" "$tmp/golden" "$fixtures/tokenizers"
status=0
for f in "$here"/../golden/*.jsonl; do
  if ! cmp -s "$f" "$tmp/golden/$(basename "$f")"; then
    echo "golden $(basename "$f") differs from tokenizers.js output"
    status=1
  fi
done
[ "$status" = 0 ] && echo "goldens match tokenizers.js"
exit "$status"
