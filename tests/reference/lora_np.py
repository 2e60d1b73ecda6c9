"""LoRA adapters in numpy, read independently of parallm: mlx-lm, Hugging Face PEFT and llama.cpp GGUF.

Each format is read from its own published conventions:
- mlx-lm (mlx_lm/tuner/lora.py LoRALinear, tuner/utils.py load_adapters): adapter_config.json has
  fine_tune_type ("lora"), num_layers (the last N layers) and lora_parameters {rank, scale, keys};
  adapters.safetensors holds <module>.lora_a [in, r] and <module>.lora_b [r, out], and the layer
  computes y = W x + scale * (x @ lora_a) @ lora_b, i.e. W' = W + scale * lora_b.T @ lora_a.T.
- PEFT (peft/tuners/lora/layer.py): adapter_config.json has r, lora_alpha, use_rslora; tensors
  base_model.model.<module>.lora_A.weight [r, in] and .lora_B.weight [out, r];
  W' = W + (lora_alpha / r) * B @ A, or lora_alpha / sqrt(r) with use_rslora.
- GGUF (llama.cpp convert_lora_to_gguf.py, llama-adapter.cpp): general.type "adapter", adapter.type
  "lora", adapter.lora.alpha; tensors blk.N.<tensor>.weight.lora_a (ne [in, r]) and .lora_b (ne [r,
  out]); scale = alpha / r (1 when alpha is 0). The converter runs the base model's tensor
  transformations, so for llama-family GGUF the q/k rows of lora_b are permuted like the base's
  (convert_hf_to_gguf's LlamaModel.permute).
The adapter is applied by adding the update to the base weights in float64: exactly x W'^T = x W^T
+ scale * (x A^T) B^T, the runtime update, up to float64 rounding.
"""
import json
import os

import numpy as np

import gguf_np
import safetensors_np

# HF module (inside a layer) -> (reference Layer field, GGUF tensor kind)
TARGETS = {
    "self_attn.q_proj": ("wq", "attn_q"), "self_attn.k_proj": ("wk", "attn_k"),
    "self_attn.v_proj": ("wv", "attn_v"), "self_attn.o_proj": ("wo", "attn_output"),
    "mlp.gate_proj": ("w_gate", "ffn_gate"), "mlp.up_proj": ("w_up", "ffn_up"),
    "mlp.down_proj": ("w_down", "ffn_down"),
}
BY_GGUF = {g: (field, hf) for hf, (field, g) in TARGETS.items()}


def _halves_to_interleaved(rows, n_heads):
    """llama.cpp's permute: per head, (i, i + d/2) pairs become (2i, 2i + 1)."""
    out_dim, cols = rows.shape
    return rows.reshape(n_heads, 2, out_dim // n_heads // 2, cols).swapaxes(1, 2).reshape(out_dim, cols)


def _interleaved_to_halves(rows, n_heads):
    out_dim, cols = rows.shape
    return rows.reshape(n_heads, out_dim // n_heads // 2, 2, cols).swapaxes(1, 2).reshape(out_dim, cols)


def load_adapter(path):
    """[(layer, hf_module, A [r, in], B [out, r], scale, b_rows)] where b_rows says how B's q/k rows
    pair for RoPE: "halves" (HF order) or "interleaved" (llama-family GGUF)."""
    if os.path.isfile(path):
        return _load_gguf(path)
    if os.path.exists(os.path.join(path, "adapters.safetensors")):
        return _load_mlx(path)
    return _load_peft(path)


def _load_mlx(folder):
    with open(os.path.join(folder, "adapter_config.json")) as f:
        cfg = json.load(f)
    if cfg.get("fine_tune_type", "lora") != "lora":
        raise ValueError(f"{folder}: fine_tune_type {cfg['fine_tune_type']} not supported by the reference")
    scale = float(cfg["lora_parameters"]["scale"])
    w = safetensors_np.read_safetensors(os.path.join(folder, "adapters.safetensors"))
    out = []
    for name, a in w.items():
        if not name.endswith(".lora_a"):
            continue
        module = name[:-len(".lora_a")]
        parts = module.split(".")            # model.layers.N.self_attn.q_proj
        layer, hf = int(parts[2]), ".".join(parts[3:])
        b = w[module + ".lora_b"]
        out.append((layer, hf, np.asarray(a, np.float64).T, np.asarray(b, np.float64).T, scale, "halves"))
    return out


def _load_peft(folder):
    with open(os.path.join(folder, "adapter_config.json")) as f:
        cfg = json.load(f)
    r, alpha = float(cfg["r"]), float(cfg["lora_alpha"])
    scale = alpha / np.sqrt(r) if cfg.get("use_rslora") else alpha / r
    w = safetensors_np.read_safetensors(os.path.join(folder, "adapter_model.safetensors"))
    out = []
    for name, a in w.items():
        if not name.endswith(".lora_A.weight"):
            continue
        module = name[:-len(".lora_A.weight")]
        parts = module.split(".")            # base_model.model.model.layers.N.self_attn.q_proj
        layer, hf = int(parts[4]), ".".join(parts[5:])
        b = w[module + ".lora_B.weight"]
        out.append((layer, hf, np.asarray(a, np.float64), np.asarray(b, np.float64), scale, "halves"))
    return out


def _load_gguf(path):
    g = gguf_np.GGUFFile(path)
    md = g.metadata
    if md.get("general.type") != "adapter" or md.get("adapter.type") != "lora":
        raise ValueError(f"{path}: not a GGUF LoRA adapter")
    alpha = float(md.get("adapter.lora.alpha", 0.0))
    arch = md["general.architecture"]
    rows = "interleaved" if arch in ("llama", "mistral") else "halves"
    out = []
    for name in g.tensors:
        if not name.endswith(".weight.lora_a"):
            continue
        base = name[:-len(".weight.lora_a")]   # blk.N.attn_q
        _, n, kind = base.split(".")
        a, b = g.tensor(name), g.tensor(base + ".weight.lora_b")   # [r, in], [out, r]
        scale = alpha / a.shape[0] if alpha else 1.0
        out.append((int(n), BY_GGUF[kind][1], a, b, scale, rows))
    return out


def apply_adapter(model, path):
    """Adds the adapter at `path` to `model`'s weights in place (float64)."""
    c = model.config
    model_rows = "interleaved" if c.rope_style == "interleaved" else "halves"
    for layer, hf, a, b, scale, rows in load_adapter(path):
        field = TARGETS[hf][0]
        if field in ("wq", "wk") and rows != model_rows:
            heads = c.n_heads if field == "wq" else c.n_kv_heads
            b = _interleaved_to_halves(b, heads) if rows == "interleaved" else _halves_to_interleaved(b, heads)
        L = model.layers[layer]
        w = getattr(L, field)
        if w.shape != (b.shape[0], a.shape[1]):
            raise ValueError(f"{path}: layer {layer} {hf}: update {b.shape[0]}x{a.shape[1]} vs weight {w.shape}")
        setattr(L, field, np.asarray(w, np.float64) + scale * (b @ a))
    return model
