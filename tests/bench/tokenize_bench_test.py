#!/usr/bin/env python3
"""`parallm bench tokenize` on small inputs: the JSON report has its fields, the figures follow from each other
(MB/s = bytes / seconds, ratios against the 1x row), sizes and token counts match the inputs (repeated 'a' and
repeated emoji tokenize to counts proportional to their length), and a missing reference is reported as
unavailable instead of failing. Speed itself is never asserted; node is not needed.

usage: tokenize_bench_test.py PARALLM_BINARY TOKENIZER_DIR"""
import json
import pathlib
import subprocess
import sys
import tempfile


def close(a, b):
    return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))


def run(binary, tokenizer, out, *extra):
    r = subprocess.run([binary, "bench", "tokenize", "--tokenizer", tokenizer, "--bytes", "20000", "--chars", "3000",
                        "--repeats", "2", "--output", str(out), *extra], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    print(r.stdout)
    return json.loads(out.read_text())


def main():
    binary, tokenizer = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        j = run(binary, tokenizer, tmp / "t.json")
        assert j["benchmark"] == "tokenize" and j["repeats"] == 2 and j["tokenizer_vocab"] > 0
        assert "reference" not in j and "speedup" not in j  # not asked for
        en = j["english"]
        assert en["bytes"] == 20000 and 0 < en["tokens"] < en["bytes"], en
        assert 0 < en["warm_s"] and 0 < en["cold_s"]
        assert close(en["warm_mb_per_s"], en["bytes"] / 1e6 / en["warm_s"])
        assert close(en["cold_mb_per_s"], en["bytes"] / 1e6 / en["cold_s"])
        assert close(en["warm_tokens_per_s"], en["tokens"] / en["warm_s"])

        cases = {c["name"]: c for c in j["long_inputs"]}
        assert list(cases) == ["no-spaces", "repeated-a", "repeated-emoji"], list(cases)
        assert cases["no-spaces"]["unit_bytes"] == 20000
        assert cases["repeated-a"]["unit_bytes"] == 3000
        assert cases["repeated-emoji"]["unit_bytes"] == 4 * 3000
        for c in cases.values():
            rows = c["rows"]
            assert [r["scale"] for r in rows] == [1, 2, 4], rows
            assert rows[0]["time_ratio"] == 1.0
            for r in rows:
                assert r["bytes"] == r["scale"] * c["unit_bytes"], r
                assert 0 < r["tokens"] <= r["bytes"] and r["warm_s"] > 0, r
                assert close(r["mb_per_s"], r["bytes"] / 1e6 / r["warm_s"]), r
                assert close(r["time_ratio"], r["warm_s"] / rows[0]["warm_s"]), r
        # A run of one repeated character merges into the same few tokens over and over: the count grows with
        # the length (off by at most a couple of tokens at the tail).
        for name in ["repeated-a", "repeated-emoji"]:
            t = [r["tokens"] for r in cases[name]["rows"]]
            assert abs(t[2] - 4 * t[0]) <= 4 and abs(t[1] - 2 * t[0]) <= 4, (name, t)

        # The reference is optional: with a script that does not exist it is reported as unavailable.
        j = run(binary, tokenizer, tmp / "r.json", "--reference", "--reference-script", str(tmp / "missing.mjs"))
        assert j["reference"]["available"] is False and j["reference"]["reason"], j["reference"]
        assert "speedup" not in j
        # With node and tokenizers.js installed, the reference's token count must equal parallm's (the speed
        # figures themselves are not checked).
        script = pathlib.Path(__file__).resolve().parents[1] / "tokenizer" / "node" / "bench.mjs"
        j = run(binary, tokenizer, tmp / "n.json", "--reference", "--reference-script", str(script))
        ref = j["reference"]
        if ref["available"]:
            assert ref["english"]["tokens_match"] and ref["english"]["tokens"] == j["english"]["tokens"], ref
            assert close(j["speedup"]["warm"], ref["english"]["warm_s"] / j["english"]["warm_s"])
        else:
            print("reference unavailable:", ref["reason"])
    print("bench tokenize report consistent")


if __name__ == "__main__":
    main()
