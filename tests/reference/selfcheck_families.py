"""Self-checks of the Gemma / Phi-3 parts of the numpy reference, run by selfcheck.py as its part (f).

Each check builds small files with fake_parallm.py's writers (which follow the families spec) or a
hand-made Model, and proves one piece of the reference without parallm:
- the masks, GELU and soft-capping against scalar loops and known values;
- equivalences: a window >= the prompt equals no window; a huge soft-cap equals none; LongRoPE with
  all factors 1 and attention factor 1 equals plain RoPE; Phi-3's fused tensors equal a Llama built
  from the split ones (partial rotary 1, no scaling);
- the same weights written as GGUF (Gemma norms shifted by 1, LongRoPE factors as tensors) and as an
  HF folder give the same logits; the GGUF really holds 1 + w;
- LongRoPE's switch at original_max_position_embeddings and its attention factor; Gemma 3's
  per-layer windows and RoPE bases; errors that name the field the reference cannot honour.
"""
import json
import math
import os
import tempfile

import numpy as np

import fake_parallm as fp
import families
import forward

IDS = [1, 17, 42, 99, 256, 3, 500, 77, 128, 311, 64, 9]


def rel(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


def write(tmp, arch, fmt, seed=3, **changes):
    """A tiny model of `arch` in `fmt` (gguf-f32 / hf-f32 / mlx-4bit) with make-model options changed."""
    opts = fp.default_options(arch)
    opts.update(changes)
    w = fp.random_hf_weights(arch, seed, opts["layers"])
    tag = "-".join(f"{k}{v}" for k, v in sorted(changes.items()))
    path = os.path.join(tmp, f"{arch}-{fmt}-{seed}-{tag}" + (".gguf" if fmt == "gguf" else ""))
    if fmt == "gguf":
        fp.write_gguf(path, arch, w, "f32", False, opts)
    elif fmt == "hf":
        fp.write_hf(path, arch, w, "f32", False, opts)
    else:
        fp.write_mlx(path, arch, w, 4, 64, False, opts)
    return path


def check_primitives(check):
    # Attention mask: uniform scores (q = 0) and one-hot values make output row i the visible set
    # of query i, spread evenly; compared with a loop over i - W < j <= i.
    T, ok = 9, True
    v = np.eye(T)[:, None, :]                     # [T, 1 head, D = T]
    for W in (0, 1, 3, 9, 20):
        out = forward.attention(np.zeros((T, 1, T)), np.zeros((T, 1, T)), v, window=W)
        for i in range(T):
            seen = [j for j in range(T) if j <= i and (W == 0 or j > i - W)]
            want = np.zeros(T)
            want[seen] = 1.0 / len(seen)
            ok = ok and np.allclose(out[i], want, atol=1e-15)
    check(ok, "(f) sliding-window mask == loop over i - W < j <= i (W = 0, 1, 3, 9, 20)")
    # GELU: tanh approximation (HF gelu_pytorch_tanh), against a scalar loop and a known value;
    # it must differ from the exact erf GELU (or an implementation using erf would pass).
    x = np.linspace(-6, 6, 97)
    loop = [0.5 * t * (1 + math.tanh(math.sqrt(2 / math.pi) * (t + 0.044715 * t ** 3))) for t in x]
    erf = np.array([0.5 * t * (1 + math.erf(t / math.sqrt(2))) for t in x])
    g = forward.gelu_tanh(x)
    check(np.allclose(g, loop, rtol=0, atol=1e-15) and abs(forward.gelu_tanh(1.0) - 0.8411919906) < 1e-9
          and np.abs(g - erf).max() > 1e-4,
          f"(f) gelu_tanh == scalar tanh formula, gelu(1) = {forward.gelu_tanh(1.0):.10f}, "
          f"differs from erf GELU by {np.abs(g - erf).max():.1e}")
    # Soft-capping: cap * tanh(x / cap), identity without a cap.
    check(np.allclose(forward.softcap(x, 2.0), [2 * math.tanh(t / 2) for t in x], rtol=0, atol=1e-15)
          and forward.softcap(x, 0.0) is x and np.abs(forward.softcap(x, 2.0)).max() < 2.0,
          "(f) softcap == cap * tanh(x / cap), bounded by cap; cap 0 = none")
    # LongRoPE's attention factor: Phi-3-mini-128k (131072 / 4096) and s <= 1.
    a = families.longrope_mscale(131072, 4096)
    check(abs(a - math.sqrt(1 + math.log(32) / math.log(4096))) < 1e-15 and abs(a - 1.1902380714) < 1e-9
          and families.longrope_mscale(4096, 4096) == 1.0,
          f"(f) LongRoPE attention factor {a:.10f} for 131072 / 4096 (1 when s <= 1)")


def check_equivalences(check, tmp):
    # A window >= the prompt equals no window; a smaller one changes the logits (phi3: every layer).
    base = forward.load_model(write(tmp, "phi3", "hf"))
    ref = forward.forward(base, IDS)
    outs = {}
    for W in (len(IDS), 100, len(IDS) - 1, 5):
        for L in base.layers:
            L.window = W
        outs[W] = forward.forward(base, IDS)
    check(rel(outs[len(IDS)], ref) == 0 and rel(outs[100], ref) == 0 and rel(outs[len(IDS) - 1], ref) > 1e-6
          and rel(outs[5], ref) > 1e-3,
          f"(f) window >= prompt == no window; W 11 / 5 move logits by {rel(outs[11], ref):.1e} / "
          f"{rel(outs[5], ref):.1e}")
    # Soft-capping with a huge cap equals none (gemma2's defaults 50 / 30 are on).
    g2 = forward.load_model(write(tmp, "gemma2", "hf", attn_softcap=0.0, final_softcap=0.0))
    none = forward.forward(g2, IDS)
    g2.config.attn_softcap = g2.config.final_softcap = 1e9
    huge = forward.forward(g2, IDS)
    g2.config.attn_softcap, g2.config.final_softcap = 2.0, 3.0
    small = forward.forward(g2, IDS)
    check(rel(huge, none) < 1e-12 and rel(small, none) > 1e-2 and np.abs(small).max() < 3.0,
          f"(f) soft-cap 1e9 == none ({rel(huge, none):.1e}); caps 2 / 3 move the logits "
          f"({rel(small, none):.2f}) and bound them by 3")
    # LongRoPE with every factor 1 and attention factor 1 equals plain RoPE, in both encodings.
    plain_path = write(tmp, "phi3", "hf")
    plain = forward.forward(forward.load_model(plain_path), IDS)
    ok = True
    for fmt in ("hf", "gguf"):
        path = write(tmp, "phi3", fmt, rope_scaling="longrope", original_context=fp.CONTEXT)
        m = forward.load_model(path)
        ok = ok and m.config.inv_freq_long is not None and m.config.rope_mscale == 1.0
        one = np.ones(m.config.n_rot // 2)
        m.config.inv_freq = forward.default_inv_freq(m.config.n_rot, m.config.rope_base) / one
        m.config.inv_freq_long = m.config.inv_freq.copy()
        ok = ok and rel(forward.forward(m, IDS), plain) < 1e-6
    with open(os.path.join(plain_path, "config.json")) as f:
        cfg = json.load(f)
    n = fp.rotary_dim(fp.default_options("phi3")) // 2
    cfg["rope_scaling"] = {"type": "longrope", "short_factor": [1.0] * n, "long_factor": [1.0] * n}
    cfg["original_max_position_embeddings"] = 4        # the prompt (12) uses the long factors
    cfg["max_position_embeddings"] = 4                 # s = 1: attention factor 1
    ones = os.path.join(tmp, "phi3-ones")
    os.makedirs(ones)
    os.link(os.path.join(plain_path, "model.safetensors"), os.path.join(ones, "model.safetensors"))
    with open(os.path.join(ones, "config.json"), "w") as f:
        json.dump(cfg, f)
    same = rel(forward.forward(forward.load_model(ones), IDS), plain)
    check(ok and same < 1e-15, f"(f) LongRoPE, all factors 1 and attention factor 1 == plain RoPE "
                               f"(HF config {same:.0e}; GGUF and HF with factors forced to 1)")
    # Phi-3's fused tensors == a Llama (HF layout, NEOX) built from the split tensors.
    w = fp.random_hf_weights("phi3", 3)
    split = {}
    q_rows, kv_rows, F = 4 * 64, 2 * 64, fp.TINY["n_ff"]
    for name, a in w.items():
        if name.endswith("qkv_proj.weight"):
            pre = name[:-len("qkv_proj.weight")]
            split[pre + "q_proj.weight"], split[pre + "k_proj.weight"], split[pre + "v_proj.weight"] = (
                a[:q_rows], a[q_rows:q_rows + kv_rows], a[q_rows + kv_rows:])
        elif name.endswith("gate_up_proj.weight"):
            pre = name[:-len("gate_up_proj.weight")]
            split[pre + "gate_proj.weight"], split[pre + "up_proj.weight"] = a[:F], a[F:]
        else:
            split[name] = a
    fp.write_hf(os.path.join(tmp, "llama-split"), "llama", split, "f32", False)
    llama = forward.forward(forward.load_model(os.path.join(tmp, "llama-split")), IDS)
    d = rel(plain, llama)
    check(d < 1e-12, f"(f) phi3 fused qkv / gate_up == llama from the split tensors ({d:.0e})")


def check_same_weights(check, tmp):
    # The same weights as GGUF (llama.cpp's layout) and HF: equal logits; the GGUF holds 1 + w.
    for arch, changes in (("gemma", {}), ("gemma2", {"window": 5}), ("gemma3", {"layers": 6, "window": 5}),
                          ("phi3", {"window": 5, "partial_rotary": 0.75}),
                          ("phi3", {"rope_scaling": "longrope", "original_context": 8})):
        g = forward.load_model(write(tmp, arch, "gguf", **changes))
        h_path = write(tmp, arch, "hf", **changes)
        h = forward.load_model(h_path)
        d = rel(forward.forward(g, IDS), forward.forward(h, IDS))
        import safetensors_np
        raw = safetensors_np.read_folder_tensors(h_path)["model.layers.0.input_layernorm.weight"]
        shifted = np.allclose(g.layers[0].attn_norm, 1.0 + raw, atol=1e-7) if arch != "phi3" else \
            np.array_equal(g.layers[0].attn_norm, raw)
        check(d < 1e-6 and shifted,
              f"(f) {arch} {changes or 'defaults'} GGUF == HF ({d:.1e}); GGUF norms "
              f"{'hold 1 + w' if arch != 'phi3' else 'plain'}")


def check_layer_plans(check, tmp):
    # Gemma 3, 6 layers: layers 0..4 sliding with the local base, layer 5 global (rope_theta 1e6).
    local, glob = forward.default_inv_freq(64, 10000.0), forward.default_inv_freq(64, 1e6)
    for fmt in ("hf", "gguf"):   # (an MLX folder goes through the HF loader)
        m = forward.load_model(write(tmp, "gemma3", fmt, layers=6, window=5))
        ok = ([L.window for L in m.layers] == [5, 5, 5, 5, 5, 0]
              and all(np.allclose(L.inv_freq, local) for L in m.layers[:5]) and m.layers[5].inv_freq is None
              and np.allclose(m.config.inv_freq, glob) and m.config.attn_scale == 64 ** -0.5
              and m.config.embed_scale == 16.0 and m.config.act == "gelu_tanh")
        check(ok, f"(f) gemma3 {fmt}: windows {[L.window for L in m.layers]}, local base on sliding "
                  f"layers, 1e6 on layer 5, scale 1/8, embed x16")
    for fmt in ("hf", "gguf"):
        m = forward.load_model(write(tmp, "gemma2", fmt, layers=4, window=5))
        c = m.config
        check([L.window for L in m.layers] == [5, 0, 5, 0] and (c.attn_softcap, c.final_softcap) == (50, 30)
              and all(L.post_attn_norm is not None and L.post_ffn_norm is not None for L in m.layers),
              f"(f) gemma2 {fmt}: windows on even layers, soft-caps 50 / 30, four norms")
    # Gemma 3 with linear scaling on its global layers (HF config).
    path = write(tmp, "gemma3", "hf", layers=6)
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    cfg["rope_scaling"] = {"rope_type": "linear", "factor": 8.0}
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f)
    m = forward.load_model(path)
    check(np.allclose(m.config.inv_freq, glob / 8) and np.allclose(m.layers[0].inv_freq, local),
          "(f) gemma3 linear rope_scaling divides the global layers' frequencies only")
    # LongRoPE switch: prompt length > original -> long factors, else short; attention factor.
    m = forward.load_model(write(tmp, "phi3", "hf", rope_scaling="longrope", original_context=8))
    c = m.config
    short, long = fp.longrope_factors(fp.default_options("phi3"))
    base = forward.default_inv_freq(64, 10000.0)
    want_mscale = math.sqrt(1 + math.log(fp.CONTEXT / 8) / math.log(8))
    ok = (np.allclose(c.inv_freq, base / short) and np.allclose(c.inv_freq_long, base / long)
          and abs(c.rope_mscale - want_mscale) < 1e-12 and c.rope_original_ctx == 8)
    at8, at12 = forward.forward(m, IDS[:8]), forward.forward(m, IDS)
    inv_long, c.inv_freq_long = c.inv_freq_long, None
    short8, short12 = forward.forward(m, IDS[:8]), forward.forward(m, IDS)
    c.inv_freq = inv_long
    long12 = forward.forward(m, IDS)
    check(ok and rel(at8, short8) == 0 and rel(at12, long12) == 0 and rel(at12, short12) > 1e-3,
          f"(f) LongRoPE: 8 tokens use the short factors, 12 the long ones (orig 8); attention "
          f"factor {c.rope_mscale:.4f}")
    # Partial rotary: the last 16 of 64 dims pass through unrotated.
    m = forward.load_model(write(tmp, "phi3", "gguf", partial_rotary=0.75))
    x = np.random.default_rng(1).standard_normal((5, 2, 64))
    inv = forward.default_inv_freq(m.config.n_rot, 10000.0)
    y = forward.apply_rope(x, np.arange(5), inv, forward.NEOX)
    check(m.config.n_rot == 48 and len(inv) == 24 and np.array_equal(y[..., 48:], x[..., 48:])
          and not np.allclose(y[1:, :, :48], x[1:, :, :48]),
          "(f) phi3 partial rotary 0.75: 48 dims rotated, 16 passed through")


def check_errors(check, tmp):
    def error_of(path, edit):
        with open(os.path.join(path, "config.json")) as f:
            cfg = json.load(f)
        edit(cfg)
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(cfg, f)
        try:
            forward.load_model(path)
        except ValueError as e:
            return str(e)
        return ""

    cases = [("gemma", lambda c: c.update(hidden_activation="relu"), "hidden_activation"),
             ("gemma2", lambda c: c.update(hidden_activation="gelu"), "hidden_activation"),
             ("phi3", lambda c: c.update(hidden_act="gelu"), "hidden_act"),
             ("phi3", lambda c: c.update(rope_scaling={"type": "yarn", "factor": 4.0}), "rope_scaling"),
             ("gemma3", lambda c: c.update(rope_scaling={"rope_type": "dynamic", "factor": 2.0}), "rope_scaling"),
             ("gemma3", lambda c: c.update(attn_logit_softcapping=50.0), "attn_logit_softcapping")]
    msgs = [error_of(write(tmp, arch, "hf", seed=9 + i), edit) for i, (arch, edit, _) in enumerate(cases)]
    ok = all(field in m for (_, _, field), m in zip(cases, msgs))
    for m in msgs:
        print("   ", m)
    check(ok, "(f) unknown activation / rope scaling type / gemma3 attention soft-cap: errors naming the field")


def run(check):
    check_primitives(check)
    with tempfile.TemporaryDirectory() as tmp:
        for step in (check_equivalences, check_same_weights, check_layer_plans, check_errors):
            step(check, tmp)
