# Cross-compiling for ARM64 Linux with Debian's g++-aarch64-linux-gnu; the tests run under qemu-user
# (scripts/test_arm64.sh). Libraries come from Debian's arm64 multiarch packages (libfmt-dev:arm64 ...).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
# The programs load the arm64 multiarch libc (libc6:arm64, under /lib/aarch64-linux-gnu), not the cross
# toolchain's copy: `-L /usr/aarch64-linux-gnu` mixes the two and hangs at the first thread.
# -cpu max: an Armv8.x+ core with the dot-product extension (sdot), so the NEON path is exercised.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-cpu;max)
# pkg-config (libhwy, ...) must report the arm64 multiarch libraries, not the host's.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
