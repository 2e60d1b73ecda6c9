"""AsyncLLM: many concurrent requests from asyncio into one engine. The engine thread leaves each step's progress
in a collector whose pipe the event loop watches (loop.add_reader), so no Python thread waits on the engine."""
from __future__ import annotations

import asyncio
import itertools
from typing import Any, AsyncIterator, Dict, List, Optional, Union

from . import _parallm
from .llm import LLM, PromptType, _Prompt, _ToolRequest
from .lora import LoRARequest
from .outputs import CompletionOutput, FunctionCall, RequestOutput, ToolCall, _cumulative, _logprobs
from .sampling_params import SamplingParams
from .tokenizer import Conversation, Tokenizer

__all__ = ["AsyncLLM"]


class AsyncLLM:
    """parallm's engine for asyncio: ``generate`` is an async iterator of RequestOutputs, ``stream`` of text
    pieces; any number of them may run concurrently and they all join the same continuous batch.

    Args:
        model: a model path (with the keyword options of ``LLM``), or an ``LLM`` whose engine to share.

    Example::

        engine = parallm.AsyncLLM("model.gguf")
        async for text in engine.stream("Hello", parallm.SamplingParams(max_tokens=32)):
            print(text, end="")

    Cancelling the task that iterates (or leaving the loop early) cancels the request and frees its KV blocks.
    """

    def __init__(self, model: Union[str, LLM], **engine_options: Any) -> None:
        if isinstance(model, LLM):
            if engine_options:
                raise TypeError("engine options go to the LLM being shared, not to AsyncLLM")
            self._llm = model
        else:
            self._llm = LLM(model, **engine_options)
        self._collector = _parallm.Collector(deltas=True, notify=True)
        self._queues: Dict[int, asyncio.Queue] = {}
        self._tags = itertools.count()
        self._request_ids = itertools.count()
        self._loop: Optional[asyncio.AbstractEventLoop] = None

    @property
    def llm(self) -> LLM:
        """The synchronous interface to the same engine."""
        return self._llm

    def get_tokenizer(self) -> Tokenizer:
        return self._llm.get_tokenizer()

    def metrics(self) -> Dict[str, float]:
        return self._llm.metrics()

    async def generate(self, prompt: PromptType, sampling_params: Optional[SamplingParams] = None,
                       request_id: Optional[str] = None,
                       lora_request: Optional[LoRARequest] = None) -> AsyncIterator[RequestOutput]:
        """Yields the request's RequestOutput after every engine step in which it progressed, cumulative (as
        vLLM's AsyncLLM); the last one has ``finished`` set. A request the engine refuses raises ValueError at
        the first iteration. `lora_request`: the LoRA adapter to run with (None: the base model)."""
        params = sampling_params or SamplingParams()
        outputs = self._outputs(self._llm._prompt(prompt), params, request_id, lora_request)
        try:
            async for out in outputs:
                yield out
        finally:
            await outputs.aclose()

    async def chat(self, messages: Conversation, sampling_params: Optional[SamplingParams] = None,
                   request_id: Optional[str] = None, lora_request: Optional[LoRARequest] = None, *,
                   tools: Optional[List[Dict[str, Any]]] = None,
                   tool_choice: Union[str, Dict[str, Any], None] = None, parallel_tool_calls: bool = True,
                   tool_parser: Optional[str] = None, **template_kwargs: Any) -> AsyncIterator[RequestOutput]:
        """generate() for one conversation, rendered through the model's chat template (`template_kwargs` are
        more template variables).

        `tools`, `tool_choice`, `parallel_tool_calls` and `tool_parser` are LLM.chat's: with tools, each output's
        ``text`` is the content so far and ``tool_calls`` the calls completed so far (a call appears once it is
        whole, never half-way); the last output is exactly what LLM.chat returns. Bad tools raise ValueError at
        the first iteration."""
        tool_request = self._llm._tool_request(tools, tool_choice, parallel_tool_calls, tool_parser)
        item = self._llm._chat_prompt(messages, tool_request, tools=tools, **template_kwargs)
        outputs = self._outputs(item, sampling_params or SamplingParams(), request_id, lora_request, tool_request)
        try:
            async for out in outputs:
                yield out
        finally:
            await outputs.aclose()

    async def stream(self, prompt: PromptType, sampling_params: Optional[SamplingParams] = None,
                     lora_request: Optional[LoRARequest] = None) -> AsyncIterator[str]:
        """Yields one completion's text as it is generated (n must be 1); the pieces concatenate to the full
        text."""
        params = sampling_params or SamplingParams()
        if params.n != 1:
            raise ValueError("stream() streams one completion; use n=1")
        deltas = self._deltas(self._llm._prompt(prompt), params, lora_request)
        try:
            async for delta in deltas:
                for c in delta.choices:
                    if c.text:
                        yield c.text
        finally:
            await deltas.aclose()

    # -- internals -----------------------------------------------------------------------------------------------
    def _watch(self) -> None:
        """Has the running loop call _on_ready when the engine left something in the collector (while any request
        of this AsyncLLM runs: the loop holds no reference to it otherwise)."""
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        if self._loop is not None:
            raise RuntimeError("an AsyncLLM serves one event loop at a time")
        loop.add_reader(self._collector.fileno(), self._on_ready)
        self._loop = loop

    def _unwatch(self) -> None:
        if not self._queues and self._loop is not None:
            if not self._loop.is_closed():
                self._loop.remove_reader(self._collector.fileno())
            self._loop = None

    def _on_ready(self) -> None:
        for delta in self._collector.take_deltas(0):
            queue = self._queues.get(delta.tag)
            if queue is not None:  # else: a request whose consumer went away (it was cancelled)
                queue.put_nowait(delta)

    async def _deltas(self, item: _Prompt, params: SamplingParams, lora: Optional[LoRARequest] = None,
                      tools: Optional[_ToolRequest] = None) -> AsyncIterator[Any]:
        """Submits the request (ValueError if the engine refuses it) and yields its progress, step by step;
        leaving early (or the task being cancelled) cancels it."""
        native = self._llm._native([item], [params], tools)[0]
        self._watch()
        tag = next(self._tags)
        queue: asyncio.Queue = asyncio.Queue()
        self._queues[tag] = queue
        done = False
        try:
            request = self._llm._submit(self._collector, tag, item, native, lora)
        except BaseException:
            del self._queues[tag]
            self._unwatch()
            raise
        try:
            while not done:
                delta = await queue.get()
                if delta.error:
                    done = True
                    raise RuntimeError(delta.error)
                done = delta.done
                yield delta
        finally:
            del self._queues[tag]
            self._unwatch()
            if not done:
                self._llm._engine.cancel(request)

    async def _outputs(self, item: _Prompt, params: SamplingParams, request_id: Optional[str],
                       lora: Optional[LoRARequest] = None,
                       tools: Optional[_ToolRequest] = None) -> AsyncIterator[RequestOutput]:
        deltas = self._deltas(item, params, lora, tools)
        rid = request_id if request_id is not None else str(next(self._request_ids))
        choices = [CompletionOutput(k, "", [], None, None) for k in range(params.n)]
        samples: List[List[Any]] = [[] for _ in range(params.n)]
        calls = [_ChoiceCalls(tools) for _ in range(params.n)] if tools is not None else None
        decode = self._llm._decode_one
        try:
            async for delta in deltas:
                self._apply(delta, choices, samples, params)
                snapshot = [CompletionOutput(out.index, out.text, list(out.token_ids),
                                             _cumulative(samples[k], params.logprobs),
                                             _logprobs(samples[k], params.logprobs, decode), out.finish_reason)
                            for k, out in enumerate(choices)]
                if calls is not None:
                    for c in delta.choices:
                        calls[c.index].add(c.text, c.finished, choices[c.index])
                    for k, out in enumerate(snapshot):
                        calls[k].show(out)
                yield RequestOutput(rid, item.text, item.token_ids, snapshot, delta.done, delta.cached_tokens)
        finally:
            await deltas.aclose()

    @staticmethod
    def _apply(delta: Any, choices: List[CompletionOutput], samples: List[List[Any]],
               params: SamplingParams) -> None:
        """Adds one step's progress to the running totals of each choice."""
        for c in delta.choices:
            out = choices[c.index]
            out.text += c.text
            out.token_ids.extend(c.token_ids)
            if params.logprobs is not None:
                samples[c.index].extend(c.samples)
            if c.finished:
                out.finish_reason = c.finish_reason or None


class _ChoiceCalls:
    """One choice's tool calls as its text streams in: the content so far and the calls completed so far; once
    the choice finishes, what LLM.chat reports for the whole text (a forced answer is calls only; one cut short
    keeps its text and has no calls)."""

    def __init__(self, tools: _ToolRequest) -> None:
        self._tools = tools
        self._stream = _parallm.ToolCallStream(tools.parser, tools.opening, tools.single_call)
        self.content = ""
        self.calls: List[ToolCall] = []
        self.finished = False

    def add(self, text: str, finished: bool, choice: CompletionOutput) -> None:
        content, calls = self._stream.add(text, finished)
        self.content += content
        self.calls += [ToolCall(id=i, function=FunctionCall(name=n, arguments=a)) for i, n, a in calls]
        if finished:
            self.finished = True
            if self.calls:
                self.content = "" if self._tools.opening else self.content
            else:
                self.content = choice.text

    def show(self, out: CompletionOutput) -> None:
        """Puts the content and calls so far into a snapshot of the choice."""
        out.text = self.content
        out.tool_calls = list(self.calls)
        if self.finished and self.calls:
            out.finish_reason = "tool_calls"
