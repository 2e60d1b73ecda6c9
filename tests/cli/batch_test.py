#!/usr/bin/env python3
"""`parallm batch`: results equal one-at-a-time `generate` runs (greedy), bad lines are reported with their line
number while the others run, and a second run resumes (skips finished ids, redoes a line cut short)."""
import json
import pathlib
import random
import subprocess
import sys
import tempfile


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True, errors="replace")


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        model = tmp / "tiny.gguf"
        r = run(binary, "make-model", "--arch", "qwen2", "--dtype", "q8_0", "-o", str(model))
        assert r.returncode == 0, r.stderr
        rng = random.Random(3)
        requests = [{"id": f"q{i}", "prompt_ids": [rng.randrange(500) for _ in range(rng.randrange(3, 40))],
                     "max_tokens": rng.randrange(1, 12), "ignore_eos": True} for i in range(24)]
        lines = [json.dumps(q) for q in requests]
        lines.insert(5, "{not json")
        lines.insert(9, json.dumps({"id": "bad-temp", "prompt_ids": [1], "temperature": -1}))
        inp = tmp / "in.jsonl"
        inp.write_text("\n".join(lines) + "\n")
        out = tmp / "out.jsonl"
        r = run(binary, "batch", "-m", str(model), "--input", str(inp), "--output", str(out), "--max-num-seqs", "8")
        assert r.returncode == 1, (r.returncode, r.stderr)  # bad lines make the exit code 1
        assert "in.jsonl:6: invalid JSON" in r.stderr, r.stderr
        assert "in.jsonl:10: temperature must be >= 0" in r.stderr, r.stderr
        results = {}
        for line in out.read_text().splitlines():
            rec = json.loads(line)
            results[rec["id"]] = rec
        errors = [rec for rec in results.values() if "error" in rec]
        assert len(errors) == 2, errors
        for q in requests:
            rec = results[q["id"]]
            g = run(binary, "generate", "-m", str(model), "--prompt-ids", ",".join(map(str, q["prompt_ids"])),
                    "-n", str(q["max_tokens"]), "--ignore-eos", "--json")
            assert g.returncode == 0, g.stderr
            solo = json.loads(g.stdout)
            assert rec["token_ids"] == solo["ids"], (q["id"], rec["token_ids"], solo["ids"])
            assert rec["usage"]["completion_tokens"] == len(solo["ids"])
            assert rec["usage"]["prompt_tokens"] == len(q["prompt_ids"])
            assert rec["finish_reason"] == "length"
        # Resume: drop the last 3 results and cut the one before in half, as an interruption would.
        kept = [l for l in out.read_text().splitlines() if '"error"' not in l]
        out.write_text("\n".join(kept[:-4]) + "\n" + kept[-4][: len(kept[-4]) // 2])  # no final newline
        r = run(binary, "batch", "-m", str(model), "--input", str(inp), "--output", str(out))
        assert f"resuming: {len(requests) - 4} requests already" in r.stderr, r.stderr
        ids = [json.loads(l)["id"] for l in out.read_text().splitlines()
               if l.startswith("{") and l.endswith("}") and '"error"' not in l]
        assert sorted(ids) == sorted(q["id"] for q in requests), ids
    print("batch: results equal solo runs; bad lines reported; resume works")


if __name__ == "__main__":
    main()
