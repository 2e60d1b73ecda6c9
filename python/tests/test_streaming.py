"""Streaming and cancellation: stream pieces concatenate to the full text; 64 concurrent asyncio streams into one
engine equal their solo runs; Ctrl-C, leaving a stream early and cancelling an asyncio task free every KV block;
a LoRA adapter per request in chat, streams and asyncio."""
import asyncio
import signal
import threading
import time

import pytest

import parallm
from conftest import run_cli

PROMPTS = [f"Question {i}: what is {i} + {i * 7}?" for i in range(64)]


def _idle(llm, timeout=10.0):
    """Waits until the engine has let every request go; returns its metrics."""
    deadline = time.monotonic() + timeout
    while True:
        m = llm.metrics()
        if m["num_unfinished"] == 0 or time.monotonic() > deadline:
            return m


def _all_blocks_free(llm):
    m = _idle(llm)
    assert m["num_unfinished"] == 0, m
    assert m["num_free_blocks"] == m["num_blocks"], m
    assert m["num_requests_running"] == 0 and m["num_requests_waiting"] == 0, m


def test_stream_generate_concatenates(llm):
    for params in (parallm.SamplingParams(temperature=0, max_tokens=20, ignore_eos=True),
                   parallm.SamplingParams(temperature=0.9, seed=4, max_tokens=20),
                   parallm.SamplingParams(temperature=0, max_tokens=20, ignore_eos=True, stop=["e"])):
        full = llm.generate("Streaming test", params)[0].outputs[0].text
        pieces = list(llm.stream_generate("Streaming test", params))
        assert "".join(pieces) == full
        assert all(pieces)
    with pytest.raises(ValueError, match="n=1"):
        llm.stream_generate("x", parallm.SamplingParams(n=2))
    with pytest.raises(ValueError, match="temperature"):  # refused when called, not when first iterated
        llm.stream_generate("x", parallm.SamplingParams(temperature=-2))


def test_leaving_a_stream_early_cancels_it(llm):
    stream = llm.stream_generate("Count", parallm.SamplingParams(temperature=0, max_tokens=2000, ignore_eos=True))
    next(stream)
    assert llm.metrics()["num_unfinished"] == 1
    stream.close()
    del stream
    _all_blocks_free(llm)


def test_keyboard_interrupt_cancels_generate(llm):
    # SIGINT arrives while generate() waits on the engine: KeyboardInterrupt, every request cancelled.
    params = parallm.SamplingParams(temperature=0, max_tokens=3000, ignore_eos=True)
    started = threading.Event()

    def interrupt():
        # Once the requests hold KV blocks.
        while llm.metrics()["num_free_blocks"] == llm.metrics()["num_blocks"]:
            time.sleep(0.01)
        started.set()
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    t = threading.Thread(target=interrupt)
    t.start()
    with pytest.raises(KeyboardInterrupt):
        llm.generate(PROMPTS[:8], params)
    t.join()
    assert started.is_set()
    _all_blocks_free(llm)
    # The engine still serves.
    assert llm.generate("after", parallm.SamplingParams(temperature=0, max_tokens=3))[0].finished


def test_64_concurrent_asyncio_streams_equal_solo_runs(llm):
    engine = parallm.AsyncLLM(llm)
    params = [parallm.SamplingParams(temperature=0, max_tokens=12, ignore_eos=True) if i % 2 == 0 else
              parallm.SamplingParams(temperature=0.8, seed=i, max_tokens=12) for i in range(len(PROMPTS))]
    solo = [llm.generate(p, sp)[0].outputs[0] for p, sp in zip(PROMPTS, params)]

    async def one_stream(prompt, sp):
        return "".join([piece async for piece in engine.stream(prompt, sp)])

    async def one_output(prompt, sp):
        last = None
        async for out in engine.generate(prompt, sp):
            last = out
        return last

    async def main():
        texts = await asyncio.gather(*(one_stream(p, sp) for p, sp in zip(PROMPTS, params)))
        outputs = await asyncio.gather(*(one_output(p, sp) for p, sp in zip(PROMPTS, params)))
        return texts, outputs

    texts, outputs = asyncio.run(main())
    assert texts == [s.text for s in solo]
    for out, s in zip(outputs, solo):
        assert out.finished and out.outputs[0].token_ids == s.token_ids and out.outputs[0].text == s.text
        assert out.outputs[0].finish_reason == s.finish_reason
    _all_blocks_free(llm)


def test_asyncio_cancellation_frees_blocks(llm):
    engine = parallm.AsyncLLM(llm)
    params = parallm.SamplingParams(temperature=0, max_tokens=3000, ignore_eos=True)

    async def consume(prompt):
        async for _ in engine.stream(prompt, params):
            pass

    async def main():
        tasks = [asyncio.create_task(consume(p)) for p in PROMPTS[:16]]
        while llm.metrics()["num_requests_running"] == 0:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        for t in tasks:
            t.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(isinstance(r, asyncio.CancelledError) for r in results)
        # Leaving an async for early cancels too.
        async for out in engine.generate("break early", params):
            break
        # A request the engine refuses raises at its first iteration.
        with pytest.raises(ValueError, match="the prompt is empty"):
            async for _ in engine.generate([], params):
                pass

    asyncio.run(main())
    _all_blocks_free(llm)
    # The chat form, after the loop above closed: a new loop is served.
    async def chat():
        outs = [o async for o in engine.chat([{"role": "user", "content": "Hi"}],
                                             parallm.SamplingParams(temperature=0, max_tokens=5))]
        return outs[-1]

    last = asyncio.run(chat())
    assert last.finished
    assert last.outputs[0].token_ids == llm.chat([{"role": "user", "content": "Hi"}], parallm.SamplingParams(
        temperature=0, max_tokens=5))[0].outputs[0].token_ids


def test_threads_share_one_llm(llm):
    # Calls from several threads at once join the same batch; each gets its own results.
    params = parallm.SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    expected = [llm.generate(p, params)[0].outputs[0].token_ids for p in PROMPTS[:8]]
    results = [None] * 8

    def work(i):
        results[i] = llm.generate(PROMPTS[i], params)[0].outputs[0].token_ids

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == expected
    _all_blocks_free(llm)


def test_lora_request_in_chat_streams_and_asyncio(cli, llm, workdir):
    """vLLM's lora_request reaches LLM.chat, stream_generate and AsyncLLM's generate, chat and stream: each equals
    LLM.generate with the same adapter (greedy), which differs from the base model's answer."""
    path = workdir / "qwen3-lora"
    run_cli(cli, "make-model", "--preset", "tiny", "--arch", "qwen3", "--seed", "31", "--lora", "peft",
            "--lora-rank", "8", "--lora-targets", "q,k,v,o,gate,up,down", "--lora-scale", "4", "-o", path)
    lora = parallm.LoRARequest("stream-lora", 1, str(path))
    params = parallm.SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    conversation = [{"role": "user", "content": "Hi"}]
    rendered = llm.get_tokenizer().render_chat(conversation, add_generation_prompt=True)
    want = llm.generate({"prompt_token_ids": llm.get_tokenizer().encode(rendered, add_special_tokens=False)},
                        params, lora_request=lora)[0].outputs[0]
    base = llm.chat(conversation, params)[0].outputs[0]
    assert want.token_ids != base.token_ids  # the adapter changes the answer (or this test could not fail)
    assert llm.chat(conversation, params, lora_request=lora)[0].outputs[0].token_ids == want.token_ids
    assert llm.chat([conversation] * 2, params, lora_request=[None, lora])[1].outputs[0].token_ids == want.token_ids
    text = llm.generate("Streaming test", params, lora_request=lora)[0].outputs[0].text
    assert "".join(llm.stream_generate("Streaming test", params, lora_request=lora)) == text
    assert text != llm.generate("Streaming test", params)[0].outputs[0].text

    engine = parallm.AsyncLLM(llm)

    async def run():
        outs = [o async for o in engine.generate("Streaming test", params, lora_request=lora)]
        pieces = [p async for p in engine.stream("Streaming test", params, lora_request=lora)]
        chats = [o async for o in engine.chat(conversation, params, lora_request=lora)]
        return outs[-1], "".join(pieces), chats[-1]

    last, streamed, chat = asyncio.run(run())
    assert last.finished and last.outputs[0].text == text
    assert streamed == text
    assert chat.outputs[0].token_ids == want.token_ids
    with pytest.raises(TypeError, match="LoRARequest"):
        llm.stream_generate("x", params, lora_request="stream-lora")
    _all_blocks_free(llm)


def test_asyncio_chat_with_tools(llm):
    """AsyncLLM.chat takes LLM.chat's tools: calls appear in the snapshots only once whole, and the last snapshot
    equals LLM.chat's answer (forced calls constrained by the grammar, so even this random model calls)."""
    tools = [{"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "required": ["a", "b"], "additionalProperties": False,
        "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9},
                       "b": {"type": "integer", "minimum": 0, "maximum": 9}}}}}]
    ask = [{"role": "user", "content": "What is 2 + 3?"}]
    engine = parallm.AsyncLLM(llm)
    cases = [("required", parallm.SamplingParams(max_tokens=60, temperature=1.0, seed=5)),
             ({"type": "function", "function": {"name": "add"}},
              parallm.SamplingParams(max_tokens=60, temperature=1.0, seed=6)),
             (None, parallm.SamplingParams(max_tokens=6, temperature=0))]

    async def run(choice, params):
        return [o async for o in engine.chat(ask, params, tools=tools, tool_choice=choice,
                                             parallel_tool_calls=False)]

    for choice, params in cases:
        snapshots = asyncio.run(run(choice, params))
        want = llm.chat(ask, params, tools=tools, tool_choice=choice, parallel_tool_calls=False)[0].outputs[0]
        got = snapshots[-1].outputs[0]
        assert snapshots[-1].finished
        assert (got.text, got.finish_reason, got.token_ids) == (want.text, want.finish_reason, want.token_ids)
        assert [(c.function.name, c.function.arguments) for c in got.tool_calls] == \
            [(c.function.name, c.function.arguments) for c in want.tool_calls]
        if choice is not None:
            assert got.finish_reason == "tool_calls" and len(got.tool_calls) == 1, got
            # Forced: no content, and the call shows up whole (in the last snapshot only, here: single call).
            assert all(s.outputs[0].text == "" for s in snapshots)
            assert all(s.outputs[0].tool_calls == [] for s in snapshots[:-1])
        else:
            assert got.tool_calls == [] and got.text == want.text
    with pytest.raises(ValueError, match="nope"):
        asyncio.run(run({"type": "function", "function": {"name": "nope"}}, parallm.SamplingParams()))
    _all_blocks_free(llm)
