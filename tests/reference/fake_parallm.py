#!/usr/bin/python3
"""A numpy stand-in for the two parallm commands check_models.py drives (make-model, logits).

Test tooling, not a reference: it lets check_models.py run end to end before (or without) the C++
CLI, and it measures the tolerance of the quantized cases: its `logits` computes in float32 and,
for quantized weights, rounds every matmul input to int8 per block of 32 (scale = max|x| / 127),
which is what parallm's int8 dot-product path does to activations. Usage mirrors the contract:
  fake_parallm.py make-model --arch qwen2 --preset tiny --format gguf --dtype q8_0 --seed 7 -o m.gguf
  fake_parallm.py logits -m m.gguf --prompt-ids 1,2,3 -o logits.npy
The gemma, gemma2, gemma3 and phi3 files follow the conventions of the families spec (GGUF as
llama.cpp's convert_hf_to_gguf writes them: Gemma norms stored as 1 + w, Phi-3's fused qkv and
gate_up, LongRoPE factors as rope_factors_long/short).
FAKE_PARALLM_BUG=<name> makes `logits` commit one deliberate defect (see BUGS), to show that
check_models.py catches it.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import forward  # noqa: E402
import gguf_np  # noqa: E402
import quantize_np as qz  # noqa: E402

TINY = dict(n_embd=256, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=64, n_ff=512, vocab=512)
LLAMA3_SCALING = dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                      original_max_position_embeddings=512)  # as parallm make-model
CONTEXT = 256   # max_position_embeddings / context_length of the tiny models
GEMMAS = ("gemma", "gemma2", "gemma3")


def default_options(arch):
    """make-model's per-arch defaults of the families spec (the tiny preset)."""
    return dict(layers=2, window={"gemma2": 4096, "gemma3": 512}.get(arch, 0),
                attn_softcap=50.0 if arch == "gemma2" else 0.0,
                final_softcap=30.0 if arch == "gemma2" else 0.0,
                rope_scaling=None, original_context=min(4096, CONTEXT), partial_rotary=1.0)


def rotary_dim(opts):
    return int(TINY["head_dim"] * opts["partial_rotary"])


def longrope_factors(opts):
    """The tiny preset's deterministic LongRoPE factors: short 1 + 0.1 i, long 1 + 2 i."""
    i = np.arange(rotary_dim(opts) // 2)
    return 1.0 + 0.1 * i, 1.0 + 2.0 * i


# ---------------------------------------------------------------------------------------------
# The random model, in Hugging Face naming ([out, in] matrices).

def random_hf_weights(arch, seed, n_layers=2):
    p, rng = dict(TINY, n_layers=n_layers), np.random.default_rng(seed)
    D, H, KV, hd, F, V = (p["n_embd"], p["n_heads"], p["n_kv_heads"], p["head_dim"], p["n_ff"],
                          p["vocab"])

    def mat(out, inp):
        return (rng.standard_normal((out, inp)) / math.sqrt(inp)).astype(np.float32)

    def norm(n):   # HF Gemma stores w and multiplies by (1 + w)
        return ((0.0 if arch in GEMMAS else 1.0) + 0.1 * rng.standard_normal(n)).astype(np.float32)

    w = {"model.embed_tokens.weight": mat(V, D)}
    for i in range(p["n_layers"]):
        pre, a, m = f"model.layers.{i}.", f"model.layers.{i}.self_attn.", f"model.layers.{i}.mlp."
        w[pre + "input_layernorm.weight"] = norm(D)
        w[a + "q_proj.weight"], w[a + "k_proj.weight"] = mat(H * hd, D), mat(KV * hd, D)
        w[a + "v_proj.weight"], w[a + "o_proj.weight"] = mat(KV * hd, D), mat(D, H * hd)
        if arch == "phi3":   # fused rows [q; k; v]
            w[a + "qkv_proj.weight"] = np.concatenate(
                [w.pop(a + "q_proj.weight"), w.pop(a + "k_proj.weight"), w.pop(a + "v_proj.weight")])
        if arch == "qwen2":
            for n, size in (("q", H * hd), ("k", KV * hd), ("v", KV * hd)):
                w[a + f"{n}_proj.bias"] = (0.1 * rng.standard_normal(size)).astype(np.float32)
        if arch in ("qwen3", "gemma3"):
            w[a + "q_norm.weight"], w[a + "k_norm.weight"] = norm(hd), norm(hd)
        w[pre + "post_attention_layernorm.weight"] = norm(D)
        if arch in ("gemma2", "gemma3"):
            w[pre + "pre_feedforward_layernorm.weight"] = norm(D)
            w[pre + "post_feedforward_layernorm.weight"] = norm(D)
        w[m + "gate_proj.weight"], w[m + "up_proj.weight"] = mat(F, D), mat(F, D)
        w[m + "down_proj.weight"] = mat(D, F)
        if arch == "phi3":   # fused rows [gate; up]
            w[m + "gate_up_proj.weight"] = np.concatenate(
                [w.pop(m + "gate_proj.weight"), w.pop(m + "up_proj.weight")])
    w["model.norm.weight"] = norm(D)
    if arch in ("llama", "mistral", "phi3"):
        w["lm_head.weight"] = mat(V, D)
    return w


def hf_config(arch, rope_scaling, opts=None):
    p, opts = TINY, opts or default_options(arch)
    c = {"model_type": "gemma3_text" if arch == "gemma3" else arch, "hidden_size": p["n_embd"],
         "intermediate_size": p["n_ff"],
         "num_hidden_layers": opts["layers"], "num_attention_heads": p["n_heads"],
         "num_key_value_heads": p["n_kv_heads"], "head_dim": p["head_dim"], "rms_norm_eps": 1e-6,
         "rope_theta": 1e6 if arch == "gemma3" else 10000.0, "vocab_size": p["vocab"],
         "max_position_embeddings": CONTEXT,
         "tie_word_embeddings": arch in ("qwen2", "qwen3") + GEMMAS}
    if rope_scaling:
        c["rope_scaling"] = dict(rope_type="llama3", **LLAMA3_SCALING)
    if arch == "mistral" and opts["window"]:
        c["sliding_window"] = opts["window"]
    if arch in GEMMAS:
        c["architectures"] = [{"gemma": "GemmaForCausalLM", "gemma2": "Gemma2ForCausalLM",
                               "gemma3": "Gemma3ForCausalLM"}[arch]]
        c["hidden_activation"] = "gelu_pytorch_tanh"
    if arch in ("gemma2", "gemma3"):
        c.update(query_pre_attn_scalar=p["head_dim"], sliding_window=opts["window"],
                 attn_logit_softcapping=opts["attn_softcap"] or None,
                 final_logit_softcapping=opts["final_softcap"] or None)
    if arch == "gemma3":
        c.update(sliding_window_pattern=6, rope_local_base_freq=10000.0, rope_scaling=None,
                 layer_types=["sliding_attention" if (i + 1) % 6 else "full_attention"
                              for i in range(opts["layers"])])
    if arch == "phi3":
        c.update(architectures=["Phi3ForCausalLM"], hidden_act="silu",
                 partial_rotary_factor=opts["partial_rotary"], sliding_window=opts["window"] or None,
                 original_max_position_embeddings=opts["original_context"], rope_scaling=None)
        if opts["rope_scaling"] == "longrope":
            short, long = longrope_factors(opts)
            c["rope_scaling"] = {"type": "longrope", "short_factor": short.tolist(),
                                 "long_factor": long.tolist()}
    return c


# ---------------------------------------------------------------------------------------------
# Writers.

def write_safetensors(path, tensors):
    """tensors: {name: (dtype string, shape, bytes)}."""
    header, offset, blobs = {}, 0, []
    for name, (dtype, shape, blob) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def float_entry(a, dtype):
    a = np.asarray(a, np.float32)
    if dtype == "BF16":
        return ("BF16", a.shape, qz.f32_to_bf16_bits(a).tobytes())
    if dtype == "F16":
        return ("F16", a.shape, qz.f32_to_f16_bits(a).tobytes())
    return ("F32", a.shape, a.astype("<f4").tobytes())


def write_hf(folder, arch, w, dtype, rope_scaling, opts=None):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(hf_config(arch, rope_scaling, opts), f, indent=1)
    write_safetensors(os.path.join(folder, "model.safetensors"),
                      {n: float_entry(a, dtype.upper()) for n, a in w.items()})


def write_mlx(folder, arch, w, bits, group_size, rope_scaling, opts=None):
    os.makedirs(folder, exist_ok=True)
    cfg = hf_config(arch, rope_scaling, opts)
    cfg["quantization"] = {"group_size": group_size, "bits": bits}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    out = {}
    for name, a in w.items():
        if a.ndim == 2:   # Linear layers and the embedding
            packed, scales, biases = qz.mlx_quantize(a, bits, group_size)
            mod = name[:-len(".weight")]
            out[name] = ("U32", packed.shape, packed.tobytes())
            out[mod + ".scales"] = ("F16", scales.shape, scales.tobytes())
            out[mod + ".biases"] = ("F16", biases.shape, biases.tobytes())
        else:
            out[name] = float_entry(a, "BF16")
    write_safetensors(os.path.join(folder, "model.safetensors"), out)


def permute_qk(w, n_heads):
    """convert_hf_to_gguf's reordering of Q/K rows for llama: within each head, row j of the first
    half and row j of the second half become rows 2j and 2j+1 (so RoPE pairs are interleaved)."""
    return (w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def llama3_rope_factors(head_dim, base, s):
    """rope_freqs.weight as convert_hf_to_gguf writes it: per-pair divisors of the frequency."""
    inv = base ** (-np.arange(0, head_dim, 2) / head_dim)
    wavelen = 2 * math.pi / inv
    lo = s["original_max_position_embeddings"] / s["low_freq_factor"]
    hi = s["original_max_position_embeddings"] / s["high_freq_factor"]
    out = []
    for wl in wavelen:
        if wl < hi:
            out.append(1.0)
        elif wl > lo:
            out.append(s["factor"])
        else:
            smooth = (s["original_max_position_embeddings"] / wl - s["low_freq_factor"]) / (
                s["high_freq_factor"] - s["low_freq_factor"])
            out.append(1.0 / ((1 - smooth) / s["factor"] + smooth))
    return np.array(out, np.float32)


GGUF_TYPES = {"f32": (gguf_np.F32, None), "f16": (gguf_np.F16, None), "bf16": (gguf_np.BF16, None),
              "q8_0": (gguf_np.Q8_0, qz.quantize_q8_0), "q4_0": (gguf_np.Q4_0, qz.quantize_q4_0),
              "q4_k": (gguf_np.Q4_K, qz.quantize_q4_k), "q6_k": (gguf_np.Q6_K, qz.quantize_q6_k)}


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def family_metadata(arch, opts):
    """GGUF keys of gemma/gemma2/gemma3/phi3 beyond the common ones (the families spec)."""
    md = []
    if arch in GEMMAS:
        md.append((f"{arch}.attention.value_length", 4, TINY["head_dim"]))
    if arch in ("gemma2", "gemma3", "phi3", "mistral"):
        md.append((f"{'llama' if arch == 'mistral' else arch}.attention.sliding_window", 4, opts["window"]))
    if arch == "gemma2":
        md += [("gemma2.attn_logit_softcapping", 6, opts["attn_softcap"]),
               ("gemma2.final_logit_softcapping", 6, opts["final_softcap"])]
    if arch == "gemma3":
        md.append(("gemma3.rope.freq_base_swa", 6, 10000.0))
    if arch == "phi3":
        md.append(("phi3.rope.dimension_count", 4, rotary_dim(opts)))
        if opts["rope_scaling"] == "longrope":
            orig = opts["original_context"]
            s = CONTEXT / orig
            attn = math.sqrt(1 + math.log(s) / math.log(orig)) if s > 1 else 1.0
            md += [("phi3.rope.scaling.original_context_length", 4, orig),
                   ("phi3.rope.scaling.attn_factor", 6, attn)]
    return md


def write_gguf(path, arch, w, dtype, rope_scaling, opts=None):
    p, g_arch = TINY, ("llama" if arch == "mistral" else arch)
    opts = opts or default_options(arch)
    md = [("general.architecture", 8, g_arch), (f"{g_arch}.embedding_length", 4, p["n_embd"]),
          (f"{g_arch}.block_count", 4, opts["layers"]), (f"{g_arch}.feed_forward_length", 4, p["n_ff"]),
          (f"{g_arch}.attention.head_count", 4, p["n_heads"]),
          (f"{g_arch}.attention.head_count_kv", 4, p["n_kv_heads"]),
          (f"{g_arch}.attention.key_length", 4, p["head_dim"]),
          (f"{g_arch}.attention.layer_norm_rms_epsilon", 6, 1e-6),
          (f"{g_arch}.rope.freq_base", 6, 1e6 if arch == "gemma3" else 10000.0),
          (f"{g_arch}.context_length", 4, CONTEXT)]
    if arch in GEMMAS + ("phi3",) or opts["window"]:
        md += family_metadata(arch, opts)
    names = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
             "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
             "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate",
             "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
             # phi3's fused projections; gemma2/3's four norms
             "self_attn.qkv_proj": "attn_qkv", "mlp.gate_up_proj": "ffn_up",
             "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm"}
    if arch in ("gemma2", "gemma3"):
        names["post_attention_layernorm"] = "post_attention_norm"
    tensors = []   # (name, array)
    for n, a in w.items():
        if arch in GEMMAS and n.endswith("norm.weight"):
            a = a + np.float32(1.0)   # convert_hf_to_gguf stores Gemma's norms as 1 + w
        if n == "model.embed_tokens.weight":
            g = "token_embd.weight"
        elif n == "model.norm.weight":
            g = "output_norm.weight"
        elif n == "lm_head.weight":
            g = "output.weight"
        else:
            _, _, i, rest = n.split(".", 3)
            mod, suffix = rest.rsplit(".", 1)
            g = f"blk.{i}.{names[mod]}.{suffix}"
            if g_arch == "llama" and mod in ("self_attn.q_proj", "self_attn.k_proj"):
                a = permute_qk(a, p["n_heads"] if "q_proj" in mod else p["n_kv_heads"])
        tensors.append((g, a))
    if rope_scaling:
        tensors.append(("rope_freqs.weight", llama3_rope_factors(p["head_dim"], 10000.0, LLAMA3_SCALING)))
    if arch == "phi3" and opts["rope_scaling"] == "longrope":
        short, long = longrope_factors(opts)
        tensors += [("rope_factors_long.weight", long.astype(np.float32)),
                    ("rope_factors_short.weight", short.astype(np.float32))]
    ttype, quantizer = GGUF_TYPES[dtype]
    infos, blobs, offset = b"", [], 0
    for name, a in tensors:
        t = ttype if a.ndim == 2 else gguf_np.F32
        if t == gguf_np.F32:
            blob = a.astype("<f4").tobytes()
        elif t == gguf_np.F16:
            blob = qz.f32_to_f16_bits(a).tobytes()
        elif t == gguf_np.BF16:
            blob = qz.f32_to_bf16_bits(a).tobytes()
        else:
            blob = quantizer(a.ravel())
        ne = list(reversed(a.shape))
        infos += gguf_string(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
        infos += struct.pack("<IQ", t, offset)
        blob += b"\0" * (-len(blob) % 32)
        blobs.append(blob)
        offset += len(blob)
    kv = b""
    for key, vtype, value in md:
        kv += gguf_string(key) + struct.pack("<I", vtype)
        kv += gguf_string(value) if vtype == 8 else struct.pack({4: "<I", 6: "<f"}[vtype], value)
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(md)) + kv + infos
    head += b"\0" * (-len(head) % 32)
    with open(path, "wb") as f:
        f.write(head + b"".join(blobs))


# ---------------------------------------------------------------------------------------------
# logits: float32 compute; int8 activations (per block of 32) when the weights are quantized.

def int8_activation_linear(x, w, b=None):
    blocks = x.reshape(*x.shape[:-1], -1, 32)
    d = np.abs(blocks).max(axis=-1, keepdims=True) / 127.0
    q = np.rint(np.divide(blocks, d, out=np.zeros_like(blocks), where=d > 0))
    return forward.exact_linear((q * d).reshape(x.shape).astype(np.float32), w, b)


def is_quantized(path):
    if os.path.isdir(path):
        with open(os.path.join(path, "config.json")) as f:
            return "quantization" in json.load(f)
    g = gguf_np.GGUFFile(path)
    return any(t.type not in (gguf_np.F32, gguf_np.F16, gguf_np.BF16) for t in g.tensors.values())


BUGS = {
    "rope-neox": "rotate halves instead of interleaved pairs on GGUF llama weights",
    "no-qkv-bias": "drop the q/k/v biases (qwen2)",
    "no-rope-scaling": "ignore llama-3 rope scaling",
    "bf16-activations": "round every matmul input to bf16",
    "no-qk-norm": "skip qwen3's per-head q/k RMSNorm",
    "mlx-no-bias": "dequantize MLX weights without their biases",
    "no-window": "ignore sliding windows",
    "no-softcap": "ignore attention and final soft-capping",
    "short-rope": "always use LongRoPE's short factors",
}


def inject_bug(model, bug, path):
    c = model.config
    if bug == "rope-neox":
        c.rope_style = forward.NEOX
    elif bug == "no-rope-scaling":
        c.inv_freq = None
    elif bug == "no-window":
        for L in model.layers:
            L.window = 0
    elif bug == "no-softcap":
        c.attn_softcap = c.final_softcap = 0.0
    elif bug == "short-rope":
        c.inv_freq_long = None
    elif bug in ("no-qkv-bias", "no-qk-norm"):
        for L in model.layers:
            if bug == "no-qkv-bias":
                L.bq = L.bk = L.bv = None
            else:
                L.q_norm = L.k_norm = None
    elif bug == "mlx-no-bias" and os.path.isdir(path):
        import safetensors_np
        tensors = safetensors_np.read_folder_tensors(path)
        zeroed = {n: (np.zeros_like(a) if n.endswith(".biases") else a) for n, a in tensors.items()}
        orig = safetensors_np.read_folder_tensors
        safetensors_np.read_folder_tensors = lambda folder: zeroed
        try:
            model = forward.load_model(path)
        finally:
            safetensors_np.read_folder_tensors = orig
    return model


def bf16_linear(inner):
    def linear(x, w, b=None):
        x16 = (np.asarray(x, np.float32).view(np.uint32) + 0x8000) & 0xFFFF0000
        return inner(x16.view(np.float32), w, b)
    return linear


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    mk = sub.add_parser("make-model")
    mk.add_argument("--arch", required=True,
                    choices=["llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "phi3"])
    mk.add_argument("--preset", default="tiny", choices=["tiny"])
    mk.add_argument("--format", required=True, choices=["gguf", "hf", "mlx"])
    mk.add_argument("--dtype", default="f32")
    mk.add_argument("--bits", type=int, default=4)
    mk.add_argument("--group-size", type=int, default=64)
    mk.add_argument("--seed", type=int, default=7)
    mk.add_argument("--rope-scaling", choices=["llama3", "longrope"])
    mk.add_argument("--layers", type=int)
    mk.add_argument("--sliding-window", type=int)
    mk.add_argument("--attn-softcap", type=float)
    mk.add_argument("--final-softcap", type=float)
    mk.add_argument("--original-context", type=int)
    mk.add_argument("--partial-rotary", type=float)
    mk.add_argument("-o", required=True)
    lg = sub.add_parser("logits")
    lg.add_argument("-m", required=True)
    lg.add_argument("--prompt-ids", required=True)
    lg.add_argument("-o", required=True)
    lg.add_argument("--kv-cache-dtype", choices=["f32"], default="f32")  # numpy keeps every value in f32 or wider
    args = ap.parse_args(argv)
    if args.cmd == "make-model":
        opts = default_options(args.arch)
        for k, v in (("layers", args.layers), ("window", args.sliding_window),
                     ("attn_softcap", args.attn_softcap), ("final_softcap", args.final_softcap),
                     ("rope_scaling", args.rope_scaling), ("original_context", args.original_context),
                     ("partial_rotary", args.partial_rotary)):
            opts[k] = opts[k] if v is None else v
        w = random_hf_weights(args.arch, args.seed, opts["layers"])
        scaling = args.rope_scaling == "llama3"
        if args.format == "gguf":
            write_gguf(args.o, args.arch, w, args.dtype, scaling, opts)
        elif args.format == "hf":
            write_hf(args.o, args.arch, w, args.dtype, scaling, opts)
        else:
            write_mlx(args.o, args.arch, w, args.bits, args.group_size, scaling, opts)
    else:
        ids = [int(s) for s in args.prompt_ids.split(",")]
        model = forward.load_model(args.m)
        linear = int8_activation_linear if is_quantized(args.m) else forward.exact_linear
        bug = os.environ.get("FAKE_PARALLM_BUG")
        if bug:
            if bug not in BUGS:
                sys.exit(f"unknown FAKE_PARALLM_BUG {bug!r}; one of {', '.join(BUGS)}")
            model = inject_bug(model, bug, args.m)
            linear = bf16_linear(linear) if bug == "bf16-activations" else linear
        np.save(args.o, forward.forward(model, ids, linear=linear, dtype=np.float32).astype(np.float32))


if __name__ == "__main__":
    main()
