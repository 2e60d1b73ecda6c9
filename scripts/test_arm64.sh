#!/usr/bin/env bash
# Cross-builds util, tensor and kernels for ARM64 and runs their tests under qemu-user with `-cpu max` (NEON
# with the dot-product extension), so the NEON MatMul path is checked against the scalar twin on x86 machines.
# Needs what scripts/setup.sh installs: g++-aarch64-linux-gnu, qemu-user, libfmt-dev:arm64, libgtest-dev:arm64.
# Exits 77 (ctest: skipped) when they are missing. Usage: scripts/test_arm64.sh [build-dir]  (default: build-arm64)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build-arm64}"

for tool in aarch64-linux-gnu-g++ qemu-aarch64 cmake ninja; do
  if ! command -v "$tool" >/dev/null; then
    echo "test_arm64: $tool is missing (scripts/setup.sh installs it); skipped"
    exit 77
  fi
done
for pkg in libfmt-dev:arm64 libgtest-dev:arm64; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    echo "test_arm64: $pkg is missing (scripts/setup.sh installs it); skipped"
    exit 77
  fi
done

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DPARALLM_KERNELS_ONLY=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" --timeout 600
