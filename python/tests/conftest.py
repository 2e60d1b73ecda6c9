"""Fixtures of the Python package's tests: the parallm CLI (PARALLM_CLI), the shared fixtures (PARALLM_FIXTURES),
and tiny random-weight models made with real tokenizers, once per session."""
import json
import os
import pathlib
import subprocess

import pytest


@pytest.fixture(scope="session")
def cli() -> str:
    path = os.environ.get("PARALLM_CLI")
    if not path:
        root = pathlib.Path(__file__).resolve().parents[2]
        path = str(root / "build" / "src" / "cli" / "parallm")
    assert os.path.exists(path), f"the parallm CLI is not at {path}: set PARALLM_CLI"
    return path


@pytest.fixture(scope="session")
def fixtures() -> pathlib.Path:
    path = os.environ.get("PARALLM_FIXTURES")
    root = pathlib.Path(path) if path else pathlib.Path(__file__).resolve().parents[3] / "shared"
    assert (root / "tokenizers" / "qwen3").is_dir(), f"no fixtures at {root}: set PARALLM_FIXTURES"
    return root


def run_cli(cli: str, *args: str, input_text=None) -> subprocess.CompletedProcess:
    r = subprocess.run([cli, *map(str, args)], capture_output=True, text=True, input=input_text)
    assert r.returncode == 0, f"parallm {' '.join(map(str, args))} failed: {r.stderr}"
    return r


@pytest.fixture(scope="session")
def workdir(tmp_path_factory) -> pathlib.Path:
    return tmp_path_factory.mktemp("parallm")


@pytest.fixture(scope="session")
def qwen3_model(cli, fixtures, workdir) -> str:
    """The tiny preset, Qwen3-shaped, Q8_0, with Qwen3's tokenizer and chat template in the GGUF file."""
    path = workdir / "tiny-qwen3.gguf"
    run_cli(cli, "make-model", "--preset", "tiny", "--arch", "qwen3", "--dtype", "q8_0",
            "--tokenizer", fixtures / "tokenizers" / "qwen3", "-o", path)
    return str(path)


@pytest.fixture(scope="session")
def llama_folder(cli, fixtures, workdir) -> str:
    """The tiny preset as a Hugging Face folder with Llama 3's tokenizer files copied beside the weights."""
    path = workdir / "tiny-llama3-hf"
    run_cli(cli, "make-model", "--preset", "tiny", "--arch", "llama", "--format", "hf", "--dtype", "bf16",
            "--tokenizer", fixtures / "tokenizers" / "llama3", "-o", path)
    return str(path)


@pytest.fixture(scope="session")
def llm(qwen3_model):
    import parallm
    return parallm.LLM(qwen3_model, max_num_seqs=16, num_kv_blocks=256)


def cli_batch(cli: str, model: str, requests, workdir: pathlib.Path, *extra: str):
    """Runs `parallm batch` on request dicts; returns the result records by id. The KV cache is 256 blocks unless
    `extra` says otherwise (the CLI's default 2 GiB takes seconds to allocate)."""
    inp = workdir / "batch-in.jsonl"
    out = workdir / "batch-out.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in requests))
    if out.exists():
        out.unlink()
    if "--num-kv-blocks" not in extra:
        extra = (*extra, "--num-kv-blocks", "256")
    run_cli(cli, "batch", "-m", model, "--input", inp, "--output", out, *extra)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    return {r["id"]: r for r in records}


def subprocess_env() -> dict:
    """This process's environment with the package it imported first on the path (PYTHONPATH may be relative)."""
    import parallm
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(pathlib.Path(parallm.__file__).resolve().parents[1]),
                                         env.get("PYTHONPATH", "")])
    return env
