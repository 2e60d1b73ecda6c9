"""vLLM's interface (LLM, SamplingParams, RequestOutput, the tokenizer): results equal `parallm batch` for the same
requests, greedy and seeded, and bad input raises the right Python exception with the engine's message."""
import json
import math

import pytest

import parallm
from conftest import cli_batch, run_cli

WORDS = ["Hello world", "The capital of France is", "Once upon a time", "1 2 3 4 5", "Tell me a joke.",
         "Ünïcödé テキスト 🙂", "def main():", "a"]


def _params(i: int) -> dict:
    """A mix of greedy and seeded sampling, n > 1, penalties, bias and stop tokens (OpenAI field names)."""
    variants = [
        {"temperature": 0, "max_tokens": 12},
        {"temperature": 0.8, "top_p": 0.9, "seed": 7, "max_tokens": 10},
        {"temperature": 1.0, "top_k": 20, "seed": 3, "n": 3, "max_tokens": 8},
        {"temperature": 0.7, "min_p": 0.05, "seed": 11, "presence_penalty": 0.5, "frequency_penalty": 0.3,
         "max_tokens": 9},
        {"temperature": 0, "repetition_penalty": 1.3, "max_tokens": 14, "logit_bias": {"100": 5.0}},
        {"temperature": 0.9, "seed": 5, "max_tokens": 16, "stop_token_ids": [11], "ignore_eos": True},
    ]
    return variants[i % len(variants)]


def _sampling(fields: dict) -> parallm.SamplingParams:
    return parallm.SamplingParams(**fields)


def test_generate_equals_cli_batch(cli, qwen3_model, llm, workdir):
    requests, prompts, params = [], [], []
    for i, text in enumerate(WORDS * 2):
        fields = _params(i)
        if i % 3 == 2:  # some as token ids
            ids = llm.get_tokenizer().encode(text)
            requests.append({"id": f"r{i}", "prompt_ids": ids, **fields})
            prompts.append(ids)
        else:
            requests.append({"id": f"r{i}", "prompt": text, **fields})
            prompts.append(text)
        params.append(_sampling(fields))
    expected = cli_batch(cli, qwen3_model, requests, workdir, "--max-num-seqs", "16", "--num-kv-blocks", "256")
    outputs = llm.generate(prompts, params)
    assert len(outputs) == len(prompts)
    for request, out in zip(requests, outputs):
        rec = expected[request["id"]]
        choices = rec.get("choices", [rec])
        assert len(out.outputs) == len(choices) == request.get("n", 1)
        for got, want in zip(out.outputs, choices):
            assert got.token_ids == want["token_ids"], request
            assert got.text == want["text"], request
            assert got.finish_reason == want["finish_reason"], request
        assert len(out.prompt_token_ids) == rec["usage"]["prompt_tokens"]
        assert out.finished
        if isinstance(out.prompt, str):
            assert out.prompt == request["prompt"]
        else:
            assert out.prompt is None and out.prompt_token_ids == request["prompt_ids"]


def test_chat_equals_cli_batch(cli, qwen3_model, llm, workdir):
    conversations = [[{"role": "user", "content": w}] for w in WORDS[:4]]
    conversations.append([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                          {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Again"}])
    requests = [{"id": f"c{i}", "messages": c, "max_tokens": 10, "temperature": 0.6, "seed": i}
                for i, c in enumerate(conversations)]
    expected = cli_batch(cli, qwen3_model, requests, workdir)
    outputs = llm.chat(conversations, [parallm.SamplingParams(max_tokens=10, temperature=0.6, seed=i)
                                       for i in range(len(conversations))])
    for request, out in zip(requests, outputs):
        rec = expected[request["id"]]
        assert out.outputs[0].token_ids == rec["token_ids"]
        assert out.outputs[0].text == rec["text"]
        assert len(out.prompt_token_ids) == rec["usage"]["prompt_tokens"]
        assert out.prompt.startswith("<|im_start|>") and out.prompt.endswith("<|im_start|>assistant\n")
    # One conversation (not a list of them) gives one output.
    single = llm.chat(conversations[0], parallm.SamplingParams(max_tokens=10, temperature=0.6, seed=0))
    assert len(single) == 1 and single[0].outputs[0].token_ids == outputs[0].outputs[0].token_ids


def test_stop_strings_and_logprobs(llm):
    greedy = parallm.SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
    full = llm.generate("Once upon a time", greedy)[0].outputs[0]
    assert full.finish_reason == "length" and len(full.token_ids) == 24
    assert full.cumulative_logprob is None and full.logprobs is None
    # A stop string taken from the middle of the greedy text cuts it there.
    cut = len(full.text) // 2
    stop = full.text[cut:cut + 3]
    assert stop.strip(), full.text
    stopped = llm.generate("Once upon a time", parallm.SamplingParams(
        temperature=0, max_tokens=24, ignore_eos=True, stop=[stop]))[0].outputs[0]
    assert stopped.finish_reason == "stop"
    assert stopped.text == full.text[:full.text.index(stop)]
    # logprobs=3: per token the sampled one and the top 3, ranks 1..3, cumulative = sum of the sampled ones.
    out = llm.generate("Once upon a time", parallm.SamplingParams(
        temperature=0, max_tokens=6, ignore_eos=True, logprobs=3))[0].outputs[0]
    assert out.token_ids == full.token_ids[:6]
    assert len(out.logprobs) == 6
    total = 0.0
    for token, entry in zip(out.token_ids, out.logprobs):
        assert token in entry and entry[token].rank == 1  # greedy picks the most likely
        assert sorted(e.rank for e in entry.values()) == [1, 2, 3]
        assert all(e.logprob <= 0 for e in entry.values())
        assert entry[token].decoded_token == llm.get_tokenizer().decode([token], skip_special_tokens=False)
        total += entry[token].logprob
    assert math.isclose(out.cumulative_logprob, total, rel_tol=1e-5)
    # skip_special_tokens: a special token the model writes (<|im_start|>: this tiny model repeats the prompt's last
    # token, and logit_bias pushes it too) stays out of the text by default and is kept when asked.
    start = llm.get_tokenizer().encode("<|im_start|>", add_special_tokens=False)
    assert len(start) == 1
    forced = dict(temperature=0, max_tokens=3, ignore_eos=True, logit_bias={start[0]: 100.0})
    skipped, kept = (llm.generate("Once upon a<|im_start|>",
                                  parallm.SamplingParams(**forced, skip_special_tokens=skip))[0].outputs[0]
                     for skip in (True, False))
    assert skipped.token_ids == kept.token_ids == start * 3
    assert (skipped.text, kept.text) == ("", "<|im_start|>" * 3)
    with pytest.raises(TypeError, match="skip_special_tokens"):
        parallm.SamplingParams(skip_special_tokens=1)


def test_structured_outputs_equal_cli_batch(cli, qwen3_model, llm, workdir):
    """SamplingParams(structured_outputs=...) and vLLM's older guided_decoding=... constrain the output as
    `parallm batch`'s structured_outputs do: the same outputs, each following its constraint (the random-weight
    model cannot on its own)."""
    import re
    import jsonschema
    schema = {"type": "object", "required": ["name", "age"], "additionalProperties": False,
              "properties": {"name": {"type": "string", "maxLength": 6}, "age": {"type": "integer", "minimum": 0,
                                                                               "maximum": 120},
                             "pets": {"type": "array", "items": {"enum": ["cat", "dog"]}, "maxItems": 2}}}
    grammar = 'root ::= "x" [0-9]{1,2} ("!" | "?")'
    specs = [({"json": schema}, lambda: parallm.StructuredOutputsParams(json=schema)),
             ({"json": schema}, lambda: parallm.GuidedDecodingParams(json=json.dumps(schema), backend="xgrammar")),
             ({"regex": "[a-z]{2,5}-[0-9]{1,3}"}, lambda: parallm.GuidedDecodingParams(regex="[a-z]{2,5}-[0-9]{1,3}")),
             ({"choice": ["yes", "no", "maybe"]}, lambda: parallm.StructuredOutputsParams(choice=["yes", "no", "maybe"])),
             ({"grammar": grammar}, lambda: parallm.StructuredOutputsParams(grammar=grammar))]
    requests = [{"id": f"s{i}", "prompt": "Once upon a time", "max_tokens": 120, "temperature": 1.0, "seed": i,
                 "structured_outputs": spec} for i, (spec, _) in enumerate(specs)]
    expected = cli_batch(cli, qwen3_model, requests, workdir)
    params = []
    for i, (_, make) in enumerate(specs):
        constraint = make()
        key = "guided_decoding" if isinstance(constraint, parallm.GuidedDecodingParams) else "structured_outputs"
        params.append(parallm.SamplingParams(max_tokens=120, temperature=1.0, seed=i, **{key: constraint}))
    outputs = llm.generate(["Once upon a time"] * len(specs), params)
    assert params[1].guided_decoding is params[1].structured_outputs
    for request, out in zip(requests, outputs):
        rec, text = expected[request["id"]], out.outputs[0].text
        assert text == rec["text"] and out.outputs[0].finish_reason == "stop", (request, text, rec)
        spec = request["structured_outputs"]
        if "json" in spec:
            jsonschema.validate(json.loads(text), schema)
        elif "regex" in spec:
            assert re.fullmatch(spec["regex"], text), text
        elif "choice" in spec:
            assert text in spec["choice"], text
        else:
            assert re.fullmatch(r"x[0-9]{1,2}[!?]", text), text
    # Errors: two constraints, a schema keyword the compiler refuses (named with its path), a wrong type.
    with pytest.raises(ValueError, match="only use one kind"):
        parallm.StructuredOutputsParams(json=schema, regex="a")
    bad = parallm.StructuredOutputsParams(json={"type": "array", "uniqueItems": True})
    with pytest.raises(ValueError, match="prompt 0: .*'uniqueItems' at #"):
        llm.generate("x", parallm.SamplingParams(structured_outputs=bad))
    with pytest.raises(TypeError):
        parallm.SamplingParams(structured_outputs={"json": schema})


def test_chat_tool_calls_equal_cli_batch(cli, qwen3_model, llm, workdir):
    """LLM.chat(tools=..., tool_choice=...) answers with parsed tool calls, as `parallm batch` does; "required"
    and a named function are valid calls whose arguments follow the function's schema, on a random-weight model."""
    import jsonschema
    schemas = {"get_weather": {"type": "object", "required": ["city"], "additionalProperties": False,
                               "properties": {"city": {"type": "string", "maxLength": 5},
                                              "unit": {"enum": ["c", "f"]}}},
               "add": {"type": "object", "required": ["a", "b"],
                       "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 99},
                                      "b": {"type": "integer", "minimum": 0, "maximum": 99}}}}
    tools = [{"type": "function", "function": {"name": n, "parameters": p}} for n, p in schemas.items()]
    ask = [{"role": "user", "content": "What is 2 + 3?"}]
    choices = ["required", {"type": "function", "function": {"name": "add"}}]
    requests = [{"id": f"t{i}", "messages": ask, "tools": tools, "tool_choice": c, "max_tokens": 200,
                 "temperature": 1.0, "seed": i, "parallel_tool_calls": False} for i, c in enumerate(choices)]
    expected = cli_batch(cli, qwen3_model, requests, workdir)
    for i, (choice, request) in enumerate(zip(choices, requests)):
        out = llm.chat(ask, parallm.SamplingParams(max_tokens=200, temperature=1.0, seed=i), tools=tools,
                       tool_choice=choice, parallel_tool_calls=False)[0].outputs[0]
        rec = expected[request["id"]]
        assert out.finish_reason == "tool_calls" == rec["finish_reason"] and out.text == "", (out, rec)
        assert [(c.function.name, c.function.arguments) for c in out.tool_calls] == \
            [(c["function"]["name"], c["function"]["arguments"]) for c in rec["tool_calls"]]
        (call,) = out.tool_calls
        assert call.type == "function" and call.id.startswith("call_")
        assert isinstance(choice, str) or call.function.name == "add"
        jsonschema.validate(json.loads(call.function.arguments), schemas[call.function.name])
    # "auto" (the default): whatever the model wrote, parsed (no call here: the text is the content).
    auto = llm.chat(ask, parallm.SamplingParams(max_tokens=8, temperature=0), tools=tools)[0].outputs[0]
    assert auto.tool_calls == [] and auto.finish_reason != "tool_calls"
    plain = llm.chat(ask, parallm.SamplingParams(max_tokens=8, temperature=0))[0].outputs[0]
    assert plain.tool_calls is None
    with pytest.raises(ValueError, match="nope"):
        llm.chat(ask, tools=tools, tool_choice={"type": "function", "function": {"name": "nope"}})
    with pytest.raises(ValueError, match="unknown tool_parser 'bogus'"):
        llm.chat(ask, tools=tools, tool_choice="required", tool_parser="bogus")


def test_prompt_forms(llm):
    tok = llm.get_tokenizer()
    p = parallm.SamplingParams(temperature=0, max_tokens=5, ignore_eos=True)
    ids = tok.encode("Hello world")
    by_text = llm.generate("Hello world", p)[0]
    assert by_text.prompt_token_ids == ids
    for form in (ids, [ids], {"prompt": "Hello world"}, {"prompt_token_ids": ids}, [{"prompt_token_ids": ids}]):
        assert llm.generate(form, p)[0].outputs[0].token_ids == by_text.outputs[0].token_ids, form
    assert llm.generate(prompt_token_ids=[ids], sampling_params=p)[0].outputs[0].token_ids == \
        by_text.outputs[0].token_ids
    # max_tokens=None: what the context leaves (the request stops at length = max_model_len - prompt).
    short = parallm.LLM(llm.model_path, max_model_len=16, num_kv_blocks=8)
    out = short.generate(ids, parallm.SamplingParams(temperature=0, max_tokens=None, ignore_eos=True))[0]
    assert len(out.outputs[0].token_ids) == 16 - len(ids) and out.outputs[0].finish_reason == "length"


def test_tokenizer_equals_cli(cli, qwen3_model, llm, workdir):
    tok = llm.get_tokenizer()
    for text in WORDS + ["<|im_start|>user\nHi<|im_end|>"]:
        r = run_cli(cli, "tokenize", "--tokenizer", qwen3_model, "--json", text)
        assert tok.encode(text) == json.loads(r.stdout)["ids"], text
        assert tok.decode(tok.encode(text)) == text.replace("<|im_start|>", "").replace("<|im_end|>", "")
        assert tok.decode(tok.encode(text), skip_special_tokens=False) == text
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    (workdir / "messages.json").write_text(json.dumps(messages))
    r = run_cli(cli, "tokenize", "--tokenizer", qwen3_model, "--json", "--chat", workdir / "messages.json")
    ids = tok.apply_chat_template(messages, add_generation_prompt=True)
    assert ids == json.loads(r.stdout)["ids"]
    text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert text == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert tok.apply_chat_template(messages, tokenize=False) == text[:-len("<|im_start|>assistant\n")]
    assert tok.eos_token_id is not None and tok.convert_ids_to_tokens(tok.eos_token_id) == tok.eos_token
    assert tok.convert_tokens_to_ids("<|im_end|>") == tok.encode("<|im_end|>")[0]
    assert len(tok) == tok.vocab_size == llm.vocab_size
    assert tok("Hello world")["input_ids"] == tok.encode("Hello world")


def test_hf_folder_and_tokenizer_override(cli, llama_folder, fixtures):
    # A Hugging Face folder carries its tokenizer files; a synthetic model takes one from `tokenizer=`.
    llm = parallm.LLM(llama_folder, num_kv_blocks=64)
    tok = llm.get_tokenizer()
    assert tok.bos_token == "<|begin_of_text|>"
    r = run_cli(cli, "tokenize", "--tokenizer", llama_folder, "--json", "Hi there")
    assert tok.encode("Hi there") == json.loads(r.stdout)["ids"]
    out = llm.chat([{"role": "user", "content": "Hi"}], parallm.SamplingParams(temperature=0, max_tokens=4))[0]
    assert out.prompt.startswith("<|begin_of_text|><|start_header_id|>")
    synthetic = parallm.LLM("synthetic:tiny", tokenizer=str(fixtures / "tokenizers" / "qwen3"), num_kv_blocks=64)
    assert synthetic.get_tokenizer().encode("Hello world") == [9707, 1879]
    bare = parallm.LLM("synthetic:tiny", num_kv_blocks=64)
    assert bare.generate([1, 2, 3], parallm.SamplingParams(temperature=0, max_tokens=3, ignore_eos=True))[0] \
        .outputs[0].text == ""
    with pytest.raises(ValueError, match="synthetic models have no tokenizer"):
        bare.generate("Hello")


def test_speculative_config_keeps_outputs(fixtures):
    # Prompt lookup on stories260K retelling its own story: drafts are accepted, and the text is the same as
    # without them, greedy and seeded.
    model = str(fixtures / "models" / "stories260K" / "stories260K.bin")
    tokenizer = str(fixtures / "models" / "stories260K" / "tok512.bin")
    plain = parallm.LLM(model, tokenizer=tokenizer, num_kv_blocks=64)
    spec = parallm.LLM(model, tokenizer=tokenizer, num_kv_blocks=64,
                       speculative_config={"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3})
    greedy = parallm.SamplingParams(temperature=0, max_tokens=48)
    story = plain.generate("Once upon a time", greedy)[0].outputs[0].text
    prompt = "Once upon a time" + story + " Once upon a time"
    seeded = parallm.SamplingParams(temperature=0.8, seed=3, max_tokens=48)
    for params in (greedy, seeded):
        want = plain.generate(prompt, params)[0].outputs[0]
        got = spec.generate(prompt, params)[0].outputs[0]
        assert got.token_ids == want.token_ids and got.text == want.text
    metrics = spec.metrics()
    assert 0 < metrics["spec_decode_num_accepted_tokens"] <= metrics["spec_decode_num_draft_tokens"]
    with pytest.raises(ValueError, match="speculative_config: .*prompt lookup"):
        parallm.LLM(model, tokenizer=tokenizer, speculative_config={"method": "eagle", "num_speculative_tokens": 2})


def test_draft_model_keeps_outputs(fixtures):
    # stories260K drafting for itself: every greedy draft is accepted and the text is the same, greedy and seeded;
    # a draft with another vocabulary is refused.
    model = str(fixtures / "models" / "stories260K" / "stories260K.bin")
    tokenizer = str(fixtures / "models" / "stories260K" / "tok512.bin")
    plain = parallm.LLM(model, tokenizer=tokenizer, num_kv_blocks=64)
    spec = parallm.LLM(model, tokenizer=tokenizer, num_kv_blocks=64,
                       speculative_config={"model": model, "num_speculative_tokens": 3})
    greedy = parallm.SamplingParams(temperature=0, max_tokens=32)
    seeded = parallm.SamplingParams(temperature=0.8, seed=5, max_tokens=32)
    for params in (greedy, seeded):
        want = plain.generate("Once upon a time", params)[0].outputs[0]
        got = spec.generate("Once upon a time", params)[0].outputs[0]
        assert got.token_ids == want.token_ids and got.text == want.text
    metrics = spec.metrics()
    assert metrics["spec_decode_num_accepted_tokens"] > 0
    other = str(fixtures / "models" / "llama-2-tiny-random" / "llama-2-tiny-random.gguf")
    with pytest.raises(ValueError, match="speculative_config: .*vocabulary"):
        parallm.LLM(model, tokenizer=tokenizer, speculative_config={"model": other, "num_speculative_tokens": 2})


def test_kv_cache_dtype_keeps_the_story(fixtures):
    # Keys and values stored as f16, bf16 or int8: half or a quarter of the cache memory per token, the same story
    # from the trained stories260K, and a clear error for a type parallm does not store.
    model = str(fixtures / "models" / "stories260K" / "stories260K.bin")
    tokenizer = str(fixtures / "models" / "stories260K" / "tok512.bin")
    greedy = parallm.SamplingParams(temperature=0, max_tokens=24)
    llms = {dtype: parallm.LLM(model, tokenizer=tokenizer, num_kv_blocks=16, kv_cache_dtype=dtype)
            for dtype in ("auto", "f16", "bf16", "int8")}
    # auto is the model's own type: f32 for this f32 checkpoint.
    assert [llm.kv_cache_dtype for llm in llms.values()] == ["f32", "f16", "bf16", "int8"]
    texts = [llm.generate("Once upon a time", greedy)[0].outputs[0].text for llm in llms.values()]
    assert texts[0].startswith(", there was a little girl named Lily")
    assert texts[1:] == [texts[0]] * 3
    with pytest.raises(ValueError, match="kv_cache_dtype must be 'auto', 'f32', 'f16', 'bf16' or 'int8', got 'fp8'"):
        parallm.LLM(model, tokenizer=tokenizer, kv_cache_dtype="fp8")


def test_auto_kv_cache_of_a_quantized_model_is_f16(llm):
    # The Q8_0 model of the session's fixture: auto stores f16, as llama.cpp does.
    assert llm.kv_cache_dtype == "f16"


def test_bad_input_raises(llm, workdir):
    p = parallm.SamplingParams(temperature=0, max_tokens=4)
    with pytest.raises(FileNotFoundError, match="model not found: /no/such/model.gguf"):
        parallm.LLM("/no/such/model.gguf")
    with pytest.raises(FileNotFoundError, match="tokenizer not found"):
        parallm.LLM(llm.model_path, tokenizer="/no/such/tokenizer.json")
    garbage = workdir / "garbage.gguf"
    garbage.write_bytes(b"not a gguf file at all")
    with pytest.raises(RuntimeError, match="garbage.gguf"):
        parallm.LLM(str(garbage))
    with pytest.raises(ValueError, match="max_num_seqs must be >= 1"):
        parallm.LLM(llm.model_path, max_num_seqs=0)
    with pytest.raises(ValueError, match="kv_cache_gb must be > 0"):
        parallm.LLM(llm.model_path, kv_cache_gb=0)
    with pytest.raises(ValueError, match="prompt 1: temperature must be >= 0"):
        llm.generate(["a", "b"], [p, parallm.SamplingParams(temperature=-1)])
    with pytest.raises(ValueError, match="top_p"):
        llm.generate("a", parallm.SamplingParams(top_p=0))
    with pytest.raises(ValueError, match="prompt 0: the prompt has 5000 tokens"):
        llm.generate([[1] * 5000], p)
    with pytest.raises(ValueError, match="the prompt is empty"):
        llm.generate([[]], p)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        llm.generate([[llm.vocab_size]], p)
    with pytest.raises(ValueError, match="KV blocks"):
        parallm.LLM(llm.model_path, num_kv_blocks=2).generate([[1, 2, 3]], parallm.SamplingParams(max_tokens=100))
    with pytest.raises(ValueError, match="2 SamplingParams for 3 prompts"):
        llm.generate(["a", "b", "c"], [p, p])
    with pytest.raises(TypeError, match="temperature must be a number"):
        parallm.SamplingParams(temperature="hot")
    with pytest.raises(TypeError):
        parallm.SamplingParams(best_of=2)
    with pytest.raises(TypeError, match="a prompt is a str"):
        llm.generate([3.5])
    with pytest.raises(ValueError, match="messages"):
        llm.get_tokenizer().apply_chat_template([])
    # Nothing was left running by the refused calls.
    assert llm.metrics()["num_unfinished"] == 0


def test_help_and_stubs():
    doc = parallm.LLM.__doc__
    assert "max_num_seqs" in doc and "kv_cache_gb" in doc
    assert "Completes every prompt" in parallm.LLM.generate.__doc__
    assert "temperature" in parallm.SamplingParams.__doc__
    import pathlib
    package = pathlib.Path(parallm.__file__).parent
    assert (package / "_parallm.pyi").exists() and (package / "py.typed").exists()
    assert parallm.__version__


def test_lora_request_per_prompt_equals_cli(cli, workdir):
    """vLLM's LoRARequest: prompts with different adapters in one generate() call equal `parallm generate
    --adapter-path` for each (greedy); an adapter that does not fit the model is a ValueError."""
    base = workdir / "lora-base.gguf"
    assert run_cli(cli, "make-model", "--arch", "llama", "--seed", "5", "-o", base).returncode == 0
    adapters = []
    for i, fmt in enumerate(("peft", "mlx")):
        path = workdir / f"lora-{fmt}"
        r = run_cli(cli, "make-model", "--arch", "llama", "--seed", str(20 + i), "--lora", fmt, "--lora-rank", "8",
                    "--lora-targets", "q,k,v,o,gate,up,down", "--lora-scale", "4", "-o", path)
        assert r.returncode == 0, r.stderr
        adapters.append(path)
    prompt = [3, 14, 15, 92, 65]

    def cli_ids(adapter):
        extra = ["--adapter-path", str(adapter)] if adapter else []
        r = run_cli(cli, "generate", "-m", base, "--prompt-ids", ",".join(map(str, prompt)), "-n", "8",
                    "--ignore-eos", "--json", "-t", "1", *extra)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["ids"]

    llm = parallm.LLM(str(base), kv_cache_gb=0.05, threads=1)
    loras = [None, parallm.LoRARequest("peft", 1, str(adapters[0])), parallm.LoRARequest("mlx", 2, str(adapters[1]))]
    outs = llm.generate([prompt] * 3, parallm.SamplingParams(temperature=0, max_tokens=8, ignore_eos=True),
                        lora_request=loras)
    want = [cli_ids(None), cli_ids(adapters[0]), cli_ids(adapters[1])]
    assert [o.outputs[0].token_ids for o in outs] == want
    assert want[1] != want[0] and want[2] != want[0]
    with pytest.raises(ValueError, match="no such adapter"):
        llm.generate([prompt], lora_request=parallm.LoRARequest("missing", 3, str(workdir / "missing")))
