#!/usr/bin/env python3
"""Runs every ```bash example of README.md, as written, against the freshly built parallm.

```sh blocks are the set-up and test commands; they are checked to be what .ci/run runs instead (running
them here would rebuild and recurse). A block right after a `<!-- slow example, the README test runs it with:
FROM => TO -->` line runs with FROM replaced by TO (a tiny model or fewer prompts for one that takes minutes).
Examples run in a scratch copy of the layout they assume: build/src/cli/parallm and ../shared.
"""
import os
import pathlib
import re
import subprocess
import sys
import tempfile


def blocks(readme: str, lang: str):
    found = []
    for m in re.finditer(r"(<!-- slow example, the README test runs it with: (.*?) => (.*?) -->\n)?```" + lang +
                         r"\n(.*?)```", readme, re.S):
        block = m.group(4)
        if m.group(1):
            if m.group(2) not in block:
                sys.exit(f"slow example substitution {m.group(2)!r} not found in: {block}")
            block = block.replace(m.group(2), m.group(3))
        found.append(block)
    return found


def main():
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
        (work / "scripts").symlink_to(repo / "scripts")
        (root / "shared").symlink_to(fixtures)
        examples = blocks(readme, "bash")
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
