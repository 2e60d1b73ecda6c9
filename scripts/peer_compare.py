#!/usr/bin/env python3
"""Measures parallm against llama.cpp on one GGUF file in one run and prints the Markdown table of issue 19's
workloads with the ratio per row: decode of 1, 32 and 64 sequences, prefill of one 512-token prompt, 32 HTTP
streams, and 32 sequences of 1,000-token prompts (--rows prompts) and, with --rows long, also decode at 2,000-token
contexts (with --rows shared, that decode with llama.cpp on one shared prompt: an easier case for it that runs in
minutes).

Usage: scripts/peer_compare.py PARALLM LLAMA_CPP_BIN_DIR [--model FILE.gguf | --preset P --quant Q] [--repeats 2]
       [--rows ...] [--kv-cache-dtype auto|f16|bf16|int8] [--json F]

LLAMA_CPP_BIN_DIR holds llama-batched-bench, llama-bench, llama-server and llama-quantize, built from llama.cpp's
source outside this repository (e.g. `cmake -S llama.cpp -B build -DLLAMA_CURL=OFF -DGGML_NATIVE=ON && cmake --build
build --target llama-batched-bench llama-bench llama-server llama-quantize`); parallm neither vendors nor needs it.
Without --model the file is the 0.5B benchmark shape (random weights, Qwen3's real vocabulary from the fixtures, so
that both servers stream text: llama.cpp prints nothing for the padding tokens of parallm's built-in vocabulary)
written in f32 by `parallm make-model` and quantized to Q8_0 by llama-quantize, so both engines read a file that
parallm did not write; `--preset llama-3.2-1b` or `llama-3.2-3b` (Llama 3's vocabulary) and `--quant Q4_K_M` write
the larger shapes and other types the same way. The two engines alternate row by row (A B, then B A), and each
figure is the median of --repeats runs: the machine's speed drifts over an hour, so only the ratios of one run mean
anything. llama.cpp runs with its default KV cache, f16; parallm with --kv-cache-dtype (default auto: f16 for the
quantized files compared here, the same cache as the peer's).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perf_targets import add_medians, free_port, interleaved, stop  # noqa: E402

THREADS = "2"


def run(cmd, timeout=3600):
    """Runs a command; returns its stdout (stderr folded in), raising with the tail of the output on failure."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-2000:]}")
    return p.stdout


class Llama:
    """llama.cpp's benchmark tools, run the way issue 19 quotes them (2 threads, flash attention)."""

    def __init__(self, bin_dir, model):
        self.bin_dir, self.model = bin_dir, model

    def tool(self, name):
        return os.path.join(self.bin_dir, name)

    def batched(self, npp, ntg, npl, shared=False):
        """llama-batched-bench for one shape: (aggregate decode tokens/s, total tokens/s, decode tokens/s with no
        prompt in the steps: the same as the first, since llama-batched-bench runs every prompt before decoding).
        shared: one prompt for all sequences (-pps), its cells shared in the unified cache."""
        ctx = (npp if shared else npl * npp) + npl * ntg + 64
        out = run([self.tool("llama-batched-bench"), "-m", self.model, "-t", THREADS, "-fa", "-c", str(ctx),
                   "-npp", str(npp), "-ntg", str(ntg), "-npl", str(npl), "--output-format", "jsonl"]
                  + (["-pps"] if shared else []))
        rows = [json.loads(line) for line in out.splitlines() if line.startswith("{") and '"speed_tg"' in line]
        if not rows:
            raise RuntimeError(f"no result line from llama-batched-bench:\n{out[-2000:]}")
        return rows[-1]["speed_tg"], rows[-1]["speed"], rows[-1]["speed_tg"]

    def prefill(self, n):
        out = run([self.tool("llama-bench"), "-m", self.model, "-t", THREADS, "-fa", "1", "-p", str(n), "-n", "0",
                   "-r", "1", "-o", "json"])
        return json.loads(out[out.index("["):])[0]["avg_ts"]

    def server(self, port, slots, ctx_per_slot):
        return subprocess.Popen([self.tool("llama-server"), "-m", self.model, "-t", THREADS, "-fa", "-np", str(slots),
                                 "-c", str(slots * ctx_per_slot), "--port", str(port), "--host", "127.0.0.1"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class Parallm:
    """parallm's bench commands on the same file and shapes."""

    def __init__(self, binary, model, scratch, kv_cache_dtype="auto"):
        self.binary, self.model, self.out = binary, model, os.path.join(scratch, "parallm.json")
        self.kv = ["--kv-cache-dtype", kv_cache_dtype]
        self.kv_stored = kv_cache_dtype  # what the cache stored, as `bench` reports it (auto resolved)

    def bench(self, prompts, input_len, max_tokens, runs=1):
        run([self.binary, "bench", "-m", self.model, "--prompts", str(prompts), "--concurrency", str(prompts),
             "--input-len", str(input_len), "--max-tokens", str(max_tokens), "-t", THREADS, "--runs", str(runs),
             "--output", self.out] + self.kv)
        with open(self.out) as f:
            report = json.load(f)
        self.kv_stored = report.get("kv_cache_dtype", self.kv_stored)
        return report["runs"][-1]

    def batched(self, npp, ntg, npl, shared=False):
        # `shared` is the peer's: parallm always runs npl distinct prompts (the harder case for it).
        r = self.bench(npl, npp, ntg)
        # The third figure: tokens/s over the steps that carry no prompt chunk (what llama-batched-bench's decode is).
        return r["decode_tokens_per_s"], r["total_tokens_per_s"], r.get("decode_only_step_tokens_per_s", 0.0)

    def prefill(self, n):
        # The second of two requests (each a fresh prompt), as llama-bench times after its warm-up run in a context
        # whose cache it cleared at creation: parallm's cache pages fault in on their first write, which on a
        # fragmented machine (huge pages compacted on demand) cost the first request 0-400 ms of its ~400.
        r = self.bench(1, n, 1, runs=2)
        return r["prompt_tokens"] / r["ttft_mean_s"]

    def server(self, port, slots, ctx_per_slot):
        return subprocess.Popen([self.binary, "serve", "-m", self.model, "--port", str(port), "--threads", THREADS,
                                 "--max-num-seqs", str(slots)] + self.kv,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def http_streams(engine, client, scratch, streams=32, input_len=100, output_len=64):
    """Output tokens/s of `parallm bench serve` (the same client for both) against the engine's server."""
    port = free_port()
    server = engine.server(port, streams, input_len + output_len + 64)
    out = os.path.join(scratch, "serve.json")
    try:
        deadline = time.time() + 600
        while True:  # both servers answer /health with 200 once the model is loaded
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10):
                    break
            except OSError:
                if server.poll() is not None or time.time() > deadline:
                    raise RuntimeError("the server did not become ready")
                time.sleep(1)
        run([client, "bench", "serve", "--base-url", f"http://127.0.0.1:{port}", "--num-prompts", str(2 * streams),
             "--max-concurrency", str(streams), "--random-input-len", str(input_len), "--random-output-len",
             str(output_len), "--ignore-eos", "--output", out])
        with open(out) as f:
            return json.load(f)["output_throughput"]
    finally:
        stop(server)


def rows(client, scratch):
    """(key, workload, how to measure it on an engine, unit). Each measure returns one figure."""
    return [
        ("decode", "decode, 1 sequence, 128-token prompt, 128 out", lambda e: e.batched(128, 128, 1)[0], "tok/s"),
        ("aggregate", "aggregate decode, 32 sequences, 128-token prompts, 128 out",
         lambda e: e.batched(128, 128, 32)[0], "tok/s"),
        ("aggregate", "aggregate decode, 64 sequences, same", lambda e: e.batched(128, 128, 64)[0], "tok/s"),
        # The same shapes counted as llama-batched-bench counts its decode (speed_tg: only steps without a prompt):
        # parallm's `decode_tokens_per_s` above is stricter, with the other requests' prefill chunks in the early steps.
        ("pure", "aggregate decode, 32 sequences, steps without prefill", lambda e: e.batched(128, 128, 32)[2], "tok/s"),
        ("pure", "aggregate decode, 64 sequences, steps without prefill", lambda e: e.batched(128, 128, 64)[2], "tok/s"),
        ("prefill", "prefill, one 512-token prompt", lambda e: e.prefill(512), "tok/s"),
        ("http", "HTTP, 32 streams, 100-token prompts, 64 out (output tokens/s)",
         lambda e: http_streams(e, client, scratch), "tok/s"),
        ("prompts", "32 sequences x 1,000-token prompts, 128 out: total tokens/s",
         lambda e: e.batched(1000, 128, 32)[1], "tok/s"),
        ("long", "decode in steps without prefill, 32 sequences at 2,000-token contexts, 64 out",
         lambda e: e.batched(2000, 64, 32)[2], "tok/s"),
        # The row above costs llama.cpp 40-80 minutes on the Sapphire Rapids kind, ~18 on the AMD one (every prompt
        # token attends over the whole unified cache, masked). This one gives it one shared prompt (-pps): it then
        # decodes over ~4,000 cells a step, not ~64,000, which can only favour it, while parallm still decodes 32
        # distinct 2,000-token contexts.
        ("shared", "decode in steps without prefill at 2,000-token contexts, 32 sequences, 64 out "
         "(llama.cpp: one shared prompt, -pps; parallm: 32 distinct prompts)",
         lambda e: e.batched(2000, 64, 32, shared=True)[2], "tok/s"),
    ]


# The vocabulary each preset's released model has (from the fixtures), so that both servers stream real text.
PRESET_TOKENIZERS = {"qwen2.5-0.5b": "qwen3", "llama-3.2-1b": "llama3", "llama-3.2-3b": "llama3"}


def benchmark_file(parallm, llama_bin, preset, tokenizer, quant, scratch):
    """The preset's shape in f32 from parallm, quantized by llama.cpp's own tool (Q8_0, Q4_K_M, ...)."""
    out = os.path.join(scratch, f"{preset}-{os.path.basename(tokenizer)}-vocab-{quant.lower()}-by-llama-quantize.gguf")
    if not os.path.exists(out):
        f32 = os.path.join(scratch, f"{preset}-f32.gguf")
        run([parallm, "make-model", "--preset", preset, "--tokenizer", tokenizer, "--dtype", "f32", "-o", f32])
        run([os.path.join(llama_bin, "llama-quantize"), f32, out, quant])
        os.remove(f32)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("parallm")
    ap.add_argument("llama_bin", help="folder with llama-batched-bench, llama-bench, llama-server, llama-quantize")
    ap.add_argument("--model", help="a GGUF file both engines read (default: the 0.5B shape in Q8_0, see above)")
    fixtures = os.environ.get("PARALLM_FIXTURES") or os.path.join(os.path.dirname(__file__), "..", "..", "shared")
    ap.add_argument("--preset", default="qwen2.5-0.5b", choices=sorted(PRESET_TOKENIZERS),
                    help="without --model: the shape to write (default: the 0.5B benchmark shape)")
    ap.add_argument("--quant", default="Q8_0", help="without --model: llama-quantize's type (default Q8_0; e.g. Q4_K_M)")
    ap.add_argument("--tokenizer", help="without --model: the vocabulary (default: the fixtures' tokenizer of the "
                    "preset's family: Qwen3's for the Qwen shape, Llama 3's for the Llama ones)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--rows", default="decode,aggregate,prefill,http",
                    help="comma list; 'prompts' adds 32 x 1,000-token prompts (~5 minutes), 'long' those and the "
                    "2,000-token decode (~20 minutes), 'shared' the 2,000-token decode with the peer on one "
                    "shared prompt (minutes instead of an hour), 'pure' the aggregate rows counted as the peer counts "
                    "them (steps without prefill)")
    ap.add_argument("--kv-cache-dtype", default="auto", choices=["auto", "f32", "f16", "bf16", "int8"],
                    help="parallm's KV cache (llama.cpp keeps its default, f16): auto (f16 for a quantized file), f32, "
                    "f16, bf16 or int8")
    ap.add_argument("--scratch", default=os.path.join(tempfile.gettempdir(), "parallm-peer"))
    ap.add_argument("--json")
    a = ap.parse_args()
    for tool in ("llama-batched-bench", "llama-bench", "llama-server") + (() if a.model else ("llama-quantize",)):
        if not os.access(os.path.join(a.llama_bin, tool), os.X_OK):
            sys.exit(f"error: {tool} is not in {a.llama_bin}: build it from llama.cpp's source (see --help)")
    os.makedirs(a.scratch, exist_ok=True)
    tokenizer = a.tokenizer or os.path.join(fixtures, "tokenizers", PRESET_TOKENIZERS[a.preset])
    model = a.model or benchmark_file(a.parallm, a.llama_bin, a.preset, tokenizer, a.quant, a.scratch)
    parallm = Parallm(a.parallm, model, a.scratch, a.kv_cache_dtype)
    engines = [("llama.cpp", Llama(a.llama_bin, model)), ("parallm", parallm)]
    wanted = set(a.rows.split(","))
    if "long" in wanted:
        wanted.add("prompts")
    results = []
    for key, what, measure, unit in rows(a.parallm, a.scratch):
        if key not in wanted:
            continue
        figures = interleaved(engines, measure, a.repeats, what,
                              (RuntimeError, OSError, KeyError, ValueError, subprocess.TimeoutExpired))
        row = {"workload": what, "unit": unit}
        add_medians(row, figures)
        results.append(row)
        print(f"{what}: " + ", ".join(f"{n} {row[n]:.1f}" if row[n] is not None else f"{n} failed"
                                      for n, _ in engines), file=sys.stderr, flush=True)
    print("| workload | llama.cpp | parallm | ratio |")
    print("|---|---|---|---|")
    for r in results:
        cell = lambda v: f"{v:.1f}" if v is not None else "failed"
        ratio = f"{r['parallm'] / r['llama.cpp']:.2f}x" if r["parallm"] and r["llama.cpp"] else "-"
        print(f"| {r['workload']} | {cell(r['llama.cpp'])} | {cell(r['parallm'])} | {ratio} |")
    print(f"\n{os.path.basename(model)}, {THREADS} threads, median of {a.repeats} alternating runs per engine; "
          f"parallm's KV cache: {parallm.kv_stored}, llama.cpp's: f16.")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": model, "rows": results}, f, indent=1)


if __name__ == "__main__":
    main()
