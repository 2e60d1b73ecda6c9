#!/usr/bin/env python3
"""deploy/kubernetes/ checked without a cluster: the manifests hang together (the Service and the InferencePool
select the Deployment's pods, readiness probes /health on the serving port, the scrape annotations name /metrics on
it, the pool's endpoint picker is the Service it references), the Deployment's own `parallm serve` arguments start
a server here (model and address swapped for a local tiny model), and every metric the endpoint picker is
configured to read is on that server's /metrics as the picker parses it and moves under load: queued and running
requests and KV-cache use rise and fall back to 0, the cache info carries the configured block size and block count,
and the LoRA info gauge has empty adapter lists (which the picker skips) and a time that advances. Skipped (exit 77)
without PyYAML.

Usage: kubernetes_test.py PARALLM_BINARY"""
import pathlib
import re
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from server_util import MODEL_NAME, Server  # noqa: E402

BINARY = sys.argv[1]
DEPLOY = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
# The endpoint picker's metric flags and their defaults (gateway-api-inference-extension, pkg/epp/server options).
EPP_METRIC_FLAGS = {
    "--total-queued-requests-metric": "vllm:num_requests_waiting",
    "--total-running-requests-metric": "vllm:num_requests_running",
    "--kv-cache-usage-percentage-metric": "vllm:kv_cache_usage_perc",
    "--lora-info-metric": "vllm:lora_requests_info",
    "--cache-info-metric": "vllm:cache_config_info",
}


def load_manifests():
    import yaml
    docs = {}
    for path in sorted(DEPLOY.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                docs[(doc["kind"], doc["metadata"]["name"])] = doc
    return docs


def flag_value(args, flag):
    return args[args.index(flag) + 1] if flag in args else None


def check_manifests(docs):
    deployment = docs[("Deployment", "parallm")]
    pod = deployment["spec"]["template"]
    labels = pod["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (container,) = pod["spec"]["containers"]
    args = container["args"]
    assert args[0] == "serve", args
    port = int(flag_value(args, "--port"))
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["http"] == port
    probe = container["readinessProbe"]["httpGet"]
    assert probe["path"] == "/health" and ports.get(probe["port"], probe["port"]) == port, probe
    notes = pod["metadata"]["annotations"]
    assert notes["prometheus.io/scrape"] == "true" and notes["prometheus.io/path"] == "/metrics", notes
    assert int(notes["prometheus.io/port"]) == port
    grace = float(flag_value(args, "--shutdown-grace") or 30)
    assert pod["spec"]["terminationGracePeriodSeconds"] > grace, "the pod must outlive --shutdown-grace"
    service = docs[("Service", "parallm")]
    assert service["spec"]["selector"].items() <= labels.items()
    assert service["spec"]["ports"][0]["targetPort"] in ("http", port)
    pool = docs[("InferencePool", "parallm")]
    assert pool["apiVersion"] == "inference.networking.k8s.io/v1"
    assert pool["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pool["spec"]["targetPorts"] == [{"number": port}]
    epp_ref = pool["spec"]["endpointPickerRef"]
    epp_service = docs[("Service", epp_ref["name"])]
    assert epp_service["spec"]["ports"][0]["port"] == epp_ref["portNumber"]
    epp = docs[("Deployment", epp_ref["name"])]
    assert epp_service["spec"]["selector"].items() <= epp["spec"]["template"]["metadata"]["labels"].items()
    (epp_container,) = epp["spec"]["template"]["spec"]["containers"]
    assert flag_value(epp_container["args"], "--pool-name") == pool["metadata"]["name"]
    route = docs[("HTTPRoute", "parallm")]
    assert route["spec"]["rules"][0]["backendRefs"][0]["name"] == pool["metadata"]["name"]
    metrics = {flag: flag_value(epp_container["args"], flag) or default for flag, default in EPP_METRIC_FLAGS.items()}
    return args, metrics


def scrape(server):
    """/metrics as the picker reads it: {name: (type, [(labels, value)])}."""
    status, _, body = server.request("GET", "/metrics")
    assert status == 200
    families = {}
    for line in body.decode().splitlines():
        m = re.fullmatch(r"# TYPE (\S+) (\S+)", line)
        if m:
            families[m.group(1)] = (m.group(2), [])
            continue
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r'([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)', line)
        assert m, line
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2)))
        if m.group(1) in families:
            families[m.group(1)][1].append((labels, float(m.group(3))))
    return families


def gauge(families, name):
    kind, samples = families[name]
    assert kind == "gauge" and len(samples) == 1, (name, kind, samples)
    return samples[0]


def main():
    try:
        docs = load_manifests()
    except ImportError:
        print("SKIPPED: PyYAML is missing (scripts/setup.sh installs Debian's python3-yaml)")
        sys.exit(77)
    args, metrics = check_manifests(docs)
    print(f"     manifests agree; the endpoint picker reads {sorted(metrics.values())}")
    with tempfile.TemporaryDirectory() as tmp:
        model = pathlib.Path(tmp) / "tiny.gguf"
        r = subprocess.run([BINARY, "make-model", "--arch", "llama", "--dtype", "q8_0", "-o", str(model)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        # The Deployment's arguments, with a local model on loopback, and 2 running requests at most so that a
        # handful of requests queue (Server adds the port, the served name and a small cache itself).
        local = list(args[1:])
        for flag in ("--model", "--port", "--served-model-name", "--kv-cache-gb"):
            i = local.index(flag)
            del local[i:i + 2]
        for flag, value in (("--host", "127.0.0.1"), ("--max-num-seqs", "2")):
            local[local.index(flag) + 1] = value
        server = Server(BINARY, model, *local, threads=1, kv_cache_gb=0.05)
        try:
            idle = scrape(server)
            for name in metrics.values():
                assert name in idle, f"{name} is missing from /metrics"
            for name in ("vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc"):
                assert gauge(idle, metrics_name(metrics, name))[1] == 0, name
            info = gauge(idle, metrics["--cache-info-metric"])[0]
            assert info["block_size"] == "16" and int(info["num_gpu_blocks"]) > 0, info
            lora_labels, lora_time = gauge(idle, metrics["--lora-info-metric"])
            assert lora_labels["running_lora_adapters"] == lora_labels["waiting_lora_adapters"] == "", lora_labels
            assert lora_labels["max_lora"] == "0"

            # Load: 6 long requests, 2 run at a time; the picker's gauges must show it.
            seen = {name: 0.0 for name in metrics.values()}
            done = []
            threads = [threading.Thread(target=lambda: done.append(server.post(
                "/v1/completions", {"model": MODEL_NAME, "prompt": "load " * 50, "max_tokens": 600,
                                    "ignore_eos": True}, timeout=120)[0]))
                for _ in range(6)]
            for t in threads:
                t.start()
            deadline = time.time() + 60
            queued, running, kv = (metrics["--total-queued-requests-metric"], metrics["--total-running-requests-metric"],
                                   metrics["--kv-cache-usage-percentage-metric"])
            while time.time() < deadline and not (seen[queued] >= 1 and seen[running] >= 2 and seen[kv] > 0):
                busy = scrape(server)
                for name in (queued, running, kv):
                    seen[name] = max(seen[name], gauge(busy, name)[1])
                time.sleep(0.01)
            for t in threads:
                t.join()
            assert done == [200] * 6, done
            assert seen[queued] >= 1 and seen[running] == 2 and 0 < seen[kv] <= 1, seen
            after = scrape(server)
            for name in (queued, running, kv):
                assert gauge(after, name)[1] == 0, (name, gauge(after, name))
            assert gauge(after, metrics["--lora-info-metric"])[1] > lora_time
            assert gauge(after, metrics["--cache-info-metric"])[0] == info
            print(f"kubernetes: under load the picker saw {seen[queued]:.0f} queued, {seen[running]:.0f} running, "
                  f"KV-cache use {seen[kv]:.3f}; all back to 0 after; cache info {info}; LoRA info time advances")
        finally:
            assert server.stop() == 0


def metrics_name(metrics, vllm_name):
    """The name the picker is configured to read for what vLLM calls `vllm_name`."""
    flag = next(f for f, default in EPP_METRIC_FLAGS.items() if default == vllm_name)
    return metrics[flag]


if __name__ == "__main__":
    main()
