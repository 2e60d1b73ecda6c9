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
        # Drafts from a draft model (the model drafting for itself) change the work, not the tokens: in batch and in
        # generate.
        spec_out = tmp / "spec.jsonl"
        r = run(binary, "batch", "-m", str(model), "--input", str(inp), "--output", str(spec_out), "--max-num-seqs", "8",
                "--speculative-model", str(model), "--num-speculative-tokens", "3")
        assert r.returncode == 1, (r.returncode, r.stderr)
        spec = [json.loads(line) for line in spec_out.read_text().splitlines()]
        assert len(spec) == len(results)
        for rec in spec:
            assert rec.get("token_ids") == results[rec["id"]].get("token_ids"), rec["id"]
        q = requests[0]
        g = run(binary, "generate", "-m", str(model), "--prompt-ids", ",".join(map(str, q["prompt_ids"])),
                "-n", str(q["max_tokens"]), "--ignore-eos", "--json", "--speculative-model", str(model),
                "--num-speculative-tokens", "3")
        assert g.returncode == 0, g.stderr
        assert json.loads(g.stdout)["ids"] == results[q["id"]]["token_ids"]
        assert "draft tokens accepted" in g.stderr, g.stderr
        # Resume: drop the last 3 results and cut the one before in half, as an interruption would.
        kept = [l for l in out.read_text().splitlines() if '"error"' not in l]
        out.write_text("\n".join(kept[:-4]) + "\n" + kept[-4][: len(kept[-4]) // 2])  # no final newline
        r = run(binary, "batch", "-m", str(model), "--input", str(inp), "--output", str(out))
        assert f"resuming: {len(requests) - 4} requests already" in r.stderr, r.stderr
        ids = [json.loads(l)["id"] for l in out.read_text().splitlines()
               if l.startswith("{") and l.endswith("}") and '"error"' not in l]
        assert sorted(ids) == sorted(q["id"] for q in requests), ids
        # Text prompts and chat messages through a model with a real tokenizer and chat template (Qwen3's).
        q3 = tmp / "q3.gguf"
        r = run(binary, "make-model", "--arch", "qwen3", "--dtype", "q8_0", "--tokenizer", sys.argv[2], "-o", str(q3))
        assert r.returncode == 0, r.stderr
        text_in = tmp / "text.jsonl"
        text_in.write_text("\n".join([
            json.dumps({"id": "p", "prompt": "Hello world", "max_tokens": 5, "ignore_eos": True}),
            json.dumps({"id": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5, "ignore_eos": True}),
        ]) + "\n")
        text_out = tmp / "text_out.jsonl"
        r = run(binary, "batch", "-m", str(q3), "--input", str(text_in), "--output", str(text_out))
        assert r.returncode == 0, r.stderr
        got = {json.loads(l)["id"]: json.loads(l) for l in text_out.read_text().splitlines()}
        g = run(binary, "generate", "-m", str(q3), "-p", "Hello world", "-n", "5", "--ignore-eos", "--json")
        assert g.returncode == 0, g.stderr
        solo = json.loads(g.stdout)
        assert got["p"]["token_ids"] == solo["ids"] and got["p"]["text"] == solo["text"], (got["p"], solo)
        assert got["p"]["usage"]["prompt_tokens"] == solo["prompt_tokens"] == 2
        # "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n" is 9 Qwen3 tokens
        assert got["m"]["usage"]["prompt_tokens"] == 9, got["m"]
        # The tiny model made without --tokenizer has no chat template: messages are a reported error.
        no_tmpl = tmp / "no_tmpl.jsonl"
        no_tmpl.write_text(json.dumps({"id": "m", "messages": [{"role": "user", "content": "Hi"}]}) + "\n")
        r = run(binary, "batch", "-m", str(model), "--input", str(no_tmpl), "--output", str(tmp / "x.jsonl"))
        assert r.returncode == 1 and "no chat template" in r.stderr, r.stderr
        # Tools: a scripted model (make-model --script, Qwen3's template: the hermes parser) writes a call after a
        # named tool_choice's opening, and "It is sunny in Paris." after the assistant header.
        scripted = tmp / "scripted"
        r = run(binary, "make-model", "--arch", "qwen3", "--hidden", "64", "--layers", "1", "--heads", "2",
                "--kv-heads", "1", "--head-dim", "32", "--ffn", "64", "--format", "hf", "--dtype", "f16",
                "--tokenizer", sys.argv[2], "--script", '"arguments": =>{"city": "Paris"}}</tool_call><|im_end|>',
                "--script", "assistant\n=>It is sunny in Paris.<|im_end|>", "-o", str(scripted))
        assert r.returncode == 0, r.stderr
        tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
        ask = [{"role": "user", "content": "Weather in Paris?"}]
        tools_in = tmp / "tools.jsonl"
        tools_in.write_text("\n".join(json.dumps(q) for q in [
            {"id": "named", "messages": ask, "tools": tools, "max_tokens": 16,
             "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
            {"id": "auto", "messages": ask, "tools": tools, "max_tokens": 16},
            {"id": "bad", "messages": ask, "tools": tools, "tool_choice": "sometimes"},
        ]) + "\n")
        tools_out = tmp / "tools_out.jsonl"
        r = run(binary, "batch", "-m", str(scripted), "--input", str(tools_in), "--output", str(tools_out),
                "--kv-cache-gb", "0.05")
        assert r.returncode == 1 and "tools.jsonl:3: 'tool_choice' must be" in r.stderr, r.stderr
        got = {json.loads(l)["id"]: json.loads(l) for l in tools_out.read_text().splitlines()}
        (call,) = got["named"]["tool_calls"]
        assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}, got["named"]
        assert call["id"].startswith("call_") and call["type"] == "function", call
        assert got["named"]["text"] == "" and got["named"]["finish_reason"] == "tool_calls", got["named"]
        assert got["auto"]["text"] == "It is sunny in Paris." and "tool_calls" not in got["auto"], got["auto"]
        assert got["auto"]["finish_reason"] == "stop", got["auto"]
        # The mistral parser under tool_choice "auto": Mistral's [TOOL_CALLS] marker is a special token, which the
        # text keeps only because that parser turns skip_special_tokens off (as vLLM's adjust_request). Qwen3's
        # tokenizer with [TOOL_CALLS] added as a special token; the model writes a v11-style call on its own.
        mistral_tok = tmp / "mistral-tok"
        mistral_tok.mkdir()
        spec = json.loads((pathlib.Path(sys.argv[2]) / "tokenizer.json").read_text())
        marker_id = max(t["id"] for t in spec["added_tokens"]) + 1
        spec["added_tokens"].append({"id": marker_id, "content": "[TOOL_CALLS]", "single_word": False, "lstrip": False,
                                     "rstrip": False, "normalized": False, "special": True})
        (mistral_tok / "tokenizer.json").write_text(json.dumps(spec))
        config = (pathlib.Path(sys.argv[2]) / "tokenizer_config.json").read_text()
        (mistral_tok / "tokenizer_config.json").write_text(config)
        mistral = tmp / "scripted-mistral"
        r = run(binary, "make-model", "--arch", "qwen3", "--hidden", "64", "--layers", "1", "--heads", "2",
                "--kv-heads", "1", "--head-dim", "32", "--ffn", "64", "--format", "hf", "--dtype", "f16",
                "--tokenizer", str(mistral_tok),
                "--script", 'assistant\n=>Sure.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}<|im_end|>',
                "-o", str(mistral))
        assert r.returncode == 0, r.stderr
        mistral_in = tmp / "mistral.jsonl"
        mistral_in.write_text("\n".join(json.dumps(q) for q in [
            {"id": "auto", "messages": ask, "tools": tools, "max_tokens": 32},
            {"id": "none", "messages": ask, "tools": tools, "tool_choice": "none", "max_tokens": 32},
            {"id": "kept", "messages": ask, "max_tokens": 32, "skip_special_tokens": False},
        ]) + "\n")
        mistral_out = tmp / "mistral_out.jsonl"
        r = run(binary, "batch", "-m", str(mistral), "--input", str(mistral_in), "--output", str(mistral_out),
                "--kv-cache-gb", "0.05", "--tool-call-parser", "mistral")
        assert r.returncode == 0, r.stderr
        got = {json.loads(l)["id"]: json.loads(l) for l in mistral_out.read_text().splitlines()}
        assert marker_id in got["auto"]["token_ids"], got["auto"]
        (call,) = got["auto"]["tool_calls"]
        assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}, got["auto"]
        assert len(call["id"]) == 9 and call["id"].isalnum(), call  # Mistral's ids
        assert got["auto"]["text"] == "Sure." and got["auto"]["finish_reason"] == "tool_calls", got["auto"]
        # tool_choice "none" parses nothing, so the special token is skipped as usual; asked for, it is kept.
        none_text = 'Sure.get_weather[ARGS]{"city": "Paris"}'
        assert got["none"]["text"] == none_text and "tool_calls" not in got["none"], got["none"]
        assert got["kept"]["text"] == 'Sure.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}', got["kept"]
        assert got["kept"]["finish_reason"] == "stop", got["kept"]  # EOS (<|im_end|>) ended it, not in the text
    print("batch: results equal solo runs; bad lines reported; resume works; text prompts and chat messages; tools")


if __name__ == "__main__":
    main()
