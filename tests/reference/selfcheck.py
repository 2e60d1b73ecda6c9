#!/usr/bin/python3
"""Proves the numpy reference right without parallm (the ctest `reference_selfcheck`).

(a) stories260K (real trained llama2.c weights) greedy from BOS reproduces llama2.c's documented
    sample text;
(b) llama-2-tiny-random.gguf (F16, real Llama-2 vocabulary) gives finite logits [n, 32000];
(c) RoPE pairing: a random HF-layout llama with NEOX RoPE equals the same model with Q/K rows
    permuted the convert_hf_to_gguf way and interleaved RoPE; the llama-3 rope scaling written as
    GGUF rope_freqs divisors equals the HF formula;
(d) block formats: hand-built blocks with known values for F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K and
    MLX 2..8-bit; the vectorized dequantizers against scalar loop twins on random bytes; a
    hand-built GGUF with every metadata type;
(e) the comparison metric of check_models.py accepts parallm-like numerics and rejects defects;
(f) the Gemma / Phi-3 families (selfcheck_families.py).
Fixtures come from $PARALLM_FIXTURES (default: the repository's ../shared).
"""
import math
import os
import struct
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
sys.path.insert(0, HERE)
import check_models  # noqa: E402
import fake_parallm  # noqa: E402
import forward  # noqa: E402
import gguf_np  # noqa: E402
import quantize_np  # noqa: E402
import safetensors_np  # noqa: E402
import selfcheck_families  # noqa: E402

FIXTURES = os.environ.get("PARALLM_FIXTURES") or os.path.normpath(
    os.path.join(HERE, "..", "..", "..", "shared"))
STORIES_TEXT = ("Once upon a time, there was a little girl named Lily. "
                "She loved to play outside in the park.")

failures = []


def check(cond, what):
    print(f"{'PASS' if cond else 'FAIL'} {what}", flush=True)
    if not cond:
        failures.append(what)


# ---------------------------------------------------------------------------------------------
def check_stories():
    d = os.path.join(FIXTURES, "models", "stories260K")
    model = forward.load_model(os.path.join(d, "stories260K.bin"))
    ids = forward.greedy(model, [1], 40)
    pieces = forward.read_llama2c_tokenizer(os.path.join(d, "tok512.bin"))
    text = forward.decode_llama2c(pieces, ids, prev=1)
    print("  stories260K greedy ids:", ",".join(map(str, ids)))
    print("  text:", repr(text))
    check(len(pieces) == 512 and text.startswith(STORIES_TEXT),
          "(a) stories260K greedy from BOS reproduces llama2.c's sample")


def check_tiny_random():
    path = os.path.join(FIXTURES, "models", "llama-2-tiny-random", "llama-2-tiny-random.gguf")
    model = forward.load_model(path)
    ids = [1, 15043, 29892, 920, 526, 366, 29973]
    logits = forward.forward(model, ids)
    c = model.config
    check(logits.shape == (len(ids), 32000) and np.all(np.isfinite(logits))
          and (c.n_embd, c.n_heads, c.head_dim, c.rope_style) == (8, 2, 4, forward.INTERLEAVED),
          f"(b) llama-2-tiny-random.gguf: finite logits {logits.shape}, std {logits.std():.3g}")


# ---------------------------------------------------------------------------------------------
def random_hf_llama(rng, D=64, H=4, KV=2, hd=16, F=96, V=50, bias=True):
    def mat(o, i):
        return rng.standard_normal((o, i)) / math.sqrt(i)

    layers = [forward.Layer(
        attn_norm=1 + 0.1 * rng.standard_normal(D), wq=mat(H * hd, D), wk=mat(KV * hd, D),
        wv=mat(KV * hd, D), wo=mat(D, H * hd), ffn_norm=1 + 0.1 * rng.standard_normal(D),
        w_gate=mat(F, D), w_up=mat(F, D), w_down=mat(D, F),
        bq=0.3 * rng.standard_normal(H * hd) if bias else None,
        bk=0.3 * rng.standard_normal(KV * hd) if bias else None,
        bv=0.3 * rng.standard_normal(KV * hd) if bias else None) for _ in range(2)]
    cfg = forward.Config(arch="llama", n_embd=D, n_layers=2, n_heads=H, n_kv_heads=KV,
                         head_dim=hd, n_ff=F, vocab=V, eps=1e-5, rope_style=forward.NEOX)
    return forward.Model(cfg, rng.standard_normal((V, D)), layers, np.ones(D), mat(V, D))


def gguf_row_order(n_heads, head_dim):
    """Row r of a GGUF llama Q/K matrix is HF row gguf_row_order[r]: within a head, GGUF row 2j+s
    holds HF row s*head_dim/2 + j (the pair (x[j], x[j + d/2]) becomes (x[2j], x[2j+1]))."""
    order = []
    for h in range(n_heads):
        for j in range(head_dim // 2):
            for s in range(2):
                order.append(h * head_dim + s * head_dim // 2 + j)
    return np.array(order)


def check_rope_pairing():
    rng = np.random.default_rng(11)
    hf = random_hf_llama(rng)
    ids = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8]
    want = forward.forward(hf, ids)
    c = hf.config
    qo, ko = gguf_row_order(c.n_heads, c.head_dim), gguf_row_order(c.n_kv_heads, c.head_dim)
    gg = forward.Model(forward.Config(**{**c.__dict__, "rope_style": forward.INTERLEAVED}),
                       hf.tok_embd, [], hf.out_norm, hf.lm_head)
    for L in hf.layers:
        gg.layers.append(forward.Layer(**{**L.__dict__, "wq": L.wq[qo], "bq": L.bq[qo],
                                          "wk": L.wk[ko], "bk": L.bk[ko]}))
    got = forward.forward(gg, ids)
    rel = np.abs(got - want).max() / np.abs(want).max()
    check(rel < 1e-12, f"(c) NEOX on HF rows == interleaved on permuted rows (rel diff {rel:.1e})")
    # The writer's reshape/swapaxes permutation (the convert_hf_to_gguf way) is the same order.
    check(np.array_equal(fake_parallm.permute_qk(hf.layers[0].wq, c.n_heads), hf.layers[0].wq[qo])
          and np.array_equal(fake_parallm.permute_qk(hf.layers[0].wk, c.n_kv_heads),
                             hf.layers[0].wk[ko]),
          "(c) convert_hf_to_gguf's reshape permutation == the explicit row order")
    # ... and the pairing matters: interleaved RoPE on unpermuted rows gives other logits.
    gg.layers = hf.layers
    wrong = np.abs(forward.forward(gg, ids) - want).max() / np.abs(want).max()
    check(wrong > 1e-2, f"(c) interleaved RoPE on HF rows differs (rel diff {wrong:.2f})")
    # Llama-3 scaling: GGUF rope_freqs (divisors, convert_hf_to_gguf) vs HF inv_freq formula.
    for s in (fake_parallm.LLAMA3_SCALING, dict(factor=8.0, low_freq_factor=1.0,
                                                 high_freq_factor=4.0,
                                                 original_max_position_embeddings=8192)):
        base, hd = 500000.0, 128
        inv = forward.default_inv_freq(hd, base)
        from_gguf = inv / fake_parallm.llama3_rope_factors(hd, base, s).astype(np.float64)
        from_hf = forward.llama3_inv_freq(inv, s["factor"], s["low_freq_factor"],
                                          s["high_freq_factor"], s["original_max_position_embeddings"])
        rel = np.abs(from_gguf / from_hf - 1).max()
        scaled = np.sum(np.abs(from_hf / inv - 1) > 1e-3)
        check(rel < 1e-6 and scaled > 0,
              f"(c) llama3 rope_freqs == HF rope_scaling (orig ctx "
              f"{s['original_max_position_embeddings']}: {scaled}/{hd // 2} pairs scaled)")


# ---------------------------------------------------------------------------------------------
# Scalar twins: plain loops in the shape of ggml's dequantize_row_* C code.

def f16(b, at):
    return float(np.frombuffer(bytes(b[at:at + 2]), "<f2")[0])


def scalar_q8_0(b):
    return [f16(b, 0) * (v - 256 if v > 127 else v) for v in b[2:34]]


def scalar_q4_0(b):
    d, y = f16(b, 0), [0.0] * 32
    for j in range(16):
        y[j] = ((b[2 + j] & 0x0F) - 8) * d
        y[j + 16] = ((b[2 + j] >> 4) - 8) * d
    return y


def scale_min_k4(j, q):
    if j < 4:
        return q[j] & 63, q[j + 4] & 63
    return (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4)


def scalar_q4_k(b):
    d, dmin, scales, q = f16(b, 0), f16(b, 2), b[4:16], b[16:144]
    y, qi, is_ = [], 0, 0
    for _ in range(0, 256, 64):
        sc, m = scale_min_k4(is_, scales)
        d1, m1 = d * sc, dmin * m
        sc, m = scale_min_k4(is_ + 1, scales)
        d2, m2 = d * sc, dmin * m
        y += [d1 * (q[qi + l] & 0xF) - m1 for l in range(32)]
        y += [d2 * (q[qi + l] >> 4) - m2 for l in range(32)]
        qi += 32
        is_ += 2
    return y


def scalar_q6_k(b):
    ql, qh = b[0:128], b[128:192]
    sc = [v - 256 if v > 127 else v for v in b[192:208]]
    d, y = f16(b, 208), [0.0] * 256
    for n in range(2):
        for l in range(32):
            is_ = l // 16
            L, H, S = 64 * n, 32 * n, 8 * n
            q1 = ((ql[L + l] & 0xF) | (((qh[H + l] >> 0) & 3) << 4)) - 32
            q2 = ((ql[L + l + 32] & 0xF) | (((qh[H + l] >> 2) & 3) << 4)) - 32
            q3 = ((ql[L + l] >> 4) | (((qh[H + l] >> 4) & 3) << 4)) - 32
            q4 = ((ql[L + l + 32] >> 4) | (((qh[H + l] >> 6) & 3) << 4)) - 32
            y[128 * n + l] = d * sc[S + is_] * q1
            y[128 * n + l + 32] = d * sc[S + is_ + 2] * q2
            y[128 * n + l + 64] = d * sc[S + is_ + 4] * q3
            y[128 * n + l + 96] = d * sc[S + is_ + 6] * q4
    return y


def f16_bytes(x):
    return np.array([x], "<f2").tobytes()


def check_blocks():
    G = gguf_np
    # F16 / BF16 bit patterns.
    f = G.dequantize(np.frombuffer(struct.pack("<4H", 0x3C00, 0xC000, 0x7BFF, 0x0001), np.uint8), G.F16, 4)
    b = G.dequantize(np.frombuffer(struct.pack("<3H", 0x3F80, 0x4049, 0xC2F7), np.uint8), G.BF16, 3)
    check(list(f) == [1.0, -2.0, 65504.0, 2.0 ** -24] and list(b) == [1.0, 3.140625, -123.5],
          "(d) F16 and BF16 bit patterns")
    # Q8_0: d = 0.5, q = -16..15.
    blk = f16_bytes(0.5) + np.arange(-16, 16, dtype=np.int8).tobytes()
    y = G.dequantize(np.frombuffer(blk, np.uint8), G.Q8_0, 32)
    check(np.array_equal(y, 0.5 * np.arange(-16, 16)), "(d) Q8_0 hand-built block")
    # Q4_0: d = 2, byte j = j | (15 - j) << 4: y[j] = 2 (j - 8), y[j+16] = 2 (7 - j).
    blk = f16_bytes(2.0) + bytes(j | ((15 - j) << 4) for j in range(16))
    y = G.dequantize(np.frombuffer(blk, np.uint8), G.Q4_0, 32)
    j = np.arange(16)
    check(np.array_equal(y, np.concatenate([2.0 * (j - 8), 2.0 * (7 - j)])), "(d) Q4_0 hand-built block")
    # Q4_K: d = 1, dmin = 0.5; sub-block scales 1..8 except 7 -> 40, mins 0,2,..,14 except 7 -> 50
    # (40 and 50 need the high 2 bits: bytes 3 and 7 carry them). All codes 3 in sub-blocks 0..6,
    # sub-block 7 has code (l % 16).
    sc = [1, 2, 3, 4, 5, 6, 7, 40]
    mn = [0, 2, 4, 6, 8, 10, 12, 50]
    scales = bytes([1, 2, 3, 4 | (40 >> 4) << 6 << 0,  # bytes 0..3: sc[0..3] | sc[4..7] >> 4 << 6
                    0, 2, 4, 6 | (50 >> 4) << 6,       # bytes 4..7: mn[0..3] | mn[4..7] >> 4 << 6
                    5 | 8 << 4, 6 | 10 << 4, 7 | 12 << 4, (40 & 15) | (50 & 15) << 4])
    # byte 3 holds sc[3]=4 and the top bits of sc[7] (40 >> 4 = 2); byte 7 holds mn[3]=6 and those
    # of mn[7] (50 >> 4 = 3); the other high bits are 0 since sc/mn[4..6] < 16.
    codes = np.full((8, 32), 3)
    codes[7] = np.arange(32) % 16
    qs = bytes((codes[2 * c][l] | codes[2 * c + 1][l] << 4) for c in range(4) for l in range(32))
    blk = f16_bytes(1.0) + f16_bytes(0.5) + scales + qs
    y = G.dequantize(np.frombuffer(blk, np.uint8), G.Q4_K, 256).reshape(8, 32)
    want = np.array(sc)[:, None] * codes - 0.5 * np.array(mn)[:, None]
    check(np.array_equal(y, want), "(d) Q4_K hand-built block (6-bit scales incl. high bits)")
    # Q6_K: d = 0.25, scales[g] = g - 8 (negative ones too), value e has code (e % 64) - 32.
    e = np.arange(256)
    q = (e % 64).reshape(2, 4, 32)                           # [half, k, l], value 128h + 32k + l
    ql = bytes(int(q[h, a, l] & 15 | (q[h, a + 2, l] & 15) << 4) for h in range(2)
               for a in range(2) for l in range(32))
    qh = bytes(int(sum(((q[h, k, l] >> 4) & 3) << (2 * k) for k in range(4)))
               for h in range(2) for l in range(32))
    blk = ql + qh + np.arange(-8, 8, dtype=np.int8).tobytes() + f16_bytes(0.25)
    y = G.dequantize(np.frombuffer(blk, np.uint8), G.Q6_K, 256)
    check(np.array_equal(y, 0.25 * (e // 16 - 8) * (e % 64 - 32)), "(d) Q6_K hand-built block")
    # Vectorized vs scalar twins on random blocks (random bytes; the f16 scales set to finite
    # values so that no inf/nan hides a mismatch).
    rng = np.random.default_rng(5)
    for t, n_bytes, twin, d_at in ((G.Q8_0, 34, scalar_q8_0, (0,)), (G.Q4_0, 18, scalar_q4_0, (0,)),
                                   (G.Q4_K, 144, scalar_q4_k, (0, 2)), (G.Q6_K, 210, scalar_q6_k, (208,))):
        blocks = rng.integers(0, 256, (6, n_bytes), dtype=np.uint8)
        for at in d_at:
            blocks[:, at:at + 2] = np.frombuffer(rng.uniform(-2, 2, 6).astype("<f2").tobytes(),
                                                 np.uint8).reshape(6, 2)
        per = G.BLOCK[t][0]
        fast = G.dequantize(blocks.ravel(), t, 6 * per)
        slow = np.concatenate([twin(list(bk)) for bk in blocks])
        check(np.allclose(fast, slow, rtol=0, atol=1e-12), f"(d) {G.TYPE_NAMES[t]} vectorized == scalar twin")
    # Quantize -> dequantize round trips stay within each format's step.
    x = rng.standard_normal(1024)
    for t, quant, max_rel in ((G.Q8_0, quantize_np.quantize_q8_0, 0.01),
                              (G.Q4_0, quantize_np.quantize_q4_0, 0.15),
                              (G.Q4_K, quantize_np.quantize_q4_k, 0.15),
                              (G.Q6_K, quantize_np.quantize_q6_k, 0.04)):
        y = G.dequantize(np.frombuffer(quant(x), np.uint8), t, x.size)
        rel = np.abs(y - x).max() / np.abs(x).max()
        check(rel < max_rel, f"(d) {G.TYPE_NAMES[t]} round trip, max err {rel:.3f} of max|x|")
    check_mlx(rng)
    check_gguf_metadata()


def check_mlx(rng):
    S = safetensors_np
    # 4-bit: codes 0..7 in one word, 0x76543210; w = 0.5 q - 1.
    w = S.mlx_dequantize(np.array([[0x76543210]], np.uint32), np.array([[0.5]]), np.array([[-1.0]]), 4, 8)
    ok4 = np.array_equal(w[0], 0.5 * np.arange(8) - 1)
    # 3-bit: codes 0..7 fill 24 bits of a bit stream, octal 76543210; 32 codes = 3 words.
    codes = np.arange(32) % 8
    stream = sum(int(c) << (3 * i) for i, c in enumerate(codes))
    words = np.array([[(stream >> (32 * k)) & 0xFFFFFFFF for k in range(3)]], np.uint32)
    ok3 = words[0, 0] & 0xFFFFFF == 0o76543210
    w = S.mlx_dequantize(words, np.array([[1.0]]), np.array([[0.0]]), 3, 32)
    ok3 = ok3 and np.array_equal(w[0], codes)
    # 6-bit: a code straddling the first word boundary (value 5 occupies bits 30..35).
    codes6 = (np.arange(16) * 5) % 64
    stream = sum(int(c) << (6 * i) for i, c in enumerate(codes6))
    words = np.array([[(stream >> (32 * k)) & 0xFFFFFFFF for k in range(3)]], np.uint32)
    ok6 = np.array_equal(S.unpack_codes(words, 6, 16)[0], codes6)
    check(ok4 and ok3 and ok6, "(d) MLX hand-built words: 4-bit, 3-bit, 6-bit (word-straddling)")
    for bits in (2, 3, 4, 5, 6, 8):
        wt = rng.standard_normal((4, 128))
        packed, scales, biases = quantize_np.mlx_quantize(wt, bits, 64)
        back = S.mlx_dequantize(packed, scales, biases, bits, 64)
        step = np.repeat(scales.astype(np.float64), 64, axis=1)
        ok = packed.shape == (4, 128 * bits // 32) and np.all(np.abs(back - wt) <= 0.51 * step + 2e-3)
        check(ok, f"(d) MLX {bits}-bit round trip within half a step")


def gguf_value(vtype, v):
    fmt = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
           11: "<q", 12: "<d"}
    if vtype == 8:
        b = v.encode()
        return struct.pack("<Q", len(b)) + b
    if vtype == 9:
        etype, items = v
        return struct.pack("<IQ", etype, len(items)) + b"".join(gguf_value(etype, i) for i in items)
    return struct.pack(fmt[vtype], v)


def check_gguf_metadata():
    """A GGUF v2 file with every metadata value type, alignment 64, and one F32 tensor [3, 2]."""
    kv = [("u8", 0, 200), ("i8", 1, -5), ("u16", 2, 60000), ("i16", 3, -300), ("u32", 4, 4000000000),
          ("i32", 5, -7), ("f32", 6, 0.5), ("bool", 7, True), ("str", 8, "héllo"), ("u64", 10, 2 ** 40),
          ("i64", 11, -2 ** 40), ("f64", 12, 0.1), ("arr_str", 9, (8, ["a", "bc"])),
          ("arr_i32", 9, (5, [1, -2, 3])), ("arr_arr", 9, (9, [(4, [1, 2]), (4, [3])])),
          ("general.alignment", 4, 64)]
    body = b"".join(gguf_value(8, k) + struct.pack("<I", t) + gguf_value(t, v) for k, t, v in kv)
    info = gguf_value(8, "t") + struct.pack("<I2QIQ", 2, 3, 2, 0, 0)
    head = b"GGUF" + struct.pack("<IQQ", 2, 1, len(kv)) + body + info
    head += b"\0" * (-len(head) % 64)
    with tempfile.NamedTemporaryFile(suffix=".gguf", delete=False) as f:
        f.write(head + np.arange(6, dtype="<f4").tobytes())
    try:
        g = gguf_np.GGUFFile(f.name)
        md = g.metadata
        ok = (g.version == 2 and g.data_start % 64 == 0 and md["u8"] == 200 and md["i16"] == -300
              and md["u32"] == 4000000000 and md["f32"] == 0.5 and md["bool"] is True
              and md["str"] == "héllo" and md["u64"] == 2 ** 40 and md["i64"] == -2 ** 40
              and md["f64"] == 0.1 and md["arr_str"] == ["a", "bc"]
              and list(md["arr_i32"]) == [1, -2, 3] and [list(a) for a in md["arr_arr"]] == [[1, 2], [3]]
              and np.array_equal(g.tensor("t"), np.arange(6.0).reshape(2, 3)))
    finally:
        os.unlink(f.name)
    check(ok, "(d) GGUF v2 with every metadata type, alignment 64, tensor shape reversed")


# ---------------------------------------------------------------------------------------------
def check_metric():
    """The tolerances of check_models.py: parallm-like arithmetic passes, defects fail."""
    cm, fp = check_models, fake_parallm
    ids = cm.PROMPT_IDS
    with tempfile.TemporaryDirectory() as tmp:
        w = fp.random_hf_weights("qwen2", 3)
        fp.write_gguf(os.path.join(tmp, "f.gguf"), "qwen2", w, "f32", False)
        fp.write_gguf(os.path.join(tmp, "q.gguf"), "qwen2", w, "q8_0", False)
        mf, mq = forward.load_model(os.path.join(tmp, "f.gguf")), forward.load_model(os.path.join(tmp, "q.gguf"))
    ref_f, ref_q = forward.forward(mf, ids), forward.forward(mq, ids)
    f32 = forward.forward(mf, ids, dtype=np.float32)
    int8 = forward.forward(mq, ids, linear=fp.int8_activation_linear, dtype=np.float32)
    bf16 = forward.forward(mf, ids, linear=fp.bf16_linear(forward.exact_linear), dtype=np.float32)
    for L in mq.layers:
        L.bq = L.bk = L.bv = None
    no_bias = forward.forward(mq, ids, linear=fp.int8_activation_linear, dtype=np.float32)
    check(cm.compare(ref_f, f32, cm.FLOAT_TOL).ok and cm.compare(ref_q, int8, cm.QUANT_TOL).ok,
          "(e) float32 passes FLOAT_TOL; int8 activations pass QUANT_TOL")
    check(not cm.compare(ref_f, bf16, cm.FLOAT_TOL).ok and not cm.compare(ref_q, no_bias, cm.QUANT_TOL).ok
          and not cm.compare(ref_f, ref_q, cm.FLOAT_TOL).ok,
          "(e) bf16 activations, a dropped bias and Q8_0-vs-F32 weights all fail")
    # Argmax ties: saturated (soft-capped) logits tie at the cap; picking either tied one agrees,
    # picking one below the tie band does not.
    ref = np.array([[3.0, 1.0, 3.0 - 1e-9, -2.0], [0.5, 2.0, 1.9, 0.0]])
    tied = ref + np.array([[0, 0, 1e-8, 0], [0, 0, 0, 0]])          # row 0 picks index 2 (a tie)
    wrong = np.array([[3.0, 1.0, 3.0, -2.0], [0.5, 1.9, 2.0, 0.0]])  # row 1 picks index 2 (0.1 lower)
    check(cm.compare(ref, tied, cm.FLOAT_TOL).agree == 2 and cm.compare(ref, wrong, cm.QUANT_TOL).agree == 1,
          "(e) argmax: a tie at the top agrees, a 0.1-lower pick does not")


def check_ssd():
    """nemotron_h.py's chunked SSD (transformers' torch_forward, chunk 8) equals the plain Mamba-2 recurrence
    S = S * exp(dt A) + dt x B^T, y = S C, over 21 tokens (3 chunks, the last padded)."""
    import nemotron_h
    rng = np.random.default_rng(0)
    T, H, P, N = 21, 4, 3, 5
    x, B, C = rng.normal(size=(T, H, P)), rng.normal(size=(T, H, N)), rng.normal(size=(T, H, N))
    dt, A = rng.uniform(0.01, 0.5, size=(T, H)), -rng.uniform(1, 5, size=H)
    y = nemotron_h.ssd_chunked(x, dt, A, B, C, 8)
    S, want = np.zeros((H, P, N)), []
    for t in range(T):
        S = S * np.exp(dt[t] * A)[:, None, None] + (dt[t][:, None] * x[t])[:, :, None] * B[t][:, None, :]
        want.append(np.einsum("hpn,hn->hp", S, C[t]))
    err = float(np.abs(y - np.array(want)).max())
    check(err < 1e-12, f"(s) chunked SSD equals the Mamba-2 recurrence: max diff {err:.2g}")


def main():
    print(f"fixtures: {FIXTURES}")
    def check_families():
        selfcheck_families.run(check)

    for step in (check_stories, check_tiny_random, check_rope_pairing, check_blocks, check_metric,
                 check_families, check_ssd):
        try:
            step()
        except Exception as e:  # noqa: BLE001 - report and keep going
            import traceback
            traceback.print_exc()
            check(False, f"{step.__name__} raised {type(e).__name__}: {e}")
    print(f"{'FAILED' if failures else 'OK'}: {len(failures)} failing check(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
