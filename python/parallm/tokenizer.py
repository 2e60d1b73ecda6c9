"""Tokenizer: a model's own tokenizer and chat template with Hugging Face's method names (encode, decode,
apply_chat_template), exactly as the engine, the CLI and the server use them."""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _parallm

__all__ = ["Tokenizer"]

Conversation = List[Dict[str, Any]]


class Tokenizer:
    """The tokenizer of a loaded model (``LLM.get_tokenizer()``, or the second value of ``parallm.load``).

    Built from the model's tokenizer.json (Hugging Face and MLX folders), its GGUF vocabulary, or the tokenizer
    given to ``LLM(tokenizer=...)``. Encoding is exact to Hugging Face's tokenizers; chat templates render as
    transformers' Jinja templates do.
    """

    def __init__(self, native: _parallm.Tokenizer) -> None:
        self._native = native

    # -- text <-> ids --------------------------------------------------------------------------------------------
    def encode(self, text: str, add_special_tokens: bool = True) -> List[int]:
        """Token ids of `text`. add_special_tokens adds BOS/EOS as the tokenizer's configuration says; the text of
        special tokens (e.g. "<|im_end|>") becomes those tokens, as transformers and vLLM tokenize prompts."""
        if not isinstance(text, str):
            raise TypeError(f"encode() takes a str, not {type(text).__name__}")
        return self._native.encode(text, add_special_tokens)

    def __call__(self, text: Union[str, Sequence[str]], add_special_tokens: bool = True) -> Dict[str, Any]:
        """{"input_ids": ids} for a string, or a list of id lists for a list of strings (no padding)."""
        if isinstance(text, str):
            return {"input_ids": self.encode(text, add_special_tokens)}
        return {"input_ids": [self.encode(t, add_special_tokens) for t in text]}

    def decode(self, token_ids: Union[int, Sequence[int]], skip_special_tokens: bool = True) -> str:
        """The text of `token_ids` (ids outside the vocabulary are skipped; invalid UTF-8 becomes U+FFFD)."""
        if isinstance(token_ids, int):
            token_ids = [token_ids]
        return self._native.decode(list(token_ids), skip_special_tokens)

    def batch_decode(self, sequences: Sequence[Sequence[int]], skip_special_tokens: bool = True) -> List[str]:
        return [self.decode(s, skip_special_tokens) for s in sequences]

    def convert_ids_to_tokens(self, ids: Union[int, Sequence[int]]) -> Union[Optional[str], List[Optional[str]]]:
        """The vocabulary's pieces ("Ġthe", "<|im_end|>") of ids."""
        if isinstance(ids, int):
            return self._native.id_to_token(ids)
        return [self._native.id_to_token(i) for i in ids]

    def convert_tokens_to_ids(self, tokens: Union[str, Sequence[str]]) -> Union[Optional[int], List[Optional[int]]]:
        if isinstance(tokens, str):
            return self._native.token_to_id(tokens)
        return [self._native.token_to_id(t) for t in tokens]

    # -- chat ----------------------------------------------------------------------------------------------------
    def apply_chat_template(self, conversation: Conversation, tools: Optional[List[Dict[str, Any]]] = None,
                            add_generation_prompt: bool = False, tokenize: bool = True,
                            **template_kwargs: Any) -> Union[str, List[int]]:
        """Renders `conversation` ([{"role": ..., "content": ...}, ...]) through the model's chat template, as
        transformers does (add_generation_prompt is False unless asked; bos_token and eos_token are defined;
        `tools` and any other keyword are template variables). tokenize=True returns the ids of the rendered text
        (BOS/EOS are not added again: the template writes them)."""
        text = self.render_chat(conversation, tools=tools, add_generation_prompt=add_generation_prompt,
                                **template_kwargs)
        if not tokenize:
            return text
        return self.encode(text, add_special_tokens=False)

    def render_chat(self, conversation: Conversation, tools: Optional[List[Dict[str, Any]]] = None,
                    add_generation_prompt: bool = True, **template_kwargs: Any) -> str:
        """The chat template's text for `conversation` (add_generation_prompt defaults to True here, as chat
        requests need)."""
        if not isinstance(conversation, (list, tuple)):
            raise TypeError("a conversation is a list of {'role': ..., 'content': ...} dicts")
        extra: Dict[str, Any] = dict(template_kwargs)
        extra["add_generation_prompt"] = bool(add_generation_prompt)
        if tools is not None:
            extra["tools"] = tools
        return self._native.render_chat(json.dumps(list(conversation)), json.dumps(extra))

    @property
    def chat_template_available(self) -> bool:
        return self._native.has_chat_template

    # -- vocabulary ----------------------------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return self._native.vocab_size

    def __len__(self) -> int:
        return self._native.vocab_size

    @property
    def bos_token_id(self) -> Optional[int]:
        return self._native.bos_token_id

    @property
    def eos_token_id(self) -> Optional[int]:
        return self._native.eos_token_id

    @property
    def bos_token(self) -> Optional[str]:
        i = self.bos_token_id
        return None if i is None else self._native.id_to_token(i)

    @property
    def eos_token(self) -> Optional[str]:
        i = self.eos_token_id
        return None if i is None else self._native.id_to_token(i)

    def __repr__(self) -> str:
        if not self._native.has_tokenizer:
            return f"Tokenizer(none: {self._native.missing})"
        return f"Tokenizer(vocab_size={self.vocab_size}, chat_template={self.chat_template_available})"
