#!/usr/bin/env python3
"""A fake OpenAI-compatible server for testing `parallm bench serve` (stdlib only).

It streams `max_tokens` chunks (or a fixed number) of " hello" after `ttft` seconds, `delay` seconds apart,
as server-sent events over chunked transfer encoding (or, with close_delimited, a body that ends when the
connection closes), with `usage` in a last chunk when the request asks for include_usage. It records every
request body, arrival time and the peak number of streams open at once, and can fail every k-th request
with HTTP 500 or hang after the headers.

Run alone: fake_openai_server.py --port 8000 --delay 0.01
"""
import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeConfig:
    def __init__(self, **kw):
        self.model = kw.get("model", "fake-model")
        self.ttft = kw.get("ttft", 0.0)          # seconds before the first chunk
        self.delay = kw.get("delay", 0.0)        # seconds between chunks
        self.chunks = kw.get("chunks", 0)        # content chunks per answer; 0: max_tokens
        self.usage = kw.get("usage", True)       # send usage when include_usage is asked
        self.fail_every = kw.get("fail_every", 0)  # every k-th request (k, 2k, ...) gets HTTP 500
        self.hang = kw.get("hang", 0.0)          # seconds to stall after the headers, sending nothing
        self.close_delimited = kw.get("close_delimited", False)


class FakeState:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = []        # (arrival time.monotonic(), path, body dict)
        self.authorization = set()  # Authorization headers seen
        self.active = 0
        self.peak_active = 0
        self.tokens_sent = 0      # content chunks of the answers that completed
        self.failed_on_purpose = 0


def make_handler(config, state):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _json(self, code, obj):
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/v1/models":
                self._json(200, {"object": "list", "data": [{"id": config.model, "object": "model", "root": "x"}]})
            else:
                self._json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

        def _write(self, payload):
            data = f"data: {payload}\n\n".encode()
            if config.close_delimited:
                self.wfile.write(data)
            else:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            with state.lock:
                index = len(state.requests)
                state.requests.append((time.monotonic(), self.path, body))
                state.authorization.add(self.headers.get("Authorization"))
            if config.fail_every and (index + 1) % config.fail_every == 0:
                with state.lock:
                    state.failed_on_purpose += 1
                self._json(500, {"error": {"message": f"fake failure of request {index}", "type": "server_error",
                                           "param": None, "code": None}})
                return
            chat = self.path.endswith("/chat/completions")
            n = config.chunks or int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            if config.close_delimited:
                self.send_header("Connection", "close")
                self.close_connection = True
            else:
                self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            if config.hang:
                time.sleep(config.hang)
                self.close_connection = True
                return
            with state.lock:
                state.active += 1
                state.peak_active = max(state.peak_active, state.active)
            open_stream = True

            def close_stream():
                # Before the last bytes go out: once the client has them it may start its next request at once.
                nonlocal open_stream
                if open_stream:
                    open_stream = False
                    with state.lock:
                        state.active -= 1
            try:
                obj = "chat.completion.chunk" if chat else "text_completion"
                if chat:  # vLLM's first chat chunk: the role, no content
                    self._write(json.dumps({"object": obj, "choices": [{"index": 0, "delta": {"role": "assistant",
                                                                                             "content": ""}}]}))
                time.sleep(config.ttft)
                for i in range(n):
                    if i:
                        time.sleep(config.delay)
                    choice = {"index": 0, "finish_reason": "length" if i == n - 1 else None}
                    if chat:
                        choice["delta"] = {"content": " hello"}
                    else:
                        choice["text"] = " hello"
                    self._write(json.dumps({"object": obj, "model": config.model, "choices": [choice]}))
                if config.usage and (body.get("stream_options") or {}).get("include_usage"):
                    usage = {"completion_tokens": n}
                    if isinstance(body.get("prompt"), list):  # token ids: the prompt's length is known here
                        usage["prompt_tokens"] = len(body["prompt"])
                        usage["total_tokens"] = n + len(body["prompt"])
                    self._write(json.dumps({"object": obj, "choices": [], "usage": usage}))
                with state.lock:
                    state.tokens_sent += n
                close_stream()
                self._write("[DONE]")
                if not config.close_delimited:
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
            finally:
                close_stream()

    return Handler


class FakeServer:
    """Serves on 127.0.0.1 (a free port) in a background thread: `with FakeServer(delay=0.01) as f: f.url`."""

    def __init__(self, **kw):
        self.config = FakeConfig(**kw)
        self.state = FakeState()
        ThreadingHTTPServer.request_queue_size = 256  # many connects at once must not overflow the backlog
        self.httpd = ThreadingHTTPServer(("127.0.0.1", kw.get("port", 0)), make_handler(self.config, self.state))
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--ttft", type=float, default=0.0)
    p.add_argument("--delay", type=float, default=0.0)
    p.add_argument("--chunks", type=int, default=0)
    p.add_argument("--no-usage", action="store_true")
    p.add_argument("--fail-every", type=int, default=0)
    a = p.parse_args()
    server = FakeServer(port=a.port, ttft=a.ttft, delay=a.delay, chunks=a.chunks, usage=not a.no_usage,
                        fail_every=a.fail_every)
    print(server.url, flush=True)
    server.httpd.serve_forever()


if __name__ == "__main__":
    main()
