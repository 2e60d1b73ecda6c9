#!/usr/bin/env python3
"""Runs the package's pytest suite for ctest: first checks that a fresh interpreter imports the built package.
In a sanitizer build the extension needs the ASan runtime loaded before anything else (PARALLM_ASAN_RUNTIME, the
runtime and libstdc++, is preloaded; Python's own allocations at exit are not leaks of ours, so leak checking is
off); if it still cannot load, the suite is skipped (exit 77) with the reason.

Usage: run_tests.py [pytest arguments]   (environment: PYTHONPATH, PARALLM_CLI, PARALLM_FIXTURES,
                                          PARALLM_SANITIZE, PARALLM_ASAN_RUNTIME)
"""
import os
import pathlib
import subprocess
import sys

SKIP = 77


def main() -> int:
    env = dict(os.environ)
    sanitized = env.get("PARALLM_SANITIZE", "").upper() in ("1", "ON", "TRUE")
    if sanitized and env.get("PARALLM_ASAN_RUNTIME"):
        env["LD_PRELOAD"] = env["PARALLM_ASAN_RUNTIME"]
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    probe = subprocess.run([sys.executable, "-c", "import parallm"], env=env, capture_output=True, text=True)
    if probe.returncode != 0:
        reason = probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else f"exit {probe.returncode}"
        if sanitized:
            print(f"SKIPPED: the sanitizer build's extension does not load into {sys.executable}: {reason}")
            return SKIP
        print(f"python3 cannot import the built package: {probe.stderr}", file=sys.stderr)
        return 1
    here = pathlib.Path(__file__).resolve().parent
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(here), *sys.argv[1:]]
    return subprocess.run(cmd, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
