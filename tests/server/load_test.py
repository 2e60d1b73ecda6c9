#!/usr/bin/env python3
"""`parallm serve` under load: 128 concurrent streaming requests give exactly the texts the library (`parallm
batch`) and non-streamed requests give for the same seeds; a client that disconnects mid-stream while 30 others
run is cancelled at once (its blocks freed, the others' outputs unchanged); /metrics counters add up; memory
stays bounded over rounds; SIGTERM lets running requests finish (or cancels them after the grace) and exits 0.

Usage: load_test.py PARALLM_BINARY FIXTURES_DIR"""
import json
import pathlib
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from server_util import MODEL_NAME, Server, metric, parse_sse, run_tests, stream_text  # noqa: E402

BINARY, FIXTURES = sys.argv[1], pathlib.Path(sys.argv[2])
HOT = 100.0  # the random model's distributions are very peaked; sampling must matter
S = None
MODEL = None
TMP = None


def make_requests(count, seed, max_tokens=(4, 24)):
    rng = random.Random(seed)
    return [{"model": MODEL_NAME, "prompt": [rng.randrange(200, 5000) for _ in range(rng.randrange(3, 60))],
             "max_tokens": rng.randrange(*max_tokens), "ignore_eos": True, "temperature": HOT, "top_k": 20, "seed": 1000 + i}
            for i in range(count)]


def library_texts(requests):
    """The same requests through `parallm batch` (the LLM library): text per request."""
    inp = pathlib.Path(TMP) / "batch_in.jsonl"
    out = pathlib.Path(TMP) / "batch_out.jsonl"
    out.unlink(missing_ok=True)
    inp.write_text("".join(json.dumps({"id": f"q{i}", "prompt_ids": q["prompt"], "max_tokens": q["max_tokens"],
                                       "ignore_eos": True, "temperature": q["temperature"], "top_k": q["top_k"],
                                       "seed": q["seed"]}) + "\n"
                           for i, q in enumerate(requests)))
    r = subprocess.run([BINARY, "batch", "-m", str(MODEL), "--input", str(inp), "--output", str(out), "-t", "2",
                        "--kv-cache-gb", "0.25"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    recs = {json.loads(l)["id"]: json.loads(l) for l in out.read_text().splitlines()}
    return [recs[f"q{i}"]["text"] for i in range(len(requests))]


def run_concurrently(fn, items):
    results = [None] * len(items)
    errors = []

    def work(i):
        try:
            results[i] = fn(items[i])
        except Exception as e:  # noqa: BLE001
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(items))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:5]
    return results


# Under the sanitizers on a busy machine the last of 128 queued requests can wait more than the default 20 s for
# its first byte; these tests check what comes back, not how soon.
LOAD_TIMEOUT = 120


def streamed_text(body):
    status, chunks, done = S.stream("/v1/completions", {**body, "stream": True, "stream_options": {"include_usage": True}},
                                    timeout=LOAD_TIMEOUT)
    assert status == 200 and done, chunks
    assert chunks[-1]["choices"] == []
    return stream_text(chunks[:-1], "completions")[0], chunks[-1]["usage"]


def whole_text(body):
    status, out = S.post("/v1/completions", body, timeout=LOAD_TIMEOUT)
    assert status == 200, out
    return out["choices"][0]["text"], out["usage"]


def rss_mb(pid):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0


def wait_idle(timeout=30):
    deadline = time.time() + timeout
    while True:
        m = S.metrics()
        if metric(m, "vllm:num_requests_running") == 0 and metric(m, "vllm:num_requests_waiting") == 0:
            return m
        assert time.time() < deadline, "the server did not become idle"
        time.sleep(0.05)


def test_128_streams_equal_library_and_metrics_add_up():
    requests = make_requests(128, seed=1)
    want = library_texts(requests)
    before = wait_idle()
    got = run_concurrently(streamed_text, requests)
    after = wait_idle()
    mismatches = [i for i in range(128) if got[i][0] != want[i]]
    assert not mismatches, [(i, got[i][0], want[i]) for i in mismatches[:3]]
    for (text, usage), q in zip(got, requests):
        assert usage["prompt_tokens"] == len(q["prompt"]) and usage["completion_tokens"] == q["max_tokens"], usage
    # Counters: exactly what these 128 requests did.
    d = lambda name, **l: metric(after, name, **l) - metric(before, name, **l)  # noqa: E731
    assert d("vllm:prompt_tokens_total") == sum(len(q["prompt"]) for q in requests)
    assert d("vllm:generation_tokens_total") == sum(q["max_tokens"] for q in requests)
    assert d("vllm:request_success_total", finished_reason="length") == 128
    assert d("vllm:e2e_request_latency_seconds_count") == 128
    assert d("vllm:time_to_first_token_seconds_count") == 128
    assert d("vllm:prefix_cache_queries_total") >= d("vllm:prefix_cache_hits_total") >= 0
    assert metric(after, "vllm:kv_cache_usage_perc") == 0
    # Non-streamed, concurrently: the same texts.
    whole = run_concurrently(whole_text, requests)
    assert [w[0] for w in whole] == want


def settled_rss_mb(pid, seconds=1.5):
    """The lowest RSS over a short idle spell: after a round, the HTTP threads' stacks and arenas and the largest
    batch's buffers are released over the next tenths of a second (sometimes later), so one sample can sit 50-120
    MiB above the floor the process returns to."""
    lowest = rss_mb(pid)
    deadline = time.time() + seconds
    while time.time() < deadline:
        time.sleep(0.1)
        lowest = min(lowest, rss_mb(pid))
    return lowest


def test_memory_bounded():
    # A leak raises the floor RSS returns to when idle; a transient (a round that batched differently, threads
    # still tearing down, an arena not yet trimmed) does not stay in every round. So compare the lowest settled
    # RSS of rounds 3-4 with the lowest of the last three. Rounds 1-2 are a warm-up: in about one run in three here
    # the RSS stepped up 20-45 MiB in round 2 or 3 and stayed flat from there (332 375 381 382 383 384 MiB): /proc/PID/
    # smaps put the step in glibc's per-thread malloc arenas (64 MiB heaps) that the HTTP threads first grow then,
    # which malloc keeps; a one-time step, not growth. (Rounds 2-3 were compared until a step in round 3 failed a
    # fresh clone's run: 323 332 377 381 383 384 384 MiB.)
    #
    # On a server of its own with a 4 MiB KV cache (~130 blocks), which the first round fills: the cache's pages are
    # faulted in on first write and the block pool hands out the least recently freed block first (cached prefixes
    # live longest), so on the shared server's 256 MiB cache every round wrote blocks no round had written before,
    # one huge page per layer buffer (8 MiB of RSS) every round or two. That growth is bounded by --kv-cache-gb, not
    # by six rounds, and it had failed this check (+66 MiB) with no leak anywhere.
    global S
    shared, S = S, Server(BINARY, MODEL, kv_cache_gb=0.004)
    try:
        requests = make_requests(128, seed=2, max_tokens=(2, 6))
        samples = []
        for _ in range(8):
            run_concurrently(streamed_text, requests)
            wait_idle()
            samples.append(settled_rss_mb(S.proc.pid))
    finally:
        assert S.stop() == 0
        S = shared
    first, last = min(samples[2:4]), min(samples[5:])
    growth = last - first
    print(f"     settled RSS after rounds 1-8: {' '.join(f'{m:.0f}' for m in samples)} MiB; growth {growth:.1f} MiB")
    assert growth < 48, samples


def open_stream(body):
    """A raw streaming request; returns the socket after the response head and first event arrived."""
    s = socket.create_connection(("127.0.0.1", S.port))
    data = json.dumps({**body, "stream": True}).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
              str(len(data)).encode() + b"\r\n\r\n" + data)
    s.settimeout(20)
    got = b""
    while b"data: " not in got:
        b = s.recv(4096)
        assert b, got
        got += b
    return s


def test_disconnect_mid_stream_while_30_run():
    requests = make_requests(30, seed=3, max_tokens=(40, 80))
    want = library_texts(requests)
    before = wait_idle()
    victim_body = {"model": MODEL_NAME, "prompt": "A long story", "max_tokens": 2000, "ignore_eos": True}
    results = {}

    def victim():
        s = open_stream(victim_body)
        time.sleep(0.2)
        s.close()  # gone mid-stream
        results["closed_at"] = time.time()

    t = threading.Thread(target=victim)
    t.start()
    got = run_concurrently(streamed_text, requests)
    t.join()
    assert [g[0] for g in got] == want, "the other streams' outputs changed"
    # The victim is cancelled at once, not after its 2000 tokens.
    deadline = time.time() + 30
    while True:
        m = S.metrics()
        if metric(m, "vllm:request_success_total", finished_reason="abort") - \
                metric(before, "vllm:request_success_total", finished_reason="abort") == 1:
            break
        assert time.time() < deadline, "the disconnected request was not cancelled"
        time.sleep(0.02)
    after = wait_idle()
    generated = metric(after, "vllm:generation_tokens_total") - metric(before, "vllm:generation_tokens_total")
    assert generated < sum(q["max_tokens"] for q in requests) + 2000, generated
    assert metric(after, "vllm:kv_cache_usage_perc") == 0, "blocks still in use when idle"
    # A non-streamed request whose client goes away is cancelled too.
    s = socket.create_connection(("127.0.0.1", S.port))
    data = json.dumps(victim_body).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + str(len(data)).encode() + b"\r\n\r\n" +
              data)
    time.sleep(0.3)
    s.close()
    deadline = time.time() + 30
    while metric(S.metrics(), "vllm:request_success_total", finished_reason="abort") - \
            metric(before, "vllm:request_success_total", finished_reason="abort") != 2:
        assert time.time() < deadline, "the disconnected non-streamed request was not cancelled"
        time.sleep(0.02)
    assert metric(wait_idle(), "vllm:kv_cache_usage_perc") == 0


def test_queue_full_429():
    server = Server(BINARY, MODEL, "--max-num-seqs", "2", "--max-queued-requests", "2")
    try:
        body = {"model": MODEL_NAME, "prompt": "x", "max_tokens": 1500, "ignore_eos": True}
        socks = []
        for _ in range(4):  # 2 running + 2 queued
            s = socket.create_connection(("127.0.0.1", server.port))
            data = json.dumps(body).encode()
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + str(len(data)).encode() +
                      b"\r\n\r\n" + data)
            socks.append(s)
        deadline = time.time() + 30
        while True:
            m = server.metrics()
            if metric(m, "vllm:num_requests_running") + metric(m, "vllm:num_requests_waiting") == 4:
                break
            assert time.time() < deadline, "requests did not queue"
            time.sleep(0.02)
        status, out = server.post("/v1/completions", {"model": MODEL_NAME, "prompt": "y", "max_tokens": 1})
        assert status == 429 and out["error"]["type"] == "rate_limit_error", (status, out)
        for s in socks:
            s.close()
        deadline = time.time() + 30
        while metric(server.metrics(), "vllm:num_requests_running") != 0:
            assert time.time() < deadline
            time.sleep(0.02)
        status, out = server.post("/v1/completions", {"model": MODEL_NAME, "prompt": "y", "max_tokens": 1})
        assert status == 200, out
    finally:
        assert server.stop() == 0


def test_sigterm_drains():
    server = Server(BINARY, MODEL, "--shutdown-grace", "30")
    body = {"model": MODEL_NAME, "prompt": "x", "max_tokens": 300, "ignore_eos": True, "stream": True}
    out = {}

    def client():
        out["result"] = server.stream("/v1/completions", body)

    t = threading.Thread(target=client)
    t.start()
    deadline = time.time() + 30
    while metric(server.metrics(), "vllm:num_requests_running") != 1:
        assert time.time() < deadline
        time.sleep(0.01)
    server.proc.send_signal(signal.SIGTERM)
    t.join(60)
    status, chunks, done = out["result"]
    assert status == 200 and done, chunks
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert len(stream_text(chunks, "completions")[0]) > 0
    assert server.proc.wait(30) == 0
    assert any("SIGTERM" in l for l in server.lines), server.lines
    try:
        socket.create_connection(("127.0.0.1", server.port), timeout=2).close()
        raise AssertionError("still accepting after shutdown")
    except OSError:
        pass


def test_sigterm_grace_cancels():
    server = Server(BINARY, MODEL, "--shutdown-grace", "0.3")
    body = {"model": MODEL_NAME, "prompt": "x", "max_tokens": 2040, "ignore_eos": True, "stream": True}
    out = {}
    t = threading.Thread(target=lambda: out.update(result=server.stream("/v1/completions", body)))
    t.start()
    deadline = time.time() + 30
    while metric(server.metrics(), "vllm:num_requests_running") != 1:
        assert time.time() < deadline
        time.sleep(0.01)
    start = time.time()
    server.proc.send_signal(signal.SIGINT)
    t.join(60)
    status, chunks, done = out["result"]
    assert status == 200 and done, chunks
    assert chunks[-1]["choices"][0]["finish_reason"] == "abort", chunks[-1]
    assert server.proc.wait(30) == 0
    assert time.time() - start < 10


def main():
    global S, MODEL, TMP
    with tempfile.TemporaryDirectory() as tmp:
        TMP = tmp
        from server_util import make_model
        MODEL = make_model(BINARY, tmp, FIXTURES / "tokenizers" / "qwen3")
        S = Server(BINARY, MODEL)
        try:
            run_tests([test_128_streams_equal_library_and_metrics_add_up, test_disconnect_mid_stream_while_30_run,
                       test_memory_bounded, test_queue_full_429, test_sigterm_drains, test_sigterm_grace_cancels])
        finally:
            assert S.stop() == 0


if __name__ == "__main__":
    main()
