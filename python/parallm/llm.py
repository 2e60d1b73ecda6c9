"""LLM: vLLM's offline interface over parallm's engine: load a model once, then generate() or chat() for many
prompts at once through continuous batching. The engine runs on its own thread with the GIL released; Python
only submits requests and collects finished ones."""
from __future__ import annotations

import itertools
import json
import sys
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

from . import _parallm
from .lora import LoRARequest
from .outputs import CompletionOutput, FunctionCall, RequestOutput, ToolCall, _cumulative, _logprobs
from .sampling_params import SamplingParams
from .tokenizer import Conversation, Tokenizer

__all__ = ["LLM"]

# How long one wait for results lasts before Python checks for signals (Ctrl-C): results wake it at once.
_POLL_SECONDS = 0.1

PromptType = Union[str, Sequence[int], Dict[str, Any]]


@dataclass
class _ToolRequest:
    """LLM.chat's tools: the request's tool fields as JSON, the call format, a forced call's opening."""
    body: str
    parser: str
    opening: str
    single_call: bool


@dataclass
class _Prompt:
    text: Optional[str]  # None when given as token ids
    token_ids: List[int]


class _Progress:
    """A one-line count of finished requests on stderr (use_tqdm=True, verbose=True)."""

    def __init__(self, total: int, label: str) -> None:
        self.total, self.label, self.done = total, label, 0
        self._show()

    def add(self, n: int = 1) -> None:
        self.done += n
        self._show()
        if self.done == self.total:
            sys.stderr.write("\n")
            sys.stderr.flush()

    def _show(self) -> None:
        sys.stderr.write(f"\r{self.label}: {self.done}/{self.total} prompts")
        sys.stderr.flush()


def _token_ids(value: Any, what: str) -> List[int]:
    ids = list(value)
    for t in ids:
        if isinstance(t, bool) or not isinstance(t, int):
            raise TypeError(f"{what} must hold ints (token ids), not {type(t).__name__}")
    return ids


class LLM:
    """A model loaded into parallm's continuous-batching engine, with vLLM's offline interface.

    Args:
        model: a .gguf file, a Hugging Face or MLX folder, a llama2.c .bin, or ``synthetic:PRESET`` (random
            weights built in memory, no tokenizer).
        tokenizer: where the tokenizer comes from when not the model's own: a tokenizer.json, a folder holding
            one, a .gguf file or a llama2.c tokenizer.bin.
        max_num_seqs: requests running at once (more wait in the queue).
        kv_cache_gb: the most the paged KV cache may take, in GiB; it takes no more than max_num_seqs requests
            of max_model_len tokens can use (ignored when num_kv_blocks is given).
        num_kv_blocks: size of the KV cache in blocks.
        block_size: tokens per KV block.
        max_num_batched_tokens: tokens per engine step (prefill chunks and decodes together).
        max_model_len: prompt + output limit per request (default: the model's context length, at most 4096).
        enable_prefix_caching: requests with a common prefix share its KV blocks.
        threads: threads for the forward pass (default: all cores).
        speculative_config: speculative decoding as vLLM takes it, e.g. ``{"method": "ngram",
            "num_speculative_tokens": 4, "prompt_lookup_max": 3}`` (prompt lookup) or ``{"model": "draft.gguf",
            "num_speculative_tokens": 4}`` (a smaller draft model with the same vocabulary: a path or a synthetic
            spec): drafts verified in the request's next step; outputs are the same as without it.
        kv_cache_dtype: how the KV cache stores keys and values, as vLLM's option: ``"auto"`` (the model's: f16
            for quantized or 16-bit weights, as llama.cpp stores, f32 for f32 weights), ``"f32"`` (exact),
            ``"f16"`` or ``"bf16"`` (half of f32's memory per token; f16 the closer to f32, bf16 with f32's range)
            or ``"int8"`` (a quarter, one scale per token and head).

    Raises FileNotFoundError for a path that does not exist, RuntimeError for a model or tokenizer that cannot
    be read (with the loader's message), ValueError for an option out of range.

    Example::

        llm = parallm.LLM("model.gguf", max_num_seqs=64)
        outputs = llm.generate(["Hello", "The sky is"], parallm.SamplingParams(temperature=0, max_tokens=32))
        print(outputs[0].outputs[0].text)
    """

    def __init__(self, model: str, tokenizer: Optional[str] = None, *, max_num_seqs: int = 64,
                 kv_cache_gb: float = 2.0, num_kv_blocks: Optional[int] = None, block_size: int = 16,
                 max_num_batched_tokens: int = 512, max_model_len: Optional[int] = None,
                 enable_prefix_caching: bool = True, threads: Optional[int] = None,
                 speculative_config: Optional[Dict[str, Any]] = None, kv_cache_dtype: str = "auto") -> None:
        if not isinstance(model, str):
            model = str(model)  # pathlib.Path
        self._engine = _parallm.Engine(
            model, "" if tokenizer is None else str(tokenizer), max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens, max_model_len=max_model_len or 0,
            kv_cache_gb=kv_cache_gb, num_kv_blocks=num_kv_blocks or 0, block_size=block_size,
            enable_prefix_caching=enable_prefix_caching, threads=threads or 0,
            speculative_config="" if speculative_config is None else json.dumps(speculative_config),
            kv_cache_dtype=kv_cache_dtype)
        self._tokenizer = Tokenizer(self._engine.tokenizer)
        self._request_ids = itertools.count()
        self._grammar_compiler: Optional[Any] = None

    # -- the model -----------------------------------------------------------------------------------------------
    def get_tokenizer(self) -> Tokenizer:
        """The model's tokenizer (encode, decode, apply_chat_template)."""
        return self._tokenizer

    @property
    def model_path(self) -> str:
        return self._engine.model_path

    @property
    def max_model_len(self) -> int:
        """Prompt + output limit per request."""
        return self._engine.max_model_len

    @property
    def vocab_size(self) -> int:
        return self._engine.vocab_size

    @property
    def kv_cache_dtype(self) -> str:
        """What the KV cache stores: "f32", "f16", "bf16" or "int8" (``"auto"`` resolved: f16 for a quantized or
        16-bit model, f32 for an f32 one)."""
        return self._engine.kv_cache_dtype

    def metrics(self) -> Dict[str, float]:
        """The engine's gauges and counters: num_requests_running, num_requests_waiting, num_unfinished,
        num_blocks, num_free_blocks, kv_cache_usage, prompt_tokens, generation_tokens, prefix-cache counts."""
        return self._engine.metrics()

    # -- generation ----------------------------------------------------------------------------------------------
    def generate(self, prompts: Union[PromptType, Sequence[PromptType], None] = None,
                 sampling_params: Union[SamplingParams, Sequence[SamplingParams], None] = None,
                 use_tqdm: bool = False, *,
                 prompt_token_ids: Optional[Sequence[Sequence[int]]] = None,
                 lora_request: Union[LoRARequest, Sequence[Optional[LoRARequest]], None] = None
                 ) -> List[RequestOutput]:
        """Completes every prompt, all in one continuous batch; returns one RequestOutput per prompt, in order.

        Args:
            prompts: a string, a list of token ids, a ``{"prompt": str}`` or ``{"prompt_token_ids": [...]}``
                dict, or a list of any of these.
            sampling_params: one SamplingParams for all prompts, or one per prompt (default: SamplingParams()).
            use_tqdm: show a count of finished prompts on stderr.
            prompt_token_ids: prompts as token id lists (vLLM's older keyword).
            lora_request: the LoRA adapter to run with (vLLM's LoRARequest), one for all prompts or one per prompt
                (None: the base model); prompts with different adapters still run in one batch.

        Raises ValueError (naming the prompt) for a prompt the engine refuses (empty, too long for the context or
        the KV cache, tokens outside the vocabulary) or parameters out of range, before anything runs.
        Ctrl-C (KeyboardInterrupt) cancels every request of the call and frees their KV blocks.
        """
        if prompts is None and prompt_token_ids is None:
            raise ValueError("give prompts or prompt_token_ids")
        items: List[_Prompt] = []
        if prompts is not None:
            items += [self._prompt(p) for p in self._prompt_list(prompts)]
        if prompt_token_ids is not None:
            items += [_Prompt(None, _token_ids(ids, "prompt_token_ids")) for ids in prompt_token_ids]
        return self._generate(items, sampling_params, use_tqdm, lora_request)

    def chat(self, messages: Union[Conversation, Sequence[Conversation]],
             sampling_params: Union[SamplingParams, Sequence[SamplingParams], None] = None,
             use_tqdm: bool = False, *, add_generation_prompt: bool = True,
             tools: Optional[List[Dict[str, Any]]] = None,
             chat_template_kwargs: Optional[Dict[str, Any]] = None,
             tool_choice: Union[str, Dict[str, Any], None] = None, parallel_tool_calls: bool = True,
             tool_parser: Optional[str] = None,
             lora_request: Union[LoRARequest, Sequence[Optional[LoRARequest]], None] = None) -> List[RequestOutput]:
        """Like generate(), for chat conversations rendered through the model's chat template.

        Args:
            messages: one conversation ([{"role": "user", "content": "Hi"}, ...]) or a list of them.
            sampling_params: one for all, or one per conversation.
            add_generation_prompt: end the prompt where the assistant's answer starts.
            tools: tool definitions (OpenAI's [{"type": "function", "function": {...}}]), passed to the template;
                the answers are parsed for calls, which come back as each CompletionOutput's ``tool_calls``.
            chat_template_kwargs: other template variables.
            tool_choice: as OpenAI's API: "auto" (the default with tools: the model decides), "none" (the answer
                is text), "required" (one or more calls) or {"type": "function", "function": {"name": ...}}.
                "required" and a named function are constrained by a grammar: the answer is a valid call in the
                model's format, its arguments following the function's ``parameters`` schema; so are, under
                "auto", the calls of functions marked ``"strict": true`` (hermes format only).
            parallel_tool_calls: False: at most one call per answer.
            tool_parser: the model's call format, "hermes" (Qwen, Hermes), "llama3_json" or "mistral"; default:
                the one the chat template shows.
            lora_request: the LoRA adapter, one for all conversations or one per conversation (as generate()).

        Raises ValueError for bad tools or tool_choice (naming what is wrong), or when the call format is unknown.
        """
        conversations = [messages] if messages and isinstance(messages[0], dict) else list(messages)
        tool_request = self._tool_request(tools, tool_choice, parallel_tool_calls, tool_parser)
        items = [self._chat_prompt(conversation, tool_request, tools=tools,
                                   add_generation_prompt=add_generation_prompt, **(chat_template_kwargs or {}))
                 for conversation in conversations]
        return self._generate(items, sampling_params, use_tqdm, lora_request, tools=tool_request)

    def stream_generate(self, prompt: PromptType, sampling_params: Optional[SamplingParams] = None, *,
                        lora_request: Optional[LoRARequest] = None) -> Iterator[str]:
        """Yields the text of one completion as it is generated (n must be 1). The pieces concatenate to the
        text generate() returns. Closing the iterator early cancels the request. `lora_request`: the LoRA
        adapter to run with (None: the base model)."""
        params = sampling_params or SamplingParams()
        if params.n != 1:
            raise ValueError("stream_generate streams one completion; use n=1")
        stream = self._stream(self._prompt(prompt), params, lora_request)
        return (choice.text for delta in stream for choice in delta.choices if choice.text)

    # -- internals -----------------------------------------------------------------------------------------------
    def _tool_request(self, tools: Optional[List[Dict[str, Any]]], tool_choice: Union[str, Dict[str, Any], None],
                      parallel_tool_calls: bool, tool_parser: Optional[str]) -> Optional[_ToolRequest]:
        """chat()'s tool arguments checked (ValueError naming what is wrong); None when the answers are not parsed
        for calls."""
        if not tools:
            return None
        if tool_parser is None:
            tool_parser = _parallm.detect_tool_parser(self._engine.tokenizer)
            tool_parser = "" if tool_parser == "none" else tool_parser
        if not tool_parser and tool_choice is None:
            return None  # a template whose call format is unknown, no tool_choice asked: tools only reach it
        body = json.dumps({"tools": tools, "tool_choice": "auto" if tool_choice is None else tool_choice,
                           "parallel_tool_calls": parallel_tool_calls})
        # Checks the tools and compiles the grammar once (the compiler caches it for every request).
        opening = self._grammars().apply_tools(_parallm.SamplingParams(), body, tool_parser)
        if tool_choice == "none":
            return None
        return _ToolRequest(body, tool_parser, opening, not parallel_tool_calls)

    def _chat_prompt(self, conversation: Conversation, tool_request: Optional[_ToolRequest],
                     **template_kwargs: Any) -> _Prompt:
        """One conversation through the chat template; a forced call's opening ends the prompt (the answer goes
        on from inside the call)."""
        text = self._tokenizer.render_chat(conversation, **template_kwargs)
        text += tool_request.opening if tool_request else ""
        return _Prompt(text, self._tokenizer.encode(text, add_special_tokens=False))

    @staticmethod
    def _prompt_list(prompts: Any) -> List[Any]:
        if isinstance(prompts, (str, dict)):
            return [prompts]
        prompts = list(prompts)
        if prompts and all(isinstance(p, int) and not isinstance(p, bool) for p in prompts):
            return [prompts]  # one prompt of token ids
        return prompts

    def _prompt(self, prompt: Any) -> _Prompt:
        if isinstance(prompt, str):
            if not self._engine.tokenizer.has_tokenizer:
                raise ValueError(f"a text prompt needs a tokenizer: {self._engine.tokenizer.missing}")
            return _Prompt(prompt, self._tokenizer.encode(prompt))
        if isinstance(prompt, dict):
            if "prompt_token_ids" in prompt:
                return _Prompt(prompt.get("prompt"), _token_ids(prompt["prompt_token_ids"], "prompt_token_ids"))
            if "prompt" in prompt:
                return self._prompt(prompt["prompt"])
            raise ValueError("a prompt dict needs 'prompt' or 'prompt_token_ids'")
        if isinstance(prompt, (list, tuple)):
            return _Prompt(None, _token_ids(prompt, "a token-id prompt"))
        raise TypeError(f"a prompt is a str, a list of token ids or a dict, not {type(prompt).__name__}")

    def _engine_params(self, items: List[_Prompt], sampling_params: Any) -> List[SamplingParams]:
        if sampling_params is None:
            sampling_params = SamplingParams()
        if isinstance(sampling_params, SamplingParams):
            return [sampling_params] * len(items)
        params = list(sampling_params)
        if len(params) != len(items):
            raise ValueError(f"{len(params)} SamplingParams for {len(items)} prompts (give one, or one per prompt)")
        for p in params:
            if not isinstance(p, SamplingParams):
                raise TypeError(f"sampling_params must hold SamplingParams, not {type(p).__name__}")
        return params

    def _grammars(self) -> Any:
        """The model's grammar compiler (structured outputs, tool choices), made on first use."""
        if self._grammar_compiler is None:
            self._grammar_compiler = _parallm.Grammars(self._engine.tokenizer, self._engine.vocab_size)
        return self._grammar_compiler

    def _native(self, items: List[_Prompt], params: List[SamplingParams],
                tools: Optional[_ToolRequest] = None) -> list:
        """The engine's parameters per prompt, each request checked as the engine will (nothing runs if one
        fails)."""
        natives = []
        for i, (item, p) in enumerate(zip(items, params)):
            native = p._to_engine(len(item.token_ids), self._engine.max_model_len)
            try:
                if p.structured_outputs is not None:
                    self._grammars().apply_structured_outputs(native, json.dumps(p.structured_outputs._request()))
                if tools is not None:
                    self._grammars().apply_tools(native, tools.body, tools.parser)
                self._engine.validate(item.token_ids, native)
            except ValueError as e:
                raise ValueError(f"prompt {i}: {e}") from None
            natives.append(native)
        return natives

    def _generate(self, items: List[_Prompt], sampling_params: Any, use_tqdm: bool,
                  lora_request: Any = None, tools: Optional[_ToolRequest] = None) -> List[RequestOutput]:
        params = self._engine_params(items, sampling_params)
        natives = self._native(items, params, tools)
        if lora_request is None or isinstance(lora_request, LoRARequest):
            loras = [lora_request] * len(items)
        else:
            loras = list(lora_request)
            if len(loras) != len(items):
                raise ValueError(f"{len(loras)} lora_requests for {len(items)} prompts (give one, or one per prompt)")
        progress = _Progress(len(items), "generate") if use_tqdm and items else None
        finished = self._run(items, natives, progress, loras)
        return [self._output(str(next(self._request_ids)), item, f, p, tools)
                for item, f, p in zip(items, finished, params)]

    def _run(self, items: List[_Prompt], natives: list, progress: Optional[_Progress] = None,
             loras: Optional[list] = None) -> list:
        """Submits every request into one collector and waits for all of them; on any exception (Ctrl-C
        included) cancels them all and waits until the engine has let them go, then re-raises."""
        collector = _parallm.Collector()
        finished: List[Any] = [None] * len(items)
        submitted = []
        try:
            for tag, (item, native) in enumerate(zip(items, natives)):
                submitted.append(self._submit(collector, tag, item, native, loras[tag] if loras else None))
            left = len(items)
            while left:
                for f in collector.take_finished(_POLL_SECONDS):
                    if f.error:
                        raise RuntimeError(f"prompt {f.tag}: {f.error}")
                    finished[f.tag] = f
                    left -= 1
                    if progress:
                        progress.add()
        except BaseException:
            for request in submitted:
                self._engine.cancel(request)
            collector.wait_idle()
            raise
        return finished

    def _submit(self, collector: Any, tag: int, item: _Prompt, native: Any, lora: Optional[LoRARequest]) -> int:
        """Hands one request to the engine, with its adapter (loaded on first use; ValueError if it cannot be)."""
        if lora is None:
            return self._engine.submit(collector, tag, item.token_ids, native)
        if not isinstance(lora, LoRARequest):
            raise TypeError(f"lora_request must be a LoRARequest, not {type(lora).__name__}")
        return self._engine.submit(collector, tag, item.token_ids, native, lora_name=lora.lora_name,
                                   lora_path=str(lora.lora_path))

    def _stream(self, item: _Prompt, params: SamplingParams, lora: Optional[LoRARequest] = None) -> "_DeltaStream":
        """Submits one request (raising ValueError now if the engine would refuse it); the returned iterator
        yields each engine step's progress of it."""
        native = self._native([item], [params])[0]
        collector = _parallm.Collector(deltas=True)
        request = self._submit(collector, 0, item, native, lora)
        return _DeltaStream(self._engine, collector, request)

    def _output(self, request_id: str, item: _Prompt, f: Any, params: SamplingParams,
                tools: Optional[_ToolRequest] = None) -> RequestOutput:
        decode = self._decode_one
        outputs = []
        for c in f.choices:
            samples = c.samples if params.logprobs is not None else []
            out = CompletionOutput(
                index=c.index, text=c.text, token_ids=list(c.token_ids),
                cumulative_logprob=_cumulative(samples, params.logprobs),
                logprobs=_logprobs(samples, params.logprobs, decode),
                finish_reason=c.finish_reason or None)
            if tools is not None:
                # As the server's chat API: content and calls; a forced answer is calls only. A forced answer cut
                # short (max_tokens, a stop string) keeps its text and has no calls.
                content, calls = _parallm.parse_tool_calls(tools.parser, c.text, tools.opening, tools.single_call)
                out.tool_calls = [ToolCall(id=i, function=FunctionCall(name=n, arguments=a)) for i, n, a in calls]
                if calls:
                    out.text = "" if tools.opening else content
                    out.finish_reason = "tool_calls"
            outputs.append(out)
        return RequestOutput(request_id=request_id, prompt=item.text, prompt_token_ids=item.token_ids,
                             outputs=outputs, finished=True, num_cached_tokens=f.cached_tokens,
                             metrics={"time_to_first_token": f.ttft_seconds, "latency": f.total_seconds})

    def _decode_one(self, token: int) -> Optional[str]:
        if not self._engine.tokenizer.has_tokenizer:
            return None
        return self._tokenizer.decode([token], skip_special_tokens=False)

    def __repr__(self) -> str:
        return f"LLM(model={self.model_path!r}, max_model_len={self.max_model_len})"


class _DeltaStream:
    """One request's progress, step by step. Closing it (or dropping it) before the end cancels the request and
    waits until the engine has freed its KV blocks."""

    def __init__(self, engine: Any, collector: Any, request: int) -> None:
        self._engine, self._collector, self._request = engine, collector, request
        self._pending: List[Any] = []
        self._done = False

    def __iter__(self) -> "_DeltaStream":
        return self

    def __next__(self) -> Any:
        try:
            while not self._pending:
                if self._done:
                    raise StopIteration
                self._pending = self._collector.take_deltas(_POLL_SECONDS)
                self._pending.reverse()
            delta = self._pending.pop()
            if delta.error:
                self._done = True
                raise RuntimeError(delta.error)
            self._done = delta.done
            return delta
        except (KeyboardInterrupt, GeneratorExit):
            self.close()
            raise

    def close(self) -> None:
        if not self._done:
            self._done = True
            self._pending = []
            self._engine.cancel(self._request)
            self._collector.wait_idle()

    def __del__(self) -> None:
        self.close()
