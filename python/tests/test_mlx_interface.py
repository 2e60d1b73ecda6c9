"""mlx_parallm's interface (load, generate, stream_generate, batch_generate): texts in prompt order equal to
`parallm batch` on the same requests, verbose output shaped as mlx_parallm's, and its demo script running with
only the import line (and the model name) changed."""
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

import parallm
from conftest import cli_batch, subprocess_env

TEMPLATE = "Think of a real word containing both the letters {l1} and {l2}. Then, say 3 sentences which use the word."


def test_load_returns_model_and_tokenizer(qwen3_model):
    model, tokenizer = parallm.load(qwen3_model, max_num_seqs=8, num_kv_blocks=128)
    assert isinstance(model, parallm.LLM) and isinstance(tokenizer, parallm.Tokenizer)
    assert tokenizer is model.get_tokenizer()


def test_batch_generate_equals_cli_batch(cli, qwen3_model, llm, workdir, capsys):
    tokenizer = llm.get_tokenizer()
    pairs = [("A", "B"), ("C", "X"), ("Q", "Z"), ("E", "T"), ("M", "N"), ("O", "P")]
    prompts = [TEMPLATE.format(l1=a, l2=b) for a, b in pairs]
    # format_prompts=True (the default) is a user message through the chat template, as the seed workload.
    requests = [{"id": f"s{i}", "messages": [{"role": "user", "content": p}], "max_tokens": 20, "temperature": 0}
                for i, p in enumerate(prompts)]
    expected = cli_batch(cli, qwen3_model, requests, workdir)
    texts = parallm.batch_generate(llm, tokenizer, prompts, max_tokens=20, temp=0.0)
    assert texts == [expected[f"s{i}"]["text"] for i in range(len(prompts))]
    # Plain prompts, sampled with a seed.
    requests = [{"id": f"p{i}", "prompt": p, "max_tokens": 15, "temperature": 0.7, "top_p": 0.9, "seed": 42}
                for i, p in enumerate(prompts)]
    expected = cli_batch(cli, qwen3_model, requests, workdir)
    texts = parallm.batch_generate(llm, tokenizer, prompts, max_tokens=15, format_prompts=False, temp=0.7,
                                   top_p=0.9, seed=42)
    assert texts == [expected[f"p{i}"]["text"] for i in range(len(prompts))]
    # verbose: mlx_parallm's lines on stdout, progress on stderr.
    capsys.readouterr()
    texts = parallm.batch_generate(llm, tokenizer, prompts[:3], max_tokens=5, verbose=True, temp=0.0)
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0] == "=" * 10
    assert re.fullmatch(r"Prompt: \d+\.\d{3} tokens-per-sec", lines[1]), lines[1]
    assert re.fullmatch(r"Generation: \d+\.\d{3} tokens-per-sec", lines[2]), lines[2]
    assert lines[3] == "=" * 10 and lines[4] == "Prompt: " + prompts[0]
    assert "batch_generate: 3/3 prompts" in err


def test_generate_and_stream_generate(llm, capsys):
    tokenizer = llm.get_tokenizer()
    text = parallm.generate(llm, tokenizer, "Once upon a time", max_tokens=16, temp=0.0)
    same = llm.generate("Once upon a time", parallm.SamplingParams(temperature=0, max_tokens=16))[0].outputs[0]
    assert text == same.text
    assert "".join(parallm.stream_generate(llm, tokenizer, "Once upon a time", max_tokens=16)) == text
    capsys.readouterr()
    assert parallm.generate(llm, tokenizer, "Once upon a time", max_tokens=16, verbose=True) == text
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["=" * 10, "Prompt: Once upon a time"]
    assert lines[-3] == "=" * 10
    assert re.fullmatch(r"Prompt: \d+\.\d{3} tokens-per-sec", lines[-2])
    assert re.fullmatch(r"Generation: \d+\.\d{3} tokens-per-sec", lines[-1])
    pieces = []
    parallm.generate(llm, tokenizer, "Once upon a time", max_tokens=16, verbose=True,
                     formatter=lambda piece, prob: pieces.append((piece, prob)))
    assert "".join(p for p, _ in pieces) == text and all(0 < prob <= 1 for _, prob in pieces)
    # The repetition penalty is the engine's (whole context); a window is refused, not ignored.
    penalized = llm.generate("Once upon a time", parallm.SamplingParams(temperature=0, max_tokens=16,
                                                                        repetition_penalty=1.3))[0].outputs[0]
    assert parallm.generate(llm, tokenizer, "Once upon a time", max_tokens=16, repetition_penalty=1.3) == \
        penalized.text
    with pytest.raises(ValueError, match="repetition_context_size"):
        parallm.batch_generate(llm, tokenizer, ["x"], repetition_penalty=1.3, repetition_context_size=20)


def test_mlx_parallm_demo_runs_with_the_import_changed(qwen3_model, workdir):
    """mlx_parallm's demo.py, with `mlx_parallm` imports turned into `parallm` ones and its model name into the
    tiny model."""
    demo = textwrap.dedent("""\
        import mlx_parallm
        import importlib
        importlib.reload(mlx_parallm)

        from mlx_parallm.utils import load, generate, batch_generate
        import string
        import random

        # load model
        model, tokenizer = load("google/gemma-1.1-2b-it")

        capital_letters = string.ascii_uppercase
        distinct_pairs = [(a, b) for i, a in enumerate(capital_letters) for b in capital_letters[i + 1:]]

        num_prompts = 10
        prompt_template = "Think of a real word containing both the letters {l1} and {l2}. Then, say 3 sentences which use the word."
        prompts_raw = [prompt_template.format(l1=p[0], l2=p[1]) for p in random.sample(distinct_pairs, num_prompts)]
        prompt_template_2 = "Come up with a real English word containing both the letters {l1} and {l2}. No acronyms. Then, give 3 complete sentences which use the word."
        prompts_raw_2 = [prompt_template_2.format(l1=p[0], l2=p[1]) for p in random.sample(distinct_pairs, num_prompts)]

        response = batch_generate(model, tokenizer, prompts=prompts_raw+prompts_raw_2, max_tokens=100, verbose=True, temp=0.0)
        """)
    script = demo.replace("mlx_parallm", "parallm").replace('"google/gemma-1.1-2b-it"', repr(qwen3_model))
    path = pathlib.Path(workdir) / "demo.py"
    path.write_text(script)
    r = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=subprocess_env(), timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("Prompt: Think of a real word") == 10
    assert r.stdout.count("Prompt: Come up with a real English word") == 10
    assert "Generation:" in r.stdout and "tokens-per-sec" in r.stdout

