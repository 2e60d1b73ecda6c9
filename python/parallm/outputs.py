"""What a request produced, in vLLM's shapes: RequestOutput holding one CompletionOutput per choice."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

__all__ = ["Logprob", "FunctionCall", "ToolCall", "CompletionOutput", "RequestOutput"]


@dataclass
class Logprob:
    """A token's log-probability under the model's distribution (before sampling's processing).

    rank is 1 for the most likely token; None when the sampled token was not among the top ones asked for.
    """
    logprob: float
    rank: Optional[int] = None
    decoded_token: Optional[str] = None


@dataclass
class FunctionCall:
    """The function a tool call names, and its arguments as JSON text (OpenAI's shape)."""
    name: str
    arguments: str


@dataclass
class ToolCall:
    """One call the model made (LLM.chat with tools), in OpenAI's and vLLM's shape."""
    id: str
    function: FunctionCall
    type: str = "function"


@dataclass
class CompletionOutput:
    """One of a prompt's n completions.

    Attributes:
        index: which of the n.
        text: the generated text, special tokens skipped, cut before a matched stop string.
        token_ids: the generated tokens (a stop token is not included).
        cumulative_logprob: sum of the sampled tokens' logprobs, when logprobs were asked (else None).
        logprobs: per generated token, {token id: Logprob} for the sampled token and the top ones asked for
            (None unless SamplingParams.logprobs was set).
        finish_reason: "stop" (EOS, a stop token or string), "length" (max_tokens or the context), "abort"
            (cancelled), "tool_calls" (LLM.chat with tools: the answer called tools), or None while running.
        tool_calls: LLM.chat with tools: the calls the answer made (then `text` is only the content around them,
            "" for a forced tool_choice); None otherwise.
    """
    index: int
    text: str
    token_ids: List[int]
    cumulative_logprob: Optional[float]
    logprobs: Optional[List[Dict[int, Logprob]]]
    finish_reason: Optional[str] = None
    stop_reason: Optional[str] = None
    tool_calls: Optional[List[ToolCall]] = None

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestOutput:
    """A request's prompt and completions.

    Attributes:
        request_id: the id given, or the engine's counter.
        prompt: the prompt text (for chat, the rendered template); None when the prompt was token ids.
        prompt_token_ids: the prompt as the engine ran it.
        outputs: one CompletionOutput per choice (SamplingParams.n).
        finished: every choice is done.
        num_cached_tokens: prompt tokens served from the prefix cache.
    """
    request_id: str
    prompt: Optional[str]
    prompt_token_ids: List[int]
    outputs: List[CompletionOutput]
    finished: bool
    num_cached_tokens: int = 0
    metrics: Dict[str, float] = field(default_factory=dict)


def _logprobs(samples, want: Optional[int], decode) -> Optional[List[Dict[int, Logprob]]]:
    """vLLM's per-token dicts from the engine's SampleResults."""
    if want is None:
        return None
    out = []
    for s in samples:
        entry: Dict[int, Logprob] = {}
        for rank, alt in enumerate(s.top, start=1):
            entry[alt.token] = Logprob(alt.logprob, rank, decode(alt.token))
        if s.token not in entry:  # sampled outside the top ones asked for: its rank is not known
            entry[s.token] = Logprob(s.logprob, None, decode(s.token))
        out.append(entry)
    return out


def _cumulative(samples, want: Optional[int]) -> Optional[float]:
    if want is None:
        return None
    return float(sum(s.logprob for s in samples))
