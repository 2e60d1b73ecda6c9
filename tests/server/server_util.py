"""Helpers for the `parallm serve` end-to-end tests: a tiny model with a real tokenizer and chat template, a
server on a free loopback port, and plain-stdlib HTTP (http.client, raw sockets) with SSE parsing."""
import http.client
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import threading
import time

MODEL_NAME = "tiny"


def make_model(binary, tmp, tokenizer_dir):
    """A random-weight Qwen3-shaped model carrying the real Qwen3 tokenizer and chat template."""
    model = pathlib.Path(tmp) / "q3.gguf"
    r = subprocess.run([binary, "make-model", "--arch", "qwen3", "--dtype", "q8_0", "--tokenizer", str(tokenizer_dir),
                        "-o", str(model)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return model


class Server:
    """`parallm serve` on port 0; `port` is read from its "listening on" line."""

    def __init__(self, binary, model, *extra, ready=True, threads=2, kv_cache_gb=0.25, port=0):
        args = [binary, "serve", "-m", str(model), "--port", str(port), "--served-model-name", MODEL_NAME,
                "--kv-cache-gb", str(kv_cache_gb), "-t", str(threads), *map(str, extra)]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.port = None
        self._ready = threading.Event()
        self._listening = threading.Event()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        self.stderr = []
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()
        assert self._listening.wait(30), f"server did not start listening: {self.lines} {self.stderr}"
        if ready:
            assert self._ready.wait(60), f"model not ready: {self.lines} {self.stderr}"

    def _read_stdout(self):
        for line in self.proc.stdout:
            self.lines.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                self._listening.set()
            if "model ready" in line:
                self._ready.set()

    def wait_ready(self, timeout=60):
        return self._ready.wait(timeout)

    def conn(self, timeout=20):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, conn=None, timeout=20):
        """Returns (status, headers dict (lower-case names), body bytes)."""
        own = conn is None
        c = conn or self.conn(timeout)
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        if own:
            c.close()
        return r.status, hdrs, data

    def post(self, path, body, **kw):
        status, headers, data = self.request("POST", path, body, **kw)
        return status, json.loads(data) if data else None

    def stream(self, path, body, conn=None, timeout=20):
        """A streaming request: (status, list of parsed chunks, saw_done). Uses http.client's de-chunking."""
        c = conn or self.conn(timeout)
        c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            return r.status, json.loads(r.read()), False
        chunks, done = parse_sse(r.read().decode())
        if conn is None:
            c.close()
        return r.status, chunks, done

    def metrics(self):
        status, _, data = self.request("GET", "/metrics")
        assert status == 200
        return parse_metrics(data.decode())

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise


def stop_process(proc, timeout=10):
    """Terminates a helper process (HAProxy, Prometheus) and waits for it; kills it if it does not exit in time."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()


def parse_sse(text):
    """Splits an event stream into its JSON chunks; asserts the framing: only `data: ...\\n\\n` events."""
    events = text.split("\n\n")
    assert events[-1] == "", f"stream does not end with a blank line: {text[-200:]!r}"
    chunks, done = [], False
    for e in events[:-1]:
        assert e.startswith("data: "), f"not an SSE data event: {e!r}"
        payload = e[len("data: "):]
        assert not done, "events after [DONE]"
        if payload == "[DONE]":
            done = True
        else:
            chunks.append(json.loads(payload))
    return chunks, done


def parse_metrics(text):
    """Prometheus text -> {(name, frozenset(labels)): value}; checks every sample has model_name."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r'([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)', line)
        assert m, f"bad metrics line: {line!r}"
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2)))
        assert labels.get("model_name") == MODEL_NAME, line
        del labels["model_name"]
        out[(m.group(1), frozenset(labels.items()))] = float(m.group(3))
    return out


def metric(metrics, name, **labels):
    return metrics[(name, frozenset(labels.items()))]


def stream_text(chunks, api):
    """Text per choice index from stream chunks."""
    texts = {}
    for c in chunks:
        for ch in c["choices"]:
            piece = ch["delta"].get("content", "") if api == "chat" else ch["text"]
            texts[ch["index"]] = texts.get(ch["index"], "") + (piece or "")
    return texts


def raw_http(port, data, read_timeout=10, shutdown_write=False):
    """Sends raw bytes, returns everything the server sends until it closes (or the timeout)."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(read_timeout)
    s.sendall(data)
    if shutdown_write:
        s.shutdown(socket.SHUT_WR)
    got = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
    except socket.timeout:
        pass
    s.close()
    return got


def dechunk(body):
    """HTTP chunked body -> list of chunk payloads (asserts the final 0-size chunk)."""
    chunks = []
    while True:
        line, _, rest = body.partition(b"\r\n")
        size = int(line, 16)
        if size == 0:
            assert rest == b"\r\n", rest
            return chunks
        chunks.append(rest[:size])
        assert rest[size:size + 2] == b"\r\n"
        body = rest[size + 2:]


def check_error(status, body, want_status, param=None, message_part=None):
    assert status == want_status, (status, body)
    assert set(body) == {"error"}, body
    e = body["error"]
    assert set(e) == {"message", "type", "param", "code"}, e
    assert isinstance(e["message"], str) and e["message"], e
    assert e["code"] is None
    if param is not None:
        assert e["param"] == param, (param, e)
    if message_part is not None:
        assert message_part in e["message"], (message_part, e["message"])


def run_tests(tests):
    failures = 0
    for t in tests:
        start = time.time()
        try:
            t()
            print(f"ok   {t.__name__} ({time.time() - start:.1f} s)", flush=True)
        except Exception:
            failures += 1
            import traceback
            print(f"FAIL {t.__name__}", flush=True)
            traceback.print_exc()
    if failures:
        sys.exit(f"{failures} of {len(tests)} checks failed")
    print(f"all {len(tests)} checks passed")
