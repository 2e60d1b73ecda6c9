#!/usr/bin/env python3
"""`parallm bench serve` against a fake OpenAI server (fake_openai_server.py) whose answers are known: the
report counts what the fake sent, its latencies follow the fake's delays (within generous bounds, never a
speed assertion), --max-concurrency and --request-rate shape the load as the fake saw it, ShareGPT files are
read, failures are counted, a refused connection is a clear error, and the JSON and SVG outputs have their
fields and elements. With a second argument (parallm's shared fixtures), the same client is also pointed at
a real `parallm serve` on a tiny generated model.

Usage: bench_serve_test.py PARALLM [FIXTURES]"""
import json
import pathlib
import socket
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from fake_openai_server import FakeServer  # noqa: E402

SVG = "{http://www.w3.org/2000/svg}"
BINARY = None


def close(a, b, rel=1e-6):
    return abs(a - b) <= rel * max(1.0, abs(a), abs(b))


def serve(url, *args, expect_rc=0, timeout=60):
    r = subprocess.run([BINARY, "bench", "serve", "--base-url", url, *args], capture_output=True, text=True,
                       timeout=timeout)
    print(r.stdout[-3000:], r.stderr[-2000:], sep="\n", flush=True)
    assert r.returncode == expect_rc, f"exit {r.returncode}, expected {expect_rc}: {r.stderr}"
    return r


def report(path):
    return json.loads(pathlib.Path(path).read_text())


def check_schema(d):
    for key in ["date", "backend", "model_id", "num_prompts", "request_rate", "max_concurrency", "duration",
                "completed", "failed", "total_input_tokens", "total_output_tokens", "request_throughput",
                "output_throughput", "total_token_throughput", "max_concurrent_requests", "input_lens",
                "output_lens", "ttfts", "itls", "e2els", "start_times", "errors", "generated_texts"]:
        assert key in d, f"missing {key}"
    for metric in ["ttft", "tpot", "itl", "e2el"]:
        for stat in ["mean", "median", "std", "p50", "p90", "p99"]:
            assert isinstance(d[f"{stat}_{metric}_ms"], (int, float)), (stat, metric)
        assert d[f"median_{metric}_ms"] == d[f"p50_{metric}_ms"]
        assert d[f"p50_{metric}_ms"] <= d[f"p90_{metric}_ms"] <= d[f"p99_{metric}_ms"] + 1e-9, metric
    n = d["num_prompts"]
    assert d["completed"] + d["failed"] == n
    for key in ["input_lens", "output_lens", "ttfts", "itls", "e2els", "start_times", "errors"]:
        assert len(d[key]) == n, key
    assert d["duration"] > 0
    assert close(d["request_throughput"], d["completed"] / d["duration"])
    assert close(d["output_throughput"], d["total_output_tokens"] / d["duration"])
    assert close(d["total_token_throughput"], (d["total_input_tokens"] + d["total_output_tokens"]) / d["duration"])
    ok = [i for i in range(n) if not d["errors"][i]]
    assert len(ok) == d["completed"]
    assert d["total_output_tokens"] == sum(d["output_lens"][i] for i in ok)
    assert d["total_input_tokens"] == sum(d["input_lens"][i] for i in ok)
    for i in ok:
        assert 0 < d["ttfts"][i] <= d["e2els"][i]
        assert len(d["itls"][i]) <= d["output_lens"][i] - 1 or d["output_token_sources"][i] != "chunks"


def test_random_completions(tmp):
    # 20 requests of 8 tokens, 4 at a time; the fake waits 50 ms before the first chunk and 10 ms between chunks.
    with FakeServer(ttft=0.05, delay=0.01) as fake:
        serve(fake.url, "--num-prompts", "20", "--random-input-len", "16", "--random-output-len", "8",
              "--max-concurrency", "4", "--output", str(tmp / "r.json"), "--chart", str(tmp / "r.svg"))
        d = report(tmp / "r.json")
        check_schema(d)
        assert d["model_id"] == "fake-model" and d["backend"] == "openai" and d["request_rate"] == "inf"
        assert d["completed"] == 20 and d["failed"] == 0
        assert d["total_output_tokens"] == fake.state.tokens_sent == 160
        assert d["output_lens"] == [8] * 20 and set(d["output_token_sources"]) == {"usage"}
        assert d["input_lens"] == [16] * 20 and d["total_input_tokens"] == 320
        # The fake saw what was asked: token-id prompts, streamed, usage asked for, ignore_eos for random prompts.
        bodies = [b for _, _, b in fake.state.requests]
        assert len(bodies) == 20
        for b in bodies:
            assert b["model"] == "fake-model" and b["stream"] is True and b["max_tokens"] == 8
            assert b["stream_options"] == {"include_usage": True} and b["ignore_eos"] is True
            assert isinstance(b["prompt"], list) and len(b["prompt"]) == 16
        assert len({tuple(b["prompt"]) for b in bodies}) == 20  # different random prompts
        # --max-concurrency 4: never more than 4 streams open at the fake, and the client saw 4 in flight.
        assert 1 <= fake.state.peak_active <= 4 and d["max_concurrent_requests"] == 4
        # Latencies follow the fake's delays: ITL ~10 ms, TTFT >= 50 ms, TPOT = (E2E - TTFT) / 7. The bounds are
        # wide: on a loaded machine the client may read two chunks at once (one gap ~0, the next ~20 ms).
        assert 4 <= d["median_itl_ms"] <= 1000, d["median_itl_ms"]
        assert 4 <= d["mean_tpot_ms"] <= 1000, d["mean_tpot_ms"]
        assert close(d["mean_tpot_ms"], sum((e - t) / 7 for e, t in zip(d["e2els"], d["ttfts"])) / 20 * 1e3, 1e-6)
        assert min(d["ttfts"]) >= 0.045 and d["median_ttft_ms"] >= 45
        assert all(len(g) == 7 for g in d["itls"])
        for i in range(20):
            tpot = (d["e2els"][i] - d["ttfts"][i]) / 7
            assert tpot >= sum(d["itls"][i]) / 7 - 1e-6
        # E2E at least TTFT plus the 7 gaps.
        assert min(d["e2els"]) >= 0.045 + 7 * 0.009
        svg = ET.parse(tmp / "r.svg").getroot()
        bars = [e for e in svg.iter(SVG + "rect") if e.get("class") == "bar"]
        assert len(bars) == 12, len(bars)  # TTFT/TPOT/ITL/E2E x mean/median/p99
        assert [b.get("data-series") for b in bars] == ["mean", "median", "p99"] * 4
        texts = " ".join("".join(t.itertext()) for t in svg.iter(SVG + "text"))
        assert "fake-model" in texts and "TTFT" in texts and "milliseconds" in texts
        means = [float(b.get("data-value")) for b in bars if b.get("data-series") == "mean"]
        assert close(means[0], d["mean_ttft_ms"], 1e-4) and close(means[3], d["mean_e2el_ms"], 1e-4)


def test_chat_and_counting(tmp, fixtures):
    # No usage from the server: output tokens are counted from the content chunks, or by the tokenizer.
    with FakeServer(usage=False, close_delimited=True) as fake:
        serve(fake.url, "--model", "m", "--api-key", "sk-test", "--num-prompts", "5", "--random-input-len", "10", "--random-output-len", "6",
              "--output", str(tmp / "c.json"))
        d = report(tmp / "c.json")
        assert d["completed"] == 5 and d["output_lens"] == [6] * 5 and set(d["output_token_sources"]) == {"chunks"}
        assert all(b["model"] == "m" for _, _, b in fake.state.requests)
        assert fake.state.authorization == {"Bearer sk-test"}
    if fixtures is None:
        return
    with FakeServer(usage=False) as fake:
        # Chat with a tokenizer: random prompts are text of (about) exactly 24 tokens; " hello" x 6 is 6 tokens.
        serve(fake.url, "--endpoint", "/v1/chat/completions", "--tokenizer", str(fixtures / "tokenizers" / "qwen3"),
              "--num-prompts", "6", "--random-input-len", "24", "--random-output-len", "6",
              "--output", str(tmp / "t.json"))
        d = report(tmp / "t.json")
        print("input_lens", d["input_lens"])
        check_schema(d)
        assert d["backend"] == "openai-chat" and d["completed"] == 6
        assert set(d["output_token_sources"]) == {"tokenizer"} and d["output_lens"] == [6] * 6
        assert all(abs(n - 24) <= 2 for n in d["input_lens"]) and d["input_lens"].count(24) >= 3, d["input_lens"]
        for _, path, b in fake.state.requests:
            assert path == "/v1/chat/completions" and b["max_completion_tokens"] == 6
            assert b["messages"][0]["role"] == "user" and isinstance(b["messages"][0]["content"], str)
        # The role-only first chunk is not content: TTFT is measured to the first " hello".
        assert all(len(g) == 5 for g in d["itls"])


def test_request_rate(tmp):
    # Poisson arrivals at 25 req/s: 12 requests spread over about half a second; `inf` sends all at once.
    with FakeServer() as fake:
        serve(fake.url, "--num-prompts", "12", "--random-input-len", "4", "--random-output-len", "2",
              "--request-rate", "25", "--seed", "3", "--output", str(tmp / "p.json"))
        d = report(tmp / "p.json")
        assert d["request_rate"] == 25 and d["completed"] == 12
        starts = d["start_times"]
        print("start_times", starts)
        assert starts == sorted(starts) and starts[-1] > 0.2, starts
        gaps = [b - a for a, b in zip(starts, starts[1:])]
        assert max(gaps) > 1.5 * min(gaps), gaps  # exponential gaps, not a fixed interval
        arrivals = [t for t, _, _ in fake.state.requests]
        assert max(arrivals) - min(arrivals) > 0.1
    with FakeServer() as fake:
        serve(fake.url, "--num-prompts", "12", "--random-input-len", "4", "--random-output-len", "2",
              "--output", str(tmp / "q.json"))
        assert max(report(tmp / "q.json")["start_times"]) < 0.15


def test_sharegpt(tmp):
    conv = lambda h, g: {"conversations": [{"from": "human", "value": h}, {"from": "gpt", "value": g}]}
    data = [conv("Tell me about the sea and its many colours.", "The sea is blue, green and grey. " * 3),
            conv("hi", "hello there my friend, how are you"),           # prompt too short: skipped
            {"conversations": [{"from": "gpt", "value": "I start"}, {"from": "human", "value": "Why is the sky blue today?"},
                               {"from": "gpt", "value": "Because of Rayleigh scattering of sunlight."}]},
            conv("Write a haiku about autumn leaves falling.", "Red leaves drift and fall / quiet on the path"),
            {"id": "no conversations"}]
    path = tmp / "sharegpt.json"
    path.write_text(json.dumps(data))
    with FakeServer() as fake:
        serve(fake.url, "--dataset-path", str(path), "--num-prompts", "3", "--output", str(tmp / "s.json"))
        d = report(tmp / "s.json")
        assert d["dataset"] == "sharegpt" and d["completed"] == 3 and d["ignore_eos"] is False
        prompts = sorted(b["prompt"] for _, _, b in fake.state.requests)
        assert prompts == sorted([data[0]["conversations"][0]["value"], data[2]["conversations"][1]["value"],
                                  data[3]["conversations"][0]["value"]]), prompts
        # Without a tokenizer the reply's length is estimated as characters / 4 (rounded up).
        expected = {data[i]["conversations"][j]["value"]: -(-len(data[i]["conversations"][j + 1]["value"]) // 4)
                    for i, j in [(0, 0), (2, 1), (3, 0)]}
        for _, _, b in fake.state.requests:
            assert b["max_tokens"] == expected[b["prompt"]] and "ignore_eos" not in b
        assert d["total_output_tokens"] == sum(expected.values()) == fake.state.tokens_sent


def test_failures(tmp):
    # Every third request gets HTTP 500: counted as failed, the first message printed, exit code still 0.
    with FakeServer(fail_every=3) as fake:
        r = serve(fake.url, "--num-prompts", "9", "--random-input-len", "4", "--random-output-len", "3",
                  "--max-concurrency", "1", "--output", str(tmp / "f.json"))
        d = report(tmp / "f.json")
        check_schema(d)
        assert d["completed"] == 6 and d["failed"] == 3 == fake.state.failed_on_purpose
        assert sum(1 for e in d["errors"] if e) == 3 and "HTTP 500: fake failure" in d["first_error"]
        assert "fake failure" in r.stdout and d["total_output_tokens"] == 18
    # A server that stalls after its headers: the request times out, the command does not hang.
    with FakeServer(hang=5) as fake:
        start = time.monotonic()
        r = serve(fake.url, "--num-prompts", "2", "--random-input-len", "4", "--random-output-len", "2",
                  "--timeout", "0.5", expect_rc=1)
        assert time.monotonic() - start < 4.5 and "timed out" in r.stderr, r.stderr
    # Nothing listens: a clear error and a non-zero exit, with and without --model.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    r = serve(url, "--num-prompts", "2", expect_rc=1)
    assert "refused" in r.stderr.lower() and "/v1/models" in r.stderr, r.stderr
    r = serve(url, "--model", "x", "--num-prompts", "2", "--random-input-len", "4", "--output", str(tmp / "x.json"),
              expect_rc=1)
    assert "refused" in r.stderr.lower(), r.stderr
    assert report(tmp / "x.json")["failed"] == 2
    r = serve(url, "--num-prompts", "2", "--ready-check-timeout-sec", "0.5", expect_rc=1)
    assert "not ready after 0.5 s" in r.stderr and "refused" in r.stderr.lower(), r.stderr
    # --ready-check-timeout-sec waits for a server that comes up late.
    client = subprocess.Popen([BINARY, "bench", "serve", "--base-url", url, "--ready-check-timeout-sec", "20",
                               "--num-prompts", "3", "--random-input-len", "4", "--random-output-len", "2"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1)
    with FakeServer(port=port) as fake:
        out, err = client.communicate(timeout=30)
        assert client.returncode == 0, err
        assert "Successful requests:                     3" in out and len(fake.state.requests) == 3
    r = serve("https://example.com", "--num-prompts", "1", expect_rc=1)
    assert "https is not supported" in r.stderr


def test_real_server(tmp, fixtures):
    # parallm serve on a tiny random model: every request completes with exactly random-output-len tokens.
    model = tmp / "tiny.gguf"
    subprocess.run([BINARY, "make-model", "--preset", "tiny", "--arch", "qwen3", "--tokenizer",
                    str(fixtures / "tokenizers" / "qwen3" / "tokenizer.json"), "-o", str(model)],
                   check=True, capture_output=True)
    server = subprocess.Popen([BINARY, "serve", "-m", str(model), "--port", "0", "--kv-cache-gb", "0.05",
                               "--served-model-name", "tiny"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    try:
        url = None
        deadline = time.monotonic() + 60
        lines = []
        while time.monotonic() < deadline and server.poll() is None:
            line = server.stdout.readline()
            lines.append(line)
            if "model ready" in line:
                break
            if "listening on " in line:
                url = line.split("listening on ")[1].split()[0]
        assert url, "".join(lines)
        serve(url, "--num-prompts", "12", "--random-input-len", "24", "--random-output-len", "10", "--max-concurrency",
              "6", "--output", str(tmp / "real.json"))
        d = report(tmp / "real.json")
        check_schema(d)
        assert d["model_id"] == "tiny" and d["completed"] == 12 and d["failed"] == 0
        assert d["total_output_tokens"] == 12 * 10 and d["output_lens"] == [10] * 12
        assert d["input_lens"] == [24] * 12 and d["max_concurrent_requests"] <= 6
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


def main():
    global BINARY
    BINARY = sys.argv[1]
    fixtures = pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else None
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        test_random_completions(tmp)
        test_chat_and_counting(tmp, fixtures)
        test_request_rate(tmp)
        test_sharegpt(tmp)
        test_failures(tmp)
        if fixtures is not None:
            test_real_server(tmp, fixtures)
    print("bench serve reports consistent")


if __name__ == "__main__":
    main()
