#!/usr/bin/env python3
"""The CLI answers bad input with exit code 1 and an 'error:' line that says what is wrong; it never crashes."""
import os
import pathlib
import subprocess
import sys
import tempfile


def run(binary, *args):
    return subprocess.run([binary, *args], capture_output=True, text=True)


def main():
    binary, fixtures = sys.argv[1], pathlib.Path(sys.argv[2])
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        tiny = tmp / "tiny.gguf"
        r = run(binary, "make-model", "--arch", "llama", "--dtype", "q8_0", "-o", str(tiny))
        assert r.returncode == 0, r.stderr
        data = tiny.read_bytes()
        (tmp / "truncated.gguf").write_bytes(data[: len(data) // 2])
        (tmp / "garbage.gguf").write_bytes(b"GGUF" + b"\xff" * 64)
        folder = tmp / "badjson"
        folder.mkdir()
        (folder / "config.json").write_text("{not json")
        cases = [
            (["info", "-m", str(tmp / "missing.gguf")], "no such file"),
            (["info", "-m", str(tmp / "truncated.gguf")], "truncated.gguf"),
            (["info", "-m", str(tmp / "garbage.gguf")], "garbage.gguf"),
            (["info", "-m", str(folder)], "config.json"),
            (["info", "-m", str(fixtures / "tokenizers/gguf-vocab/ggml-vocab-llama-spm.gguf")], "no tensors"),
            (["generate", "-m", str(tiny), "--prompt-ids", "1,x"], "not a token id"),
            (["generate", "-m", str(tiny), "--prompt-ids", "1,99999"], "out of range"),
            (["generate", "-m", str(tiny), "--prompt-ids", "1", "-n", "100000"], "exceed the model's context"),
            (["generate", "-m", str(fixtures / "models/stories260K/stories260K.bin"), "-p", "hello"], "--tokenizer"),
            (["generate", "-m", str(tiny), "-p", "hi", "--prompt-ids", "1"], "not both"),
            (["tokenize", "hello"], "--model or --tokenizer"),
            (["tokenize", "--tokenizer", str(tmp / "nope.json"), "x"], "nope.json"),
            (["tokenize", "--tokenizer", str(fixtures / "tokenizers/qwen3"), "--chat", str(tmp / "none.json")], "none.json"),
            (["make-model", "--preset", "huge", "-o", str(tmp / "x.gguf")], "unknown preset"),
            (["make-model", "--dtype", "q5_1", "-o", str(tmp / "x.gguf")], "not a GGUF weight type"),
            (["make-model", "--format", "mlx", "--bits", "7", "-o", str(tmp / "x")], "bits"),
            (["make-model", "--preset", "qwen3-0.6b", "--arch", "llama", "-o", str(tmp / "x.gguf")], "only 'tiny'"),
            (["convert", str(fixtures / "models/stories260K/stories260K.bin"), "-o", str(tmp / "s.gguf")], "--tokenizer"),
            (["bench", "-m", str(tiny), "--speculative-model", str(fixtures / "models/llama-2-tiny-random/llama-2-tiny-random.gguf"),
              "--num-speculative-tokens", "2"], "must share the target's vocabulary"),
            (["bench", "-m", str(tiny), "--speculative-config", '{"model": "%s", "num_speculative_tokens": 2}'
              % (tmp / "no-draft.gguf")], "speculative draft model"),
        ]
        for args, fragment in cases:
            r = run(binary, *args)
            ok = r.returncode == 1 and "error:" in r.stderr and fragment in r.stderr
            print(("PASS" if ok else "FAIL"), " ".join(args[:2]), "->", r.returncode, r.stderr.strip()[:200])
            if not ok:
                failures.append((args, r.returncode, r.stderr))
        # Flags checked while the command line is parsed: CLI11's usage error (its own exit code, not a crash), with
        # a message naming the problem.
        usage_cases = [
            (["batch", "-m", str(tiny), "--speculative-config", '{"method": "eagle", "num_speculative_tokens": 2}'],
             "prompt lookup"),
            (["serve", "-m", str(tiny), "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 2, '
              '"prompt_lookup_min": 3, "prompt_lookup_max": 2}'], "prompt_lookup_max"),
            (["bench", "-m", str(tiny), "--speculative-config", '{"method": "ngram", "k": 2}'], "unknown field"),
            (["bench", "-m", str(tiny), "--speculative-config", "4"], "JSON object"),
            (["bench", "-m", str(tiny), "--speculative-model", str(tiny)], "requires --num-speculative-tokens"),
            (["serve", "-m", str(tiny), "--speculative-config", '{"method": "draft_model", "num_speculative_tokens": 2}'],
             "needs \"model\""),
            (["serve", "-m", str(tiny), "--kv-cache-dtype", "fp8"], "int8"),
            (["generate", "-m", str(tiny), "--kv-cache-dtype", "f64"],
             "not one of auto, f32 (float32), f16 (float16), bf16"),
        ]
        for args, fragment in usage_cases:
            r = run(binary, *args)
            ok = 0 < r.returncode < 128 and fragment in r.stderr
            print(("PASS" if ok else "FAIL"), " ".join(args[:2]), "->", r.returncode, r.stderr.strip()[:200])
            if not ok:
                failures.append((args, r.returncode, r.stderr))
    if failures:
        sys.exit(f"{len(failures)} CLI error case(s) failed")


if __name__ == "__main__":
    main()
