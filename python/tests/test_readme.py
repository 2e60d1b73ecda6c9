"""The README's Python examples run as written, on the tiny Qwen3-shaped model its earlier example makes."""
import pathlib
import re
import subprocess
import sys

from conftest import subprocess_env


def _examples():
    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index("## Python"):]
    section = section[:section.index("\n## ", 1)]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_readme_python_examples(qwen3_model, tmp_path):
    examples = _examples()
    assert len(examples) >= 3
    (tmp_path / "tiny-qwen3.gguf").symlink_to(qwen3_model)
    for code in examples:
        r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                           timeout=120, env=subprocess_env())
        assert r.returncode == 0, f"README example failed:\n{code}\n{r.stderr}"
        assert r.stdout.strip(), code

