"""Loaders of the mixture-of-experts families for the numpy reference (forward.py dispatches here), and their
sparse MLP.

Written from Hugging Face transformers' modeling_qwen2_moe.py, modeling_qwen3_moe.py and modeling_mixtral.py (the
semantics: Qwen2MoeSparseMoeBlock, Qwen3MoeSparseMoeBlock, MixtralSparseMoeBlock and the decoder layers' choice
of sparse vs dense MLP), llama.cpp's convert_hf_to_gguf.py / llama-model.cpp (the GGUF layout: experts merged into
3-D ffn_{gate,up,down}_exps, the router ffn_gate_inp, Qwen2-MoE's ffn_*_shexp and ffn_gate_inp_shexp; Mixtral
written as "llama" with expert_count) and mlx-lm (experts stacked under switch_mlp), not from parallm's code.
The router: softmax over all experts (float), top-k by probability (ties: the lower expert id, as a stable sort
gives), divided by the top-k sum when norm_topk_prob (Mixtral always); each chosen expert's gated MLP output
times its weight, summed; Qwen2-MoE adds sigmoid(x . shared_expert_gate) * shared_expert(x).
"""
import dataclasses

import numpy as np

import forward as fw

HF_ARCHS = {"qwen2_moe": "qwen2moe", "qwen3_moe": "qwen3moe", "mixtral": "mixtral"}
GGUF_ARCHS = ("qwen2moe", "qwen3moe")


@dataclasses.dataclass
class Moe:
    router: np.ndarray          # [E, n_embd]
    gate: np.ndarray            # [E, F, n_embd]
    up: np.ndarray              # [E, F, n_embd]
    down: np.ndarray            # [E, n_embd, F]
    top_k: int
    norm_topk: bool
    shared_gate: np.ndarray = None   # [S, n_embd] (qwen2moe)
    shared_up: np.ndarray = None
    shared_down: np.ndarray = None   # [n_embd, S]
    shared_expert_gate: np.ndarray = None  # [n_embd]


def route(h, moe):
    """(experts [T, k], weights [T, k]) of each token: softmax, top-k, optional renormalisation."""
    logits = h @ moe.router.T
    p = np.exp(logits - logits.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    top = np.argsort(-p, axis=-1, kind="stable")[:, :moe.top_k]
    w = np.take_along_axis(p, top, axis=-1)
    if moe.norm_topk:
        w = w / w.sum(axis=-1, keepdims=True)
    return top, w


def sparse_mlp(h, moe, act, linear=None):
    """The sparse MLP of one layer, h [T, n_embd] -> [T, n_embd] (`linear`: forward.py's hook)."""
    linear = linear or fw.exact_linear
    top, w = route(h, moe)
    out = np.zeros_like(h)
    for e in range(moe.router.shape[0]):
        rows, ranks = np.nonzero(top == e)
        if len(rows) == 0:
            continue
        x = h[rows]
        y = linear(act(linear(x, moe.gate[e])) * linear(x, moe.up[e]), moe.down[e])
        out[rows] += w[rows, ranks][:, None] * y
    if moe.shared_gate is not None:
        y = linear(act(linear(h, moe.shared_gate)) * linear(h, moe.shared_up), moe.shared_down)
        out = out + 1.0 / (1.0 + np.exp(-(h @ moe.shared_expert_gate)))[:, None] * y
    return out


def _sparse_layers(n_layers, n_experts, step=1, mlp_only=()):
    """Qwen2MoeDecoderLayer / Qwen3MoeDecoderLayer: sparse when not in mlp_only_layers, num_experts > 0 and
    (i + 1) % decoder_sparse_step == 0."""
    return [i not in mlp_only and n_experts > 0 and (i + 1) % step == 0 for i in range(n_layers)]


# ---------------------------------------------------------------------------------------------
# Hugging Face / MLX folders.

def load_hf(folder, config, w):
    arch = HF_ARCHS[config["model_type"]]
    n_embd, n_heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    head_dim = int(config.get("head_dim") or n_embd // n_heads)
    n_layers = int(config["num_hidden_layers"])
    act = config.get("hidden_act", "silu")
    if act != "silu":
        raise ValueError(f"{folder}: hidden_act {act!r} not supported by the reference (silu)")
    cfg = fw.Config(arch=arch, n_embd=n_embd, n_layers=n_layers, n_heads=n_heads,
                    n_kv_heads=int(config.get("num_key_value_heads") or n_heads), head_dim=head_dim,
                    n_ff=int(config["intermediate_size"]), vocab=w["model.embed_tokens.weight"].shape[0],
                    eps=float(config.get("rms_norm_eps", 1e-6)),
                    rope_base=float(config.get("rope_theta", 10000.0)), rope_style=fw.NEOX)
    if config.get("rope_scaling"):
        raise ValueError(f"{folder}: rope_scaling not supported by the reference for {arch}")
    if arch == "mixtral":
        n_experts, prefix = int(config["num_local_experts"]), "block_sparse_moe."
        names = {"gate": "w1", "up": "w3", "down": "w2"}
        sparse = [True] * n_layers
        norm_topk = True
        window = int(config.get("sliding_window") or 0)
    else:
        n_experts, prefix = int(config["num_experts"]), "mlp."
        names = {"gate": "gate_proj", "up": "up_proj", "down": "down_proj"}
        sparse = _sparse_layers(n_layers, n_experts, int(config.get("decoder_sparse_step", 1)),
                                set(config.get("mlp_only_layers") or []))
        norm_topk = bool(config.get("norm_topk_prob", False))
        window = 0
    top_k = int(config["num_experts_per_tok"])

    def experts(m, kind):
        stacked = m + "switch_mlp." + kind + "_proj.weight"   # mlx-lm
        if stacked in w:
            return w[stacked]
        return np.stack([w[f"{m}experts.{e}.{names[kind]}.weight"] for e in range(n_experts)])

    layers = []
    for i in range(n_layers):
        p = f"model.layers.{i}."
        a, m = p + "self_attn.", p + prefix
        moe = None
        dense = {}
        if sparse[i]:
            moe = Moe(router=w[m + "gate.weight"], gate=experts(m, "gate"), up=experts(m, "up"),
                      down=experts(m, "down"), top_k=top_k, norm_topk=norm_topk)
            if arch == "qwen2moe":
                s = m + "shared_expert."
                moe.shared_gate, moe.shared_up = w[s + "gate_proj.weight"], w[s + "up_proj.weight"]
                moe.shared_down = w[s + "down_proj.weight"]
                moe.shared_expert_gate = w[m + "shared_expert_gate.weight"].reshape(-1)
        else:
            dense = dict(w_gate=w[m + "gate_proj.weight"], w_up=w[m + "up_proj.weight"],
                         w_down=w[m + "down_proj.weight"])
        L = fw.Layer(attn_norm=w[p + "input_layernorm.weight"], wq=w[a + "q_proj.weight"],
                     wk=w[a + "k_proj.weight"], wv=w[a + "v_proj.weight"], wo=w[a + "o_proj.weight"],
                     ffn_norm=w[p + "post_attention_layernorm.weight"],
                     w_gate=dense.get("w_gate"), w_up=dense.get("w_up"), w_down=dense.get("w_down"),
                     bq=w.get(a + "q_proj.bias"), bk=w.get(a + "k_proj.bias"), bv=w.get(a + "v_proj.bias"),
                     q_norm=w.get(a + "q_norm.weight"), k_norm=w.get(a + "k_norm.weight"), window=window)
        L.moe = moe
        layers.append(L)
    tok_embd = w["model.embed_tokens.weight"]
    tied = bool(config.get("tie_word_embeddings", False)) or "lm_head.weight" not in w
    return fw.Model(cfg, tok_embd, layers, w["model.norm.weight"], tok_embd if tied else w["lm_head.weight"])


# ---------------------------------------------------------------------------------------------
# GGUF (llama.cpp's layout).

def load_gguf(path, g):
    md = g.metadata
    arch, key = g.arch_key(path)

    t = g.tensor

    def opt(name):
        return t(name) if name in g.tensors else None

    n_embd, n_heads = int(key("embedding_length")), int(key("attention.head_count"))
    head_dim = int(key("attention.key_length", n_embd // n_heads))
    n_layers = int(key("block_count"))
    cfg = fw.Config(arch=arch, n_embd=n_embd, n_layers=n_layers, n_heads=n_heads,
                    n_kv_heads=int(key("attention.head_count_kv", n_heads)), head_dim=head_dim,
                    n_ff=int(key("feed_forward_length")), vocab=g.tensors["token_embd.weight"].ne[1],
                    eps=float(key("attention.layer_norm_rms_epsilon")),
                    rope_base=float(key("rope.freq_base", 10000.0)),
                    # convert_hf_to_gguf permutes Q/K for "llama" (Mixtral) only
                    rope_style=fw.INTERLEAVED if arch == "llama" else fw.NEOX)
    top_k = int(key("expert_used_count"))
    # llama.cpp renormalises for Qwen3-MoE and Mixtral, not for Qwen2-MoE, unless the file says
    norm_topk = bool(md.get(f"{arch}.expert_weights_norm", arch != "qwen2moe"))
    layers = []
    for i in range(n_layers):
        p = f"blk.{i}."
        moe, dense = None, {}
        if p + "ffn_gate_inp.weight" in g.tensors:
            moe = Moe(router=t(p + "ffn_gate_inp.weight"), gate=t(p + "ffn_gate_exps.weight"),
                      up=t(p + "ffn_up_exps.weight"), down=t(p + "ffn_down_exps.weight"),
                      top_k=top_k, norm_topk=norm_topk)
            if p + "ffn_gate_shexp.weight" in g.tensors:
                moe.shared_gate, moe.shared_up = t(p + "ffn_gate_shexp.weight"), t(p + "ffn_up_shexp.weight")
                moe.shared_down = t(p + "ffn_down_shexp.weight")
                moe.shared_expert_gate = t(p + "ffn_gate_inp_shexp.weight").reshape(-1)
        else:
            dense = dict(w_gate=t(p + "ffn_gate.weight"), w_up=t(p + "ffn_up.weight"),
                         w_down=t(p + "ffn_down.weight"))
        L = fw.Layer(attn_norm=t(p + "attn_norm.weight"), wq=t(p + "attn_q.weight"), wk=t(p + "attn_k.weight"),
                     wv=t(p + "attn_v.weight"), wo=t(p + "attn_output.weight"), ffn_norm=t(p + "ffn_norm.weight"),
                     w_gate=dense.get("w_gate"), w_up=dense.get("w_up"), w_down=dense.get("w_down"),
                     bq=opt(p + "attn_q.bias"), bk=opt(p + "attn_k.bias"), bv=opt(p + "attn_v.bias"),
                     q_norm=opt(p + "attn_q_norm.weight"), k_norm=opt(p + "attn_k_norm.weight"),
                     window=int(key("attention.sliding_window", 0)))
        L.moe = moe
        layers.append(L)
    tok_embd = t("token_embd.weight")
    lm_head = opt("output.weight")
    return fw.Model(cfg, tok_embd, layers, t("output_norm.weight"), tok_embd if lm_head is None else lm_head)


def routing_margins(model, ids):
    """[sparse layer, position]: the relative gap (p_k - p_k+1) / p_k between the k-th and (k+1)-th router
    probabilities of each token in each sparse layer, from a forward pass over `ids`. A gap below the relative
    error of the router's input is a near-tie: a computation with that error may pick either expert."""
    global route
    margins, exact = [], route

    def spy(h, m):
        logits = h @ m.router.T
        p = np.exp(logits - logits.max(axis=-1, keepdims=True))
        s = -np.sort(-p, axis=-1)
        margins.append((s[:, m.top_k - 1] - s[:, m.top_k]) / s[:, m.top_k - 1])
        return exact(h, m)

    route = spy
    try:
        fw.forward(model, ids)
    finally:
        route = exact
    return np.array(margins)
