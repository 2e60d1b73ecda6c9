#!/usr/bin/env python3
"""The seed workload (mlx_parallm's benchmark: 325 chat prompts, 100 tokens each, greedy) run by `parallm batch`
and by parallm.batch_generate from Python on the same model and engine settings, interleaved, tokens/s side by
side: what the binding costs. Also checks that both produce the same texts.

Usage: python3 python/bench/seed_workload.py --cli build/src/cli/parallm --model MODEL [--repeats 3] [--threads 2]

The CLI's figure is its own ("N tokens generated in S s"): the batch from the first request queued to the last
finished. Python's is the whole batch_generate call, chat templating and tokenization of the prompts included.
"""
import argparse
import json
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]


def seed_requests():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "seed_workload.py")], capture_output=True,
                         text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def run_cli(args, requests, tmp: pathlib.Path):
    inp, out = tmp / "seed.jsonl", tmp / "seed-results.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in requests))
    if out.exists():
        out.unlink()
    r = subprocess.run([args.cli, "batch", "-m", args.model, "--input", str(inp), "--output", str(out),
                        "--max-num-seqs", str(args.max_num_seqs), "--num-kv-blocks", str(args.num_kv_blocks),
                        "-t", str(args.threads)], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"parallm batch failed: {r.stderr}")
    m = re.search(r"(\d+) tokens generated in ([\d.]+) s", r.stderr)
    tokens, seconds = int(m.group(1)), float(m.group(2))
    texts = {}
    for line in out.read_text().splitlines():
        rec = json.loads(line)
        texts[rec["id"]] = rec["text"]
    return tokens / seconds, [texts[r["id"]] for r in requests]


def run_python(model, tokenizer, prompts, max_tokens):
    import parallm
    before = model.metrics()["generation_tokens"]
    start = time.perf_counter()
    texts = parallm.batch_generate(model, tokenizer, prompts, max_tokens=max_tokens, temp=0.0)
    seconds = time.perf_counter() - start
    return (model.metrics()["generation_tokens"] - before) / seconds, texts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--max-num-seqs", type=int, default=64)
    ap.add_argument("--num-kv-blocks", type=int, default=2048)
    args = ap.parse_args()
    import parallm
    requests = seed_requests()
    prompts = [r["messages"][0]["content"] for r in requests]
    max_tokens = requests[0]["max_tokens"]
    model, tokenizer = parallm.load(args.model, max_num_seqs=args.max_num_seqs, num_kv_blocks=args.num_kv_blocks,
                                    threads=args.threads or None)
    cli_rates, py_rates = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            rate, cli_texts = run_cli(args, requests, pathlib.Path(tmp))
            cli_rates.append(rate)
            rate, py_texts = run_python(model, tokenizer, prompts, max_tokens)
            py_rates.append(rate)
            same = sum(a == b for a, b in zip(cli_texts, py_texts))
            print(f"run {i + 1}: parallm batch {cli_rates[-1]:.1f} tokens/s, batch_generate {py_rates[-1]:.1f} "
                  f"tokens/s; {same}/{len(prompts)} texts equal", flush=True)
            if same != len(prompts):
                sys.exit("the two runs gave different texts")
    print(f"| workload | parallm batch | parallm.batch_generate |\n|---|---|---|\n"
          f"| seed, {len(prompts)} prompts x {max_tokens} tokens | {statistics.median(cli_rates):.1f} tokens/s | "
          f"{statistics.median(py_rates):.1f} tokens/s |")


if __name__ == "__main__":
    main()
