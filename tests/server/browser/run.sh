#!/usr/bin/env bash
# Runs chat_page_test.mjs: headless Chromium (Debian's) driven by puppeteer-core against `parallm serve`'s chat page.
# Usage: run.sh PARALLM_BINARY FIXTURES_DIR. Exits 77 (ctest: skipped) without node, node_modules or chromium.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if ! command -v node >/dev/null 2>&1; then
  echo "SKIPPED: node is not installed"
  exit 77
fi
if [ ! -f "$here/node_modules/puppeteer-core/package.json" ]; then
  echo "SKIPPED: $here/node_modules is missing; install puppeteer-core with: npm ci --prefix tests/server/browser"
  exit 77
fi
chromium="${PARALLM_CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}"
if [ -z "$chromium" ]; then
  echo "SKIPPED: chromium is not installed (scripts/setup.sh installs Debian's)"
  exit 77
fi
exec node "$here/chat_page_test.mjs" "$chromium" "$@"
