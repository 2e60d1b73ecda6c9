#!/usr/bin/env bash
# Installs every build and test dependency from Debian's packages, then configures and builds parallm.
# Idempotent: safe to run again. Usage: scripts/setup.sh [build-dir]   (default: build)
# PARALLM_CMAKE_ARGS: more options for the configure step, e.g. "-DCMAKE_UNITY_BUILD=ON" (what .ci/run passes: half
# the compile time of a clean build, slower rebuilds after an edit).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build}"

PACKAGES=(
  build-essential cmake pkg-config ninja-build
  clang libclang-rt-14-dev            # libFuzzer and sanitizer runtimes
  libfmt-dev libcli11-dev libhwy-dev libxxhash-dev
  libpcre2-dev libutf8proc-dev         # tokenizer: pre-tokenizer regexes, Unicode normalization
  libboost1.81-dev libboost-json1.81-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-numpy                # tests/reference: the independent numpy forward pass
  python3-dev pybind11-dev python3-pytest  # python/: the `parallm` package and its tests
  python3-jsonschema                   # tests/structured: an independent validator of constrained outputs
)

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

# install_missing PACKAGE...: apt-get installs those not installed yet (fails if apt-get does).
install_missing() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq || true
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

install_missing "${PACKAGES[@]}"

# ARM64: the cross compiler, qemu-user and arm64 builds of fmt and GoogleTest, for the kernels_arm64 test (the
# NEON path under emulation; scripts/test_arm64.sh). Best effort: without them that test is skipped.
if [ "$(dpkg --print-architecture)" = amd64 ]; then
  if ! { $SUDO dpkg --add-architecture arm64 &&
         install_missing g++-aarch64-linux-gnu qemu-user libfmt-dev:arm64 libgtest-dev:arm64; }; then
    echo "setup: the ARM64 cross tools did not install; the kernels_arm64 test will be skipped"
  fi
fi

# Serving in practice (tests/server: server_haproxy, server_prometheus_scrape, server_kubernetes,
# server_chat_page_browser): Debian's HAProxy and Prometheus run the configurations in deploy/, PyYAML reads
# deploy/kubernetes/, headless Chromium loads the chat page. Best effort: without one, its test is skipped.
if ! install_missing haproxy prometheus python3-yaml chromium; then
  echo "setup: haproxy, prometheus, python3-yaml or chromium did not install; their server tests will be skipped"
fi

# The JavaScript the `node` ctests run: references they regenerate goldens with (tokenizers.js for tokenizers,
# @huggingface/jinja for chat templates), the openai client the server is tested with and puppeteer-core, which
# drives Chromium on the chat page; reinstalled when a lock changes. Without npm those tests are skipped.
for NODE_DIR in tests/tokenizer/node tests/chat/node tests/server/node tests/server/browser; do
  if command -v npm >/dev/null && ! cmp -s "$NODE_DIR/package-lock.json" "$NODE_DIR/node_modules/.parallm-lock.json"; then
    if npm ci --prefix "$NODE_DIR" --no-audit --no-fund; then
      cp "$NODE_DIR/package-lock.json" "$NODE_DIR/node_modules/.parallm-lock.json"
    else
      echo "setup: npm ci in $NODE_DIR failed; its node test will be skipped"
    fi
  fi
done

# shellcheck disable=SC2086  # PARALLM_CMAKE_ARGS: words, split on purpose
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo ${PARALLM_CMAKE_ARGS:-}
cmake --build "$BUILD_DIR" -j"$(nproc)"
echo "setup: built parallm in $BUILD_DIR (binary: $BUILD_DIR/src/cli/parallm)"

# The Python package: a parallm.pth in each python3's site-packages names $BUILD_DIR/python, so `import parallm`
# works in a fresh shell (python3 on PATH and Debian's, when they differ and share the extension's ABI).
for PY in $(command -v python3) /usr/bin/python3; do
  [ -x "$PY" ] || continue
  "$PY" python/install_pth.py "$BUILD_DIR" || echo "setup: $PY will not import parallm (see above)"
done
