#!/usr/bin/python3
"""Checks parallm's logits against the numpy reference on tiny random models of every architecture
and storage format (the ctest `reference_models`).

For each case it runs `parallm make-model ... -o OUT`, `parallm logits -m OUT --prompt-ids IDS -o
parallm.npy`, runs forward.py's reference on the same OUT (in this process), and compares with
`compare()` below (`logits` with `--kv-cache-dtype f32`: `auto` would store a quantized or 16-bit
file's cache in f16). It prints one line per case and exits 1 if any case fails.

  check_models.py --parallm build/src/cli/parallm --workdir /tmp/refcheck [--only qwen2,gguf-q4_k]
(--parallm may also name fake_parallm.py, the numpy stand-in, to test this driver itself.)

TOLERANCES. Both sides use the same weights: the reference reads the file itself and dequantizes
every stored value exactly (float64), so weight quantization error is NOT part of the difference.
What remains is parallm's arithmetic. The metric (compare(), the only one) bounds the max and the
rms of (parallm - reference) by fractions of scale = max(1, std(reference logits)) (std ~1 here;
the floor keeps the bound meaningful for models with tiny logits), and checks the argmax.
- Float weights (F32; F16 and BF16 widen exactly to f32): f32 activations, f32 accumulation.
  Rounding is ~6e-8 relative per operation; sums of 256-512 terms over two layers give ~1e-6.
  Measured (the reference run in float32 vs float64, all archs, 4 seeds): max 3.7e-6..4.9e-6,
  rms 0.9e-6..1.1e-6 of the scale. FLOAT_TOL: max 1e-4, rms 2e-5 (~20x headroom for summation
  order and fast exp/rsqrt); any real defect (RoPE pairing or position, a missing bias or norm,
  activations rounded to bf16/f16: ~1e-3 or more) exceeds it by far.
- Quantized weights (GGML blocks, MLX affine): parallm also rounds every matmul input to int8 per
  block of 32 (d = max|x|/127). That error is uniform in +-d/2 (std d/sqrt(12)); with max|x| ~ 2.4
  rms for these activations it is 0.55% of the input (0.9% for down_proj, whose input
  silu(gate)*up is heavy-tailed, max ~ 3.6 rms), and the matmul output carries the same relative
  error. Fifteen matmuls feed each logit (7 per layer + LM head); measured one at a time they move
  the logits by 0.14%..0.8% rms each, and together (independent, in quadrature) ~1.9% rms; the max
  over 12 x 512 logits is 4-6x the rms. Measured with fake_parallm.py, which emulates exactly this
  rounding (3 archs x 10 quantized storages x 6 seeds): rms 1.5%..2.2%, max 5%..11.4% of the
  scale, argmax agreement >= 9/12. QUANT_TOL: max 0.2, rms 0.04 (~1.8x the worst measured), argmax
  >= 2/3 of positions. (parallm itself, first run: max <= 0.064, rms <= 1.15% of the scale; float
  cases max <= 1.2e-6 of the scale.) Any dequantization defect (a wrong nibble order, scale/min, bias or group)
  is O(1) of the scale.
Two more checks: the same seed written as GGUF F32 and as an HF F32 folder must give the same
logits from parallm to 1e-5 of the scale (only summation order and the RoPE pairing differ) and
from the reference to 1e-6 (float64; the GGUF stores rope_freqs and eps as f32). The
--rope-scaling llama3 cases also check that the scaling moves the reference's logits by > 10x
the float bound, so that a parallm ignoring it would fail.
GEMMA / PHI-3 (gemma, gemma2, gemma3 with 6 layers so that layer 5 is global, phi3): a few storages
each, then TRAP cases, each with the make-model flags of one feature on the float storages:
--sliding-window 5 (gemma2, gemma3, phi3, mistral; the 12-token prompt is longer than the window),
gemma2 --attn-softcap 2 --final-softcap 3, phi3 --rope-scaling longrope with --original-context 8
(the prompt uses the long factors) and 64 (the short ones), phi3 --partial-rotary 0.75, and gemma3
with linear rope_scaling (factor 8, written into the HF config.json). Like the
llama3 case, every trap first proves it CAN fail: the reference with the feature dropped or
misapplied (no window, the window on every layer, one RoPE base for all gemma3 layers, no cap, the
other LongRoPE factors, no attention factor, full rotary; on the plain cases: Gemma's norms as w
instead of 1 + w, no embedding scale, no post-norms) must move the logits by > 10x the float bound.
ERRORS: an HF folder whose config.json names what neither side can honour (an unknown activation,
an unknown rope scaling type) must make `parallm logits` fail with a message naming the field, and
the reference raise one too.
MIXTURE OF EXPERTS (qwen2moe, qwen3moe, mixtral; reference in moe.py from transformers' modeling code): GGUF
F32 / Q8_0 / Q4_K (Q4_0 where the experts' rows of 128 are too short for K-quants), HF F32 and MLX 4-bit, the
same-weights check, and mutations that must show on the HF F32 case: the top-k renormalisation flipped, top-1
instead of top-k, Qwen2-MoE's shared expert dropped. parallm's router runs in f32 on f32 weights (the GGUF writer
keeps ffn_gate_inp in f32 as llama.cpp does, the MLX writer gives it 8 bits as mlx-lm does, and the loader widens
it); a token whose k-th and (k+1)-th probabilities were within rounding of each other could pick a different
expert than the float64 reference; the fixed seed has none (the cases would fail by O(1) if it did).
Mixtures with dense layers are TRAP cases: qwen2moe-sparse-step2 (--decoder-sparse-step 2: layer 0 dense) and
qwen3moe-mlp-only1 (--mlp-only-layers 1), whose dense MLP must show (zeroing it moves the logits).
LORA (labels ARCH-lora-FORMAT-rRANK-TARGETS): a random adapter written by `make-model --lora
FORMAT` (mlx, peft with rsLoRA, gguf; ranks 4 and 8; attention-only and attention + MLP targets;
the last layer only for one mlx case) on float bases; parallm's `logits --adapter-path` against
the reference with the adapter read by lora_np.py (each format's own conventions) and added to the
weights in float64. The update is a few more f32 products per projection: FLOAT_TOL. Each case
also proves that the adapter moves the reference's logits beyond the float bound. llama-lora-fuse:
`convert --adapter` (fused to an F32 folder and to Q8_0 GGUF) equals the runtime adapter within
FLOAT_TOL and QUANT_TOL.
NEMOTRON-H (nemotronh; reference in nemotron_h.py from transformers' modeling_nemotron_h.py, whose chunked SSD it
runs with chunk_size 8, as parallm's prefill does, its chunks counted from position 0 and the prompt's tail and
decode token by token): the tiny preset's pattern ME*M-E (two
Mamba-2 layers with 2 B/C groups, attention without RoPE, a relu2 MLP, sigmoid-routed experts in 4 groups, 2 kept)
as an HF F32 and BF16 folder, on a 40-token prompt (5 SSD chunks) run by parallm whole and in prefill chunks of 16
and 7 tokens (the conv window and SSM state carried across), FLOAT_TOL; MLX 4-bit and 8-bit in chunks of 16 at
QUANT_TOL with every token routed to all experts (config.json edited: a routing flip under the int8 activation
rounding would travel through the Mamba state into every later position, so near-tie positions cannot just be
left out as for the attention-only MoE families); greedy ids (12 tokens: one prefill, then
decode steps through the recurrent state) equal to the reference's; and mutations that must show: D = 0, the gated
norm over the whole width instead of per group, the norm before the gate, no correction bias, no routed scaling.
GGUF as llama.cpp writes it: nemotron_h_moe (pattern ME*MEM) in F32, whole and in chunks of 7, at FLOAT_TOL, and
nemotron_h (M*M-M-, no experts, so no routing flip under int8 rounding) in Q8_0 at QUANT_TOL; the reference reads
both with its own loader (nemotron_h.load_gguf, from convert_hf_to_gguf.py and llama_model_nemotron_h), the F32
file converted by `parallm convert` to an HF F32 folder gives the reference's logits at FLOAT_TOL, and the F32 case
proves A's encoding shows (A read as A_log must move the logits).
QUANT_TOL holds for these families too: fake_parallm.py's int8 rounding (4 archs x Q8_0 / Q4_K /
MLX 4-bit x 5 seeds, gemma3 with 6 layers) reaches at most 0.57 of the max and 0.60 of the rms bound,
argmax >= 10/12.
"""
import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import forward  # noqa: E402
import moe  # noqa: E402
import lora_np  # noqa: E402

ARCHS = ["llama", "mistral", "qwen2", "qwen3"]
FAMILY_ARCHS = ["gemma", "gemma2", "gemma3", "phi3"]
# Mixture of experts (tests/reference/moe.py): the tiny preset's 16 experts top-4 (qwen2moe with a shared expert of
# 256, experts of 128) and Mixtral's 8 top-2 (experts of 512); routing differs from token to token.
MOE_ARCHS = ["qwen2moe", "qwen3moe", "mixtral"]
# Quantized MoE cases: parallm rounds every matmul input to int8 (~0.5-1% of the activations, see TOLERANCES), so
# from the second layer on the router's input differs from the reference's by ~1% and a token whose k-th and
# (k+1)-th router probabilities are within a few percent may take the other expert (as llama.cpp would): its
# logits then move by O(the k-th weight), a different, equally valid model. Those positions (a relative gap below
# MOE_NEAR_TIE in any sparse layer after the first, whose input is the exact embedding) are left out of the
# comparison, and at least MOE_MIN_KEPT of the 12 must remain. Float storages compare every position: their
# routing must match exactly.
MOE_NEAR_TIE = 0.02
MOE_MIN_KEPT = 8
ARCH_FLAGS = {"gemma3": ("--layers", "6")}   # layers 0..4 sliding, layer 5 global
PROMPT_IDS = [1, 17, 42, 99, 256, 3, 500, 77, 128, 311, 64, 9]


@dataclasses.dataclass(frozen=True)
class Tolerance:
    rel: float               # max |parallm - ref| <= rel * scale, scale = max(1, std(ref))
    rms_rel: float           # rms(parallm - ref) <= rms_rel * scale
    min_argmax_agree: float  # fraction of positions where the argmax must agree


FLOAT_TOL = Tolerance(rel=1e-4, rms_rel=2e-5, min_argmax_agree=1.0)
QUANT_TOL = Tolerance(rel=0.2, rms_rel=0.04, min_argmax_agree=2 / 3)
SAME_WEIGHTS_TOL = Tolerance(rel=1e-5, rms_rel=1e-5, min_argmax_agree=1.0)   # parallm GGUF vs HF
REFERENCE_SAME_TOL = Tolerance(rel=1e-6, rms_rel=1e-6, min_argmax_agree=1.0)  # reference GGUF vs HF


@dataclasses.dataclass(frozen=True)
class Storage:
    name: str
    fmt: str          # gguf | hf | mlx
    flags: tuple      # extra make-model flags
    tol: Tolerance

    def out_path(self, workdir, arch, tag=""):
        base = os.path.join(workdir, f"{arch}{tag}-{self.name}")
        return base + ".gguf" if self.fmt == "gguf" else base


def _gguf(t, tol):
    return Storage(f"gguf-{t}", "gguf", ("--dtype", t), tol)


def _mlx(bits):
    return Storage(f"mlx-{bits}bit", "mlx", ("--bits", str(bits), "--group-size", "64"), QUANT_TOL)


STORAGES = ([_gguf(t, FLOAT_TOL) for t in ("f32", "f16", "bf16")]
            + [_gguf(t, QUANT_TOL) for t in ("q8_0", "q4_0", "q4_k", "q6_k")]
            + [Storage("hf-f32", "hf", ("--dtype", "f32"), FLOAT_TOL),
               Storage("hf-bf16", "hf", ("--dtype", "bf16"), FLOAT_TOL)]
            + [_mlx(b) for b in (4, 8, 2, 3, 5, 6)]
            # mlx-lm-style mixed precision (per-module overrides in config.json) and a sharded folder.
            + [Storage("mlx-4bit-mixed8", "mlx", ("--bits", "4", "--group-size", "64", "--high-bits", "8"), QUANT_TOL),
               Storage("hf-sharded-f32", "hf", ("--dtype", "f32", "--shard-mb", "1"), FLOAT_TOL)])
BY_NAME = {s.name: s for s in STORAGES}
FAMILY_STORAGES = [BY_NAME[n] for n in ("gguf-f32", "hf-f32", "gguf-q8_0", "mlx-4bit", "hf-bf16")]
MOE_STORAGES = [BY_NAME[n] for n in ("gguf-f32", "hf-f32", "gguf-q8_0", "gguf-q4_k", "mlx-4bit")]
TRAP_STORAGES = [BY_NAME[n] for n in ("gguf-f32", "hf-f32")]
SENSITIVITY_TOL = Tolerance(rel=10 * FLOAT_TOL.rel, rms_rel=1.0, min_argmax_agree=0.0)


@dataclasses.dataclass
class Comparison:
    max_abs: float
    bound: float
    rms: float
    rms_bound: float
    agree: int        # positions where parallm's argmax equals (or ties) the reference's
    n: int
    ok: bool

    def describe(self):
        return (f"max|diff|={self.max_abs:.3g} tol={self.bound:.3g} "
                f"({self.max_abs / self.bound if self.bound else float('inf'):.2f} of tol) "
                f"rms={self.rms:.3g} ({self.rms / self.rms_bound if self.rms_bound else float('inf'):.2f}) "
                f"argmax {self.agree}/{self.n}")


def compare(ref, got, tol):
    """THE metric, used by every case: with scale = max(1, std(ref)), max |got - ref| <=
    tol.rel * scale, rms(got - ref) <= tol.rms_rel * scale, and the argmax of got equals the
    reference's at >= tol.min_argmax_agree of the positions. A position where got's argmax is a
    reference TIE counts as agreeing: its reference logit is within min(tol.rel, FLOAT_TOL.rel) *
    scale of the reference's max (a strong final soft-cap saturates many logits at the cap, and
    which of them comes first is rounding)."""
    ref = np.asarray(ref, np.float64)
    got = np.asarray(got, np.float64)
    if ref.shape != got.shape or not np.all(np.isfinite(got)):
        return Comparison(float("inf"), 0.0, float("inf"), 0.0, 0, ref.shape[0], False)
    scale = max(1.0, float(np.std(ref)))
    diff = got - ref
    max_abs, rms = float(np.max(np.abs(diff))), float(np.sqrt(np.mean(diff * diff)))
    picked = np.take_along_axis(ref, np.argmax(got, axis=1)[:, None], axis=1)[:, 0]
    tie = min(tol.rel, FLOAT_TOL.rel) * scale
    agree = int(np.sum(picked >= ref.max(axis=1) - tie))
    ok = (max_abs <= tol.rel * scale and rms <= tol.rms_rel * scale
          and agree >= np.ceil(tol.min_argmax_agree * len(ref) - 1e-9))
    return Comparison(max_abs, tol.rel * scale, rms, tol.rms_rel * scale, agree, len(ref), ok)


class Runner:
    def __init__(self, parallm, workdir, seed, verbose):
        self.cmd = [sys.executable, parallm] if parallm.endswith(".py") else [parallm]
        self.workdir, self.seed, self.verbose = workdir, seed, verbose
        self.failures = 0

    def run(self, *args):
        if args[0] == "logits":  # the forward pass's arithmetic: the exact cache, whatever `auto` stores for the file
            args += ("--kv-cache-dtype", "f32")
        proc = subprocess.run(self.cmd + list(args), capture_output=True, text=True, timeout=300)
        if proc.returncode != 0 or self.verbose:
            sys.stderr.write(f"$ {' '.join(self.cmd + list(args))}\n{proc.stdout}{proc.stderr}")
        if proc.returncode != 0:
            raise RuntimeError(f"exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-300:]}")

    def make(self, arch, storage, tag="", extra=()):
        out = storage.out_path(self.workdir, arch, tag)
        if os.path.isdir(out):
            shutil.rmtree(out)
        elif os.path.exists(out):
            os.remove(out)
        self.run("make-model", "--arch", arch, "--preset", "tiny", "--format", storage.fmt,
                 *storage.flags, "--seed", str(self.seed), *extra, "-o", out)
        return out

    def logits(self, model_path, extra=(), tag=""):
        npy = (model_path[:-5] if model_path.endswith(".gguf") else model_path) + tag + ".parallm.npy"
        self.run("logits", "-m", model_path, "--prompt-ids", ",".join(map(str, PROMPT_IDS)), "-o", npy, *extra)
        return np.load(npy)

    def report(self, arch, what, cmp=None, error=None, note="", passed=None):
        """One line per case: a Comparison, an error (FAIL), or passed=<text> (PASS)."""
        ok = (cmp is not None and cmp.ok or passed is not None) and error is None
        self.failures += 0 if ok else 1
        detail = error if error is not None else passed if passed is not None else cmp.describe()
        print(f"{arch:8s} {what:30s} {detail} {note}{'PASS' if ok else 'FAIL'}", flush=True)


def check_storage(r, arch, storage, tag="", extra=()):
    """One case: parallm and the reference on one file. Returns (path, parallm, reference) logits."""
    try:
        path = r.make(arch, storage, tag, extra)
        got = r.logits(path)
        ref = forward.forward(forward.load_model(path), PROMPT_IDS)
    except Exception as e:  # noqa: BLE001 - any failure of one case is reported, the rest go on
        r.report(arch, storage.name + tag, error=f"error: {e}")
        return None
    if arch in MOE_ARCHS and storage.tol is QUANT_TOL:
        # Quantized MoE: positions routed through a near-tie are left out (see MOE_NEAR_TIE).
        margins = moe.routing_margins(forward.load_model(path), PROMPT_IDS)[1:]
        keep = ~np.any(margins < MOE_NEAR_TIE, axis=0) if len(margins) else np.ones(len(PROMPT_IDS), bool)
        if keep.sum() < MOE_MIN_KEPT:
            r.report(arch, storage.name + tag, error=f"error: only {keep.sum()} positions without near-ties")
        else:
            r.report(arch, storage.name + tag, compare(ref[keep], got[keep], storage.tol),
                     note=f"({len(keep) - keep.sum()} near-tie positions left out) ")
        return path, got, ref
    r.report(arch, storage.name + tag, compare(ref, got, storage.tol))
    return path, got, ref


def check_same_weights(r, arch, results, tag=""):
    """GGUF F32 and HF F32 of one seed hold the same weights in two layouts."""
    g, h = results.get("gguf-f32"), results.get("hf-f32")
    if g is None and h is None:
        return  # neither side selected (or both already reported as errors)
    if g is None or h is None:
        r.report(arch, f"gguf-f32=hf-f32{tag}", error="error: a side is missing")
        return
    r.report(arch, f"gguf-f32=hf-f32{tag} parallm", compare(h[1], g[1], SAME_WEIGHTS_TOL))
    r.report(arch, f"gguf-f32=hf-f32{tag} ref", compare(h[2], g[2], REFERENCE_SAME_TOL))


def check_rope_scaling(r, storages):
    """Llama-3 RoPE scaling: the GGUF stores it as rope_freqs.weight, the folders as config
    rope_scaling. First make sure the case can fail: the scaling must move the reference's logits
    well beyond the float bound, or a parallm that ignores it would pass."""
    arch, tag, extra = "llama", "+rope3", ("--rope-scaling", "llama3")
    results = {}
    for s in storages:
        res = check_storage(r, arch, s, tag, extra)
        if res is not None:
            results[s.name] = res
    if "hf-f32" in results:
        path, _, ref = results["hf-f32"]
        model = forward.load_model(path)
        if model.config.inv_freq is None:
            r.report(arch, "rope3 present", error="error: HF config has no llama3 rope_scaling")
        else:
            model.config.inv_freq = None
            unscaled = forward.forward(model, PROMPT_IDS)
            cmp = compare(ref, unscaled, Tolerance(rel=10 * FLOAT_TOL.rel, rms_rel=1.0,
                                                   min_argmax_agree=0.0))
            # here "ok" would mean the scaling is invisible: the case is sound when it is NOT ok
            sound = dataclasses.replace(cmp, ok=not cmp.ok)
            r.report(arch, "rope3 sensitivity", sound,
                     note="(scaling must move the logits beyond tol) ")
    check_same_weights(r, arch, results, tag)


def check_sensitivity(r, arch, label, path, ref, mutations):
    """Each mutation (name, fn(model)) drops or misapplies one feature of the model at `path`; the
    reference's logits must then move beyond SENSITIVITY_TOL, or a parallm that made that mistake
    would pass this case."""
    for name, mutate in mutations:
        model = forward.load_model(path)
        try:
            mutate(model)
            moved = forward.forward(model, PROMPT_IDS)
        except Exception as e:  # noqa: BLE001
            r.report(arch, f"{label} vs {name}", error=f"error: {e}")
            continue
        cmp = compare(ref, moved, SENSITIVITY_TOL)
        # here "ok" would mean the feature is invisible: the case is sound when it is NOT ok
        r.report(arch, f"{label} vs {name}", dataclasses.replace(cmp, ok=not cmp.ok),
                 note="(must move the logits beyond tol) ")


def _set_layers(**fields):
    def mutate(model):
        for L in model.layers:
            for k, v in fields.items():
                setattr(L, k, v)
    return mutate


def _set_config(**fields):
    def mutate(model):
        for k, v in fields.items():
            setattr(model.config, k, v)
    return mutate


def _norms_unshifted(model):
    """Gemma's RMSNorm multiplies by 1 + w: use w instead (a plain-RMSNorm reading of HF weights)."""
    for L in model.layers:
        for k in ("attn_norm", "ffn_norm", "post_attn_norm", "post_ffn_norm", "q_norm", "k_norm"):
            if getattr(L, k) is not None:
                setattr(L, k, getattr(L, k) - 1.0)
    model.out_norm = model.out_norm - 1.0


def _short_for_long(model):
    model.config.inv_freq = model.config.inv_freq_long


def _moe_layers(**fields):
    def mutate(model):
        for L in model.layers:
            if L.moe is not None:
                for k, v in fields.items():
                    setattr(L.moe, k, v)
    return mutate


def _moe_flip_norm(model):
    for L in model.layers:
        if L.moe is not None:
            L.moe.norm_topk = not L.moe.norm_topk


def _drop_dense_mlps(model):
    """The dense layers of a mixture (decoder_sparse_step, mlp_only_layers) contribute nothing."""
    for L in model.layers:
        if L.moe is None:
            L.w_down = np.zeros_like(L.w_down)


PLAIN_MUTATIONS = {
    "qwen2moe": [("no shared expert", _moe_layers(shared_gate=None)), ("renormalised top-k", _moe_flip_norm),
                 ("top-1", _moe_layers(top_k=1))],
    "qwen3moe": [("not renormalised", _moe_flip_norm), ("top-1", _moe_layers(top_k=1))],
    "mixtral": [("not renormalised", _moe_flip_norm), ("top-1", _moe_layers(top_k=1))],
    "gemma": [("norms w not 1+w", _norms_unshifted), ("no embed scale", _set_config(embed_scale=1.0))],
    "gemma2": [("no post-norms", _set_layers(post_attn_norm=None, post_ffn_norm=None)),
               ("no soft-caps", _set_config(attn_softcap=0.0, final_softcap=0.0))],
    "gemma3": [("no q/k norms", _set_layers(q_norm=None, k_norm=None)),
               ("attn scale 1/sqrt(256)", _set_config(attn_scale=256 ** -0.5))],
}
NO_WINDOW = ("no window", _set_layers(window=0))
LONGROPE_NONE = ("no scaling", _set_config(inv_freq=None, inv_freq_long=None, rope_mscale=1.0))
NO_ATTN_FACTOR = ("no attention factor", _set_config(rope_mscale=1.0))
# (arch, label tag, make-model flags, mutations that must show)
TRAPS = [
    ("gemma2", "window5", ("--sliding-window", "5"),
     [NO_WINDOW, ("window on every layer", _set_layers(window=5))]),
    ("gemma3", "window5", ARCH_FLAGS["gemma3"] + ("--sliding-window", "5"),
     [NO_WINDOW, ("window on every layer", _set_layers(window=5)),
      ("one rope base", _set_layers(inv_freq=None))]),
    ("phi3", "window5", ("--sliding-window", "5"), [NO_WINDOW]),
    ("mistral", "window5", ("--sliding-window", "5"), [NO_WINDOW]),
    ("gemma2", "softcap", ("--attn-softcap", "2", "--final-softcap", "3"),
     [("no attn softcap", _set_config(attn_softcap=0.0)), ("no final softcap", _set_config(final_softcap=0.0))]),
    ("phi3", "longrope8", ("--rope-scaling", "longrope", "--original-context", "8"),
     [("short factors", _set_config(inv_freq_long=None)), LONGROPE_NONE, NO_ATTN_FACTOR]),
    ("phi3", "longrope64", ("--rope-scaling", "longrope", "--original-context", "64"),
     [("long factors", _short_for_long), LONGROPE_NONE, NO_ATTN_FACTOR]),
    ("phi3", "rotary75", ("--partial-rotary", "0.75"), [("full rotary", _set_config(n_rot=0, inv_freq=None))]),
    # Mixtures with dense layers: layer 0 dense (every 2nd layer sparse), layer 1 dense (mlp_only_layers); GGUF says
    # which by the tensors present, HF by config.json.
    ("qwen2moe", "sparse-step2", ("--decoder-sparse-step", "2"),
     [("dense MLP dropped", _drop_dense_mlps), ("top-1", _moe_layers(top_k=1))]),
    ("qwen3moe", "mlp-only1", ("--mlp-only-layers", "1"),
     [("dense MLP dropped", _drop_dense_mlps), ("top-1", _moe_layers(top_k=1))]),
]


def check_traps(r, wanted):
    for arch, tag, flags, mutations in TRAPS:
        if not wanted(f"{arch}-{tag}"):
            continue
        results = {}
        for s in TRAP_STORAGES:
            res = check_storage(r, arch, s, "+" + tag, flags)
            if res is not None:
                results[s.name] = res
        if "hf-f32" in results:
            path, _, ref = results["hf-f32"]
            check_sensitivity(r, arch, tag, path, ref, mutations)
        check_same_weights(r, arch, results, "+" + tag)


def check_gemma3_linear(r, wanted):
    """Gemma 3's linear RoPE scaling (the 4B..27B configs: factor 8) divides the global layers'
    frequencies only. make-model has no flag for it: the HF folder's config.json is edited."""
    arch, tag = "gemma3", "linear8"
    if not wanted(f"{arch}-{tag}"):
        return
    s = BY_NAME["hf-f32"]
    try:
        path = r.make(arch, s, "+" + tag, ARCH_FLAGS[arch] + ("--sliding-window", "5"))
        with open(os.path.join(path, "config.json")) as f:
            config = json.load(f)
        config["rope_scaling"] = {"rope_type": "linear", "factor": 8.0}
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(config, f, indent=1)
        got = r.logits(path)
        ref = forward.forward(forward.load_model(path), PROMPT_IDS)
    except Exception as e:  # noqa: BLE001
        r.report(arch, f"{s.name}+{tag}", error=f"error: {e}")
        return
    r.report(arch, f"{s.name}+{tag}", compare(ref, got, s.tol))

    def on_every_layer(model):
        for L in model.layers:
            L.inv_freq = L.inv_freq / 8.0 if L.inv_freq is not None else None

    check_sensitivity(r, arch, tag, path, ref, [
        ("unscaled", lambda m: setattr(m.config, "inv_freq", m.config.inv_freq * 8.0)),
        ("scaled on every layer", on_every_layer)])


# (arch, config.json change, the field the error must name): fields neither side can honour.
FIELD_ERRORS = [
    ("gemma", {"hidden_activation": "relu"}, "hidden_activation"),
    ("gemma2", {"hidden_activation": "gelu"}, "hidden_activation"),
    ("phi3", {"hidden_act": "gelu"}, "hidden_act"),
    ("phi3", {"rope_scaling": {"type": "no-such-scaling", "factor": 4.0}}, "rope_scaling"),
    ("gemma3", {"rope_scaling": {"rope_type": "no-such-scaling", "factor": 2.0}}, "rope_scaling"),
]


def check_field_errors(r, wanted):
    """A config.json field that cannot be honoured must stop the load with an error naming it, in
    parallm and in the reference alike (never a silently different model)."""
    for i, (arch, change, field) in enumerate(FIELD_ERRORS):
        label = f"{arch}-errors"
        if not wanted(label):
            continue
        what = f"errors {field}={json.dumps(list(change.values())[0])[:24]}"
        try:
            path = r.make(arch, BY_NAME["hf-f32"], f"+err{i}", ARCH_FLAGS.get(arch, ()))
            with open(os.path.join(path, "config.json")) as f:
                config = json.load(f)
            config.update(change)
            with open(os.path.join(path, "config.json"), "w") as f:
                json.dump(config, f, indent=1)
            proc = subprocess.run(r.cmd + ["logits", "-m", path, "--prompt-ids", "1,2,3", "-o",
                                           path + ".npy"], capture_output=True, text=True, timeout=300)
            try:
                forward.load_model(path)
                ref_msg = ""
            except ValueError as e:
                ref_msg = str(e)
        except Exception as e:  # noqa: BLE001
            r.report(arch, what, error=f"error: {e}")
            continue
        msg = (proc.stderr + proc.stdout).strip().splitlines()
        msg = msg[-1] if msg else ""
        problems = []
        if proc.returncode == 0 or field not in msg:
            problems.append(f"parallm exit {proc.returncode}, message {msg[-120:]!r}")
        if field not in ref_msg:
            problems.append(f"reference: {ref_msg[-120:]!r}")
        r.report(arch, what, error=("error: " + "; ".join(problems)) if problems else None,
                 passed=f"both refuse; parallm: {msg[-100:]!r} ")


# LoRA adapters (label ARCH-lora-FORMAT-...): (arch, base storage, adapter format, rank, targets,
# extra make-model flags). Two ranks, attention-only and attention + MLP target sets, every format,
# on a llama GGUF base (interleaved q/k rows: the PEFT/mlx adapters' rows must be re-paired) and HF
# bases; qwen3 adds q/k norms after the adapted projections.
LORA_CASES = [
    ("llama", "gguf-f32", "peft", 4, "q,k,v,o", ()),
    ("llama", "hf-f32", "mlx", 8, "q,k,v,o,gate,up,down", ("--lora-layers", "1")),
    ("llama", "gguf-f32", "gguf", 8, "q,v,gate,up,down", ()),
    ("llama", "hf-f32", "gguf", 4, "q,k,v,o", ()),
    ("qwen2", "hf-f32", "peft", 8, "q,k,v,o,gate,up,down", ("--rslora",)),
    ("qwen3", "gguf-f32", "mlx", 4, "k,o,down", ()),
]


def check_lora(r, wanted):
    """parallm's logits with --adapter-path against the reference with the adapter added to the
    weights (lora_np.py); each case first proves the adapter moves the logits beyond the bound."""
    for i, (arch, storage_name, fmt, rank, targets, flags) in enumerate(LORA_CASES):
        label = f"{arch}-lora-{fmt}-r{rank}-{targets.replace(',', '')}"
        if not wanted(label):
            continue
        s = BY_NAME[storage_name]
        what = f"{storage_name}+lora-{fmt}-r{rank} {targets}"
        try:
            base = r.make(arch, s, "+lora", ARCH_FLAGS.get(arch, ()))
            adapter = os.path.join(r.workdir, f"{arch}-adapter{i}-{fmt}" + (".gguf" if fmt == "gguf" else ""))
            if os.path.isdir(adapter):
                shutil.rmtree(adapter)
            r.run("make-model", "--arch", arch, "--preset", "tiny", *ARCH_FLAGS.get(arch, ()), "--seed",
                  str(r.seed + 100 + i), "--lora", fmt, "--lora-rank", str(rank), "--lora-targets", targets,
                  *flags, "-o", adapter)
            got = r.logits(base, ("--adapter-path", adapter), f"+adapter{i}")
            plain = forward.forward(forward.load_model(base), PROMPT_IDS)
            ref = forward.forward(lora_np.apply_adapter(forward.load_model(base), adapter), PROMPT_IDS)
        except Exception as e:  # noqa: BLE001
            r.report(arch, what, error=f"error: {e}")
            continue
        r.report(arch, what, compare(ref, got, s.tol))
        cmp = compare(ref, plain, SENSITIVITY_TOL)
        r.report(arch, f"lora-{fmt}-r{rank} vs base", dataclasses.replace(cmp, ok=not cmp.ok),
                 note="(must move the logits beyond tol) ")


def check_lora_fuse(r, wanted):
    """`parallm convert --adapter` (mlx_lm.fuse) equals the adapter applied at run time: to the float
    bound when the fused model is F32, to the quantized bound when it is written as Q8_0 (the fused
    weights' own rounding)."""
    arch = "llama"
    if not wanted(f"{arch}-lora-fuse"):
        return
    try:
        base = r.make(arch, BY_NAME["gguf-f32"], "+fusebase")  # a GGUF carries the vocabulary convert needs
        adapter = os.path.join(r.workdir, f"{arch}-fuse-adapter")
        if os.path.isdir(adapter):
            shutil.rmtree(adapter)
        r.run("make-model", "--arch", arch, "--preset", "tiny", "--seed", str(r.seed + 200), "--lora", "peft",
              "--lora-rank", "8", "--lora-targets", "q,k,v,o,gate,up,down", "-o", adapter)
        runtime = r.logits(base, ("--adapter-path", adapter), "+fuseadapter")
    except Exception as e:  # noqa: BLE001
        r.report(arch, "lora fuse", error=f"error: {e}")
        return
    for to, dtype, tol in (("hf", "f32", FLOAT_TOL), ("gguf", "q8_0", QUANT_TOL)):
        what = f"fused {to}-{dtype} = runtime"
        try:
            out = os.path.join(r.workdir, f"{arch}-fused-{dtype}" + (".gguf" if to == "gguf" else ""))
            if os.path.isdir(out):
                shutil.rmtree(out)
            r.run("convert", base, "--adapter", adapter, "--to", to, "--dtype", dtype, "-o", out)
            fused = r.logits(out)
        except Exception as e:  # noqa: BLE001
            r.report(arch, what, error=f"error: {e}")
            continue
        r.report(arch, what, compare(runtime, fused, tol))


NEMOTRON_IDS = [1, 17, 42, 99, 256, 3, 500, 77, 128, 311, 64, 9, 5, 400, 222, 13, 87, 150, 33, 460,
                 2, 71, 305, 18, 490, 66, 240, 11, 199, 58, 377, 420, 6, 145, 92, 265, 31, 508, 119, 44]


def _nemotron_config(**fields):
    def mutate(model):
        for k, v in fields.items():
            setattr(model.config, k, v)
    return mutate


def _nemotron_no_d(model):
    for L in model.layers:
        if L.kind == "M":
            L.w["D"] = np.zeros_like(L.w["D"])


def _nemotron_no_bias(model):
    for L in model.layers:
        if L.kind == "E":
            L.w.pop("gate.e_score_correction_bias", None)


NEMOTRON_MUTATIONS = [("D = 0", _nemotron_no_d), ("norm not grouped", _nemotron_config(norm_grouped=False)),
                      ("norm before gate", _nemotron_config(norm_before_gate=True)),
                      ("no correction bias", _nemotron_no_bias), ("no routed scaling", _nemotron_config(routed_scaling=1.0))]


def _nemotron_a_as_log(model):
    for L in model.layers:
        if L.kind == "M":
            L.w["A"] = -np.exp(L.w["A"])


# GGUF holds MLP layers or experts, not both (llama.cpp's nemotron_h / nemotron_h_moe): a pattern of each.
NEMOTRON_GGUF = [(BY_NAME["gguf-f32"], "ME*MEM"), (BY_NAME["gguf-q8_0"], "M*M-M-")]


def check_chunked_logits(r, arch, what, path, ids, chunk, ref, tol):
    """parallm's logits for `ids` with prefill chunks of `chunk` tokens (0: the whole prompt at once) against `ref`."""
    try:
        npy = f"{path}.chunk{chunk}.parallm.npy"
        r.run("logits", "-m", path, "--prompt-ids", ids, "--chunk", str(chunk), "-o", npy)
        r.report(arch, what, compare(ref, np.load(npy), tol))
    except Exception as e:  # noqa: BLE001
        r.report(arch, what, error=f"error: {e}")


def check_nemotron_gguf(r, wanted):
    """llama.cpp's nemotron_h_moe in F32 (whole and in chunks of 7) and nemotron_h in Q8_0 (a dense pattern: no
    routing to flip under the int8 activation rounding), and that A's encoding shows (GGUF stores A, not A_log)."""
    arch = "nemotronh"
    ids = ",".join(map(str, NEMOTRON_IDS))
    for s, pattern in NEMOTRON_GGUF:
        if not wanted(f"{arch}-{s.name}"):
            continue
        try:
            path = r.make(arch, s, extra=("--pattern", pattern))
            ref = forward.forward(forward.load_model(path), NEMOTRON_IDS)
        except Exception as e:  # noqa: BLE001
            r.report(arch, s.name, error=f"error: {e}")
            continue
        for chunk in ((0, 7) if s.tol is FLOAT_TOL else (16,)):
            check_chunked_logits(r, arch, f"{s.name} {pattern} chunk {chunk or 'all'}", path, ids, chunk, ref, s.tol)
        if s.tol is FLOAT_TOL:
            what = f"{s.name} convert to hf-f32"   # parallm convert: A back to A_log, the experts one by one
            try:
                out = path[:-5] + "-converted-hf"
                if os.path.isdir(out):
                    shutil.rmtree(out)
                r.run("convert", path, "--to", "hf", "-o", out)
                npy = f"{out}.parallm.npy"
                r.run("logits", "-m", out, "--prompt-ids", ids, "-o", npy)
                r.report(arch, what, compare(ref, np.load(npy), s.tol))
            except Exception as e:  # noqa: BLE001
                r.report(arch, what, error=f"error: {e}")
            moved_model = forward.load_model(path)
            _nemotron_a_as_log(moved_model)
            cmp = compare(ref, forward.forward(moved_model, NEMOTRON_IDS), SENSITIVITY_TOL)
            r.report(arch, f"{s.name} vs A read as A_log", dataclasses.replace(cmp, ok=not cmp.ok),
                     note="(must move the logits beyond tol) ")


def check_nemotron(r, wanted):
    """The hybrid Nemotron-H: logits whole and in prefill chunks, greedy ids, and the mutations that must show."""
    arch = "nemotronh"
    ids = ",".join(map(str, NEMOTRON_IDS))
    check_nemotron_gguf(r, wanted)
    for s in (BY_NAME["hf-f32"], BY_NAME["hf-bf16"], BY_NAME["mlx-4bit"], BY_NAME["mlx-8bit"]):
        if not wanted(f"{arch}-{s.name}"):
            continue
        try:
            path = r.make(arch, s)
            if s.tol is QUANT_TOL:
                # Quantized: every token routed to all 8 experts (config.json edited), so that no choice can flip
                # under the int8 activation rounding. Unlike attention-only models, a flip at one position does not
                # stay there: the Mamba state carries it into every later position, so near-tie positions cannot
                # simply be left out. The float cases check the routing itself.
                with open(os.path.join(path, "config.json")) as f:
                    config = json.load(f)
                config.update(num_experts_per_tok=config["n_routed_experts"], topk_group=config["n_group"])
                with open(os.path.join(path, "config.json"), "w") as f:
                    json.dump(config, f, indent=1)
            model = forward.load_model(path)
            ref = forward.forward(model, NEMOTRON_IDS)
        except Exception as e:  # noqa: BLE001
            r.report(arch, s.name, error=f"error: {e}")
            continue
        for chunk in ((0, 16, 7) if s.tol is FLOAT_TOL else (16,)):
            what = f"{s.name} chunk {chunk or 'all'}" + (" dense routing" if s.tol is QUANT_TOL else "")
            check_chunked_logits(r, arch, what, path, ids, chunk, ref, s.tol)
        if s.name != "hf-f32":
            continue
        try:
            want = forward.greedy(model, NEMOTRON_IDS[:20], 12)
            proc = subprocess.run(r.cmd + ["generate", "-m", path, "--prompt-ids", ",".join(map(str, NEMOTRON_IDS[:20])),
                                           "-n", "12", "--temp", "0", "--ignore-eos", "--json"],
                                  capture_output=True, text=True, timeout=300)
            got = json.loads(proc.stdout.strip().splitlines()[-1])["ids"] if proc.returncode == 0 else None
            r.report(arch, f"{s.name} greedy 12", error=None if got == want else f"error: parallm {got} reference {want}",
                     passed=f"ids {got} ")
        except Exception as e:  # noqa: BLE001
            r.report(arch, f"{s.name} greedy 12", error=f"error: {e}")
        for name, mutate in NEMOTRON_MUTATIONS:
            moved_model = forward.load_model(path)
            mutate(moved_model)
            cmp = compare(ref, forward.forward(moved_model, NEMOTRON_IDS), SENSITIVITY_TOL)
            r.report(arch, f"{s.name} vs {name}", dataclasses.replace(cmp, ok=not cmp.ok),
                     note="(must move the logits beyond tol) ")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parallm", required=True, help="parallm binary (or fake_parallm.py)")
    ap.add_argument("--workdir", required=True, help="scratch folder for models and logits")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--only", default="",
                    help="comma-separated substrings of case labels ARCH-STORAGE, ARCH-same, llama-rope, "
                         "ARCH-TRAP (gemma2-window5, gemma2-softcap, phi3-longrope8, ...), ARCH-errors, "
                         "ARCH-lora")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    parallm = os.path.abspath(args.parallm)
    if not (os.path.isfile(parallm) and (parallm.endswith(".py") or os.access(parallm, os.X_OK))):
        print(f"FAILED: {args.parallm} is not an executable file (build the parallm target first)")
        return 2
    os.makedirs(args.workdir, exist_ok=True)
    r = Runner(parallm, args.workdir, args.seed, args.verbose)
    only = [s for s in args.only.split(",") if s]

    def wanted(label):
        return not only or any(o in label for o in only)

    start = time.time()
    for arch in ARCHS + FAMILY_ARCHS + MOE_ARCHS:
        results = {}
        storages = STORAGES if arch in ARCHS else MOE_STORAGES if arch in MOE_ARCHS else FAMILY_STORAGES
        for s in storages:
            if wanted(f"{arch}-{s.name}"):
                res = check_storage(r, arch, s, extra=ARCH_FLAGS.get(arch, ()))
                if res is not None:
                    results[s.name] = res
        if wanted(f"{arch}-same"):
            check_same_weights(r, arch, results)
        if arch in PLAIN_MUTATIONS and "hf-f32" in results:
            path, _, ref = results["hf-f32"]
            check_sensitivity(r, arch, "hf-f32", path, ref, PLAIN_MUTATIONS[arch])
    if wanted("llama-rope"):
        check_rope_scaling(r, [BY_NAME[n] for n in ("gguf-f32", "hf-f32", "gguf-q8_0", "mlx-8bit")])
    check_traps(r, wanted)
    check_gemma3_linear(r, wanted)
    check_field_errors(r, wanted)
    check_lora(r, wanted)
    check_lora_fuse(r, wanted)
    check_nemotron(r, wanted)
    print(f"{'FAILED' if r.failures else 'OK'}: {r.failures} failing case(s), "
          f"{time.time() - start:.1f}s", flush=True)
    return 1 if r.failures else 0


if __name__ == "__main__":
    sys.exit(main())
