#!/usr/bin/python3
"""Reference forward pass in float64 numpy for llama (Llama 1/2/3, Mistral), qwen2, qwen3, (through
families.py) gemma, gemma2, gemma3 and phi3, (through moe.py) qwen2moe, qwen3moe and mixtral, and (through
nemotron_h.py) the hybrid Mamba-2 Nemotron-H.

Independent of parallm: follows Hugging Face modeling_llama / modeling_qwen2 / modeling_qwen3 /
modeling_gemma* / modeling_phi3 (RMSNorm, RoPE, grouped-query attention, SwiGLU / GeGLU, sliding
windows, soft-capping) and reads the files with this folder's own readers.
Every model is first turned into one `Model` (weights as float64 [out, in] matrices, already
dequantized); the forward pass knows nothing about the file it came from, except the RoPE pairing:
GGUF "llama" weights have Q/K rows permuted by convert_hf_to_gguf, so RoPE rotates interleaved pairs
(x[2i], x[2i+1]); everything else rotates halves (x[i], x[i + d/2], "NEOX").

CLI:
  forward.py --model PATH --ids 1,2,3 --out ref.npy     # float32 logits [n_tokens, vocab]
  forward.py --model PATH --ids 1 --greedy 32 [--tokenizer tok512.bin]
PATH is a .gguf file, a Hugging Face / MLX safetensors folder, or a llama2.c checkpoint .bin.
"""
import argparse
import dataclasses
import math
import os
import struct
import sys

import numpy as np

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import families  # noqa: E402
import moe  # noqa: E402
import nemotron_h  # noqa: E402
import gguf_np  # noqa: E402
import safetensors_np  # noqa: E402

INTERLEAVED, NEOX = "interleaved", "neox"


@dataclasses.dataclass
class Config:
    arch: str                 # llama | mistral | qwen2 | qwen3 | llama2c
    n_embd: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    n_ff: int
    vocab: int
    eps: float
    rope_base: float = 10000.0
    rope_style: str = NEOX
    n_rot: int = 0            # rotated dims per head (0 = head_dim)
    # inverse frequencies per rotated pair [n_rot/2]; None = base ** (-2i / n_rot)
    inv_freq: np.ndarray = None
    # LongRoPE (phi3): inv_freq_long replaces inv_freq when the forward's largest position + 1 exceeds
    # rope_original_ctx; rope_mscale multiplies cos and sin (the attention factor).
    inv_freq_long: np.ndarray = None
    rope_original_ctx: int = 0
    rope_mscale: float = 1.0
    act: str = "silu"         # silu | gelu_tanh (the MLP's gate activation)
    embed_scale: float = 1.0  # gemma: sqrt(n_embd)
    attn_scale: float = None  # None = head_dim ** -0.5 (gemma2/3: query_pre_attn_scalar ** -0.5)
    attn_softcap: float = 0.0   # scores = cap * tanh(scores / cap) before the mask (0 = none)
    final_softcap: float = 0.0  # logits = cap * tanh(logits / cap) (0 = none)


@dataclasses.dataclass
class Layer:
    attn_norm: np.ndarray      # [n_embd]
    wq: np.ndarray             # [n_heads*head_dim, n_embd]
    wk: np.ndarray             # [n_kv_heads*head_dim, n_embd]
    wv: np.ndarray             # [n_kv_heads*head_dim, n_embd]
    wo: np.ndarray             # [n_embd, n_heads*head_dim]
    ffn_norm: np.ndarray       # [n_embd]
    w_gate: np.ndarray         # [n_ff, n_embd]
    w_up: np.ndarray           # [n_ff, n_embd]
    w_down: np.ndarray         # [n_embd, n_ff]
    bq: np.ndarray = None      # qwen2 q/k/v biases
    bk: np.ndarray = None
    bv: np.ndarray = None
    q_norm: np.ndarray = None  # qwen3 / gemma3 per-head RMSNorm weights [head_dim]
    k_norm: np.ndarray = None
    post_attn_norm: np.ndarray = None  # gemma2/3: norms of the attention and MLP outputs
    post_ffn_norm: np.ndarray = None   # (before their residual adds)
    window: int = 0            # sliding window W: query i sees keys i - W < j <= i (0 = all j <= i)
    inv_freq: np.ndarray = None  # this layer's own RoPE frequencies (gemma3 local layers); None = config's
    moe: object = None         # moe.Moe: the sparse MLP replacing w_gate/w_up/w_down (MoE families' sparse layers)


@dataclasses.dataclass
class Model:
    config: Config
    tok_embd: np.ndarray       # [vocab, n_embd]
    layers: list
    out_norm: np.ndarray       # [n_embd]
    lm_head: np.ndarray        # [vocab, n_embd] (the embedding itself when tied)


# ---------------------------------------------------------------------------------------------
# The forward pass.

def rms_norm(x, weight, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def silu(x):
    return x / (1.0 + np.exp(-x))


def gelu_tanh(x):
    """GELU, tanh approximation (PyTorch's gelu(approximate="tanh"), HF "gelu_pytorch_tanh")."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


ACTIVATIONS = {"silu": silu, "gelu_tanh": gelu_tanh}


def softcap(x, cap):
    return cap * np.tanh(x / cap) if cap else x


def exact_linear(x, w, b=None):
    """y = x W^T (+ b). The hook `forward(linear=...)` replaces this to emulate other numerics."""
    y = x @ w.T
    return y if b is None else y + b


def default_inv_freq(n_rot, base):
    return base ** (-np.arange(0, n_rot, 2, dtype=np.float64) / n_rot)


def apply_rope(x, positions, inv_freq, style, mscale=1.0):
    """x [T, heads, head_dim]; rotates the first 2*len(inv_freq) dims of each head by pos*inv_freq
    (the rest pass through: partial rotary); cos and sin are multiplied by mscale."""
    n_rot = 2 * len(inv_freq)
    angle = positions[:, None].astype(np.float64) * inv_freq[None, :]   # [T, n_rot/2]
    cos, sin = mscale * np.cos(angle)[:, None, :], mscale * np.sin(angle)[:, None, :]
    out = x.copy()
    if style == INTERLEAVED:
        a, b = x[..., 0:n_rot:2], x[..., 1:n_rot:2]
        out[..., 0:n_rot:2] = a * cos - b * sin
        out[..., 1:n_rot:2] = a * sin + b * cos
    elif style == NEOX:
        half = n_rot // 2
        a, b = x[..., :half], x[..., half:n_rot]
        out[..., :half] = a * cos - b * sin
        out[..., half:n_rot] = a * sin + b * cos
    else:
        raise ValueError(f"unknown RoPE style {style}")
    return out


def attention(q, k, v, window=0, scale=None, cap=0.0):
    """Causal grouped-query attention. q [T, H, D], k/v [T, KV, D] -> [T, H*D].
    Query head h reads KV head h // (H / KV), as HF's repeat_kv and llama.cpp do. Query i sees keys
    j <= i, and j > i - window when window > 0. Scores are q.k * scale (default D ** -0.5), then
    soft-capped by cap (0 = none), then masked."""
    T, H, D = q.shape
    group = H // k.shape[1]
    k = np.repeat(k, group, axis=1)
    v = np.repeat(v, group, axis=1)
    scale = D ** -0.5 if scale is None else scale
    scores = softcap(np.einsum("thd,shd->hts", q, k) * scale, cap)   # [H, T, T]
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    visible = (j <= i) & ((j > i - window) if window > 0 else True)
    scores = np.where(visible[None], scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("hts,shd->thd", p, v).reshape(T, H * D)


def forward(model, ids, linear=exact_linear, dtype=np.float64):
    """Logits [len(ids), vocab] for every position of the token ids (positions 0..T-1)."""
    if isinstance(model, nemotron_h.HybridModel):
        if linear is not exact_linear or dtype != np.float64:
            raise ValueError("the hybrid (nemotron_h) reference runs in float64 with exact products only")
        return nemotron_h.forward(model, ids)
    c = model.config
    cast = (lambda a: a) if dtype == np.float64 else (lambda a: None if a is None else a.astype(dtype))
    ids = np.asarray(ids, dtype=np.int64)
    if ids.min() < 0 or ids.max() >= c.vocab:
        raise ValueError(f"token id out of range [0, {c.vocab})")
    T = len(ids)
    positions = np.arange(T)
    n_rot = c.n_rot or c.head_dim
    inv_freq = c.inv_freq if c.inv_freq is not None else default_inv_freq(n_rot, c.rope_base)
    if c.inv_freq_long is not None and T > c.rope_original_ctx:         # LongRoPE: seq_len = T
        inv_freq = c.inv_freq_long
    act = ACTIVATIONS[c.act]
    x = cast(model.tok_embd[ids] * c.embed_scale)                       # [T, n_embd]
    for L in model.layers:
        h = rms_norm(x, cast(L.attn_norm), c.eps)
        q = linear(h, cast(L.wq), cast(L.bq)).reshape(T, c.n_heads, c.head_dim)
        k = linear(h, cast(L.wk), cast(L.bk)).reshape(T, c.n_kv_heads, c.head_dim)
        v = linear(h, cast(L.wv), cast(L.bv)).reshape(T, c.n_kv_heads, c.head_dim)
        if L.q_norm is not None:                                        # qwen3/gemma3: before RoPE
            q = rms_norm(q, cast(L.q_norm), c.eps)
            k = rms_norm(k, cast(L.k_norm), c.eps)
        freq = inv_freq if L.inv_freq is None else L.inv_freq
        q = apply_rope(q, positions, freq, c.rope_style, c.rope_mscale).astype(x.dtype)
        k = apply_rope(k, positions, freq, c.rope_style, c.rope_mscale).astype(x.dtype)
        a = linear(attention(q, k, v, L.window, c.attn_scale, c.attn_softcap).astype(x.dtype), cast(L.wo))
        x = x + (a if L.post_attn_norm is None else rms_norm(a, cast(L.post_attn_norm), c.eps))
        h = rms_norm(x, cast(L.ffn_norm), c.eps)
        if L.moe is not None:
            m = moe.sparse_mlp(h, L.moe, act, linear)
        else:
            m = linear(act(linear(h, cast(L.w_gate))) * linear(h, cast(L.w_up)), cast(L.w_down))
        x = x + (m if L.post_ffn_norm is None else rms_norm(m, cast(L.post_ffn_norm), c.eps))
    logits = linear(rms_norm(x, cast(model.out_norm), c.eps), cast(model.lm_head))
    return softcap(logits, c.final_softcap)


def greedy(model, ids, n_new):
    """Append n_new argmax tokens to ids (full recompute each step: the models here are tiny)."""
    ids = list(ids)
    out = []
    for _ in range(n_new):
        nxt = int(np.argmax(forward(model, ids)[-1]))
        ids.append(nxt)
        out.append(nxt)
    return out


# ---------------------------------------------------------------------------------------------
# Llama-3 RoPE scaling, in its two encodings.

def llama3_inv_freq(inv_freq, factor, low_freq_factor, high_freq_factor, original_max_pos):
    """Hugging Face's rope_type "llama3": long wavelengths slowed by `factor`, short ones kept,
    a linear blend (in 1/wavelength) between."""
    low_freq_wavelen = original_max_pos / low_freq_factor
    high_freq_wavelen = original_max_pos / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    smooth = (original_max_pos / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    blended = (1 - smooth) * inv_freq / factor + smooth * inv_freq
    return np.where(wavelen < high_freq_wavelen, inv_freq,
                    np.where(wavelen > low_freq_wavelen, inv_freq / factor, blended))


# ---------------------------------------------------------------------------------------------
# Loaders: each returns a Model.

def load_gguf(path):
    g = gguf_np.GGUFFile(path)
    md = g.metadata
    arch = md["general.architecture"]
    if arch in families.GGUF_ARCHS:
        return families.load_gguf(path, g)
    if arch in nemotron_h.GGUF_ARCHS:
        return nemotron_h.load_gguf(path, g)
    if arch in moe.GGUF_ARCHS or (arch == "llama" and md.get("llama.expert_count", 0) > 0):
        return moe.load_gguf(path, g)
    if arch not in ("llama", "mistral", "qwen2", "qwen3"):
        raise ValueError(f"{path}: architecture {arch!r} not supported by the reference")
    _, key = g.arch_key(path)

    t = g.tensor
    n_embd, n_heads = int(key("embedding_length")), int(key("attention.head_count"))
    head_dim = int(key("attention.key_length", n_embd // n_heads))
    vocab = g.tensors["token_embd.weight"].ne[1]
    cfg = Config(arch=arch, n_embd=n_embd, n_layers=int(key("block_count")), n_heads=n_heads,
                 n_kv_heads=int(key("attention.head_count_kv", n_heads)), head_dim=head_dim,
                 n_ff=int(key("feed_forward_length")), vocab=vocab,
                 eps=float(key("attention.layer_norm_rms_epsilon")),
                 rope_base=float(key("rope.freq_base", 10000.0)),
                 # convert_hf_to_gguf permutes Q/K rows for llama-family weights only
                 rope_style=INTERLEAVED if arch in ("llama", "mistral") else NEOX,
                 n_rot=int(key("rope.dimension_count", head_dim)))
    if "rope_freqs.weight" in g.tensors:  # llama.cpp divides each pair's frequency by its factor
        cfg.inv_freq = default_inv_freq(cfg.n_rot, cfg.rope_base) / t("rope_freqs.weight").ravel()

    def opt(name):
        return t(name) if name in g.tensors else None

    layers = []
    for i in range(cfg.n_layers):
        p = f"blk.{i}."
        layers.append(Layer(
            attn_norm=t(p + "attn_norm.weight"), wq=t(p + "attn_q.weight"),
            wk=t(p + "attn_k.weight"), wv=t(p + "attn_v.weight"), wo=t(p + "attn_output.weight"),
            ffn_norm=t(p + "ffn_norm.weight"), w_gate=t(p + "ffn_gate.weight"),
            w_up=t(p + "ffn_up.weight"), w_down=t(p + "ffn_down.weight"),
            bq=opt(p + "attn_q.bias"), bk=opt(p + "attn_k.bias"), bv=opt(p + "attn_v.bias"),
            q_norm=opt(p + "attn_q_norm.weight"), k_norm=opt(p + "attn_k_norm.weight"),
            window=int(key("attention.sliding_window", 0))))   # mistral: every layer (0 = none)
    tok_embd = t("token_embd.weight")
    lm_head = opt("output.weight")
    return Model(cfg, tok_embd, layers, t("output_norm.weight"),
                 tok_embd if lm_head is None else lm_head)


def load_hf(folder):
    """A Hugging Face safetensors folder, or an MLX folder (quantized modules dequantized)."""
    config, w = safetensors_np.read_hf_folder(folder)
    arch = config.get("model_type")
    if arch in families.HF_ARCHS:
        return families.load_hf(folder, config, w)
    if arch in moe.HF_ARCHS:
        return moe.load_hf(folder, config, w)
    if arch in nemotron_h.HF_TYPES:
        return nemotron_h.load_hf(folder, config, w)
    if arch not in ("llama", "mistral", "qwen2", "qwen3"):
        raise ValueError(f"{folder}: model_type {arch!r} not supported by the reference")
    n_embd, n_heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    head_dim = int(config.get("head_dim") or n_embd // n_heads)
    base = float(config.get("rope_theta", 10000.0))
    cfg = Config(arch=arch, n_embd=n_embd, n_layers=int(config["num_hidden_layers"]),
                 n_heads=n_heads, n_kv_heads=int(config.get("num_key_value_heads", n_heads)),
                 head_dim=head_dim, n_ff=int(config["intermediate_size"]),
                 vocab=w["model.embed_tokens.weight"].shape[0],
                 eps=float(config.get("rms_norm_eps", 1e-6)), rope_base=base, rope_style=NEOX)
    rs = config.get("rope_scaling")
    if rs:
        kind = rs.get("rope_type", rs.get("type"))
        if kind == "llama3":
            cfg.inv_freq = llama3_inv_freq(
                default_inv_freq(head_dim, base), float(rs["factor"]), float(rs["low_freq_factor"]),
                float(rs["high_freq_factor"]), float(rs["original_max_position_embeddings"]))
        elif kind != "default":
            raise ValueError(f"{folder}: rope_scaling {kind!r} not supported by the reference")

    def opt(name):
        return w.get(name)

    layers = []
    for i in range(cfg.n_layers):
        p = f"model.layers.{i}."
        a, m = p + "self_attn.", p + "mlp."
        layers.append(Layer(
            attn_norm=w[p + "input_layernorm.weight"], wq=w[a + "q_proj.weight"],
            wk=w[a + "k_proj.weight"], wv=w[a + "v_proj.weight"], wo=w[a + "o_proj.weight"],
            ffn_norm=w[p + "post_attention_layernorm.weight"], w_gate=w[m + "gate_proj.weight"],
            w_up=w[m + "up_proj.weight"], w_down=w[m + "down_proj.weight"],
            bq=opt(a + "q_proj.bias"), bk=opt(a + "k_proj.bias"), bv=opt(a + "v_proj.bias"),
            q_norm=opt(a + "q_norm.weight"), k_norm=opt(a + "k_norm.weight"),
            # HF Mistral's sliding window covers every layer (null = none)
            window=int(config.get("sliding_window") or 0) if arch == "mistral" else 0))
    tok_embd = w["model.embed_tokens.weight"]
    tied = bool(config.get("tie_word_embeddings", False)) or "lm_head.weight" not in w
    return Model(cfg, tok_embd, layers, w["model.norm.weight"],
                 tok_embd if tied else w["lm_head.weight"])


def load_llama2c(path):
    """llama2.c legacy (version 0) checkpoint: 7 int32 header, then f32 tensors (see SOURCE.md)."""
    with open(path, "rb") as f:
        data = f.read()
    dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len = struct.unpack("<7i", data[:28])
    shared = vocab > 0
    vocab = abs(vocab)
    hd = dim // n_heads
    flat = np.frombuffer(data, dtype="<f4", offset=28).astype(np.float64)
    pos = 0

    def take(*shape):
        nonlocal pos
        n = int(np.prod(shape))
        if pos + n > flat.size:
            raise ValueError(f"{path}: truncated checkpoint")
        out = flat[pos:pos + n].reshape(shape)
        pos += n
        return out

    L = n_layers
    tok_embd = take(vocab, dim)
    rms_att, wq, wk = take(L, dim), take(L, dim, dim), take(L, n_kv * hd, dim)
    wv, wo = take(L, n_kv * hd, dim), take(L, dim, dim)
    rms_ffn, w1, w2, w3 = take(L, dim), take(L, hidden, dim), take(L, dim, hidden), take(L, hidden, dim)
    rms_final = take(dim)
    take(seq_len, hd // 2)                        # freq_cis_real (unused: RoPE is recomputed)
    take(seq_len, hd // 2)                        # freq_cis_imag
    lm_head = tok_embd if shared else take(vocab, dim)
    cfg = Config(arch="llama2c", n_embd=dim, n_layers=L, n_heads=n_heads, n_kv_heads=n_kv,
                 head_dim=hd, n_ff=hidden, vocab=vocab, eps=1e-5, rope_base=10000.0,
                 rope_style=INTERLEAVED)
    layers = [Layer(attn_norm=rms_att[i], wq=wq[i], wk=wk[i], wv=wv[i], wo=wo[i],
                    ffn_norm=rms_ffn[i], w_gate=w1[i], w_up=w3[i], w_down=w2[i])
              for i in range(L)]
    return Model(cfg, tok_embd, layers, rms_final, lm_head)


def load_model(path):
    if os.path.isdir(path):
        return load_hf(path)
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic == gguf_np.GGUF_MAGIC:
        return load_gguf(path)
    if path.endswith(".bin"):
        return load_llama2c(path)
    raise ValueError(f"{path}: not a GGUF file, a model folder, or a llama2.c .bin")


# ---------------------------------------------------------------------------------------------
# llama2.c tokenizer (tok512.bin), for printing greedy text.

def read_llama2c_tokenizer(path):
    """tokenizer.bin: int32 max_token_length, then records {f32 score, int32 len, bytes}."""
    with open(path, "rb") as f:
        data = f.read()
    pos, pieces = 4, []
    while pos < len(data):
        _score, n = struct.unpack("<fi", data[pos:pos + 8])
        pieces.append(data[pos + 8:pos + 8 + n])
        pos += 8 + n
    return pieces


def decode_llama2c(pieces, ids, prev=1):
    """llama2.c's decode: <0xXX> pieces are raw bytes; the space a piece carries for SentencePiece's
    '▁' is dropped right after BOS (id 1)."""
    out = b""
    for t in ids:
        piece = pieces[t]
        if prev == 1 and piece.startswith(b" "):
            piece = piece[1:]
        if len(piece) == 6 and piece.startswith(b"<0x") and piece.endswith(b">"):
            piece = bytes([int(piece[3:5], 16)])
        out += piece
        prev = t
    return out.decode("utf-8", errors="replace")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help=".gguf file, HF/MLX folder, or llama2.c .bin")
    ap.add_argument("--ids", required=True, help="comma-separated token ids")
    ap.add_argument("--out", help="write float32 logits [n_tokens, vocab] here (.npy)")
    ap.add_argument("--greedy", type=int, default=0, help="decode N tokens greedily, print ids")
    ap.add_argument("--tokenizer", help="llama2.c tokenizer.bin: also print the greedy text")
    args = ap.parse_args(argv)
    ids = [int(s) for s in args.ids.split(",") if s.strip()]
    model = load_model(args.model)
    if args.out:
        np.save(args.out, forward(model, ids).astype(np.float32))
    if args.greedy:
        new = greedy(model, ids, args.greedy)
        print(",".join(map(str, new)))
        if args.tokenizer:
            print(decode_llama2c(read_llama2c_tokenizer(args.tokenizer), new, prev=ids[-1]))
    if not args.out and not args.greedy:
        ap.error("nothing to do: give --out and/or --greedy")


if __name__ == "__main__":
    main()
