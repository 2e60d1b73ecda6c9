"""Loaders of the Gemma (1, 2, 3) and Phi-3 families for the numpy reference (forward.py dispatches here).

Written from Hugging Face transformers' modeling_gemma.py, modeling_gemma2.py, modeling_gemma3.py,
modeling_phi3.py and modeling_rope_utils.py (the semantics), and llama.cpp's convert_hf_to_gguf.py
(the GGUF layout), not from parallm's code. Each loader turns a file into forward.py's `Model`:
- Gemma's RMSNorm multiplies by (1 + w) for the w HF stores; GGUF files already hold 1 + w
  (convert_hf_to_gguf adds 1 to every "*norm.weight"), so the HF loader adds 1 and the GGUF one does not.
- Phi-3's fused qkv_proj = [q; k; v] and gate_up_proj = [gate; up] (rows) are split on load.
- RoPE rotates halves (NEOX) in every format: convert_hf_to_gguf permutes Q/K for llama only.
Anything these families define that the reference cannot honour (an unknown rope scaling type or
activation, Gemma-3 attention soft-capping) is an error naming the field, never a silent guess.
"""
import math

import numpy as np

import forward as fw

# HF model_type -> the reference's arch name (= GGUF general.architecture).
HF_ARCHS = {"gemma": "gemma", "gemma2": "gemma2", "gemma3_text": "gemma3", "phi3": "phi3"}
GGUF_ARCHS = ("gemma", "gemma2", "gemma3", "phi3")
GEMMA3_PATTERN = 6  # llama.cpp's fixed Gemma-3 pattern: five sliding layers, then one global


def sliding_layers(arch, n_layers, pattern=GEMMA3_PATTERN, layer_types=None):
    """Which layers use the sliding window: HF's layer_types when given, else Gemma-2's even layers,
    Gemma-3's (i + 1) % pattern != 0, and every layer for Phi-3."""
    if layer_types is not None:
        if len(layer_types) != n_layers or set(layer_types) - {"sliding_attention", "full_attention"}:
            raise ValueError(f"layer_types {layer_types!r}: need {n_layers} of sliding_attention / full_attention")
        return [t == "sliding_attention" for t in layer_types]
    if arch == "gemma2":
        return [i % 2 == 0 for i in range(n_layers)]
    if arch == "gemma3":
        return [(i + 1) % pattern != 0 for i in range(n_layers)]
    return [True] * n_layers


def longrope_mscale(max_pos, original_max_pos):
    """LongRoPE's attention factor (modeling_rope_utils): sqrt(1 + ln(s) / ln(original)), s = max /
    original, or 1 when s <= 1."""
    s = max_pos / original_max_pos
    return 1.0 if s <= 1.0 else math.sqrt(1.0 + math.log(s) / math.log(original_max_pos))


def longrope_inv_freq(factors, n_rot, base, where):
    """inv_freq[i] = 1 / (factor[i] * base ** (2i / n_rot))."""
    factors = np.asarray(factors, np.float64).ravel()
    if factors.size != n_rot // 2:
        raise ValueError(f"{where}: {factors.size} LongRoPE factors, need rotary_dim / 2 = {n_rot // 2}")
    return fw.default_inv_freq(n_rot, base) / factors


def gemma_activation(config, where):
    """Gemma's MLP activation: config.hidden_activation, whose class default is gelu_pytorch_tanh.
    Gemma 1 configs from before that field existed say hidden_act "gelu" but were trained with the
    tanh GELU: HF's GemmaMLP (until Dec 2024) and llama.cpp use the tanh GELU then, and so does the
    reference (hidden_act is not read)."""
    name = config.get("hidden_activation") or "gelu_pytorch_tanh"
    if name != "gelu_pytorch_tanh":
        raise ValueError(f"{where}: hidden_activation {name!r} not supported by the reference (gelu_pytorch_tanh)")
    return "gelu_tanh"


def _shift(w):
    """HF Gemma norm weight -> the multiplier a plain RMSNorm uses (1 + w)."""
    return None if w is None else 1.0 + w


def _split_rows(w, sizes, what):
    if w.shape[0] != sum(sizes):
        raise ValueError(f"{what}: {w.shape[0]} rows, expected {' + '.join(map(str, sizes))}")
    return np.split(w, np.cumsum(sizes)[:-1], axis=0)


# ---------------------------------------------------------------------------------------------
# Hugging Face / MLX folders.

def load_hf(folder, config, w):
    arch = HF_ARCHS[config["model_type"]]
    n_embd, n_heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    n_kv = int(config.get("num_key_value_heads") or n_heads)
    head_dim = int(config.get("head_dim") or n_embd // n_heads)
    n_layers = int(config["num_hidden_layers"])
    cfg = fw.Config(arch=arch, n_embd=n_embd, n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv,
                    head_dim=head_dim, n_ff=int(config["intermediate_size"]),
                    vocab=w["model.embed_tokens.weight"].shape[0],
                    # the config classes' defaults where config.json omits a field
                    eps=float(config.get("rms_norm_eps", 1e-5 if arch == "phi3" else 1e-6)),
                    rope_base=float(config.get("rope_theta", 10000.0)), rope_style=fw.NEOX)
    windows = [0] * n_layers
    layer_inv = [None] * n_layers
    if arch == "phi3":
        act = config.get("hidden_act", "silu")
        if act != "silu":
            raise ValueError(f"{folder}: hidden_act {act!r} not supported by the reference (silu)")
        _hf_phi3_rope(folder, config, cfg)
    else:
        cfg.act = gemma_activation(config, folder)
        cfg.embed_scale = math.sqrt(n_embd)
        if arch != "gemma":   # Gemma2Config's defaults: caps 50 / 30; Gemma3TextConfig's: none
            caps = (50.0, 30.0) if arch == "gemma2" else (None, None)
            cfg.attn_scale = float(config.get("query_pre_attn_scalar", 256)) ** -0.5
            cfg.final_softcap = float(config.get("final_logit_softcapping", caps[1]) or 0.0)
            attn_cap = float(config.get("attn_logit_softcapping", caps[0]) or 0.0)
            if arch == "gemma2":
                cfg.attn_softcap = attn_cap
            elif attn_cap:
                raise ValueError(f"{folder}: attn_logit_softcapping {attn_cap} on gemma3_text is not "
                                 "supported by the reference (HF's Gemma 3 does not apply it)")
        if arch == "gemma3":
            layer_inv = _hf_gemma3_rope(folder, config, cfg, n_layers)
    if arch != "gemma":   # Gemma 2/3 configs default to 4096, Phi-3's to none; null = none
        W = int(config.get("sliding_window", None if arch == "phi3" else 4096) or 0)
        pattern = int(config.get("sliding_window_pattern") or GEMMA3_PATTERN)
        for i, s in enumerate(sliding_layers(arch, n_layers, pattern, config.get("layer_types"))):
            windows[i] = W if s else 0

    q_rows, kv_rows = n_heads * head_dim, n_kv * head_dim
    layers = []
    for i in range(n_layers):
        p = f"model.layers.{i}."
        a, m = p + "self_attn.", p + "mlp."
        if arch == "phi3":
            wq, wk, wv = _split_rows(w[a + "qkv_proj.weight"], (q_rows, kv_rows, kv_rows), a + "qkv_proj")
            gate, up = _split_rows(w[m + "gate_up_proj.weight"], (cfg.n_ff, cfg.n_ff), m + "gate_up_proj")
            layers.append(fw.Layer(
                attn_norm=w[p + "input_layernorm.weight"], wq=wq, wk=wk, wv=wv,
                wo=w[a + "o_proj.weight"], ffn_norm=w[p + "post_attention_layernorm.weight"],
                w_gate=gate, w_up=up, w_down=w[m + "down_proj.weight"], window=windows[i]))
            continue
        four = arch != "gemma"   # gemma2/3: post_attention_layernorm is the attention OUTPUT's norm
        layers.append(fw.Layer(
            attn_norm=_shift(w[p + "input_layernorm.weight"]), wq=w[a + "q_proj.weight"],
            wk=w[a + "k_proj.weight"], wv=w[a + "v_proj.weight"], wo=w[a + "o_proj.weight"],
            ffn_norm=_shift(w[p + ("pre_feedforward_layernorm" if four else "post_attention_layernorm")
                               + ".weight"]),
            w_gate=w[m + "gate_proj.weight"], w_up=w[m + "up_proj.weight"],
            w_down=w[m + "down_proj.weight"],
            post_attn_norm=_shift(w[p + "post_attention_layernorm.weight"]) if four else None,
            post_ffn_norm=_shift(w[p + "post_feedforward_layernorm.weight"]) if four else None,
            q_norm=_shift(w.get(a + "q_norm.weight")) if arch == "gemma3" else None,
            k_norm=_shift(w.get(a + "k_norm.weight")) if arch == "gemma3" else None,
            window=windows[i], inv_freq=layer_inv[i]))
        if arch == "gemma3" and layers[-1].q_norm is None:
            raise ValueError(f"{folder}: gemma3 layer {i} has no self_attn.q_norm / k_norm")
    tok_embd = w["model.embed_tokens.weight"]
    # HF defaults: Gemma ties the LM head to the embedding, Phi-3 does not
    tied = bool(config.get("tie_word_embeddings", arch != "phi3")) or "lm_head.weight" not in w
    norm = w["model.norm.weight"]
    return fw.Model(cfg, tok_embd, layers, norm if arch == "phi3" else _shift(norm),
                    tok_embd if tied else w["lm_head.weight"])


def _rope_type(rs):
    return rs.get("rope_type", rs.get("type"))


def _hf_phi3_rope(folder, config, cfg):
    """Partial rotary and LongRoPE of a Phi-3 config.json (configuration_phi3 / modeling_rope_utils)."""
    prf = float(config.get("partial_rotary_factor") or 1.0)
    cfg.n_rot = int(cfg.head_dim * prf)
    if cfg.n_rot % 2 or not 0 < cfg.n_rot <= cfg.head_dim:
        raise ValueError(f"{folder}: partial_rotary_factor {prf} gives rotary_dim {cfg.n_rot}")
    rs = config.get("rope_scaling")
    if not rs:
        return
    kind = _rope_type(rs)
    if kind == "default":
        return
    if kind not in ("longrope", "su"):
        raise ValueError(f"{folder}: rope_scaling type {kind!r} not supported by the reference for phi3 "
                         "(longrope, su)")
    # Phi3Config's defaults: both lengths 4096. modeling_rope_utils: factor = rope_scaling.factor,
    # else max / original; attention factor = rope_scaling.attention_factor, else
    # sqrt(1 + ln(factor) / ln(original)) (1 when factor <= 1).
    max_pos = float(config.get("max_position_embeddings", 4096))
    orig = float(config.get("original_max_position_embeddings")
                 or rs.get("original_max_position_embeddings") or 4096)
    factor = float(rs.get("factor") or max_pos / orig)
    mscale = longrope_mscale(factor * orig, orig)
    if rs.get("attention_factor") is not None:
        mscale = float(rs["attention_factor"])
    cfg.inv_freq = longrope_inv_freq(rs["short_factor"], cfg.n_rot, cfg.rope_base, f"{folder}: short_factor")
    cfg.inv_freq_long = longrope_inv_freq(rs["long_factor"], cfg.n_rot, cfg.rope_base, f"{folder}: long_factor")
    cfg.rope_original_ctx = int(orig)
    cfg.rope_mscale = mscale


def _hf_gemma3_rope(folder, config, cfg, n_layers):
    """Gemma 3: global layers use rope_theta (+ rope_scaling, linear only), sliding layers
    rope_local_base_freq unscaled. Returns each layer's own inv_freq (None = the config's)."""
    global_base = float(config.get("rope_theta", 1e6))
    local_base = float(config.get("rope_local_base_freq", 10000.0))
    scaling = config.get("rope_scaling")
    rp = config.get("rope_parameters")
    if isinstance(rp, dict) and "full_attention" in rp:   # transformers v5 spells them per layer type
        sliding, scaling = rp.get("sliding_attention") or {}, rp["full_attention"]
        if _rope_type(sliding) not in (None, "default"):
            raise ValueError(f"{folder}: rope_parameters.sliding_attention type {_rope_type(sliding)!r} "
                             "not supported by the reference")
        local_base = float(sliding.get("rope_theta", local_base))
        global_base = float(scaling.get("rope_theta", global_base))
    cfg.rope_base = global_base
    cfg.inv_freq = fw.default_inv_freq(cfg.head_dim, global_base)
    kind = _rope_type(scaling) if scaling else None
    if kind == "linear":
        cfg.inv_freq = cfg.inv_freq / float(scaling["factor"])
    elif kind not in (None, "default"):
        raise ValueError(f"{folder}: rope_scaling type {kind!r} not supported by the reference for "
                         "gemma3 (linear)")
    local = fw.default_inv_freq(cfg.head_dim, local_base)
    pattern = int(config.get("sliding_window_pattern") or GEMMA3_PATTERN)
    return [local if s else None
            for s in sliding_layers("gemma3", n_layers, pattern, config.get("layer_types"))]


# ---------------------------------------------------------------------------------------------
# GGUF (llama.cpp's layout).

def load_gguf(path, g):
    md = g.metadata
    arch, key = g.arch_key(path)

    t = g.tensor

    def opt(name):
        return t(name) if name in g.tensors else None

    n_embd, n_heads = int(key("embedding_length")), int(key("attention.head_count"))
    n_kv = int(key("attention.head_count_kv", n_heads))
    head_dim = int(key("attention.key_length", n_embd // n_heads))
    n_layers = int(key("block_count"))
    cfg = fw.Config(arch=arch, n_embd=n_embd, n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv,
                    head_dim=head_dim, n_ff=int(key("feed_forward_length")),
                    vocab=g.tensors["token_embd.weight"].ne[1],
                    eps=float(key("attention.layer_norm_rms_epsilon")),
                    rope_base=float(key("rope.freq_base", 10000.0)), rope_style=fw.NEOX)
    W = int(key("attention.sliding_window", 0))
    windows, layer_inv = [0] * n_layers, [None] * n_layers
    if arch == "phi3":
        cfg.n_rot = int(key("rope.dimension_count", head_dim))
        if "rope_factors_long.weight" in g.tensors or "rope_factors_short.weight" in g.tensors:
            orig = int(key("rope.scaling.original_context_length"))
            cfg.inv_freq = longrope_inv_freq(t("rope_factors_short.weight"), cfg.n_rot, cfg.rope_base,
                                             f"{path}: rope_factors_short")
            cfg.inv_freq_long = longrope_inv_freq(t("rope_factors_long.weight"), cfg.n_rot, cfg.rope_base,
                                                  f"{path}: rope_factors_long")
            cfg.rope_original_ctx = orig
            cfg.rope_mscale = float(key("rope.scaling.attn_factor",
                                        longrope_mscale(float(key("context_length")), orig)))
    else:
        cfg.act = "gelu_tanh"
        cfg.embed_scale = math.sqrt(n_embd)
        if arch != "gemma":   # no key for query_pre_attn_scalar: llama.cpp scales by head_dim ** -0.5
            cfg.attn_scale = head_dim ** -0.5
        if arch == "gemma2":
            # llama.cpp's defaults when the keys are absent; 0 = none (parallm's spelling of null)
            cfg.attn_softcap = float(key("attn_logit_softcapping", 50.0))
            cfg.final_softcap = float(key("final_logit_softcapping", 30.0))
        if arch == "gemma3":
            cfg.final_softcap = float(key("final_logit_softcapping", 0.0))
            cfg.inv_freq = fw.default_inv_freq(head_dim, cfg.rope_base)
            kind = md.get(f"{arch}.rope.scaling.type", "none")
            if kind == "linear":
                cfg.inv_freq = cfg.inv_freq / float(key("rope.scaling.factor"))
            elif kind != "none":
                raise ValueError(f"{path}: {arch}.rope.scaling.type {kind!r} not supported by the "
                                 "reference for gemma3 (linear)")
            local = fw.default_inv_freq(head_dim, float(key("rope.freq_base_swa", 10000.0)))
            layer_inv = [local if s else None for s in sliding_layers(arch, n_layers)]
    if arch != "gemma":
        for i, s in enumerate(sliding_layers(arch, n_layers)):
            windows[i] = W if s else 0

    q_rows, kv_rows = n_heads * head_dim, n_kv * head_dim
    layers = []
    for i in range(n_layers):
        p = f"blk.{i}."
        if arch == "phi3":
            wq, wk, wv = _split_rows(t(p + "attn_qkv.weight"), (q_rows, kv_rows, kv_rows), p + "attn_qkv")
            gate, up = _split_rows(t(p + "ffn_up.weight"), (cfg.n_ff, cfg.n_ff), p + "ffn_up")
        else:
            wq, wk, wv = t(p + "attn_q.weight"), t(p + "attn_k.weight"), t(p + "attn_v.weight")
            gate, up = t(p + "ffn_gate.weight"), t(p + "ffn_up.weight")
        four = arch in ("gemma2", "gemma3")
        layers.append(fw.Layer(
            attn_norm=t(p + "attn_norm.weight"), wq=wq, wk=wk, wv=wv, wo=t(p + "attn_output.weight"),
            ffn_norm=t(p + "ffn_norm.weight"), w_gate=gate, w_up=up, w_down=t(p + "ffn_down.weight"),
            post_attn_norm=t(p + "post_attention_norm.weight") if four else None,
            post_ffn_norm=t(p + "post_ffw_norm.weight") if four else None,
            q_norm=t(p + "attn_q_norm.weight") if arch == "gemma3" else None,
            k_norm=t(p + "attn_k_norm.weight") if arch == "gemma3" else None,
            window=windows[i], inv_freq=layer_inv[i]))
    tok_embd = t("token_embd.weight")
    lm_head = opt("output.weight")
    return fw.Model(cfg, tok_embd, layers, t("output_norm.weight"),
                    tok_embd if lm_head is None else lm_head)
