#!/usr/bin/env python3
"""Debian's Prometheus server with deploy/prometheus/ (prometheus.yml, rules.yml; targets.json pointed at the server
under test, intervals shortened to 0.5 s) scrapes a running `parallm serve` under load; its HTTP API must return the
request, token and KV-cache series with the values the server reports, the histograms must give quantiles and the
recording rules must evaluate: the exposition is read by the real thing, not by a parser of ours. Skipped (exit 77)
without prometheus.

Usage: prometheus_server_test.py PARALLM_BINARY"""
import json
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import server_util  # noqa: E402
from server_util import MODEL_NAME, Server, metric  # noqa: E402

BINARY = sys.argv[1]
DEPLOY = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "prometheus"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    def __init__(self, config_dir):
        for _ in range(5):  # the probed port may be taken before prometheus binds it: pick again
            self.port = free_port()
            self.proc = subprocess.Popen(
                ["prometheus", f"--config.file={config_dir / 'prometheus.yml'}",
                 f"--storage.tsdb.path={config_dir / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
                 "--log.level=warn"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            deadline = time.time() + 30
            while time.time() < deadline and self.proc.poll() is None:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                        if r.status == 200:
                            return
                except OSError:
                    time.sleep(0.1)
            self.stop()
        raise RuntimeError(f"prometheus did not start: {self.proc.stdout.read()}")

    def query(self, expr):
        """Instant query: {frozenset(labels): value}."""
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=10) as r:
            out = json.load(r)
        assert out["status"] == "success", out
        return {frozenset(s["metric"].items()): float(s["value"][1]) for s in out["data"]["result"]}

    def wait(self, expr, predicate, what, timeout=20):
        deadline = time.time() + timeout
        while True:
            got = self.query(expr)
            if predicate(got):
                return got
            if time.time() > deadline:
                raise AssertionError(f"{what}: {expr} gave {got}")
            time.sleep(0.2)

    def stop(self):
        server_util.stop_process(self.proc)


def one(result):
    assert len(result) == 1, result
    return next(iter(result.values()))


def main():
    if shutil.which("prometheus") is None:
        print("SKIPPED: prometheus is not installed (scripts/setup.sh installs Debian's)")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        model = tmp / "tiny.gguf"
        r = subprocess.run([BINARY, "make-model", "--arch", "llama", "--dtype", "q8_0", "-o", str(model)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        server = Server(BINARY, model, threads=1, kv_cache_gb=0.05)
        prom = None
        try:
            # The repository's configuration, with this server as the target and 0.5 s intervals.
            config = (DEPLOY / "prometheus.yml").read_text()
            assert config.count(": 5s") == 2, "prometheus.yml's intervals changed: update this test"
            (tmp / "prometheus.yml").write_text(config.replace(": 5s", ": 500ms"))
            shutil.copy(DEPLOY / "rules.yml", tmp / "rules.yml")
            targets = json.loads((DEPLOY / "targets.json").read_text())
            targets[0]["targets"] = [f"127.0.0.1:{server.port}"]
            (tmp / "targets.json").write_text(json.dumps(targets))
            (tmp / "haproxy_targets.json").write_text("[]")  # no balancer in this test
            start = time.time()
            prom = Prometheus(tmp)
            prom.wait('up{job="parallm"}', lambda g: g and one(g) == 1, "the server is scraped")

            # Long generations keep requests running and KV blocks in use across several scrapes.
            stop = threading.Event()

            def keep_busy():
                while not stop.is_set():
                    server.post("/v1/completions", {"model": MODEL_NAME, "prompt": "busy " * 40, "max_tokens": 400,
                                                    "ignore_eos": True}, timeout=60)

            busy = [threading.Thread(target=keep_busy) for _ in range(3)]
            for t in busy:
                t.start()
            try:
                kv = prom.wait("max_over_time(vllm:kv_cache_usage_perc[1m])", lambda g: g and one(g) > 0,
                               "KV-cache use seen while busy")
                running = prom.wait("max_over_time(vllm:num_requests_running[1m])", lambda g: g and one(g) >= 1,
                                    "running requests seen while busy")
            finally:
                stop.set()
                for t in busy:
                    t.join()
            sent = 0
            for i in range(8):
                status, out = server.post("/v1/completions", {"model": MODEL_NAME, "prompt": f"request {i} " * 5,
                                                              "max_tokens": 16, "ignore_eos": True})
                assert status == 200, out
                sent += 1
            # Idle now: Prometheus's latest samples must equal what the server itself reports.
            page = server.metrics()
            want = {
                "vllm:prompt_tokens_total": metric(page, "vllm:prompt_tokens_total"),
                "vllm:generation_tokens_total": metric(page, "vllm:generation_tokens_total"),
                'vllm:request_success_total{finished_reason="length"}':
                    metric(page, "vllm:request_success_total", finished_reason="length"),
                "vllm:kv_cache_usage_perc": 0.0,
                "vllm:num_requests_running": 0.0,
                "vllm:num_requests_waiting": 0.0,
            }
            assert want['vllm:request_success_total{finished_reason="length"}'] >= sent + 3
            for expr, value in want.items():
                got = prom.wait(expr, lambda g, v=value: g and one(g) == v, f"{expr} should reach {value}")
                labels = dict(next(iter(got)))
                assert labels["model_name"] == MODEL_NAME and labels["job"] == "parallm", labels
            p50 = one(prom.query("histogram_quantile(0.5, rate(vllm:e2e_request_latency_seconds_bucket[1m]))"))
            assert 0 < p50 < 60, p50
            prom.wait("parallm:generation_tokens:rate1m", lambda g: g and one(g) > 0, "the recording rules evaluate")
            ttft = one(prom.wait("parallm:time_to_first_token_seconds:p50", lambda g: bool(g), "TTFT quantile rule"))
            print(f"prometheus: up; peak KV-cache use {one(kv):.3f}, peak running {one(running):.0f}; "
                  f"{want['vllm:generation_tokens_total']:.0f} generated and {want['vllm:prompt_tokens_total']:.0f} "
                  f"prompt tokens, {want[next(k for k in want if 'success' in k)]:.0f} requests finished by length, "
                  f"as the server reports; e2e p50 {p50:.3f} s, TTFT p50 {ttft:.4f} s "
                  f"({time.time() - start:.1f} s)")
        finally:
            if prom:
                prom.stop()
            assert server.stop() == 0


if __name__ == "__main__":
    main()
