#!/usr/bin/env python3
"""--max-model-len and --chat-template on every command that takes them (generate, batch, tokenize, serve):
`generate -n 256` on a file declaring 128 tokens of context refuses naming the flag, and runs with
`--max-model-len 512` (warning that it is past the trained context); the server reports and enforces the
overridden context; a GGUF without a chat template (fixtures' llama-2-tiny-random.gguf) gets one from a file or
from text, in generate, batch, tokenize and serve alike; bad values are clear errors.

Usage: model_flags_test.py PARALLM_BINARY FIXTURES_DIR"""
import json
import pathlib
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from server_util import Server, check_error, run_tests  # noqa: E402

BINARY, FIXTURES = sys.argv[1], pathlib.Path(sys.argv[2])
LLAMA2 = FIXTURES / "models" / "llama-2-tiny-random" / "llama-2-tiny-random.gguf"  # no chat template
TEMPLATE = FIXTURES / "chat-templates" / "mistralai-Mistral-Nemo-Instruct-2407.jinja"
MESSAGES = [{"role": "user", "content": "Hello there"}]
RENDERED = "<s>[INST]Hello there[/INST]"  # MESSAGES through Mistral-Nemo's template, bos_token "<s>"
INLINE = "{% for m in messages %}### {{ m.role }} says:\n{{ m.content }}\n{% endfor %}### assistant says:\n"
TMP = None
TINY128 = None  # a model file declaring 128 tokens of context


def run(*args):
    return subprocess.run([BINARY, *map(str, args)], capture_output=True, text=True, timeout=120)


def chat_tokens(template):
    """MESSAGES through `template` and the Llama-2 tokenizer, as `parallm tokenize --chat` counts them."""
    messages = TMP / "messages.json"
    messages.write_text(json.dumps(MESSAGES))
    r = run("tokenize", "-m", LLAMA2, "--chat", messages, "--chat-template", template, "--json")
    assert r.returncode == 0, r.stderr
    return len(json.loads(r.stdout)["ids"])


def wait_for(predicate, timeout=10):
    deadline = time.time() + timeout
    while not predicate() and time.time() < deadline:
        time.sleep(0.05)
    return predicate()


def test_help_lists_the_flags():
    for command in ("serve", "generate", "batch", "tokenize"):
        r = run(command, "--help")
        assert r.returncode == 0 and "--chat-template" in r.stdout, (command, r.stdout)
    for command in ("serve", "generate", "logits", "batch", "bench"):
        r = run(command, "--help")
        assert r.returncode == 0 and "--max-model-len" in r.stdout, (command, r.stdout)


def test_generate_past_the_declared_context():
    r = run("generate", "-m", TINY128, "--prompt-ids", "1", "-n", "256", "--ignore-eos")
    assert r.returncode == 1, r.stderr
    assert "context of 128" in r.stderr and "--max-model-len 257" in r.stderr, r.stderr
    r = run("generate", "-m", TINY128, "--prompt-ids", "1", "-n", "256", "--ignore-eos", "--json",
            "--max-model-len", "512", "-t", "1")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["completion_tokens"] == 256 and out["finish_reason"] == "length", out
    assert "warning: --max-model-len 512 is more than the 128 tokens" in r.stderr, r.stderr
    # Lowering needs no warning, and is enforced.
    r = run("generate", "-m", TINY128, "--prompt-ids", "1", "-n", "100", "--max-model-len", "64")
    assert r.returncode == 1 and "context of 64" in r.stderr and "warning" not in r.stderr, r.stderr


def test_batch_max_model_len():
    requests = TMP / "long.jsonl"
    requests.write_text(json.dumps({"id": "a", "prompt_ids": [1, 2, 3], "max_tokens": 200, "ignore_eos": True}) + "\n")
    got = {}
    for extra in ([], ["--max-model-len", "512"]):
        out = TMP / f"long_out{len(extra)}.jsonl"
        r = run("batch", "-m", TINY128, "--input", requests, "--output", out, "-t", "1", "--kv-cache-gb", "0.05", *extra)
        assert r.returncode == 0, r.stderr
        got[len(extra)] = json.loads(out.read_text())
    # The declared 128 tokens end the request at 125 of its 200 tokens; with 512 it gets them all.
    assert got[0]["usage"]["completion_tokens"] == 125 and got[0]["finish_reason"] == "length", got[0]
    assert got[2]["usage"]["completion_tokens"] == 200, got[2]


def test_tokenize_chat_template():
    messages = TMP / "messages.json"
    messages.write_text(json.dumps(MESSAGES))
    r = run("tokenize", "-m", LLAMA2, "--chat", messages)
    assert r.returncode == 1 and "no chat template" in r.stderr and "--chat-template" in r.stderr, r.stderr
    r = run("tokenize", "-m", LLAMA2, "--chat", messages, "--chat-template", TEMPLATE)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(RENDERED + "\n"), r.stdout
    r = run("tokenize", "-m", LLAMA2, "--chat", messages, "--chat-template", INLINE)
    assert r.returncode == 0 and r.stdout.startswith("### user says:\nHello there\n### assistant says:\n"), r.stdout


def test_generate_and_batch_chat_template():
    want = chat_tokens(TEMPLATE)
    assert chat_tokens(INLINE) > want
    r = run("generate", "-m", LLAMA2, "--chat", "Hello there", "-n", "3", "--ignore-eos", "--json", "-t", "1")
    assert r.returncode == 1 and "--chat-template" in r.stderr, r.stderr
    r = run("generate", "-m", LLAMA2, "--chat", "Hello there", "-n", "3", "--ignore-eos", "--json", "-t", "1",
            "--chat-template", TEMPLATE)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["prompt_tokens"] == want, (r.stdout, want)
    requests = TMP / "chat.jsonl"
    requests.write_text(json.dumps({"id": "c", "messages": MESSAGES, "max_tokens": 3, "ignore_eos": True}) + "\n")
    out = TMP / "chat_out.jsonl"
    r = run("batch", "-m", LLAMA2, "--input", requests, "--output", out, "-t", "1", "--kv-cache-gb", "0.05",
            "--chat-template", TEMPLATE)
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["usage"]["prompt_tokens"] == want


def test_bad_values():
    cases = [
        (["generate", "-m", LLAMA2, "--chat", "x", "--chat-template", TMP / "missing.jinja"], "no such file"),
        (["generate", "-m", LLAMA2, "--chat", "x", "--chat-template", "{% if %}"], "chat template"),
        (["serve", "-m", LLAMA2, "--port", "0", "--chat-template", "{% for %}"], "chat template"),
    ]
    for args, fragment in cases:
        r = run(*args)
        assert r.returncode == 1 and "error:" in r.stderr and fragment in r.stderr, (args, r.returncode, r.stderr)
    r = run("generate", "-m", TINY128, "--max-model-len", "0")
    assert r.returncode != 0 and "--max-model-len" in r.stderr, r.stderr


def test_serve_max_model_len():
    long_prompt = list(range(1, 201))
    body = {"model": "tiny", "prompt": long_prompt, "max_tokens": 20, "ignore_eos": True}
    server = Server(BINARY, TINY128, kv_cache_gb=0.05)
    try:
        status, out = server.post("/v1/completions", body)
        check_error(status, out, 400, "prompt", "maximum context length is 128")
        status, _, models = server.request("GET", "/v1/models")
        assert json.loads(models)["data"][0]["max_model_len"] == 128
    finally:
        assert server.stop() == 0
    server = Server(BINARY, TINY128, "--max-model-len", "512", kv_cache_gb=0.05)
    try:
        assert any("context 512" in line for line in server.lines), server.lines
        assert wait_for(lambda: any("--max-model-len 512 is more than the 128" in line for line in server.stderr)), \
            server.stderr
        status, _, models = server.request("GET", "/v1/models")
        assert json.loads(models)["data"][0]["max_model_len"] == 512
        status, out = server.post("/v1/completions", body)
        assert status == 200, out
        assert out["usage"] == {"prompt_tokens": 200, "completion_tokens": 20, "total_tokens": 220,
                                "prompt_tokens_details": {"cached_tokens": 0}}, out["usage"]
    finally:
        assert server.stop() == 0


def test_serve_chat_template():
    chat = {"model": "tiny", "messages": MESSAGES, "max_tokens": 3, "ignore_eos": True}
    server = Server(BINARY, LLAMA2, kv_cache_gb=0.05)
    try:
        status, out = server.post("/v1/chat/completions", chat)
        check_error(status, out, 400, "messages", "--chat-template")
    finally:
        assert server.stop() == 0
    server = Server(BINARY, LLAMA2, "--chat-template", TEMPLATE, kv_cache_gb=0.05)
    try:
        status, out = server.post("/v1/chat/completions", chat)
        assert status == 200, out
        assert out["usage"]["prompt_tokens"] == chat_tokens(TEMPLATE), out
    finally:
        assert server.stop() == 0


def main():
    global TMP, TINY128
    with tempfile.TemporaryDirectory() as tmp:
        TMP = pathlib.Path(tmp)
        TINY128 = TMP / "tiny128.gguf"
        r = run("make-model", "--arch", "llama", "--dtype", "q8_0", "--context-length", "128", "-o", TINY128)
        assert r.returncode == 0, r.stderr
        info = run("info", "-m", TINY128)
        assert "context:  128 tokens" in info.stdout, info.stdout
        # A Q8_0 model's cache stores f16 unless told otherwise (--kv-cache-dtype auto).
        assert "KV per token in f16 (auto)" in info.stdout, info.stdout
        info = run("info", "-m", TINY128, "--kv-cache-dtype", "f32")
        assert "KV per token in f32\n" in info.stdout, info.stdout
        run_tests([test_help_lists_the_flags, test_generate_past_the_declared_context, test_batch_max_model_len,
                   test_tokenize_chat_template, test_generate_and_batch_chat_template, test_bad_values,
                   test_serve_max_model_len, test_serve_chat_template])


if __name__ == "__main__":
    main()
