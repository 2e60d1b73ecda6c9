#!/usr/bin/env python3
"""Makes `import parallm` work for the interpreter running this script: writes parallm.pth, naming the build's
package folder (<build>/python), into the interpreter's site-packages (or the user's, when that is not
writable). A .pth file rather than a copy: a rebuild is picked up at once and the package can never be older
than the engine it was built with. Refuses an interpreter whose ABI the extension was not built for.

Usage: python3 python/install_pth.py BUILD_DIR      (scripts/setup.sh runs it)
"""
import importlib.machinery
import os
import pathlib
import site
import subprocess
import sys
import sysconfig


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    package_root = pathlib.Path(sys.argv[1]).resolve() / "python"
    built = sorted((package_root / "parallm").glob("_parallm*.so"))
    if not built:
        print(f"install_pth: no extension in {package_root / 'parallm'}; build first", file=sys.stderr)
        return 1
    if not any(b.name.endswith(s) for b in built for s in importlib.machinery.EXTENSION_SUFFIXES):
        print(f"install_pth: {sys.executable} cannot load {built[0].name} (it takes "
              f"{' '.join(importlib.machinery.EXTENSION_SUFFIXES)}); skipped", file=sys.stderr)
        return 1
    candidates = [sysconfig.get_paths()["purelib"]]
    if site.ENABLE_USER_SITE:
        candidates.append(site.getusersitepackages())
    for directory in candidates:
        try:
            os.makedirs(directory, exist_ok=True)
            target = pathlib.Path(directory) / "parallm.pth"
            target.write_text(f"{package_root}\n")
        except OSError:
            continue
        # A fresh interpreter must now find it (and find this build's copy, not another).
        check = subprocess.run([sys.executable, "-c", "import parallm; print(parallm.__file__)"],
                               capture_output=True, text=True, cwd="/")
        if check.returncode != 0 or not check.stdout.strip().startswith(str(package_root)):
            print(f"install_pth: {target} written, but {sys.executable} does not import this build's parallm:"
                  f"\n{check.stdout}{check.stderr}", file=sys.stderr)
            return 1
        print(f"install_pth: {sys.executable} imports parallm from {package_root} ({target})")
        return 0
    print(f"install_pth: no writable site-packages for {sys.executable}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
