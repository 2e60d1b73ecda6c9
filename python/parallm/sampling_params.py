"""SamplingParams: how one request picks its tokens and when it stops, with vLLM's names and defaults."""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _parallm

__all__ = ["SamplingParams", "StructuredOutputsParams", "GuidedDecodingParams"]


def _number(name: str, value, allow_none: bool = False) -> Optional[float]:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"SamplingParams.{name} must be a number, not {type(value).__name__}")
    return float(value)


def _integer(name: str, value, allow_none: bool = False) -> Optional[int]:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"SamplingParams.{name} must be an int, not {type(value).__name__}")
    return int(value)


@dataclasses.dataclass
class StructuredOutputsParams:
    """A constraint on the output, as vLLM's ``StructuredOutputsParams``: give exactly one of ``json`` (a JSON Schema
    as a dict or JSON text, or a pydantic model class), ``regex``, ``choice`` (the output is one of these strings),
    ``grammar`` (GBNF, as llama.cpp writes it) or ``json_object=True`` (any JSON object or array).

    Each step's logits are masked to the tokens that keep the output inside the constraint, so even a weak model's
    output parses. The whitespace and fallback options are accepted for compatibility and change nothing
    (parallm's JSON grammars always allow bounded whitespace, and there is no other backend to fall back to);
    ``structural_tag`` is refused when the request is made.
    """
    json: Union[str, Dict[str, Any], Any, None] = None
    regex: Optional[str] = None
    choice: Optional[List[str]] = None
    grammar: Optional[str] = None
    json_object: Optional[bool] = None
    disable_fallback: bool = False
    disable_any_whitespace: bool = False
    disable_additional_properties: bool = False
    whitespace_pattern: Optional[str] = None
    structural_tag: Optional[str] = None

    def __post_init__(self) -> None:
        given = [name for name in ("json", "regex", "choice", "grammar", "json_object", "structural_tag")
                 if getattr(self, name) not in (None, False)]
        if len(given) > 1:
            raise ValueError("You can only use one kind of structured outputs constraint but multiple are "
                             f"specified: {', '.join(given)}")
        if not given:
            raise ValueError("StructuredOutputsParams needs one of json, regex, choice, grammar or json_object")

    def _request(self) -> Dict[str, Any]:
        """The request's `structured_outputs` field as the server reads it (a subclass's own fields left out)."""
        fields: Dict[str, Any] = {}
        for f in dataclasses.fields(StructuredOutputsParams):
            value = getattr(self, f.name)
            if f.name == "json" and hasattr(value, "model_json_schema"):
                value = value.model_json_schema()  # a pydantic model class
            if value is not None and value is not False:
                fields[f.name] = value
        return {"structured_outputs": fields}


@dataclasses.dataclass
class GuidedDecodingParams(StructuredOutputsParams):
    """vLLM's older name for StructuredOutputsParams (``SamplingParams(guided_decoding=...)``); ``backend`` is
    accepted and ignored (parallm has one grammar engine)."""
    backend: Optional[str] = None


class SamplingParams:
    """Sampling parameters for one request, as vLLM's ``SamplingParams``.

    Args:
        n: completions per prompt; the copies share the prompt's KV blocks.
        presence_penalty: subtracted from the logit of every token already in the output.
        frequency_penalty: subtracted once per occurrence of a token in the output.
        repetition_penalty: > 1 discourages tokens seen in the prompt or the output (CTRL-style).
        temperature: 0 is greedy; the default 1.0 samples, as vLLM does.
        top_p: keep the smallest set of tokens whose probability reaches top_p.
        top_k: keep the k most likely tokens; 0 or -1 keeps all.
        min_p: drop tokens less likely than min_p times the most likely one.
        seed: the request's own random stream (copy k of n uses seed + k); None draws one.
        stop: strings that end the text; the text is cut before the match.
        stop_token_ids: tokens that end the request besides EOS (not included in the output).
        ignore_eos: keep generating past EOS.
        max_tokens: tokens to generate at most; None: as many as the context leaves after the prompt.
        logprobs: None for none; 0 for the sampled token's logprob; k > 0 also the k most likely tokens.
        logit_bias: token id -> value added to its logit.
        skip_special_tokens: leave special tokens out of the text (True, the default). LLM.chat's mistral tool
            parser turns it off, since Mistral's [TOOL_CALLS] marker is one. EOS and stop_token_ids end the
            output and are never part of it.
        structured_outputs: a StructuredOutputsParams the output must follow (JSON Schema, regex, choice, grammar).
        guided_decoding: the same under vLLM's older name (a GuidedDecodingParams); give one of the two.

    Ranges (temperature >= 0, 0 < top_p <= 1, ...) are checked by the engine when a request is made; a bad value
    raises ValueError naming the field.
    """

    __slots__ = ("n", "presence_penalty", "frequency_penalty", "repetition_penalty", "temperature", "top_p",
                 "top_k", "min_p", "seed", "stop", "stop_token_ids", "ignore_eos", "max_tokens", "logprobs",
                 "logit_bias", "skip_special_tokens", "structured_outputs")

    def __init__(self, *, n: int = 1, presence_penalty: float = 0.0, frequency_penalty: float = 0.0,
                 repetition_penalty: float = 1.0, temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0,
                 min_p: float = 0.0, seed: Optional[int] = None, stop: Union[None, str, Sequence[str]] = None,
                 stop_token_ids: Optional[Sequence[int]] = None, ignore_eos: bool = False,
                 max_tokens: Optional[int] = 16, logprobs: Optional[int] = None,
                 logit_bias: Optional[Dict[int, float]] = None, skip_special_tokens: bool = True,
                 structured_outputs: Optional[StructuredOutputsParams] = None,
                 guided_decoding: Optional[StructuredOutputsParams] = None) -> None:
        self.n = _integer("n", n)
        self.presence_penalty = _number("presence_penalty", presence_penalty)
        self.frequency_penalty = _number("frequency_penalty", frequency_penalty)
        self.repetition_penalty = _number("repetition_penalty", repetition_penalty)
        self.temperature = _number("temperature", temperature)
        self.top_p = _number("top_p", top_p)
        self.top_k = _integer("top_k", top_k)
        self.min_p = _number("min_p", min_p)
        self.seed = _integer("seed", seed, allow_none=True)
        if stop is None:
            self.stop: List[str] = []
        elif isinstance(stop, str):
            self.stop = [stop]
        else:
            self.stop = list(stop)
            for s in self.stop:
                if not isinstance(s, str):
                    raise TypeError(f"SamplingParams.stop must hold strings, not {type(s).__name__}")
        self.stop_token_ids: List[int] = [_integer("stop_token_ids[]", t) for t in (stop_token_ids or [])]
        if not isinstance(ignore_eos, bool):
            raise TypeError("SamplingParams.ignore_eos must be a bool")
        self.ignore_eos = ignore_eos
        self.max_tokens = _integer("max_tokens", max_tokens, allow_none=True)
        self.logprobs = _integer("logprobs", logprobs, allow_none=True)
        self.logit_bias: Dict[int, float] = {}
        for token, bias in (logit_bias or {}).items():
            # JSON clients send token ids as strings, as OpenAI's API does.
            key = int(token) if isinstance(token, str) and token.lstrip("-").isdigit() else token
            self.logit_bias[_integer("logit_bias key", key)] = _number("logit_bias value", bias)
        if not isinstance(skip_special_tokens, bool):
            raise TypeError("SamplingParams.skip_special_tokens must be a bool")
        self.skip_special_tokens = skip_special_tokens
        if structured_outputs is not None and guided_decoding is not None:
            raise ValueError("give structured_outputs or guided_decoding (its older name), not both")
        constraint = structured_outputs if structured_outputs is not None else guided_decoding
        if constraint is not None and not isinstance(constraint, StructuredOutputsParams):
            raise TypeError("SamplingParams.structured_outputs must be a StructuredOutputsParams, not "
                            f"{type(constraint).__name__}")
        self.structured_outputs: Optional[StructuredOutputsParams] = constraint

    @property
    def guided_decoding(self) -> Optional[StructuredOutputsParams]:
        """vLLM's older name for structured_outputs."""
        return self.structured_outputs

    def clone(self) -> "SamplingParams":
        """A copy that can be changed without changing this one."""
        copy = SamplingParams.__new__(SamplingParams)
        for name in self.__slots__:
            value = getattr(self, name)
            setattr(copy, name, value.copy() if isinstance(value, (list, dict)) else value)
        return copy

    def __eq__(self, other) -> bool:
        return isinstance(other, SamplingParams) and all(
            getattr(self, k) == getattr(other, k) for k in self.__slots__)

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__)
        return f"SamplingParams({fields})"

    def _to_engine(self, prompt_len: int, max_model_len: int) -> _parallm.SamplingParams:
        """The engine's parameters for a prompt of `prompt_len` tokens."""
        p = _parallm.SamplingParams()
        if self.max_tokens is None:
            # What the context leaves after the prompt (a prompt that fills it is refused by the engine).
            p.max_tokens = max(1, max_model_len - prompt_len)
        else:
            p.max_tokens = self.max_tokens
        p.temperature = self.temperature
        p.top_k = 0 if self.top_k == -1 else self.top_k  # vLLM's older "all" is -1
        p.top_p = self.top_p
        p.min_p = self.min_p
        p.repetition_penalty = self.repetition_penalty
        p.frequency_penalty = self.frequency_penalty
        p.presence_penalty = self.presence_penalty
        p.logit_bias = self.logit_bias
        p.stop_token_ids = self.stop_token_ids
        p.stop = self.stop
        p.ignore_eos = self.ignore_eos
        p.skip_special_tokens = self.skip_special_tokens
        p.logprobs = -1 if self.logprobs is None else self.logprobs
        p.n = self.n
        if self.seed is not None:
            if self.seed < 0:
                raise ValueError(f"seed must be >= 0, got {self.seed}")
            p.seed = self.seed
            p.has_seed = True
        return p
