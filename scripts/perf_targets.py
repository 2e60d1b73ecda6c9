#!/usr/bin/env python3
"""Measures every row of the performance targets (issue 7, docs/PERFORMANCE.md) with `parallm bench` commands,
for one parallm binary or for a new one beside a baseline, runs interleaved (A B A B ...) so that machine noise
hits both alike, and prints a Markdown table of medians with the exact commands.

Usage: scripts/perf_targets.py NEW_PARALLM [--baseline OLD_PARALLM] [--repeats 3] [--rows decode,aggregate,...]
                               [--json out.json]
Models are the 0.5B benchmark shape (random weights), written once by `parallm make-model` into a scratch folder
(--scratch, default /tmp/parallm-perf): GGUF Q8_0 and Q4_K_M files, MLX 8-bit and 4-bit folders.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

THREADS = "2"


def bench(binary, args, out):
    """Runs `parallm bench ...` with --output; returns the JSON."""
    cmd = [binary, "bench", *args, "-t", THREADS, "--output", out]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)


def throughput(model, prompts, concurrency, input_len, max_tokens):
    return ["-m", model, "--prompts", str(prompts), "--concurrency", str(concurrency), "--input-len", str(input_len),
            "--max-tokens", str(max_tokens)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_streams(binary, model, out):
    """`parallm serve` + `parallm bench serve`, 32 concurrent streams of ~100-token prompts and 64 output tokens."""
    port = free_port()
    server = subprocess.Popen([binary, "serve", "-m", model, "--port", str(port), "--threads", THREADS,
                               "--max-num-seqs", "64"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 300
        for line in server.stdout:
            if "ready" in line:
                break
            if time.time() > deadline:
                raise RuntimeError("the server did not become ready")
        cmd = [binary, "bench", "serve", "--base-url", f"http://127.0.0.1:{port}", "--num-prompts", "64",
               "--max-concurrency", "32", "--random-input-len", "100", "--random-output-len", "64", "--ignore-eos",
               "--output", out]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(out) as f:
            return json.load(f)
    finally:
        stop(server)


def stop(server):
    """SIGTERM, and SIGKILL if the server has not exited 30 s later."""
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()


def rows(mlx8, mlx4, q8, q4):
    """(key, what, target, command args or callable, how to read the figure, unit)."""
    decode = lambda j: j["runs"][0]["decode_tokens_per_s"]
    prefill = lambda j: j["runs"][0]["prompt_tokens"] / j["runs"][0]["ttft_mean_s"]
    return [
        ("decode", "single-sequence decode, Q8_0", ">= 24", throughput(q8, 1, 1, 128, 64), decode, "tok/s"),
        ("decode", "single-sequence decode, MLX 8-bit", ">= 24", throughput(mlx8, 1, 1, 128, 64), decode, "tok/s"),
        ("aggregate", "aggregate decode, 32 sequences, Q8_0", ">= 200", throughput(q8, 32, 32, 128, 64), decode, "tok/s"),
        ("aggregate", "aggregate decode, 64 sequences, Q8_0", ">= 200", throughput(q8, 64, 64, 128, 64), decode, "tok/s"),
        ("aggregate", "aggregate decode, 32 sequences, MLX 8-bit", ">= 200", throughput(mlx8, 32, 32, 128, 64), decode,
         "tok/s"),
        ("prefill", "prefill, 512-token prompt, Q8_0", ">= 220", throughput(q8, 1, 1, 512, 1), prefill, "tok/s"),
        ("http", "over HTTP, 32 streams, 100-token prompts, 64 out, Q8_0", ">= 150", ("http", q8),
         lambda j: j["output_throughput"], "tok/s"),
        ("prefix", "TTFT, 1,000-token cached prefix vs cold, Q8_0", ">= 20x",
         ["prefix-cache", "-m", q8, "--input-len", "1000", "--max-tokens", "1"], lambda j: j["ttft_speedup"], "x"),
        ("4bit", "single-sequence decode, Q4_K_M", ">= 1.6x Q8_0", throughput(q4, 1, 1, 128, 64), decode, "tok/s"),
        ("4bit", "single-sequence decode, MLX 4-bit", ">= 1.6x MLX 8-bit", throughput(mlx4, 1, 1, 128, 64), decode,
         "tok/s"),
    ]


def interleaved(contenders, measure, repeats, what, errors):
    """{name: figures}: measure(contender) `repeats` times for each (name, contender), the order alternating (A B,
    then B A) so that the machine's drift hits all alike. A run that raises one of `errors` is reported and left out."""
    figures = {name: [] for name, _ in contenders}
    for i in range(repeats):
        for name, contender in (contenders if i % 2 == 0 else list(reversed(contenders))):
            try:
                figures[name].append(measure(contender))
            except errors as e:
                print(f"{what}: {name} failed: {e}", file=sys.stderr)
    return figures


def add_medians(row, figures):
    """row[name] = the median of name's figures (None if all failed), row[name + "_runs"] = the figures."""
    for name, values in figures.items():
        row[name] = statistics.median(values) if values else None
        row[name + "_runs"] = values


def describe(args):
    if isinstance(args, tuple):
        return (f"parallm serve -m {args[1]} --threads 2 --max-num-seqs 64 & parallm bench serve --num-prompts 64 "
                "--max-concurrency 32 --random-input-len 100 --random-output-len 64 --ignore-eos")
    return "parallm bench " + " ".join(args) + " -t 2"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("--baseline")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rows", default="decode,aggregate,prefill,http,prefix,4bit")
    ap.add_argument("--scratch", default=os.path.join(tempfile.gettempdir(), "parallm-perf"))
    ap.add_argument("--json")
    a = ap.parse_args()
    wanted = set(a.rows.split(","))
    os.makedirs(a.scratch, exist_ok=True)
    mlx = {}
    for bits in (8, 4):
        path = os.path.join(a.scratch, f"qwen2.5-0.5b-mlx{bits}")
        if not os.path.exists(os.path.join(path, "config.json")):
            shutil.rmtree(path, ignore_errors=True)
            subprocess.run([a.binary, "make-model", "--preset", "qwen2.5-0.5b", "--format", "mlx", "--bits", str(bits),
                            "-o", path], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        mlx[bits] = path
    # GGUF files too (written once; a synthetic:... spec would rebuild the model in every run).
    gguf = {}
    for dtype in ("q8_0", "q4_k_m"):
        path = os.path.join(a.scratch, f"qwen2.5-0.5b-{dtype}.gguf")
        if not os.path.exists(path):
            subprocess.run([a.binary, "make-model", "--preset", "qwen2.5-0.5b", "--dtype", dtype, "-o", path],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        gguf[dtype] = path
    binaries = [("new", a.binary)] + ([("baseline", a.baseline)] if a.baseline else [])
    results = []
    out = os.path.join(a.scratch, "out.json")
    for key, what, target, args, read, unit in rows(mlx[8], mlx[4], gguf["q8_0"], gguf["q4_k_m"]):
        if key not in wanted:
            continue
        figures = interleaved(
            binaries, lambda binary: read(http_streams(binary, args[1], out) if isinstance(args, tuple)
                                          else bench(binary, args, out)),
            a.repeats, what, (subprocess.CalledProcessError, RuntimeError, KeyError, OSError))
        row = {"what": what, "target": target, "unit": unit, "command": describe(args)}
        add_medians(row, figures)
        results.append(row)
        print(f"{what}: " + ", ".join(f"{n} {row[n]:.1f}" if row[n] is not None else f"{n} failed"
                                      for n, _ in binaries), file=sys.stderr, flush=True)
    head = "| target | figure | " + " | ".join(n for n, _ in binaries) + " |"
    print(head)
    print("|" + "---|" * (2 + len(binaries)))
    for r in results:
        cells = [f"{r[n]:.1f} {r['unit']}" if r[n] is not None else "failed" for n, _ in binaries]
        print(f"| {r['what']} | {r['target']} | " + " | ".join(cells) + " |")
    print("\nCommands (median of %d interleaved runs each, 2 threads):" % a.repeats)
    for r in results:
        print(f"- {r['what']}: `{r['command']}`")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
