#!/usr/bin/env python3
"""LoRA adapters through the interfaces: `generate --adapter-path` (mlx_lm's flag), `serve --lora-modules
NAME=PATH` (vLLM's) with requests choosing by `model`, /v1/models listing the adapters with their parent, an unknown
name a 404 in OpenAI's shape, vLLM's /v1/load_lora_adapter and /v1/unload_lora_adapter (an adapter unloaded while
a request runs with it: the request finishes with it), --max-cpu-loras 1 evicting and reloading (with
--max-loras 1, one adapter per batch), the adapter of a running request named in /metrics (vllm:lora_requests_info),
and `parallm batch` lines choosing by "model". Every served completion must
equal `generate` with the same adapter (greedy).

Usage: lora_server_test.py PARALLM_BINARY"""
import json
import pathlib
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from server_util import Server, check_error, run_tests  # noqa: E402

BINARY = sys.argv[1]
TMP = None
BASE = None
ADAPTERS = {}  # name -> path
PROMPT = [5, 17, 42, 99, 7]
EXPECTED = {}  # name (or "tiny" for the base) -> generated text


def run(*args):
    return subprocess.run([BINARY, *map(str, args)], capture_output=True, text=True, timeout=120)


def generate(adapter=None, n=8):
    extra = ["--adapter-path", adapter] if adapter else []
    r = run("generate", "-m", BASE, "--prompt-ids", ",".join(map(str, PROMPT)), "-n", n, "--ignore-eos", "--json",
            "-t", "1", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["text"]


def complete(server, model, n=8):
    status, out = server.post("/v1/completions", {"model": model, "prompt": PROMPT, "max_tokens": n,
                                                  "temperature": 0, "ignore_eos": True})
    return status, out


def ids_of(out):
    """The completion's text: the server answers text, compared with `generate --json`'s text of the same ids."""
    return out["choices"][0]["text"]


def test_generate_adapter_path_changes_the_output():
    for name, path in ADAPTERS.items():
        assert EXPECTED[name] != EXPECTED["tiny"], name
    r = run("generate", "-m", BASE, "--prompt-ids", "1,2", "--adapter-path", TMP / "missing")
    assert r.returncode == 1 and "missing" in r.stderr, r.stderr


def test_serve_lora_modules():
    server = Server(BINARY, BASE, "--lora-modules", f"a={ADAPTERS['a']}", f"b={ADAPTERS['b']}", kv_cache_gb=0.05)
    try:
        status, _, body = server.request("GET", "/v1/models")
        models = {m["id"]: m for m in json.loads(body)["data"]}
        assert set(models) == {"tiny", "a", "b"}, models
        assert models["a"]["parent"] == "tiny" and models["a"]["root"] == str(ADAPTERS["a"]), models["a"]
        assert models["tiny"]["parent"] is None
        for name in ("tiny", "a", "b", "a", "tiny"):
            status, out = complete(server, name)
            assert status == 200, out
            assert out["model"] == name, out
            assert ids_of(out) == EXPECTED[name], (name, out)
        status, out = complete(server, "nope")
        check_error(status, out, 404, "model", "nope")
        # Load, use, unload at run time (vLLM's bodies); then the name is unknown again.
        status, _, body = server.request("POST", "/v1/load_lora_adapter", {"lora_name": "c", "lora_path": str(ADAPTERS["c"])})
        assert status == 200, body
        status, out = complete(server, "c")
        assert status == 200 and ids_of(out) == EXPECTED["c"], out
        status, out = server.post("/v1/load_lora_adapter", {"lora_name": "c", "lora_path": str(ADAPTERS["c"])})
        check_error(status, out, 400, "lora_name", "already")
        status, out = server.post("/v1/load_lora_adapter", {"lora_name": "d", "lora_path": str(TMP / "missing")})
        check_error(status, out, 400, "lora_path", "missing")
        status, _, body = server.request("POST", "/v1/unload_lora_adapter", {"lora_name": "c"})
        assert status == 200, body
        status, out = complete(server, "c")
        check_error(status, out, 404, "model")
        status, out = server.post("/v1/unload_lora_adapter", {"lora_name": "c"})
        check_error(status, out, 404, "lora_name")
        # Unloading an adapter a running request uses: the request finishes with it.
        long_expected = generate(ADAPTERS["b"], n=48)
        result = {}
        t = threading.Thread(target=lambda: result.update(zip(("status", "out"), complete(server, "b", n=48))))
        t.start()
        status, _, body = server.request("POST", "/v1/unload_lora_adapter", {"lora_name": "b"})
        t.join()
        assert status == 200, body
        # Either the request was admitted before the unload (it runs to the end with b) or after (404).
        if result["status"] == 200:
            assert ids_of(result["out"]) == long_expected, result
        else:
            check_error(result["status"], result["out"], 404, "model")
    finally:
        assert server.stop() == 0


def test_max_loras_one_evicts_and_reloads():
    server = Server(BINARY, BASE, "--lora-modules", f"a={ADAPTERS['a']}", f"b={ADAPTERS['b']}", "--max-loras", "1",
                    "--max-cpu-loras", "1", kv_cache_gb=0.05)
    try:
        for name in ("a", "b", "a", "b"):
            status, out = complete(server, name)
            assert status == 200 and ids_of(out) == EXPECTED[name], (name, out)
        # vLLM's LoRA gauge, as an endpoint picker reads it: the adapters a step may mix, and while a request runs
        # with "a", its name among the running requests' adapters; none once it is done.
        def lora_info():
            found = [dict(k[1]) for k in server.metrics() if k[0] == "vllm:lora_requests_info"]
            assert len(found) == 1 and found[0]["max_lora"] == "1", found
            return found[0]
        result = {}
        t = threading.Thread(target=lambda: result.update(zip(("status", "out"), complete(server, "a", n=1500))))
        t.start()
        seen = set()
        while t.is_alive() and "a" not in seen:
            seen.add(lora_info()["running_lora_adapters"])
        t.join()
        assert result["status"] == 200, result
        assert "a" in seen, seen
        assert lora_info()["running_lora_adapters"] == "" and lora_info()["waiting_lora_adapters"] == ""
    finally:
        assert server.stop() == 0


def test_batch_model_field():
    lines = [{"id": "base", "prompt_ids": PROMPT, "max_tokens": 8, "ignore_eos": True},
             {"id": "a", "model": "a", "prompt_ids": PROMPT, "max_tokens": 8, "ignore_eos": True},
             {"id": "b", "model": "b", "prompt_ids": PROMPT, "max_tokens": 8, "ignore_eos": True},
             {"id": "bad", "model": "zzz", "prompt_ids": PROMPT, "max_tokens": 8}]
    src, dst = TMP / "in.jsonl", TMP / "out.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    r = run("batch", "-m", BASE, "--input", src, "--output", dst, "-t", "1", "--kv-cache-gb", "0.05",
            "--lora-modules", f"a={ADAPTERS['a']}", f"b={ADAPTERS['b']}")
    assert r.returncode == 1 and "zzz" in r.stderr, r.stderr  # the bad line is reported, the others run
    got = {o["id"]: o for o in map(json.loads, dst.read_text().splitlines())}
    assert got["base"]["text"] == EXPECTED["tiny"], got
    assert got["a"]["text"] == EXPECTED["a"] and got["a"]["model"] == "a", got
    assert got["b"]["text"] == EXPECTED["b"], got
    assert "error" in got["line-4"], got


def main():
    global TMP, BASE
    with tempfile.TemporaryDirectory() as tmp:
        TMP = pathlib.Path(tmp)
        BASE = TMP / "base.gguf"
        r = run("make-model", "--arch", "llama", "--dtype", "f32", "--seed", "4", "-o", BASE)
        assert r.returncode == 0, r.stderr
        for name, fmt, rank, targets in (("a", "peft", 4, "q,k,v,o"), ("b", "mlx", 8, "q,k,v,o,gate,up,down"),
                                         ("c", "gguf", 8, "q,v,down")):
            path = TMP / (f"adapter-{name}" + (".gguf" if fmt == "gguf" else ""))
            r = run("make-model", "--arch", "llama", "--seed", str(10 + len(ADAPTERS)), "--lora", fmt,
                    "--lora-rank", rank, "--lora-targets", targets, "--lora-scale", "4", "-o", path)
            assert r.returncode == 0, r.stderr
            ADAPTERS[name] = path
        EXPECTED["tiny"] = generate()
        for name, path in ADAPTERS.items():
            EXPECTED[name] = generate(path)
        run_tests([test_generate_adapter_path_changes_the_output, test_serve_lora_modules,
                   test_max_loras_one_evicts_and_reloads, test_batch_model_field])


if __name__ == "__main__":
    main()
