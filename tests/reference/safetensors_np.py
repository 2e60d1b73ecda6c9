"""safetensors reader (single files and sharded folders) and MLX affine dequantization, in numpy.

Written from the safetensors format description (u64 little-endian header length, JSON header of
{name: {dtype, shape, data_offsets}}, then the byte buffer) and from MLX's affine quantization
(mlx.core.quantize/dequantize): per group of `group_size` consecutive inputs of a row,
w = scale * q + bias, where the `bits`-bit codes q are packed as one little-endian bit stream
(value i of a row occupies bits [i*bits, (i+1)*bits)) stored in uint32 words.
"""
import json
import os

import numpy as np

_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "U32": "<u4", "I32": "<i4",
           "U8": "<u1", "I8": "<i1", "I64": "<i8", "U16": "<u2", "I16": "<i2"}


def read_safetensors(path):
    """{name: numpy array} of one .safetensors file; BF16 comes back as float32, others as stored."""
    with open(path, "rb") as f:
        data = f.read()
    header_len = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + header_len])
    base = 8 + header_len
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = info["dtype"]
        if dtype not in _DTYPES:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {dtype}")
        begin, end = info["data_offsets"]
        dt = np.dtype(_DTYPES[dtype])
        count = int(np.prod(info["shape"])) if info["shape"] else 1
        if end - begin != count * dt.itemsize or base + end > len(data):
            raise ValueError(f"{path}: tensor {name} has inconsistent data_offsets")
        arr = np.frombuffer(data, dtype=dt, count=count, offset=base + begin).reshape(info["shape"])
        if dtype == "BF16":  # bf16 is the top half of an IEEE f32
            arr = (arr.astype(np.uint32) << 16).view("<f4")
        out[name] = arr
    return out


def read_folder_tensors(folder):
    """All tensors of a Hugging Face folder: model.safetensors, or the shards named by
    model.safetensors.index.json's weight_map, or (failing both) every *.safetensors file."""
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    elif os.path.exists(os.path.join(folder, "model.safetensors")):
        files = ["model.safetensors"]
    else:
        files = sorted(n for n in os.listdir(folder) if n.endswith(".safetensors"))
    if not files:
        raise ValueError(f"{folder}: no safetensors files")
    tensors = {}
    for name in files:
        tensors.update(read_safetensors(os.path.join(folder, name)))
    return tensors


def unpack_codes(packed, bits, n_values):
    """uint32 words [..., words] -> integer codes [..., n_values], reading one little-endian bit
    stream per row (LSB first). This covers 2/4/8 bits (whole codes per word) and 3/5/6 bits (codes
    straddling bytes and words) with one rule."""
    rows = packed.shape[:-1]
    as_bytes = np.ascontiguousarray(packed.astype("<u4")).view(np.uint8).reshape(*rows, -1)
    bit_stream = np.unpackbits(as_bytes, axis=-1, bitorder="little")
    if bit_stream.shape[-1] < n_values * bits:
        raise ValueError(f"{bits}-bit codes: {bit_stream.shape[-1]} bits hold < {n_values} values")
    code_bits = bit_stream[..., :n_values * bits].reshape(*rows, n_values, bits).astype(np.int64)
    return code_bits @ (1 << np.arange(bits, dtype=np.int64))


def mlx_dequantize(packed, scales, biases, bits, group_size):
    """MLX affine dequantization -> float64 [..., in]: w = scales[g] * q + biases[g]."""
    n_groups = scales.shape[-1]
    n_in = n_groups * group_size
    if packed.shape[-1] * 32 != n_in * bits:
        raise ValueError(f"packed width {packed.shape[-1]} words does not hold {n_in} x {bits} bits")
    q = unpack_codes(packed, bits, n_in).astype(np.float64)
    q = q.reshape(*q.shape[:-1], n_groups, group_size)
    w = scales.astype(np.float64)[..., None] * q + biases.astype(np.float64)[..., None]
    return w.reshape(*w.shape[:-2], n_in)


def quant_params(quantization, module):
    """(bits, group_size) for a module path under config.json's "quantization" dict, which holds
    defaults plus optional per-module overrides {module: {bits, group_size}} (or False = float)."""
    override = quantization.get(module)
    if override is False:
        return None
    if isinstance(override, dict):
        return int(override.get("bits", quantization["bits"])), int(
            override.get("group_size", quantization["group_size"]))
    return int(quantization["bits"]), int(quantization["group_size"])


def dequantize_folder(tensors, quantization):
    """Replace every quantized module (X.weight U32 + X.scales + X.biases) by a float64 X.weight;
    float tensors become float64. `quantization` is config.json's dict, or None."""
    out = {}
    for name, arr in tensors.items():
        if name.endswith(".scales") or name.endswith(".biases"):
            continue
        module = name[:-len(".weight")] if name.endswith(".weight") else None
        if module is not None and module + ".scales" in tensors:
            if quantization is None:
                raise ValueError(f"{name} is quantized but config.json has no 'quantization'")
            params = quant_params(quantization, module)
            if params is None:
                raise ValueError(f"{name} is quantized but config.json marks it unquantized")
            bits, group_size = params
            if arr.dtype != np.uint32:
                raise ValueError(f"{name}: quantized weight must be U32, got {arr.dtype}")
            out[name] = mlx_dequantize(arr, tensors[module + ".scales"],
                                       tensors[module + ".biases"], bits, group_size)
        else:
            out[name] = arr.astype(np.float64)
    return out


def read_hf_folder(folder):
    """(config dict, {name: float64 array}) of a Hugging Face or MLX(-quantized) folder."""
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    quantization = config.get("quantization") or config.get("quantization_config")
    return config, dequantize_folder(read_folder_tensors(folder), quantization)
