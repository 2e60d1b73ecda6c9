"""Nemotron-H (NemotronHForCausalLM) for the numpy reference: loader and forward pass in float64.

Written from Hugging Face transformers' modeling_nemotron_h.py / configuration_nemotron_h.py (and Zamba2RMSNormGated,
which the mixer's norm is), not from parallm's code:
- the layers follow hybrid_override_pattern ('M' Mamba-2, '*' attention, '-' MLP, 'E' experts); every layer is
  x = x + mixer(RMSNorm(x)) (NemotronHBlock), then norm_f and lm_head;
- the Mamba-2 mixer is torch_forward's path without a cache: in_proj -> [z, xBC, dt]; xBC through the depthwise
  Conv1d (padding kernel - 1, the first T outputs) and SiLU, split into x, B, C (n_groups groups of ssm_state_size,
  repeated to the heads with repeat_interleave); dt = max(softplus(dt + dt_bias), time_step_min); A = -exp(A_log);
  the CHUNKED SSD ("ssd naive" in that code: intra-chunk Y_diag through segment sums, chunk states, inter-chunk
  recurrence, Y_off) with chunk_size from the config, plus D * x; then Zamba2RMSNormGated: (y * silu(z)) normed in
  groups of intermediate / n_groups (norm_before_gate=False), times the weight; out_proj. parallm runs the
  recurrence token by token instead; the two are the same function, computed in different orders;
- attention: grouped-query, causal, scale head_dim ** -0.5, no position embedding;
- MLP: down(relu(up x) ** 2) (relu2, no gate);
- experts (NemotronHMoE): scores = sigmoid(x W_router^T); choice = scores + e_score_correction_bias; groups ranked by
  the sum of their two best choices, the topk_group best kept; top-k of the kept experts by choice; weights = the
  chosen scores, divided by their sum + 1e-20 when norm_topk_prob, times routed_scaling_factor; each expert is an
  ungated relu2 MLP; plus the shared expert (a relu2 MLP of moe_shared_expert_intermediate_size).
Tensor names: the published checkpoints' "backbone." prefix (transformers' "model." too).
GGUF (load_gguf): llama.cpp's nemotron_h (MLP layers) and nemotron_h_moe (experts), from convert_hf_to_gguf.py's
NemotronHModel / Mamba2Model and llama.cpp's llama_model_nemotron_h: no key names the layer kinds; a layer is Mamba-2
when attention.head_count_kv[i] and feed_forward_length[i] are both 0, attention when only feed_forward_length[i] is,
else an MLP or experts (expert_count > 0); ssm.time_step_rank holds the Mamba head count, ssm.inner_size their width;
ssm_a holds A = -exp(A_log) itself ([1, heads]), ssm_d is [1, heads], ssm_norm [n_group, inner / n_group],
ssm_conv1d [conv_dim, kernel] (torch's squeezed); the one norm a layer is attn_norm; the router's correction bias is
exp_probs_b.bias; experts stacked as ffn_up_exps / ffn_down_exps; routing is sigmoid with expert_weights_norm (default
off), expert_weights_scale and expert_group_count / expert_group_used_count. llama.cpp does not clamp dt, so neither
does this reader (time_step_min is not in the file: dt_min 0).
"""
import dataclasses

import numpy as np

import forward as fw

HF_TYPES = ("nemotron_h",)
GGUF_ARCHS = ("nemotron_h", "nemotron_h_moe")
KINDS = {"mamba": "M", "linear_attention": "M", "attention": "*", "full_attention": "*", "mlp": "-", "moe": "E"}


@dataclasses.dataclass
class Config:
    pattern: str
    n_embd: int
    vocab: int
    eps: float
    n_heads: int = 0
    n_kv_heads: int = 0
    head_dim: int = 0
    ssm_heads: int = 0
    ssm_head_dim: int = 0
    ssm_state: int = 0
    n_groups: int = 1
    conv_kernel: int = 4
    chunk_size: int = 128
    dt_min: float = 0.0
    top_k: int = 0
    n_group: int = 1
    topk_group: int = 1
    norm_topk: bool = True
    routed_scaling: float = 1.0
    norm_before_gate: bool = False  # what the published code does NOT do (a mutation for the sensitivity checks)
    norm_grouped: bool = True       # idem: the norm over the whole intermediate width instead of per group


@dataclasses.dataclass
class Layer:
    kind: str
    norm: np.ndarray
    w: dict  # the mixer's tensors by their HF names after "mixer."


@dataclasses.dataclass
class HybridModel:
    config: Config
    tok_embd: np.ndarray
    layers: list
    out_norm: np.ndarray
    lm_head: np.ndarray


def load_hf(folder, config, w):
    if "hybrid_override_pattern" in config:
        pattern = config["hybrid_override_pattern"]
    else:
        pattern = "".join(KINDS[t] for t in config.get("layers_block_type") or config.get("layer_types"))
    for key, want in (("mlp_hidden_act", "relu2"), ("mamba_hidden_act", "silu")):
        if config.get(key, want) != want:
            raise ValueError(f"{folder}: {key} {config[key]!r} not supported by the reference ({want})")
    if config.get("moe_latent_size") is not None:
        raise ValueError(f"{folder}: moe_latent_size not supported by the reference")
    prefix = "backbone." if "backbone.embeddings.weight" in w else "model."
    n_heads = int(config["num_attention_heads"])
    cfg = Config(pattern=pattern, n_embd=int(config["hidden_size"]), vocab=w[prefix + "embeddings.weight"].shape[0],
                 eps=float(config.get("layer_norm_epsilon", 1e-5)), n_heads=n_heads,
                 n_kv_heads=int(config.get("num_key_value_heads") or n_heads),
                 head_dim=int(config.get("head_dim") or int(config["hidden_size"]) // n_heads),
                 ssm_heads=int(config["mamba_num_heads"]), ssm_head_dim=int(config["mamba_head_dim"]),
                 ssm_state=int(config.get("ssm_state_size", 128)),
                 n_groups=int(config.get("n_groups", config.get("mamba_n_groups", 8))),
                 conv_kernel=int(config.get("conv_kernel", config.get("mamba_d_conv", 4))),
                 chunk_size=int(config.get("chunk_size", config.get("mamba_chunk_size", 128))),
                 dt_min=float(config.get("time_step_min", config.get("mamba_dt_min", 0.001))),
                 top_k=int(config.get("num_experts_per_tok", 0)), n_group=int(config.get("n_group", 1)),
                 topk_group=int(config.get("topk_group", 1)), norm_topk=bool(config.get("norm_topk_prob", True)),
                 routed_scaling=float(config.get("routed_scaling_factor", 1.0)))
    layers = []
    for i, kind in enumerate(pattern):
        p = f"{prefix}layers.{i}."
        mixer = {k[len(p) + 6:]: v for k, v in w.items() if k.startswith(p + "mixer.")}
        if kind == "E" and "experts.0.up_proj.weight" in mixer:   # per-expert tensors -> stacked
            n = sum(1 for k in mixer if k.endswith(".up_proj.weight") and k.startswith("experts."))
            mixer["up"] = np.stack([mixer[f"experts.{e}.up_proj.weight"] for e in range(n)])
            mixer["down"] = np.stack([mixer[f"experts.{e}.down_proj.weight"] for e in range(n)])
        elif kind == "E":                                           # mlx-lm's stacked switch_mlp
            mixer["up"], mixer["down"] = mixer["switch_mlp.fc1.weight"], mixer["switch_mlp.fc2.weight"]
        layers.append(Layer(kind, w[p + "norm.weight"], mixer))
    emb = w[prefix + "embeddings.weight"]
    tied = bool(config.get("tie_word_embeddings", False)) or "lm_head.weight" not in w
    return HybridModel(cfg, emb, layers, w[prefix + "norm_f.weight"], emb if tied else w["lm_head.weight"])


def load_gguf(path, g):
    _, key = g.arch_key(path)

    t = g.tensor
    n_layers = int(key("block_count"))
    ffn = [int(v) for v in key("feed_forward_length")]
    kv = [int(v) for v in key("attention.head_count_kv")]
    if len(ffn) != n_layers or len(kv) != n_layers:
        raise ValueError(f"{path}: per-layer arrays do not have {n_layers} entries")
    n_expert = int(key("expert_count", 0))
    pattern = "".join("M" if kv[i] == 0 and ffn[i] == 0 else "*" if ffn[i] == 0 else "E" if n_expert else "-"
                      for i in range(n_layers))
    n_heads = int(key("attention.head_count"))
    n_embd = int(key("embedding_length"))
    ssm_heads = int(key("ssm.time_step_rank"))
    n_group = int(key("expert_group_count", 1)) or 1
    scale = float(key("expert_weights_scale", 0.0))
    cfg = Config(pattern=pattern, n_embd=n_embd, vocab=g.tensors["token_embd.weight"].ne[1],
                 eps=float(key("attention.layer_norm_rms_epsilon")), n_heads=n_heads,
                 n_kv_heads=max(kv) or n_heads, head_dim=int(key("attention.key_length", n_embd // n_heads)),
                 ssm_heads=ssm_heads, ssm_head_dim=int(key("ssm.inner_size")) // ssm_heads,
                 ssm_state=int(key("ssm.state_size")), n_groups=int(key("ssm.group_count")),
                 conv_kernel=int(key("ssm.conv_kernel")), chunk_size=8, dt_min=0.0,
                 top_k=int(key("expert_used_count", 0)), n_group=n_group,
                 topk_group=int(key("expert_group_used_count", 1)),
                 norm_topk=bool(key("expert_weights_norm", False)), routed_scaling=scale if scale else 1.0)
    names = {"ssm_in.weight": "in_proj.weight", "ssm_conv1d.weight": "conv1d.weight", "ssm_conv1d.bias": "conv1d.bias",
             "ssm_dt.bias": "dt_bias", "ssm_out.weight": "out_proj.weight", "attn_q.weight": "q_proj.weight",
             "attn_k.weight": "k_proj.weight", "attn_v.weight": "v_proj.weight", "attn_output.weight": "o_proj.weight",
             "ffn_up.weight": "up_proj.weight", "ffn_down.weight": "down_proj.weight",
             "ffn_gate_inp.weight": "gate.weight", "exp_probs_b.bias": "gate.e_score_correction_bias",
             "ffn_up_shexp.weight": "shared_experts.up_proj.weight",
             "ffn_down_shexp.weight": "shared_experts.down_proj.weight",
             "ffn_up_exps.weight": "up", "ffn_down_exps.weight": "down"}
    layers = []
    for i, kind in enumerate(pattern):
        p = f"blk.{i}."
        w = {hf: t(p + gg) for gg, hf in names.items() if p + gg in g.tensors}
        if kind == "M":
            w["A"] = t(p + "ssm_a").reshape(-1)
            w["D"] = t(p + "ssm_d").reshape(-1)
            w["norm.weight"] = t(p + "ssm_norm.weight").reshape(-1)
        layers.append(Layer(kind, t(p + "attn_norm.weight"), w))
    emb = t("token_embd.weight")
    return HybridModel(cfg, emb, layers, t("output_norm.weight"),
                       t("output.weight") if "output.weight" in g.tensors else emb)


def silu(x):
    return x / (1.0 + np.exp(-x))


def softplus(x):
    return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


def relu2(x):
    return np.maximum(x, 0.0) ** 2


def segment_sum(x):
    """[..., L] -> [..., L, L]: out[..., i, j] = x[j+1] + ... + x[i] for i >= j, -inf above the diagonal."""
    L = x.shape[-1]
    cs = np.cumsum(x, axis=-1)
    out = cs[..., :, None] - cs[..., None, :]
    return np.where(np.tril(np.ones((L, L), bool)), out, -np.inf)


def ssd_chunked(x, dt, A, B, C, chunk):
    """The chunked SSD of torch_forward. x [T, H, P], dt [T, H] (discretisation step), A [H], B/C [T, H, N] ->
    y [T, H, P] (without the D term). Zero initial state."""
    T, H, P = x.shape
    N = B.shape[-1]
    pad = (chunk - T % chunk) % chunk
    padT = lambda a: np.concatenate([a, np.zeros((pad,) + a.shape[1:])], axis=0)   # noqa: E731
    xs = padT(x * dt[..., None]).reshape(-1, chunk, H, P)        # [c, l, h, p]
    Ad = padT(A[None, :] * dt).reshape(-1, chunk, H)             # [c, l, h]
    Bc = padT(B).reshape(-1, chunk, H, N)
    Cc = padT(C).reshape(-1, chunk, H, N)
    Ad = Ad.transpose(2, 0, 1)                                    # [h, c, l]
    A_cumsum = np.cumsum(Ad, axis=-1)
    Lmat = np.exp(segment_sum(Ad))                                # [h, c, l, s]
    y_diag = np.einsum("clhn,cshn,hcls,cshp->clhp", Cc, Bc, Lmat, xs)
    decay_states = np.exp(A_cumsum[..., -1:] - A_cumsum)          # [h, c, l]
    states = np.einsum("clhn,hcl,clhp->chpn", Bc, decay_states, xs)
    states = np.concatenate([np.zeros((1, H, P, N)), states], axis=0)
    decay_chunk = np.exp(segment_sum(np.pad(A_cumsum[..., -1], ((0, 0), (1, 0)))))   # [h, c+1, c+1]
    new_states = np.einsum("hzc,chpn->zhpn", decay_chunk, states)
    states = new_states[:-1]
    y_off = np.einsum("clhn,chpn,hcl->clhp", Cc, states, np.exp(A_cumsum))
    return (y_diag + y_off).reshape(-1, H, P)[:T]


def mamba(h, w, c):
    T = h.shape[0]
    I, G, N, K = c.ssm_heads * c.ssm_head_dim, c.n_groups, c.ssm_state, c.conv_kernel
    proj = h @ w["in_proj.weight"].T
    z, xbc, dt = proj[:, :I], proj[:, I:I + I + 2 * G * N], proj[:, I + I + 2 * G * N:]
    conv_w = w["conv1d.weight"].reshape(xbc.shape[1], K)
    xpad = np.concatenate([np.zeros((K - 1, xbc.shape[1])), xbc], axis=0)
    conv = sum(conv_w[:, j][None, :] * xpad[j:j + T] for j in range(K))
    if "conv1d.bias" in w:
        conv = conv + w["conv1d.bias"]
    xbc = silu(conv)
    x = xbc[:, :I].reshape(T, c.ssm_heads, c.ssm_head_dim)
    B = np.repeat(xbc[:, I:I + G * N].reshape(T, G, N), c.ssm_heads // G, axis=1)
    Cm = np.repeat(xbc[:, I + G * N:].reshape(T, G, N), c.ssm_heads // G, axis=1)
    dt = np.maximum(softplus(dt + w["dt_bias"]), c.dt_min)
    A = w["A"] if "A" in w else -np.exp(w["A_log"])   # GGUF stores A itself
    y = ssd_chunked(x, dt, A, B, Cm, c.chunk_size) + w["D"][None, :, None] * x
    y = y.reshape(T, I)
    gs = I // G if c.norm_grouped else I
    if not c.norm_before_gate:
        y = y * silu(z)
    yg = y.reshape(T, -1, gs)
    y = (yg / np.sqrt(np.mean(yg * yg, axis=-1, keepdims=True) + c.eps)).reshape(T, I) * w["norm.weight"]
    if c.norm_before_gate:
        y = y * silu(z)
    return y @ w["out_proj.weight"].T


def route(h, w, c):
    """(experts [T, k], weights [T, k]) as NemotronHMoE.route_tokens_to_experts."""
    scores = 1.0 / (1.0 + np.exp(-(h @ w["gate.weight"].T)))
    choice = scores + w.get("gate.e_score_correction_bias", 0.0)
    T, E = choice.shape
    grouped = choice.reshape(T, c.n_group, E // c.n_group)
    group_scores = np.sort(grouped, axis=-1)[..., ::-1][..., :2].sum(axis=-1)
    keep = np.argsort(-group_scores, axis=-1, kind="stable")[:, :c.topk_group]
    mask = np.zeros((T, c.n_group), bool)
    np.put_along_axis(mask, keep, True, axis=1)
    masked = np.where(np.repeat(mask, E // c.n_group, axis=1), choice, -np.inf)
    top = np.argsort(-masked, axis=-1, kind="stable")[:, :c.top_k]
    wts = np.take_along_axis(scores, top, axis=-1)
    if c.norm_topk:
        wts = wts / (wts.sum(axis=-1, keepdims=True) + 1e-20)
    return top, wts * c.routed_scaling


def moe(h, w, c):
    top, wts = route(h, w, c)
    out = np.zeros_like(h)
    for e in range(w["up"].shape[0]):
        rows, ranks = np.nonzero(top == e)
        if len(rows):
            out[rows] += wts[rows, ranks][:, None] * (relu2(h[rows] @ w["up"][e].T) @ w["down"][e].T)
    return out + relu2(h @ w["shared_experts.up_proj.weight"].T) @ w["shared_experts.down_proj.weight"].T


def layer_output(c, L, h):
    """The mixer of one layer on its normed input h [T, n_embd]."""
    T, w = h.shape[0], L.w
    if L.kind == "M":
        return mamba(h, w, c)
    if L.kind == "*":
        q = (h @ w["q_proj.weight"].T).reshape(T, c.n_heads, c.head_dim)
        k = (h @ w["k_proj.weight"].T).reshape(T, c.n_kv_heads, c.head_dim)
        v = (h @ w["v_proj.weight"].T).reshape(T, c.n_kv_heads, c.head_dim)
        return fw.attention(q, k, v) @ w["o_proj.weight"].T
    if L.kind == "-":
        return relu2(h @ w["up_proj.weight"].T) @ w["down_proj.weight"].T
    return moe(h, w, c)


def forward(model, ids):
    """Logits [len(ids), vocab] for every position of the token ids."""
    c = model.config
    ids = np.asarray(ids, dtype=np.int64)
    if ids.min() < 0 or ids.max() >= c.vocab:
        raise ValueError(f"token id out of range [0, {c.vocab})")
    x = model.tok_embd[ids].astype(np.float64)
    for L in model.layers:
        h = fw.rms_norm(x, L.norm, c.eps)
        x = x + layer_output(c, L, h)
    return fw.rms_norm(x, model.out_norm, c.eps) @ model.lm_head.T
