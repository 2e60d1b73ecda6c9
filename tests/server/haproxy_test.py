#!/usr/bin/env python3
"""Three `parallm serve` replicas (1 thread each) behind Debian's HAProxy with deploy/haproxy/haproxy.cfg, on
loopback: a shared-prefix workload (5 prompt families, each asked 4 times) sent to one replica directly, through
the prefix-affinity backend and through round robin, comparing the prompt tokens served from cache (usage
cached_tokens); chat requests sharing a system prompt go to one replica and find it cached; then a replica is
killed mid-run: only requests running on it may fail, cleanly (an HTTP error, or a stream that ends without
[DONE]), every later request succeeds, HAProxy's health check marks it DOWN, and once restarted it is UP again with
exactly its prompt families back. Skipped (exit 77) without haproxy.

Usage: haproxy_test.py PARALLM_BINARY"""
import concurrent.futures
import http.client
import json
import os
import pathlib
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import server_util  # noqa: E402
from server_util import MODEL_NAME, Server, parse_sse  # noqa: E402

BINARY = sys.argv[1]
CONFIG = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "haproxy" / "haproxy.cfg"
FAMILIES, ROUNDS, PREFIX_CHARS = 5, 4, 384
MODEL = None  # the tiny model file the replicas serve
# The tiny model has no chat template: a plain one, for the chat requests.
REPLICA_ARGS = ["--chat-template", "{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}<assistant>"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HAProxy:
    """haproxy -f deploy/haproxy/haproxy.cfg in the foreground, on a free port, for the given replicas."""

    def __init__(self, replicas, backend):
        self.backend = backend
        for attempt in range(5):  # a free port may be taken between the probe and the bind: pick again
            self.port, self.stats_port = free_port(), free_port()
            env = dict(os.environ, PARALLM_LB_BIND=f"127.0.0.1:{self.port}", PARALLM_LB_BACKEND=backend,
                       PARALLM_LB_STATS_BIND=f"127.0.0.1:{self.stats_port}", PARALLM_LB_CHECK_INTERVAL="300ms",
                       **{f"PARALLM_REPLICA{i + 1}": f"127.0.0.1:{r.port}" for i, r in enumerate(replicas)})
            self.proc = subprocess.Popen(["haproxy", "-db", "-f", str(CONFIG)], env=env, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, text=True)
            deadline = time.time() + 10
            while time.time() < deadline and self.proc.poll() is None:
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                    return
                except OSError:
                    time.sleep(0.05)
            self.stop()
        raise RuntimeError(f"haproxy did not start: {self.proc.stdout.read()}")

    def status(self):
        """{replica name: "UP" | "DOWN" | ...} from HAProxy's /stats;csv, for this backend."""
        c = http.client.HTTPConnection("127.0.0.1", self.stats_port, timeout=10)
        c.request("GET", "/stats;csv")
        lines = c.getresponse().read().decode().splitlines()
        c.close()
        header = lines[0].lstrip("# ").split(",")
        rows = [dict(zip(header, line.split(","))) for line in lines[1:] if line]
        return {r["svname"]: r["status"].split(" ")[0] for r in rows
                if r["pxname"] == self.backend and r["svname"] not in ("FRONTEND", "BACKEND")}

    def wait_status(self, name, want, timeout=15):
        deadline = time.time() + timeout
        while self.status().get(name) != want:
            assert time.time() < deadline, f"{name} never {want}: {self.status()}"
            time.sleep(0.05)

    def stop(self):
        server_util.stop_process(self.proc)


def post(port, body, timeout=60, path="/v1/completions"):
    """POST `path`; returns (status, body or stream chunks, replica header, completed)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        replica = r.getheader("x-parallm-replica")
        data = r.read()
        if r.status != 200:
            return r.status, data, replica, False
        if body.get("stream"):
            try:
                chunks, done = parse_sse(data.decode())
            except (AssertionError, ValueError):
                return r.status, data, replica, False  # cut off mid-event
            return r.status, chunks, replica, done
        return r.status, json.loads(data), replica, True
    except (http.client.IncompleteRead, ConnectionError) as e:
        # The proxy cut a chunked answer short: the client sees an error, not a hang.
        return 0, repr(e), None, False
    finally:
        c.close()


def prompts(seed):
    """FAMILIES shared prefixes (a long 'document' each); round r of family f asks question (f, r) about it."""
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "kappa", "sigma", "omega", "theta", "lambda", "zeta"]
    prefixes = []
    for _ in range(FAMILIES):
        text = ""
        while len(text) < PREFIX_CHARS:
            text += rng.choice(words) + " "
        prefixes.append(text[:PREFIX_CHARS])
    return [[f"{prefixes[f]}\nQuestion {r} on family {f}: {rng.random():.6f}?" for f in range(FAMILIES)]
            for r in range(ROUNDS)]


def run_workload(port, seed):
    """Every round's requests one after another (so round robin's order is exact): cached and prompt token totals,
    and which replica served each family in each round."""
    cached = prompt = 0
    served = {}
    for r, round_prompts in enumerate(prompts(seed)):
        for f, text in enumerate(round_prompts):
            status, out, replica, _ = post(port, {"model": MODEL_NAME, "prompt": text, "max_tokens": 2})
            assert status == 200, (status, out)
            cached += out["usage"]["prompt_tokens_details"]["cached_tokens"]
            prompt += out["usage"]["prompt_tokens"]
            served.setdefault(f, []).append(replica)
    return cached, prompt, served


def test_affinity_vs_round_robin(replicas):
    single = run_workload(replicas[0].port, seed=1)
    lb = HAProxy(replicas, "parallm_affinity")
    try:
        affinity = run_workload(lb.port, seed=2)  # fresh prefixes: no replica has them cached
    finally:
        lb.stop()
    lb = HAProxy(replicas, "parallm_roundrobin")
    try:
        rr = run_workload(lb.port, seed=3)
    finally:
        lb.stop()
    print(f"     cached prompt tokens, {FAMILIES} families x {ROUNDS} rounds: one replica {single[0]} of {single[1]}, "
          f"3 replicas with prefix affinity {affinity[0]} of {affinity[1]} ({affinity[0] / single[0]:.0%} of one "
          f"replica's), round robin {rr[0]} of {rr[1]} ({rr[0] / single[0]:.0%})")
    print(f"     affinity: family -> replica {[v[0] for v in affinity[2].values()]}")
    # Affinity: each family always on one replica, and the families spread over more than one.
    assert all(len(set(v)) == 1 for v in affinity[2].values()), affinity[2]
    assert len({v[0] for v in affinity[2].values()}) > 1, affinity[2]
    assert single[0] > 0 and abs(affinity[0] - single[0]) <= 0.1 * single[0], (single, affinity)
    # Round robin sends a family's rounds to 3 different replicas before it returns to the first one: only the last
    # round finds its prefix cached, a third of what one replica caches.
    assert all(len(set(v)) == 3 for v in rr[2].values()), rr[2]
    assert rr[0] <= 0.4 * single[0], (single, rr)


def test_chat_affinity(replicas):
    """Chat: the first message (here a system prompt) picks the replica, whatever the user asks after it."""
    lb = HAProxy(replicas, "parallm_affinity")
    try:
        rng = random.Random(6)
        systems = [" ".join(rng.choice(["be", "brief", "kind", "exact", "calm"]) for _ in range(80)) for _ in range(4)]
        seen = {}
        for question in range(3):
            for s, system in enumerate(systems):
                messages = [{"role": "system", "content": system}, {"role": "user", "content": f"question {question}"}]
                status, out, replica, _ = post(lb.port, {"model": MODEL_NAME, "messages": messages, "max_tokens": 2},
                                               path="/v1/chat/completions")
                assert status == 200, (status, out)
                seen.setdefault(s, []).append((replica, out["usage"]["prompt_tokens_details"]["cached_tokens"]))
        for s, answers in seen.items():
            assert len({replica for replica, _ in answers}) == 1, (s, answers)
            # After the first question the system prompt's blocks come from that replica's cache. The first finds at
            # most the chat template's opening tokens, which every family's first message shares.
            assert answers[0][1] < 16 and all(cached >= 16 * (len(systems[s]) // 16 - 1) for _, cached in answers[1:]), \
                (s, answers)
        print(f"     chat: each system prompt on one replica {[a[0][0] for a in seen.values()]}, "
              f"cached tokens per question {[[c for _, c in a] for a in seen.values()]}")
    finally:
        lb.stop()


def test_replica_killed_mid_run(replicas):
    lb = HAProxy(replicas, "parallm_affinity")
    try:
        # Learn where each family goes, then kill the replica with the most families while every family has a
        # long generation running (half streamed, half not).
        texts = prompts(seed=4)[0]
        where = {}
        for f, text in enumerate(texts):
            status, _, replica, _ = post(lb.port, {"model": MODEL_NAME, "prompt": text, "max_tokens": 1})
            assert status == 200
            where[f] = replica
        print(f"     families -> replicas: {where}")
        names = sorted(set(where.values()), key=lambda n: (-list(where.values()).count(n), n))
        victim_name = names[0]
        victim = replicas[int(victim_name[-1]) - 1]
        long_body = {"model": MODEL_NAME, "max_tokens": 1500, "ignore_eos": True}
        pool = concurrent.futures.ThreadPoolExecutor(2 * FAMILIES)
        jobs = {}
        for f, text in enumerate(texts):
            for stream in (False, True):
                body = dict(long_body, prompt=text, stream=stream)
                if stream:
                    body["stream_options"] = {"include_usage": True}
                jobs[(f, stream)] = pool.submit(post, lb.port, body, 120)
        on_victim = 2 * list(where.values()).count(victim_name)
        deadline = time.time() + 30
        while time.time() < deadline:
            m = victim.metrics()
            running = sum(v for (name, _), v in m.items() if name == "vllm:num_requests_running")
            if running >= on_victim:
                break
            time.sleep(0.02)
        else:
            raise AssertionError(f"the victim never ran its {on_victim} requests")
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait(10)
        results = {k: j.result(timeout=120) for k, j in jobs.items()}
        failed = []
        for (f, stream), (status, out, replica, completed) in results.items():
            if where[f] != victim_name:
                assert status == 200 and completed, (f, stream, status, out)
                usage = [c["usage"] for c in out if c.get("usage")][-1] if stream else out["usage"]
                tokens = usage["completion_tokens"]
                assert tokens == 1500, (f, stream, tokens)
            elif not completed:
                failed.append((f, stream, status))
                assert status in (0, 200, 502, 503, 504), (f, stream, status, out)
            else:
                # Not streamed: HAProxy still held the request and replayed it on a live replica.
                assert not stream and replica != victim_name, (f, stream, replica)
        retried = 2 * list(where.values()).count(victim_name) - len(failed)
        print(f"     killed {victim_name} with {on_victim} requests running on it: {len(failed)} failed cleanly "
              f"{sorted(failed)}, {retried} retried elsewhere by HAProxy; the other "
              f"{2 * FAMILIES - on_victim} completed")
        # Streamed answers had started: they cannot be replayed, they must fail.
        assert all(any(f2 == f and s for f2, s, _ in failed) for f, r in where.items() if r == victim_name)
        # Every later request succeeds, including those of the dead replica's families, at once (HAProxy retries
        # the refused connection elsewhere before its health check has noticed); the other families stay put.
        for f, text in enumerate(texts):
            status, out, replica, _ = post(lb.port, {"model": MODEL_NAME, "prompt": text, "max_tokens": 2})
            assert status == 200 and replica != victim_name, (status, out, replica)
            assert where[f] == victim_name or replica == where[f], (f, where[f], replica)
        for text in prompts(seed=5)[0]:
            status, out, replica, _ = post(lb.port, {"model": MODEL_NAME, "prompt": text, "max_tokens": 2})
            assert status == 200 and replica != victim_name, (status, out, replica)
        pool.shutdown()
        # The health check takes it out; restarted on its port, it is back in and gets exactly its families back.
        lb.wait_status(victim_name, "DOWN")
        index = replicas.index(victim)
        replicas[index] = Server(BINARY, MODEL, *REPLICA_ARGS, threads=1, kv_cache_gb=0.05, port=victim.port)
        lb.wait_status(victim_name, "UP")
        for f, text in enumerate(texts):
            status, out, replica, _ = post(lb.port, {"model": MODEL_NAME, "prompt": text, "max_tokens": 2})
            assert status == 200 and replica == where[f], (f, status, replica, where[f])
        print(f"     HAProxy marked {victim_name} DOWN; restarted, it is UP again and serves its families again")
    finally:
        lb.stop()


def main():
    if shutil.which("haproxy") is None:
        print("SKIPPED: haproxy is not installed (scripts/setup.sh installs Debian's)")
        sys.exit(77)
    global MODEL
    with tempfile.TemporaryDirectory() as tmp:
        MODEL = pathlib.Path(tmp) / "tiny.gguf"
        r = subprocess.run([BINARY, "make-model", "--arch", "llama", "--dtype", "q8_0", "-o", str(MODEL)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        replicas = [Server(BINARY, MODEL, *REPLICA_ARGS, ready=False, threads=1, kv_cache_gb=0.05) for _ in range(3)]
        try:
            for s in replicas:
                assert s.wait_ready(60), s.lines
            start = time.time()
            test_affinity_vs_round_robin(replicas)
            print(f"ok   affinity vs round robin ({time.time() - start:.1f} s)", flush=True)
            start = time.time()
            test_chat_affinity(replicas)
            print(f"ok   chat affinity ({time.time() - start:.1f} s)", flush=True)
            start = time.time()
            test_replica_killed_mid_run(replicas)
            print(f"ok   replica killed mid-run ({time.time() - start:.1f} s)", flush=True)
        finally:
            for s in replicas:
                if s.proc.poll() is None:
                    s.stop()


if __name__ == "__main__":
    main()
