#!/usr/bin/env python3
"""Runs every ```bash example of README.md, as written, against the freshly built parallm.

```sh blocks are the set-up and test commands; they are checked to be what .ci/run runs instead (running
them here would rebuild and recurse). A block right after a `<!-- slow example ... -->` line is skipped with
--skip-slow (the sanitizer build, where writing and running a 0.5B model would take many minutes).
Examples run in a scratch copy of the layout they assume: build/src/cli/parallm and ../shared.
"""
import os
import pathlib
import re
import subprocess
import sys
import tempfile


def blocks(readme: str, lang: str, skip_slow: bool = False):
    found = []
    for m in re.finditer(r"(<!-- slow example[^\n]*-->\n)?```" + lang + r"\n(.*?)```", readme, re.S):
        if not (skip_slow and m.group(1)):
            found.append(m.group(2))
    return found


def main():
    skip_slow = "--skip-slow" in sys.argv
    repo, binary, fixtures = (pathlib.Path(a).resolve() for a in sys.argv[1:4])
    readme = (repo / "README.md").read_text()
    ci = (repo / ".ci" / "run").read_text()
    for block in blocks(readme, "sh"):
        for line in block.strip().splitlines():
            if line.strip() and line.strip() not in ci:
                sys.exit(f"README command not run by .ci/run: {line!r}")
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        work = root / "repo"
        (work / "build" / "src" / "cli").mkdir(parents=True)
        (work / "build" / "src" / "cli" / "parallm").symlink_to(binary)
        (root / "shared").symlink_to(fixtures)
        examples = blocks(readme, "bash", skip_slow)
        if not examples:
            sys.exit("README has no ```bash examples")
        for block in examples:
            print(f"$ {block.strip()}", flush=True)
            r = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=work, capture_output=True, text=True,
                               errors="replace")
            print(r.stdout[-2000:], r.stderr[-2000:], sep="\n", flush=True)
            if r.returncode != 0:
                sys.exit(f"README example failed with exit code {r.returncode}")
    print("all README examples ran")


if __name__ == "__main__":
    main()
