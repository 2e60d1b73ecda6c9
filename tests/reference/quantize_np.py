"""Simple numpy quantizers: GGML blocks (Q8_0, Q4_0, Q4_K, Q6_K), MLX affine, f16/bf16 bits.

Test tooling only: selfcheck.py round-trips them through the readers, and fake_parallm.py uses them
to write models. They aim at valid, reasonably accurate encodings (the GGML ones follow the block
layouts of ggml-common.h, with simpler scale searches than ggml's); exact agreement with ggml's
quantizers is not needed because every comparison dequantizes the stored bytes on both sides.
"""
import numpy as np


def f32_to_f16_bits(x):
    return np.asarray(x, dtype=np.float32).astype("<f2").view("<u2")


def f32_to_bf16_bits(x):
    """Round to nearest even on the upper 16 bits of the f32 pattern."""
    u = np.asarray(x, dtype=np.float32).view("<u4").astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")


def _f16_column(d):
    """Round per-block scales to f16 first so the codes are chosen against the stored scale."""
    return d.astype(np.float16).astype(np.float64)


def quantize_q8_0(x):
    """float [n] (n % 32 == 0) -> bytes of block_q8_0 { f16 d; int8 qs[32]; }."""
    b = np.asarray(x, np.float64).reshape(-1, 32)
    d = _f16_column(np.abs(b).max(axis=1, keepdims=True) / 127.0)
    q = np.clip(np.rint(np.divide(b, d, out=np.zeros_like(b), where=d > 0)), -127, 127)
    out = np.empty((b.shape[0], 34), np.uint8)
    out[:, 0:2] = f32_to_f16_bits(d).reshape(-1, 1).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.astype(np.int8).view(np.uint8)
    return out.tobytes()


def quantize_q4_0(x):
    """float [n] -> block_q4_0 { f16 d; uint8 qs[16]; }: y = d * (q - 8), the largest-magnitude
    value of the block maps to code 0 (as ggml does: d = max / -8)."""
    b = np.asarray(x, np.float64).reshape(-1, 32)
    idx = np.abs(b).argmax(axis=1)
    d = _f16_column(b[np.arange(len(b)), idx][:, None] / -8.0)
    q = np.clip(np.rint(np.divide(b, d, out=np.zeros_like(b), where=d != 0)) + 8, 0, 15)
    q = q.astype(np.uint8)
    out = np.empty((b.shape[0], 18), np.uint8)
    out[:, 0:2] = f32_to_f16_bits(d).reshape(-1, 1).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
    return out.tobytes()


def pack_q4_k_scales(sc, m):
    """Inverse of gguf_np.unpack_q4_k_scales: 8 six-bit scales and mins -> 12 bytes per block."""
    s = np.zeros((sc.shape[0], 12), np.int64)
    s[:, 0:4] = (sc[:, :4] & 63) | ((sc[:, 4:] >> 4) << 6)
    s[:, 4:8] = (m[:, :4] & 63) | ((m[:, 4:] >> 4) << 6)
    s[:, 8:12] = (sc[:, 4:] & 0x0F) | ((m[:, 4:] & 0x0F) << 4)
    return s.astype(np.uint8)


def quantize_q4_k(x):
    """float [n] (n % 256 == 0) -> block_q4_K: per sub-block of 32, y = d*sc*q - dmin*m."""
    b = np.asarray(x, np.float64).reshape(-1, 8, 32)
    mn = np.maximum(0.0, -b.min(axis=2))                       # subtracted offset, >= 0
    step = (b.max(axis=2) + mn) / 15.0                          # per sub-block step
    d = _f16_column(step.max(axis=1, keepdims=True) / 63.0)
    dmin = _f16_column(mn.max(axis=1, keepdims=True) / 63.0)
    sc = np.clip(np.rint(np.divide(step, d, out=np.zeros_like(step), where=d > 0)), 0, 63)
    sc = np.where((sc == 0) & (step > 0), 1, sc).astype(np.int64)
    m = np.clip(np.ceil(np.divide(mn, dmin, out=np.zeros_like(mn), where=dmin > 0)), 0, 63)
    m = m.astype(np.int64)
    scale = (d * sc)[:, :, None]
    q = np.rint(np.divide(b + (dmin * m)[:, :, None], scale, out=np.zeros_like(b),
                          where=scale > 0))
    q = np.clip(q, 0, 15).astype(np.uint8).reshape(-1, 4, 2, 32)   # [block, chunk, nibble, l]
    out = np.empty((b.shape[0], 144), np.uint8)
    out[:, 0:2] = f32_to_f16_bits(d).reshape(-1, 1).view(np.uint8).reshape(-1, 2)
    out[:, 2:4] = f32_to_f16_bits(dmin).reshape(-1, 1).view(np.uint8).reshape(-1, 2)
    out[:, 4:16] = pack_q4_k_scales(sc, m)
    out[:, 16:] = (q[:, :, 0, :] | (q[:, :, 1, :] << 4)).reshape(-1, 128)
    return out.tobytes()


def quantize_q6_k(x):
    """float [n] (n % 256 == 0) -> block_q6_K: per 16 values, y = d * scale * (q - 32)."""
    b = np.asarray(x, np.float64).reshape(-1, 16, 16)
    step = np.abs(b).max(axis=2) / 31.0                          # per group of 16
    d = _f16_column(step.max(axis=1, keepdims=True) / 127.0)
    sc = np.clip(np.rint(np.divide(step, d, out=np.zeros_like(step), where=d > 0)), 0, 127)
    sc = np.where((sc == 0) & (step > 0), 1, sc).astype(np.int64)
    scale = (d * sc)[:, :, None]
    q = np.rint(np.divide(b, scale, out=np.zeros_like(b), where=scale > 0))
    q = (np.clip(q, -32, 31) + 32).astype(np.uint8).reshape(-1, 2, 4, 32)   # [block, half, k, l]
    ql = (q[:, :, 0:2, :] & 0x0F) | ((q[:, :, 2:4, :] & 0x0F) << 4)      # [block, half, k&1, l]
    qh = sum(((q[:, :, k, :] >> 4) & 3) << (2 * k) for k in range(4))     # [block, half, l]
    out = np.empty((b.shape[0], 210), np.uint8)
    out[:, 0:128] = ql.reshape(-1, 128)
    out[:, 128:192] = qh.astype(np.uint8).reshape(-1, 64)
    out[:, 192:208] = sc.astype(np.int8).view(np.uint8)
    out[:, 208:210] = f32_to_f16_bits(d).reshape(-1, 1).view(np.uint8).reshape(-1, 2)
    return out.tobytes()


def pack_codes(codes, bits):
    """Integer codes [rows, n] -> uint32 [rows, n*bits/32], one little-endian bit stream per row."""
    rows, n = codes.shape
    bit_planes = (codes.astype(np.int64)[:, :, None] >> np.arange(bits)) & 1
    packed = np.packbits(bit_planes.reshape(rows, n * bits).astype(np.uint8), axis=1,
                         bitorder="little")
    return np.ascontiguousarray(packed).view("<u4")


def mlx_quantize(w, bits, group_size, scale_dtype=np.float16):
    """MLX-style affine quantization of w [out, in]: per group, w ~ scale * q + bias with
    q in [0, 2^bits - 1], bias = group min. Returns (uint32 codes, scales, biases)."""
    w = np.asarray(w, np.float64)
    g = w.reshape(w.shape[0], -1, group_size)
    lo, hi = g.min(axis=2), g.max(axis=2)
    scales = ((hi - lo) / (2 ** bits - 1)).astype(scale_dtype)
    biases = lo.astype(scale_dtype)
    s, b = scales.astype(np.float64)[:, :, None], biases.astype(np.float64)[:, :, None]
    q = np.rint(np.divide(g - b, s, out=np.zeros_like(g), where=s > 0))
    q = np.clip(q, 0, 2 ** bits - 1).reshape(w.shape)
    return pack_codes(q, bits), scales, biases
