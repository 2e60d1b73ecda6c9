"""GGUF v2/v3 reader and numpy dequantization of GGML block formats, written from the GGUF spec.

Independent of parallm's C++ code: written from ggml's docs/gguf.md (file layout, metadata value
types, alignment) and the block layouts of ggml-common.h / ggml-quants.c (dequantize_row_*).
Dequantization is vectorized over blocks and returns float64; a GGUF shape [ne0, ne1] (innermost
first) is returned as a numpy array of shape [ne1, ne0], i.e. a [out, in] matrix row-major.
"""
import struct

import numpy as np

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32

# Metadata value types (gguf.md, enum gguf_metadata_value_type).
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
           10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_NUMPY_OF_SCALAR = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4",
                    7: "<u1", 10: "<u8", 11: "<i8", 12: "<f8"}

# ggml_type ids and their (elements per block, bytes per block).
F32, F16, Q4_0, Q8_0, Q4_K, Q6_K, BF16 = 0, 1, 2, 8, 12, 14, 30
TYPE_NAMES = {F32: "F32", F16: "F16", Q4_0: "Q4_0", Q8_0: "Q8_0", Q4_K: "Q4_K", Q6_K: "Q6_K",
              BF16: "BF16"}
BLOCK = {F32: (1, 4), F16: (1, 2), BF16: (1, 2), Q8_0: (32, 34), Q4_0: (32, 18),
         Q4_K: (256, 144), Q6_K: (256, 210)}


class GGUFFile:
    """A parsed GGUF file: .version, .metadata {key: value}, .tensors {name: TensorInfo}."""

    def __init__(self, path):
        with open(path, "rb") as f:
            self.data = f.read()
        self.path = path
        self._pos = 0
        if self._take(4) != GGUF_MAGIC:
            raise ValueError(f"{path}: not a GGUF file (bad magic)")
        (self.version,) = self._unpack("<I")
        if self.version not in (2, 3):
            raise ValueError(f"{path}: GGUF version {self.version} not supported (need 2 or 3)")
        n_tensors, n_kv = self._unpack("<QQ")
        self.metadata = {}
        for _ in range(n_kv):
            key = self._string()
            (vtype,) = self._unpack("<I")
            self.metadata[key] = self._value(vtype)
        self.tensors = {}
        for _ in range(n_tensors):
            name = self._string()
            (n_dims,) = self._unpack("<I")
            ne = list(self._unpack("<" + "Q" * n_dims))
            ttype, offset = self._unpack("<IQ")
            self.tensors[name] = TensorInfo(name, ne, ttype, offset)
        self.alignment = int(self.metadata.get("general.alignment", DEFAULT_ALIGNMENT))
        self.data_start = _align(self._pos, self.alignment)
        for t in self.tensors.values():
            end = self.data_start + t.offset + t.nbytes
            if t.offset % self.alignment or end > len(self.data):
                raise ValueError(f"{path}: tensor {t.name} misaligned or past end of file")

    def _take(self, n):
        if self._pos + n > len(self.data):
            raise ValueError(f"{self.path}: truncated at byte {self._pos}")
        out = self.data[self._pos:self._pos + n]
        self._pos += n
        return out

    def _unpack(self, fmt):
        return struct.unpack(fmt, self._take(struct.calcsize(fmt)))

    def _string(self):
        (n,) = self._unpack("<Q")
        return self._take(n).decode("utf-8", errors="surrogateescape")

    def _value(self, vtype):
        if vtype in _SCALAR:
            return self._unpack(_SCALAR[vtype])[0]
        if vtype == _STRING:
            return self._string()
        if vtype == _ARRAY:
            etype, n = self._unpack("<IQ")
            if etype in _NUMPY_OF_SCALAR:  # numeric arrays (e.g. token scores) in one read
                dt = np.dtype(_NUMPY_OF_SCALAR[etype])
                arr = np.frombuffer(self._take(n * dt.itemsize), dtype=dt)
                return arr.astype(bool) if etype == 7 else arr
            return [self._value(etype) for _ in range(n)]
        raise ValueError(f"{self.path}: unknown metadata value type {vtype}")

    def raw(self, name):
        """The tensor's bytes as a uint8 array."""
        t = self.tensors[name]
        start = self.data_start + t.offset
        return np.frombuffer(self.data, dtype=np.uint8, count=t.nbytes, offset=start)

    def arch_key(self, path):
        """The architecture and a reader of its `{arch}.{k}` metadata: key(k) raises naming the file when the key is
        absent and no default is given."""
        arch = self.metadata["general.architecture"]

        def key(k, default=None):
            v = self.metadata.get(f"{arch}.{k}", default)
            if v is None:
                raise ValueError(f"{path}: missing metadata {arch}.{k}")
            return v

        return arch, key

    def tensor(self, name):
        """Dequantized float64 array, shape reversed from GGUF's ne (outermost first)."""
        t = self.tensors[name]
        flat = dequantize(self.raw(name), t.type, t.n_elements)
        return flat.reshape(list(reversed(t.ne)))


class TensorInfo:
    def __init__(self, name, ne, ttype, offset):
        if ttype not in BLOCK:
            raise ValueError(f"tensor {name}: ggml type {ttype} not supported by the reference")
        self.name, self.ne, self.type, self.offset = name, ne, ttype, offset
        self.n_elements = int(np.prod(ne)) if ne else 1
        per_block, block_bytes = BLOCK[ttype]
        if ne and ne[0] % per_block:
            raise ValueError(f"tensor {name}: row of {ne[0]} not a multiple of block {per_block}")
        self.nbytes = self.n_elements // per_block * block_bytes


def _align(x, a):
    return (x + a - 1) // a * a


def f16_to_f64(u16):
    return u16.view("<f2").astype(np.float64)


def bf16_to_f64(u16):
    """bf16 is the top half of an IEEE f32."""
    return (u16.astype(np.uint32) << 16).view("<f4").astype(np.float64)


def dequantize(raw, ttype, n_elements):
    """uint8 bytes of n_elements of ggml type ttype -> float64 [n_elements]."""
    raw = np.ascontiguousarray(raw)
    if ttype == F32:
        return raw.view("<f4").astype(np.float64)
    if ttype == F16:
        return f16_to_f64(raw.view("<u2"))
    if ttype == BF16:
        return bf16_to_f64(raw.view("<u2"))
    per_block, block_bytes = BLOCK[ttype]
    blocks = raw.reshape(n_elements // per_block, block_bytes)
    return {Q8_0: _dq_q8_0, Q4_0: _dq_q4_0, Q4_K: _dq_q4_k, Q6_K: _dq_q6_k}[ttype](blocks).ravel()


def _half(blocks, at):
    """The f16 stored at byte offset `at` of every block, as a [n_blocks, 1] column."""
    return f16_to_f64(np.ascontiguousarray(blocks[:, at:at + 2]).view("<u2"))


def _dq_q8_0(b):
    # block_q8_0 = { f16 d; int8 qs[32]; }: y = d * q
    return _half(b, 0) * b[:, 2:].view(np.int8).astype(np.float64)


def _dq_q4_0(b):
    # block_q4_0 = { f16 d; uint8 qs[16]; }: element j is the low nibble of qs[j], element j+16
    # the high nibble; y = d * (nibble - 8)
    qs = b[:, 2:]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float64) - 8.0
    return _half(b, 0) * q


def unpack_q4_k_scales(s):
    """The 12 scale bytes of a Q4_K block -> (sc, m), each [n_blocks, 8] of 6-bit values.

    Sub-blocks 0..3 keep their scale/min in the low 6 bits of bytes 0..3 / 4..7; sub-blocks 4..7 keep
    the low 4 bits in the nibbles of bytes 8..11 and the top 2 bits in the top bits of bytes 0..7.
    """
    s = s.astype(np.int64)
    sc = np.empty((s.shape[0], 8), np.int64)
    m = np.empty_like(sc)
    sc[:, :4] = s[:, 0:4] & 63
    m[:, :4] = s[:, 4:8] & 63
    sc[:, 4:] = (s[:, 8:12] & 0x0F) | ((s[:, 0:4] >> 6) << 4)
    m[:, 4:] = (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)
    return sc, m


def _dq_q4_k(b):
    # block_q4_K = { f16 d; f16 dmin; uint8 scales[12]; uint8 qs[128]; } for 256 values in 8
    # sub-blocks of 32: y = d * sc[j] * q - dmin * m[j]. Each 64 values share 32 qs bytes:
    # the low nibbles are sub-block 2c, the high nibbles sub-block 2c+1.
    d, dmin = _half(b, 0), _half(b, 2)
    sc, m = unpack_q4_k_scales(b[:, 4:16])
    qs = b[:, 16:144].reshape(-1, 4, 32)
    q = np.stack([qs & 0x0F, qs >> 4], axis=2).reshape(-1, 8, 32).astype(np.float64)
    y = (d * sc)[:, :, None] * q - (dmin * m)[:, :, None]
    return y.reshape(-1, 256)


def _dq_q6_k(b):
    # block_q6_K = { uint8 ql[128]; uint8 qh[64]; int8 scales[16]; f16 d; }. Each half of 128
    # values uses 64 ql bytes and 32 qh bytes; within a half, value l + 32*k (k = 0..3) takes its
    # low 4 bits from ql[l + 32*(k&1)] (low nibble for k<2, high for k>=2) and its top 2 bits from
    # bits 2k..2k+1 of qh[l]; q is then offset by -32. Value e has scale scales[e // 16].
    ql = b[:, 0:128].reshape(-1, 2, 2, 32)           # [block, half, k&1, l]
    qh = b[:, 128:192].reshape(-1, 2, 1, 32)          # [block, half, -, l]
    low = np.concatenate([ql & 0x0F, ql >> 4], axis=2)                   # k = 0,1,2,3
    high = np.concatenate([(qh >> (2 * k)) & 3 for k in range(4)], axis=2)
    q = ((low | (high << 4)).astype(np.int64) - 32).reshape(-1, 16, 16)  # 16 groups of 16
    scales = b[:, 192:208].view(np.int8).astype(np.float64)
    y = _half(b, 208)[:, :, None] * scales[:, :, None] * q
    return y.reshape(-1, 256)


def read_gguf(path):
    """Convenience: (metadata dict, {name: float64 array}) for every tensor of a GGUF file."""
    g = GGUFFile(path)
    return g.metadata, {name: g.tensor(name) for name in g.tensors}
