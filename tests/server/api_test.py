#!/usr/bin/env python3
"""`parallm serve` end to end, one server: every endpoint, OpenAI shapes (completions and chat, streamed and not,
n, logprobs, stop, seed, echo, usage with cached_tokens), SSE framing byte for byte on a raw socket, and every
kind of bad input answered with the right status and OpenAI error body while the server keeps serving.

Usage: api_test.py PARALLM_BINARY FIXTURES_DIR"""
import json
import pathlib
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from server_util import (MODEL_NAME, Server, check_error, dechunk, make_model, metric, parse_sse, raw_http,  # noqa
                         run_tests, stream_text)

BINARY, FIXTURES = sys.argv[1], pathlib.Path(sys.argv[2])
S = None  # the server under test
# The random-weight model's distributions are very peaked; a high temperature makes seeded sampling matter (top_k
# keeps the sampler from sorting the whole 151k vocabulary for every token).
HOT = 100.0


def completion(**kw):
    body = {"model": MODEL_NAME, "max_tokens": 8, "ignore_eos": True}
    body.update(kw)
    status, out = S.post("/v1/completions", body)
    assert status == 200, out
    return out


def chat(**kw):
    body = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 6, "ignore_eos": True}
    body.update(kw)
    status, out = S.post("/v1/chat/completions", body)
    assert status == 200, out
    return out


def still_serving():
    out = completion(prompt="still here", max_tokens=2)
    assert out["choices"][0]["finish_reason"] == "length"


def test_health_models_version():
    status, headers, body = S.request("GET", "/health")
    assert status == 200, body
    status, _, body = S.request("GET", "/v1/models")
    models = json.loads(body)
    assert status == 200 and models["object"] == "list", models
    assert models["data"][0]["id"] == MODEL_NAME and models["data"][0]["root"].endswith("q3.gguf"), models
    assert models["data"][0]["max_model_len"] > 0
    status, _, body = S.request("GET", "/version")
    assert status == 200 and "version" in json.loads(body)


def test_completion_shapes():
    out = completion(prompt="Hello world")
    assert out["object"] == "text_completion" and out["id"].startswith("cmpl-") and out["model"] == MODEL_NAME
    assert isinstance(out["created"], int)
    (choice,) = out["choices"]
    assert choice["index"] == 0 and choice["finish_reason"] == "length" and choice["logprobs"] is None
    status, tok = S.post("/tokenize", {"prompt": "Hello world"})
    assert status == 200, tok
    usage = out["usage"]
    assert usage["prompt_tokens"] == tok["count"] == len(tok["tokens"]) == 2, (usage, tok)
    assert usage["completion_tokens"] == 8 and usage["total_tokens"] == 10
    assert usage["prompt_tokens_details"] == {"cached_tokens": 0} or usage["prompt_tokens_details"]["cached_tokens"] >= 0
    # Every prompt shape gives the same text for the same tokens.
    ids = tok["tokens"]
    for prompt in (ids, [ids], ["Hello world"]):
        again = completion(prompt=prompt)
        assert again["choices"][0]["text"] == choice["text"], (prompt, again)
    status, detok = S.post("/detokenize", {"tokens": ids})
    assert status == 200 and detok == {"prompt": "Hello world"}, detok


def test_many_prompts_and_n():
    out = completion(prompt=["one", "two two", "three"], n=2, temperature=HOT, top_k=20, seed=5)
    assert [c["index"] for c in out["choices"]] == list(range(6)), out
    assert out["usage"]["completion_tokens"] == 6 * 8
    status, tok = S.post("/tokenize", {"prompt": "two two"})
    assert out["usage"]["prompt_tokens"] == 1 + tok["count"] + 1, out["usage"]
    # Copy k of n uses seed + k: choice 1 of prompt 0 equals a request with seed 6.
    solo = completion(prompt="one", temperature=HOT, top_k=20, seed=6)
    assert solo["choices"][0]["text"] == out["choices"][1]["text"], (solo, out)
    assert out["choices"][0]["text"] != out["choices"][1]["text"], out


def test_chat_shapes():
    out = chat()
    assert out["object"] == "chat.completion" and out["id"].startswith("chatcmpl-"), out
    (choice,) = out["choices"]
    assert choice["message"]["role"] == "assistant" and isinstance(choice["message"]["content"], str)
    # "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n" is 9 Qwen3 tokens.
    assert out["usage"]["prompt_tokens"] == 9, out["usage"]
    # max_completion_tokens wins over max_tokens; content as parts; tools reach the template.
    out = chat(max_tokens=9, max_completion_tokens=3,
               messages=[{"role": "user", "content": [{"type": "text", "text": "Hi"}]}])
    assert out["usage"]["completion_tokens"] == 3 and out["usage"]["prompt_tokens"] == 9, out
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
                                               "parameters": {"type": "object", "properties": {}}}}]
    out = chat(tools=tools, tool_choice="none", max_tokens=1)
    assert out["usage"]["prompt_tokens"] > 50, out["usage"]  # the template wrote the tool list
    status, tok = S.post("/tokenize", {"messages": [{"role": "user", "content": "Hi"}]})
    assert status == 200 and tok["count"] == 9, tok


def test_streams_equal_whole():
    for api, path, extra in (("completions", "/v1/completions", {"prompt": "Once upon a time"}),
                             ("chat", "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}]})):
        body = {"model": MODEL_NAME, "max_tokens": 12, "ignore_eos": True, "temperature": HOT, "top_k": 20, "seed": 11, **extra}
        status, whole = S.post(path, body)
        assert status == 200
        status, chunks, done = S.stream(path, {**body, "stream": True, "stream_options": {"include_usage": True}})
        assert status == 200 and done, chunks
        usage_chunk = chunks[-1]
        # The same prompt a second time: all its tokens but the last are found in the prefix cache.
        streamed_usage = dict(usage_chunk["usage"])
        cached = streamed_usage.pop("prompt_tokens_details")["cached_tokens"]
        assert cached == whole["usage"]["prompt_tokens"] - 1, usage_chunk
        assert usage_chunk["choices"] == [] and streamed_usage == {k: v for k, v in whole["usage"].items()
                                                                   if k != "prompt_tokens_details"}, (usage_chunk, whole)
        for c in chunks[:-1]:
            assert c["id"] == chunks[0]["id"] and c["usage"] is None
            assert c["object"] == ("chat.completion.chunk" if api == "chat" else "text_completion")
        if api == "chat":
            assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
            assert all("role" not in c["choices"][0]["delta"] for c in chunks[1:-1])
            want = whole["choices"][0]["message"]["content"]
        else:
            want = whole["choices"][0]["text"]
        assert stream_text(chunks[:-1], api)[0] == want
        finals = [c["choices"][0]["finish_reason"] for c in chunks[:-1]]
        assert finals[-1] == "length" and all(f is None for f in finals[:-1]), finals
        # Without include_usage: no usage chunk, no usage field.
        status, chunks, done = S.stream(path, {**body, "stream": True})
        assert done and all("usage" not in c for c in chunks) and stream_text(chunks, api)[0] == want


def test_forced_tool_calls():
    """tool_choice "required" (with and without parallel calls) and a named function on the random-weight model:
    the grammar, not the model, makes every answer valid hermes calls (the parser Qwen3's template calls for) of
    the offered functions, whose arguments validate against each function's schema (python3-jsonschema); streamed
    answers reassemble to calls just as valid."""
    import jsonschema
    schemas = {
        "get_weather": {"type": "object", "additionalProperties": False, "required": ["city", "unit"],
                        "properties": {"city": {"type": "string", "maxLength": 6}, "unit": {"enum": ["c", "f"]},
                                       "days": {"type": "integer", "minimum": 1, "maximum": 7}}},
        "add_note": {"type": "object", "required": ["tags"],
                     "properties": {"tags": {"type": "array", "items": {"type": "string", "maxLength": 3},
                                             "maxItems": 2},
                                    "urgent": {"type": "boolean"}}},
    }
    tools = [{"type": "function", "function": {"name": n, "parameters": p}} for n, p in schemas.items()]
    named = {"type": "function", "function": {"name": "add_note"}}
    seen = set()
    for k, (choice, parallel) in enumerate((("required", True), ("required", False), (named, True))):
        body = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "Weather?"}], "tools": tools,
                "tool_choice": choice, "parallel_tool_calls": parallel, "n": 2, "temperature": HOT, "top_k": 50,
                # Parallel calls go on until the model stops: max_tokens may cut the last one (then dropped).
                "seed": 100 + k, "max_tokens": 160 if parallel and choice == "required" else 400}
        status, whole = S.post("/v1/chat/completions", body)
        assert status == 200, whole
        answers = [(c["message"]["content"], c["message"]["tool_calls"], c["finish_reason"]) for c in whole["choices"]]
        status, chunks, done = S.stream("/v1/chat/completions", {**body, "stream": True}, timeout=120)
        assert status == 200 and done, chunks
        streamed = {}
        for chunk in chunks:
            for c in chunk["choices"]:
                s = streamed.setdefault(c["index"], {"content": "", "calls": {}, "finish": None})
                s["content"] += c["delta"].get("content") or ""
                for d in c["delta"].get("tool_calls") or []:
                    call = s["calls"].setdefault(d["index"], {"id": d.get("id"), "function": {"name": "", "arguments": ""}})
                    call["function"]["name"] = d["function"].get("name") or call["function"]["name"]
                    call["function"]["arguments"] += d["function"].get("arguments") or ""
                s["finish"] = c["finish_reason"] or s["finish"]
        answers += [(s["content"] or None, list(s["calls"].values()), s["finish"]) for s in streamed.values()]
        assert len(answers) == 4, answers
        for content, calls, finish in answers:
            assert content is None and calls and finish == "tool_calls", (choice, content, calls, finish)
            if not parallel or choice == named:
                assert len(calls) == 1, calls
            for call in calls:
                name = call["function"]["name"]
                assert name in schemas and (choice != named or name == "add_note"), call
                assert call["id"].startswith("call_"), call
                jsonschema.validate(json.loads(call["function"]["arguments"]), schemas[name])
                seen.add(name)
    assert seen == set(schemas), seen  # "required" chose among the functions


def test_sse_framing_bytes():
    body = json.dumps({"model": MODEL_NAME, "prompt": "Hello", "max_tokens": 4, "ignore_eos": True, "stream": True,
                       "stream_options": {"include_usage": True}}).encode()
    req = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
           b"x-request-id: abc-123\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    got = raw_http(S.port, req)
    head, _, rest = got.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "HTTP/1.1 200 OK", lines
    headers = {k.lower(): v for k, v in (l.split(": ", 1) for l in lines[1:])}
    assert headers["content-type"].startswith("text/event-stream"), headers
    assert headers["transfer-encoding"] == "chunked" and headers["x-request-id"] == "abc-123", headers
    events = dechunk(rest)
    # One HTTP chunk per event, each exactly "data: <compact JSON>\n\n", the last "data: [DONE]\n\n".
    assert events[-1] == b"data: [DONE]\n\n", events
    assert len(events) == 4 + 2, events  # 4 tokens + usage + [DONE]
    for e in events[:-1]:
        assert e.startswith(b"data: {") and e.endswith(b"}\n\n") and e.count(b"\n") == 2, e
        obj = json.loads(e[6:])
        assert e == b"data: " + json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n", e
    assert json.loads(events[-2][6:])["usage"]["completion_tokens"] == 4


def test_keep_alive_and_request_id():
    c = S.conn()
    for i in range(3):
        status, headers, body = S.request("POST", "/v1/completions",
                                          {"model": MODEL_NAME, "prompt": "a", "max_tokens": 1},
                                          headers={"x-request-id": f"r{i}"}, conn=c)
        assert status == 200 and headers["x-request-id"] == f"r{i}", headers
        # A bad request answers 400 and keeps the connection.
        status, headers, body = S.request("POST", "/v1/completions", "{oops", conn=c)
        assert status == 400 and headers.get("connection") == "keep-alive", headers
    c.close()


def test_pipelined_requests():
    # Two requests in one write: the second arrives while the first generates (the disconnect watch reads it) and
    # is answered after the first, in order, on the same connection.
    def req(prompt, rid):
        body = json.dumps({"model": MODEL_NAME, "prompt": prompt, "max_tokens": 3, "ignore_eos": True}).encode()
        return (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nx-request-id: " + rid + b"\r\nContent-Length: " +
                str(len(body)).encode() + b"\r\n\r\n" + body)
    got = raw_http(S.port, req("one", b"first") + req("two", b"second") +
                   b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert got.count(b"HTTP/1.1 200 OK") == 3, got
    assert got.index(b"x-request-id: first") < got.index(b"x-request-id: second"), got
    # Headers over the limit (64 KiB): 431 and close.
    got = raw_http(S.port, b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 431"), got[:100]
    still_serving()


def test_cached_tokens():
    prompt = list(range(1000, 1040))  # 40 tokens: two full blocks of 16, and 7 of the 8 after them (the last must run)
    first = completion(prompt=prompt, max_tokens=2)
    second = completion(prompt=prompt, max_tokens=2)
    assert second["usage"]["prompt_tokens"] == 40
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] == 39, second["usage"]
    assert first["choices"][0]["text"] == second["choices"][0]["text"]


def test_logprobs_shapes():
    out = completion(prompt="Hello world", max_tokens=4, logprobs=3)
    lp = out["choices"][0]["logprobs"]
    assert set(lp) == {"tokens", "token_logprobs", "top_logprobs", "text_offset"}, lp
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == len(lp["text_offset"]) == 4
    assert "".join(lp["tokens"]) == out["choices"][0]["text"]
    assert lp["text_offset"][0] == 0 and all(len(t) == 3 for t in lp["top_logprobs"]), lp
    assert all(isinstance(x, float) and x <= 0 for x in lp["token_logprobs"])
    # Streamed: the same logprobs, offsets continuing across chunks.
    status, chunks, done = S.stream("/v1/completions", {"model": MODEL_NAME, "prompt": "Hello world", "max_tokens": 4,
                                                        "ignore_eos": True, "logprobs": 3, "stream": True})
    offsets = [o for c in chunks for o in c["choices"][0]["logprobs"]["text_offset"]]
    assert offsets == lp["text_offset"], (offsets, lp)
    out = chat(max_tokens=3, logprobs=True, top_logprobs=2)
    content = out["choices"][0]["logprobs"]["content"]
    assert len(content) == 3
    for t in content:
        assert set(t) == {"token", "logprob", "bytes", "top_logprobs"}, t
        assert bytes(t["bytes"]) == t["token"].encode() and len(t["top_logprobs"]) == 2
        assert set(t["top_logprobs"][0]) == {"token", "logprob", "bytes"}
    assert chat(max_tokens=2)["choices"][0]["logprobs"] is None


def test_stop_seed_echo():
    base = completion(prompt="The", max_tokens=10, temperature=HOT, top_k=20, seed=3)
    text = base["choices"][0]["text"]
    again = completion(prompt="The", max_tokens=10, temperature=HOT, top_k=20, seed=3)
    assert again["choices"][0]["text"] == text, "same seed, same text"
    others = {completion(prompt="The", max_tokens=10, temperature=HOT, top_k=20, seed=s)["choices"][0]["text"] for s in range(4, 8)}
    assert len(others | {text}) > 1, "different seeds all gave the same text"
    # A stop string from the middle of the text: the text ends just before it.
    cut = len(text) // 2
    stop = text[cut:cut + 3]
    if stop.strip():
        out = completion(prompt="The", max_tokens=10, temperature=HOT, top_k=20, seed=3, stop=[stop])
        assert out["choices"][0]["finish_reason"] == "stop", out
        assert out["choices"][0]["text"] == text[:text.index(stop)], (out, text, stop)
    lp = completion(prompt="Hello world", max_tokens=4, logprobs=0)["choices"][0]["logprobs"]
    out = completion(prompt="Hello world", max_tokens=4, echo=True)
    assert out["choices"][0]["text"] == "Hello world" + "".join(lp["tokens"]), out
    status, chunks, done = S.stream("/v1/completions", {"model": MODEL_NAME, "prompt": "Hello world", "max_tokens": 4,
                                                        "ignore_eos": True, "echo": True, "stream": True})
    assert stream_text(chunks, "completions")[0] == out["choices"][0]["text"]


def test_bad_input():
    P = "/v1/completions"
    C = "/v1/chat/completions"
    cases = [
        (P, "{not json", 400, None, "not valid JSON"),
        (P, "[1, 2]", 400, None, "JSON object"),
        (P, {"model": MODEL_NAME, "prompt": "x", "temperature": "hot"}, 400, "temperature", None),
        (P, {"model": MODEL_NAME, "prompt": "x", "max_tokens": "5"}, 400, "max_tokens", None),
        (P, {"model": MODEL_NAME, "prompt": 5}, 400, "prompt", None),
        (P, {"model": MODEL_NAME, "prompt": [[1, 2], "x"]}, 400, "prompt", None),
        (P, {"model": MODEL_NAME, "prompt": [1, 10**9]}, 400, "prompt", "vocabulary"),
        (P, {"model": MODEL_NAME}, 400, "prompt", "required"),
        (P, {"model": MODEL_NAME, "prompt": []}, 400, "prompt", None),
        (P, {"model": MODEL_NAME, "prompt": ""}, 400, "prompt", "empty"),
        (P, {"model": MODEL_NAME, "prompt": "x", "max_tokens": -1}, 400, "max_tokens", None),
        (P, {"model": MODEL_NAME, "prompt": "x", "max_tokens": 10**12}, 400, "max_tokens", None),
        (P, {"model": MODEL_NAME, "prompt": "x", "temperature": -0.5}, 400, "temperature", None),
        (P, {"model": MODEL_NAME, "prompt": "x", "top_p": 1.5}, 400, "top_p", None),
        (P, {"model": MODEL_NAME, "prompt": "x", "top_p": 0}, 400, "top_p", None),
        (P, {"model": MODEL_NAME, "prompt": "x", "n": 0}, 400, "n", None),
        (P, {"model": MODEL_NAME, "prompt": "x", "n": 1000}, 400, "n", None),
        (P, {"model": MODEL_NAME, "prompt": "x", "logprobs": 50}, 400, "logprobs", None),
        (P, {"model": MODEL_NAME, "prompt": "x", "stop": [1]}, 400, "stop", None),
        (P, {"model": MODEL_NAME, "prompt": "x", "suffix": "y"}, 400, "suffix", "not supported"),
        (P, {"model": MODEL_NAME, "prompt": "x", "stream": "yes"}, 400, "stream", None),
        (P, {"model": "gpt-4", "prompt": "x"}, 404, "model", "does not exist"),
        (P, {"model": MODEL_NAME, "prompt": list(range(100, 2200))}, 400, "prompt", "context"),
        (C, {"model": MODEL_NAME, "messages": []}, 400, "messages", "empty"),
        (C, {"model": MODEL_NAME}, 400, "messages", "required"),
        (C, {"model": MODEL_NAME, "messages": "hi"}, 400, "messages", None),
        (C, {"model": MODEL_NAME, "messages": [{"content": "no role"}]}, 400, "messages", "role"),
        (C, {"model": MODEL_NAME, "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400,
         "messages", None),
        (C, {"model": "nope", "messages": [{"role": "user", "content": "x"}]}, 404, "model", None),
        (C, {"model": MODEL_NAME, "messages": [{"role": "user", "content": "x"}], "max_completion_tokens": -3}, 400,
         "max_completion_tokens", None),
        (C, {"model": MODEL_NAME, "messages": [{"role": "user", "content": "word " * 3000}]}, 400, "messages",
         "context"),
        ("/tokenize", {"tokens": 1}, 400, "prompt", None),
        ("/detokenize", {"tokens": [-1]}, 400, "tokens", None),
    ]
    for path, body, want, param, part in cases:
        status, out = S.post(path, body)
        try:
            check_error(status, out, want, param, part)
        except AssertionError:
            raise AssertionError(f"{path} {str(body)[:120]}: got {status} {out}")
    # Invalid UTF-8 inside a JSON string.
    status, _, data = S.request("POST", P, b'{"model": "tiny", "prompt": "\xff\xfe bad"}')
    check_error(status, json.loads(data), 400, None, "UTF-8")
    # Unknown endpoint, wrong method.
    status, _, data = S.request("GET", "/v1/nothing")
    check_error(status, json.loads(data), 404)
    status, _, data = S.request("GET", "/v1/completions")
    check_error(status, json.loads(data), 405)
    still_serving()


def test_body_limit():
    big = json.dumps({"model": MODEL_NAME, "prompt": "x" * (2 << 20)})  # the server's limit is 1 MiB
    status, headers, data = S.request("POST", "/v1/completions", big)
    check_error(status, json.loads(data), 413, None, "limit")
    # Announced with Expect: 100-continue (as curl does), refused before the body is sent.
    s = socket.create_connection(("127.0.0.1", S.port))
    s.settimeout(10)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5000000\r\n\r\n")
    got = s.recv(4096)
    s.close()
    assert got.startswith(b"HTTP/1.1 413"), got
    still_serving()


def test_stalled_client():
    # Half a request, then silence: 408 after --timeout-keep-alive (2 s), while others are served meanwhile.
    s = socket.create_connection(("127.0.0.1", S.port))
    s.settimeout(10)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\": ")
    start = time.time()
    still_serving()
    got = b""
    while True:
        b = s.recv(4096)
        if not b:
            break
        got += b
    s.close()
    assert got.startswith(b"HTTP/1.1 408"), got
    assert 1.5 < time.time() - start < 8, time.time() - start
    # An idle keep-alive connection is closed without an answer.
    s = socket.create_connection(("127.0.0.1", S.port))
    s.settimeout(10)
    assert s.recv(10) == b""
    s.close()
    # Garbage instead of HTTP: 400 and close.
    got = raw_http(S.port, b"HELLO THERE\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 400"), got
    still_serving()


def test_metrics_page():
    m = S.metrics()
    names = {name for name, _ in m}
    for want in ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                 "vllm:cache_config_info", "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
                 "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total", "vllm:num_preemptions_total",
                 "vllm:request_success_total", "vllm:time_to_first_token_seconds_bucket",
                 "vllm:inter_token_latency_seconds_count", "vllm:e2e_request_latency_seconds_sum",
                 "vllm:request_queue_time_seconds_bucket"]:
        assert want in names, want
    assert metric(m, "vllm:prefix_cache_hits_total") >= 32  # test_cached_tokens ran before
    for reason in ("stop", "length", "abort"):
        assert ("vllm:request_success_total", frozenset({("finished_reason", reason)})) in m
    info = [k for k in m if k[0] == "vllm:cache_config_info"][0]
    assert dict(info[1])["block_size"] == "16" and int(dict(info[1])["num_gpu_blocks"]) > 0


def test_api_key():
    server = Server(BINARY, MODEL, "--api-key", "sekret")
    try:
        body = {"model": MODEL_NAME, "prompt": "x", "max_tokens": 1}
        status, out = server.post("/v1/completions", body)
        check_error(status, out, 401)
        status, out = server.post("/v1/completions", body, headers={"Authorization": "Bearer wrong"})
        check_error(status, out, 401)
        status, out = server.post("/v1/completions", body, headers={"Authorization": "Bearer sekret"})
        assert status == 200, out
        assert server.request("GET", "/health")[0] == 200  # probes need no key
    finally:
        assert server.stop() == 0


def test_port_in_use():
    r = subprocess.run([BINARY, "serve", "-m", str(MODEL), "--port", str(S.port)], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 1 and f"cannot listen on 127.0.0.1:{S.port}" in r.stderr, (r.returncode, r.stderr)
    r = subprocess.run([BINARY, "serve", "-m", "/nonexistent.gguf", "--port", "0"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 1 and "error:" in r.stderr, (r.returncode, r.stderr)
    still_serving()


def test_health_while_loading():
    # /health answers 503 until "model ready" is printed: every answer agrees with what was printed when it came.
    server = Server(BINARY, MODEL, ready=False)
    try:
        seen = set()
        while not server.wait_ready(0):
            try:
                status = server.request("GET", "/health", timeout=5)[0]
            except OSError:
                continue
            # "model ready" is written before the first 200 is sent; our reader thread may lag a little.
            assert status == 503 or server.wait_ready(5), "healthy before the model was ready"
            seen.add(status)
        assert server.wait_ready(60)
        assert server.request("GET", "/health")[0] == 200
        print(f"     /health answers seen while loading: {sorted(seen)}")
    finally:
        server.stop()


def main():
    global S, MODEL
    with tempfile.TemporaryDirectory() as tmp:
        MODEL = make_model(BINARY, tmp, FIXTURES / "tokenizers" / "qwen3")
        S = Server(BINARY, MODEL, "--max-body-mb", "1", "--timeout-keep-alive", "2")
        try:
            run_tests([test_health_models_version, test_completion_shapes, test_many_prompts_and_n, test_chat_shapes,
                       test_forced_tool_calls, test_streams_equal_whole, test_sse_framing_bytes, test_keep_alive_and_request_id, test_pipelined_requests,
                       test_cached_tokens, test_logprobs_shapes, test_stop_seed_echo, test_bad_input, test_body_limit,
                       test_stalled_client, test_metrics_page, test_api_key, test_port_in_use, test_health_while_loading])
        finally:
            assert S.stop() == 0, "SIGTERM must exit 0"


MODEL = None
if __name__ == "__main__":
    main()
