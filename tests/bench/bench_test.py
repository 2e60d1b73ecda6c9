#!/usr/bin/env python3
"""`parallm bench` on a tiny synthetic model: the JSON reports have their fields and the figures add up
(tokens counted equal tokens generated, hit counts match the scenario, speedups follow from the printed
rates). Speed itself is never asserted."""
import json
import pathlib
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET


def bench(binary, out, *args):
    r = subprocess.run([binary, "bench", *args, "--output", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    print(r.stdout)
    return json.loads(out.read_text())


def close(a, b):
    return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))


def main():
    binary = sys.argv[1]
    model = ["--model", "synthetic:tiny", "--kv-cache-gb", "0.05"]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        t = bench(binary, tmp / "t.json", *model, "--prompts", "6", "--input-len", "20", "--max-tokens", "7",
                  "--concurrency", "4", "--runs", "2")
        assert t["benchmark"] == "throughput" and len(t["runs"]) == 2
        for run in t["runs"]:
            assert run["requests"] == 6 and run["prompt_tokens"] == 120 and run["generated_tokens"] == 42, run
            assert close(run["generation_tokens_per_s"], run["generated_tokens"] / run["seconds"])
            assert close(run["total_tokens_per_s"], 162 / run["seconds"])
            assert run["ttft_mean_s"] > 0 and run["tpot_mean_s"] > 0
            assert run["decode_only_step_tokens_per_s"] > 0  # steps of decode alone happen (4 requests at once)
        assert t["peak_memory_bytes"] > 0

        b = bench(binary, tmp / "b.json", "batching", *model, "--input-len", "16", "--max-tokens", "5",
                  "--max-concurrency", "8", "--chart", str(tmp / "b.svg"))
        assert [row["concurrency"] for row in b["sweep"]] == [1, 2, 4, 8]
        base = b["sweep"][0]["generation_tokens_per_s"]
        for row in b["sweep"]:
            assert row["requests"] == row["concurrency"] and row["generated_tokens"] == 5 * row["concurrency"], row
            assert close(row["speedup"], row["generation_tokens_per_s"] / base), row
        # --chart: generation and aggregate decode tok/s, one point per concurrency, values as in the JSON.
        svg = ET.parse(tmp / "b.svg").getroot()
        ns = "{http://www.w3.org/2000/svg}"
        points = [e for e in svg.iter(ns + "circle") if e.get("class") == "point"]
        assert len(points) == 2 * len(b["sweep"]), len(points)
        gen = [float(p.get("data-value")) for p in points if p.get("data-series").startswith("generation")]
        assert [float(p.get("data-x")) for p in points[:4]] == [1, 2, 4, 8]
        assert all(abs(g - row["generation_tokens_per_s"]) <= 1e-3 * max(1, g) for g, row in zip(gen, b["sweep"]))
        texts = " ".join("".join(t.itertext()) for t in svg.iter(ns + "text"))
        assert "synthetic:tiny" in texts and "tokens/s" in texts and "concurrent requests" in texts

        p = bench(binary, tmp / "p.json", "prefix-cache", *model, "--input-len", "64", "--max-tokens", "2")
        assert [s["result"] for s in p["steps"]] == ["MISS", "HIT", "MISS", "HIT"], p["steps"]
        assert p["hits"] == 2 and p["misses"] == 2 and p["partial_hits"] == 0
        assert p["tokens_saved"] == sum(s["cached_tokens"] for s in p["steps"]) == 2 * 63  # all but the last token
        assert close(p["hit_rate"], p["tokens_saved"] / (4 * 64))

        g = bench(binary, tmp / "g.json", "paged-cache", *model, "--max-tokens", "3")
        off, on = g["modes"]
        assert not off["prefix_sharing"] and on["prefix_sharing"]
        assert off["blocks_shared"] == 0 and off["tokens_saved"] == 0 and off["cached_tokens"] == 0
        assert on["tokens_saved"] == on["cached_tokens"] > 0 and on["blocks_shared"] > 0
        assert on["blocks_allocated"] < off["blocks_allocated"]
        assert off["generated_tokens"] == on["generated_tokens"] == 60
        d = subprocess.run([binary, "bench", "detok", "--tokenizer", sys.argv[2], "--output", str(tmp / "d.json")],
                           capture_output=True, text=True)
        assert d.returncode == 0, d.stderr
        dj = json.loads((tmp / "d.json").read_text())
        rows = dj["rows"]
        assert [r["tokens"] for r in rows] == [8, 100, 500, 1000, 2000, 4000], rows
        assert all(r["exact"] for r in rows), rows
        assert dj["construct_us"] >= 0
    print("bench reports consistent")


if __name__ == "__main__":
    main()
