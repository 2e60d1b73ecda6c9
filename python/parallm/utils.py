"""mlx_parallm's interface (``from mlx_parallm.utils import load, generate, batch_generate``) over parallm's
engine: ``load`` returns (model, tokenizer), and the functions take them with mlx_parallm's parameter names,
so its scripts run with only the import line changed.

Differences, on purpose: prompts are not padded to one length (each request runs as its own sequence in the
continuous batch), so results do not depend on what else is in the batch; the repetition penalty covers the
whole prompt and output (mlx_parallm refuses it).
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from .llm import LLM, _Progress
from .sampling_params import SamplingParams
from .tokenizer import Tokenizer

__all__ = ["load", "generate", "stream_generate", "batch_generate"]


def load(path_or_hf_repo: str, tokenizer: Optional[str] = None, **engine_options: Any) -> Tuple[LLM, Tokenizer]:
    """Loads a model (a .gguf file, a Hugging Face or MLX folder, a llama2.c .bin) and its tokenizer.

    Args:
        path_or_hf_repo: a local path; nothing is downloaded.
        tokenizer: a tokenizer to use instead of the model's own (tokenizer.json, folder, .gguf, tokenizer.bin).
        engine_options: LLM's keyword options (max_num_seqs, kv_cache_gb, enable_prefix_caching, threads, ...).

    Returns:
        (model, tokenizer): the model is an ``LLM``, usable with vLLM's interface too.
    """
    model = LLM(path_or_hf_repo, tokenizer=tokenizer, **engine_options)
    return model, model.get_tokenizer()


def _params(max_tokens: int, temp: float, top_p: float, repetition_penalty: Optional[float],
            repetition_context_size: Optional[int], logit_bias: Optional[Dict[int, float]],
            extra: Dict[str, Any]) -> SamplingParams:
    if repetition_context_size is not None:
        raise ValueError("repetition_context_size is not supported: parallm's repetition_penalty covers the whole "
                         "prompt and output")
    return SamplingParams(max_tokens=max_tokens, temperature=temp, top_p=top_p,
                          repetition_penalty=1.0 if repetition_penalty is None else repetition_penalty,
                          logit_bias=logit_bias, **extra)


def _model(model: Any) -> LLM:
    if not isinstance(model, LLM):
        raise TypeError(f"model must be what parallm.load returned (an LLM), not {type(model).__name__}")
    return model


def stream_generate(model: LLM, tokenizer: Tokenizer, prompt: Union[str, Sequence[int]], max_tokens: int = 100,
                    temp: float = 0.0, top_p: float = 1.0, repetition_penalty: Optional[float] = None,
                    repetition_context_size: Optional[int] = None, logit_bias: Optional[Dict[int, float]] = None,
                    **sampling: Any) -> Iterator[str]:
    """Yields the completion of `prompt` (text, or token ids) piece by piece as it is generated; the pieces
    concatenate to what generate() returns. Other keywords (top_k, min_p, seed, stop, ...) are SamplingParams'.
    Leaving the loop early cancels the request."""
    params = _params(max_tokens, temp, top_p, repetition_penalty, repetition_context_size, logit_bias, sampling)
    return _model(model).stream_generate(_encode(tokenizer, prompt), params)


def generate(model: LLM, tokenizer: Tokenizer, prompt: Union[str, Sequence[int]], max_tokens: int = 100,
             verbose: bool = False, formatter: Optional[Callable[[str, float], None]] = None, temp: float = 0.0,
             top_p: float = 1.0, repetition_penalty: Optional[float] = None,
             repetition_context_size: Optional[int] = None, logit_bias: Optional[Dict[int, float]] = None,
             **sampling: Any) -> str:
    """The completion of one prompt (used as given: no chat template). verbose prints the prompt, the text as
    it comes and the prompt and generation tokens per second, as mlx_parallm does; formatter(text, prob) is
    called per piece instead of printing it (prob is the piece's last token's probability)."""
    llm = _model(model)
    params = _params(max_tokens, temp, top_p, repetition_penalty, repetition_context_size, logit_bias, sampling)
    if formatter is not None:
        params.logprobs = 0
    prompt_ids = _encode(tokenizer, prompt)
    if verbose:
        print("=" * 10)
        print("Prompt:", prompt)
    tic = time.perf_counter()
    first: Optional[float] = None
    text, count = [], 0
    for delta in llm._stream(llm._prompt(prompt_ids), params):
        for c in delta.choices:
            if c.token_ids and first is None:
                first = time.perf_counter()
            count += len(c.token_ids)
            text.append(c.text)
            if verbose and c.text:
                if formatter is not None:
                    formatter(c.text, math.exp(c.samples[-1].logprob) if c.samples else 0.0)
                else:
                    print(c.text, end="", flush=True)
    if verbose:
        end = time.perf_counter()
        print(flush=True)
        print("=" * 10)
        if count == 0:
            print("No tokens generated for this prompt")
        else:
            prompt_time = (first or end) - tic
            gen_time = end - (first or end)
            print(f"Prompt: {len(prompt_ids) / max(prompt_time, 1e-9):.3f} tokens-per-sec")
            print(f"Generation: {(count - 1) / max(gen_time, 1e-9):.3f} tokens-per-sec")
    return "".join(text)


def batch_generate(model: LLM, tokenizer: Tokenizer, prompts: Sequence[str], max_tokens: int = 100,
                   verbose: bool = False, format_prompts: bool = True, formatter: Optional[Callable] = None,
                   temp: float = 0.0, top_p: float = 1.0, repetition_penalty: Optional[float] = None,
                   repetition_context_size: Optional[int] = None, logit_bias: Optional[Dict[int, float]] = None,
                   **sampling: Any) -> List[str]:
    """The completions of many prompts, run together in one continuous batch; returns the texts in prompt
    order.

    Args:
        prompts: strings (or token-id lists, used as they are).
        max_tokens: tokens to generate per prompt at most.
        verbose: print a count of finished prompts (stderr), then, as mlx_parallm does, the prompt and
            generation tokens per second and every prompt with its response.
        format_prompts: wrap each prompt as one user message through the model's chat template (mlx_parallm's
            default); False uses them as plain text.
        formatter: accepted for mlx_parallm's signature; batch_generate prints no per-token output.
        temp, top_p, repetition_penalty, logit_bias: sampling, as mlx_parallm's generate_step (the penalty
            covers the whole prompt and output: repetition_context_size other than None is refused).
        sampling: other SamplingParams keywords (top_k, min_p, seed, stop, ...).

    Prompt tokens per second count every prompt token over the time until the last prompt had been read (its
    first token sampled); generation tokens per second count every generated token over the time from the
    first sampled token to the end. In a continuous batch the two overlap.
    """
    llm = _model(model)
    params = _params(max_tokens, temp, top_p, repetition_penalty, repetition_context_size, logit_bias, sampling)
    items = []
    for p in prompts:
        if isinstance(p, str):
            text = tokenizer.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True,
                                                 tokenize=False) if format_prompts else p
            ids = tokenizer.encode(text, add_special_tokens=not format_prompts)
            items.append(llm._prompt({"prompt": text, "prompt_token_ids": ids}))
        else:
            items.append(llm._prompt(p))
    if verbose:
        print("=" * 10)
    natives = llm._native(items, [params] * len(items))
    tic = time.perf_counter()
    finished = llm._run(items, natives, _Progress(len(items), "batch_generate") if verbose and items else None)
    if verbose:
        end = time.perf_counter()
        firsts = [f.ttft_seconds for f in finished if f.ttft_seconds > 0]
        prompt_time = max(firsts) if firsts else end - tic
        gen_time = (end - tic) - (min(firsts) if firsts else 0)
        prompt_tokens = sum(len(i.token_ids) for i in items)
        generated = sum(len(c.token_ids) for f in finished for c in f.choices)
        print(f"Prompt: {prompt_tokens / max(prompt_time, 1e-9):.3f} tokens-per-sec")
        print(f"Generation: {generated / max(gen_time, 1e-9):.3f} tokens-per-sec")
    responses = [f.choices[0].text for f in finished]
    if verbose:
        for prompt, response in zip(prompts, responses):
            print("=" * 10)
            print("Prompt:", prompt)
            print(response)
    return responses


def _encode(tokenizer: Tokenizer, prompt: Union[str, Sequence[int]]) -> List[int]:
    if isinstance(prompt, str):
        return tokenizer.encode(prompt)
    return list(prompt)
