"""LoRARequest: which LoRA adapter a request runs with, in vLLM's shape (vllm.lora.request.LoRARequest)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LoRARequest:
    """An adapter by name, loaded from `lora_path` (an mlx-lm or PEFT folder, or a llama.cpp GGUF LoRA file) the
    first time a request names it. `lora_int_id` is vLLM's numeric id, kept for compatibility (the name
    identifies the adapter here)."""
    lora_name: str
    lora_int_id: int = 0
    lora_path: str = ""
