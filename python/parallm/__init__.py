"""parallm: a C++ LLM inference engine built for the total throughput of many parallel requests, from Python.

Two interfaces over the same continuous-batching engine (paged KV cache, prefix sharing, quantized weights):

vLLM's::

    llm = parallm.LLM("model.gguf", max_num_seqs=64)
    outputs = llm.generate(prompts, parallm.SamplingParams(temperature=0.8, seed=1, max_tokens=100))
    outputs = llm.chat([{"role": "user", "content": "Hi"}])

mlx_parallm's::

    model, tokenizer = parallm.load("model.gguf")
    texts = parallm.batch_generate(model, tokenizer, prompts, max_tokens=100, verbose=True, temp=0.0)

Streaming: ``LLM.stream_generate`` and ``parallm.stream_generate`` (text pieces), ``AsyncLLM`` for asyncio.
"""
from ._parallm import __version__
from .async_llm import AsyncLLM
from .llm import LLM
from .lora import LoRARequest
from .outputs import CompletionOutput, FunctionCall, Logprob, RequestOutput, ToolCall
from .sampling_params import GuidedDecodingParams, SamplingParams, StructuredOutputsParams
from .tokenizer import Tokenizer
from .utils import batch_generate, generate, load, stream_generate

__all__ = ["LLM", "AsyncLLM", "LoRARequest", "SamplingParams", "StructuredOutputsParams", "GuidedDecodingParams",
           "RequestOutput", "CompletionOutput", "Logprob", "ToolCall", "FunctionCall", "Tokenizer",
           "load", "generate", "stream_generate", "batch_generate", "__version__"]
