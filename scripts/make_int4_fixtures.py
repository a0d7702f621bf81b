#!/usr/bin/env python3
"""Make the 4-bit fixtures: tiny-a / tiny-b (scripts/make_fixtures.py) quantised round-to-nearest and
written in each 4-bit format's exact packing, with HF's fp32 logits on the DEQUANTISED weights (the
truth a reader of the format must reproduce).

    pip install -r scripts/requirements-fixtures.txt compressed-tensors==0.20.1
    python scripts/make_int4_fixtures.py

Writes fixtures/<name>/{config.json, model.safetensors, hf_reference.safetensors} for

    name                   base    format                              recipe       group  zero points
    tiny-a-gptq            tiny-a  GPTQ v1 (checkpoint_format gptq)    experts      16     symmetric (stored 7)
    tiny-b-gptq-actorder   tiny-b  GPTQ v1, desc_act, shuffled g_idx   all-linear   8      asymmetric (stored z - 1)
    tiny-a-awq             tiny-a  AWQ GEMM (interleaved nibbles)      all-linear   16     asymmetric
    tiny-b-ct              tiny-b  compressed-tensors pack-quantized   experts      8      symmetric (no zero points)

"experts": the routed experts' gate/up/down (per expert, as GPTQ/AWQ/llm-compressor write them even
where the bf16 checkpoint fuses them); "all-linear": those, the shared expert, the GDN in_proj_qkv,
in_proj_z, out_proj and attention q/k/v/o_proj. Everything else (embeddings, lm_head, router,
shared_expert_gate, in_proj_a/b, conv1d, norms, A_log, dt_bias, mtp.*) is the base checkpoint's.
Groups are small because the tiny widths are (24..128 input columns), so each matrix spans 2..16
groups.

The quantiser is GPTQ's without calibration: per row and group the range is widened to include 0;
symmetric s = 2 max|w| / 15, z = 8; asymmetric s = (max - min) / 15, z = round(-min / s); q =
clamp(round(w / s) + z, 0, 15); s is rounded to the format's scale dtype (f16 for GPTQ/AWQ, bf16
for compressed-tensors) before q is computed, and the dequantised weight is (q - z) * s in fp32.
GPTQ v1 stores z - 1 in four bits, so a zero point of 0 is stored as 15 and read back as 16 by
every v1 reader (exllama, vLLM): the reference uses what the file means (z = stored + 1).
The act-order fixture assigns input columns to groups through a seeded shuffle (g_idx[i] =
position of i in the shuffle // group), as GPTQ's desc_act does with its Hessian order.

Each packing is checked against an independent reader before the reference is computed: GPTQ's and
AWQ's as vLLM's tests unpack them (AWQ's reverse order [0, 4, 1, 5, 2, 6, 3, 7]); compressed-tensors'
is packed and unpacked by the compressed-tensors library itself. hf_reference.safetensors holds
`tokens` I64 [T] and `logits` F32 [T, vocab] from one fp32 forward (as fixtures/README.md describes
for tiny-a/tiny-b), and HF's cached path is checked against it.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402
import make_fp8_fixture  # noqa: E402

EXPERTS = ("gate_proj.weight", "up_proj.weight", "down_proj.weight")
LINEAR = (
    "linear_attn.in_proj_qkv.weight", "linear_attn.in_proj_z.weight", "linear_attn.out_proj.weight",
    "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
)  # fmt: skip

FIXTURES = {
    "tiny-a-gptq": dict(base="tiny-a", fmt="gptq", recipe="experts", group=16, sym=True, act_order=False, seed=41),
    "tiny-b-gptq-actorder": dict(base="tiny-b", fmt="gptq", recipe="all", group=8, sym=False, act_order=True, seed=42),
    "tiny-a-awq": dict(base="tiny-a", fmt="awq", recipe="all", group=16, sym=False, act_order=False, seed=43),
    "tiny-b-ct": dict(base="tiny-b", fmt="ct", recipe="experts", group=8, sym=True, act_order=False, seed=44),
}
SCALE_DTYPE = {"gptq": torch.float16, "awq": torch.float16, "ct": torch.bfloat16}
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # AutoAWQ's pack order: nibble k holds output 8o + AWQ_ORDER[k]
AWQ_REVERSE_ORDER = [0, 4, 1, 5, 2, 6, 3, 7]  # vLLM's unpack: output 8o + k sits in nibble AWQ_REVERSE_ORDER[k]


def is_quantised(name: str, recipe: str) -> bool:
    if not name.startswith("model.language_model.layers."):
        return False
    if ".mlp.experts." in name:
        return name.endswith(EXPERTS)
    if recipe == "all":
        return name.endswith(LINEAR) or (".mlp.shared_expert." in name and name.endswith(EXPERTS))
    return False


# ---------------------------------------------------------------------------------------------
# Quantiser (GPTQ's, round-to-nearest) and the packings
# ---------------------------------------------------------------------------------------------


def quantise(w: torch.Tensor, g_idx: torch.Tensor, groups: int, sym: bool, sdtype: torch.dtype):
    """w [out, in] -> q [out, in] int 0..15, s [out, G] (sdtype), z [out, G] int 0..15."""
    out, _ = w.shape
    s = torch.zeros(out, groups)
    z = torch.zeros(out, groups, dtype=torch.int64)
    q = torch.zeros_like(w, dtype=torch.int64)
    for g in range(groups):
        cols = (g_idx == g).nonzero().flatten()
        x = w[:, cols].double()
        xmin = x.min(dim=1).values.clamp(max=0)
        xmax = x.max(dim=1).values.clamp(min=0)
        if sym:
            xmax = torch.maximum(-xmin, xmax)
            scale = 2 * xmax / 15
            zero = torch.full((out,), 8, dtype=torch.int64)
        else:
            scale = (xmax - xmin) / 15
            zero = torch.where(scale > 0, (-xmin / scale.clamp(min=1e-30)).round(), torch.full_like(scale, 8)).long()
        scale = torch.where(scale > 0, scale, torch.ones_like(scale)).to(sdtype).float()  # rounded as stored
        q[:, cols] = ((w[:, cols] / scale[:, None]).round() + zero[:, None]).clamp(0, 15).long()
        s[:, g], z[:, g] = scale, zero.clamp(0, 15)
    return q, s.to(sdtype), z


def dequantise(q, s, z, g_idx) -> torch.Tensor:
    return (q - z[:, g_idx]).float() * s.float()[:, g_idx]


def pack_rows(v: torch.Tensor) -> torch.Tensor:
    """[n, m] ints 0..15 -> [n / 8, m] int32: word (i, j) holds v[8i + k, j] in nibble k."""
    v = v.to(torch.int64)
    words = sum(v[k::8] << (4 * k) for k in range(8))
    return (words - ((words >> 31) << 32)).to(torch.int32)  # the same 32 bits, as a signed int32


def pack_gptq(q, s, z, g_idx, zero_minus_one: bool) -> dict[str, torch.Tensor]:
    zs = (z - 1) & 0xF if zero_minus_one else z
    return {
        "qweight": pack_rows(q.t()),  # [in/8, out]
        "qzeros": pack_rows(zs).t().contiguous(),  # [G, out/8]
        "scales": s.t().contiguous(),  # [G, out]
        "g_idx": g_idx.to(torch.int32),
    }


def read_gptq(t: dict, zero_plus_one: bool) -> torch.Tensor:
    """AutoGPTQ's torch dequantisation (what exllama's and vLLM's GPTQ kernels compute)."""
    shifts = torch.arange(0, 32, 4, dtype=torch.int32)
    qw, qz = t["qweight"], t["qzeros"]
    q = ((qw[:, None, :] >> shifts[None, :, None]) & 0xF).reshape(-1, qw.shape[1])  # [in, out]
    z = ((qz[:, :, None] >> shifts[None, None, :]) & 0xF).reshape(qz.shape[0], -1)  # [G, out]
    z = z + (1 if zero_plus_one else 0)
    g = t["g_idx"].long()
    return ((q - z[g]).float() * t["scales"].float()[g]).t()


def pack_awq(q, s, z) -> dict[str, torch.Tensor]:
    def pack(v):  # [n, out] -> [n, out/8], nibble k = output 8o + AWQ_ORDER[k]
        v = v.to(torch.int64)
        words = sum(v[:, AWQ_ORDER[k] :: 8] << (4 * k) for k in range(8))
        return (words - ((words >> 31) << 32)).to(torch.int32)

    return {"qweight": pack(q.t()), "qzeros": pack(z.t()), "scales": s.t().contiguous()}


def read_awq(t: dict, group: int) -> torch.Tensor:
    """vLLM's tests' awq_dequantize_torch: unpack along the output, undo the order, (q - z) * s."""

    def unpack(words):
        w = words.to(torch.int64) & 0xFFFFFFFF
        v = torch.stack([(w >> (4 * k)) & 0xF for k in range(8)], dim=-1).reshape(words.shape[0], -1)
        order = torch.arange(v.shape[1]).view(-1, 8)[:, AWQ_REVERSE_ORDER].reshape(-1)
        return v[:, order]

    q, z = unpack(t["qweight"]), unpack(t["qzeros"])  # [in, out], [G, out]
    z = z.repeat_interleave(group, dim=0)
    s = t["scales"].float().repeat_interleave(group, dim=0)
    return ((q - z).float() * s).t()


def ct_scheme(group: int, sym: bool):
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme

    args = QuantizationArgs(num_bits=4, type="int", symmetric=sym, strategy="group", group_size=group)
    return QuantizationScheme(targets=["Linear"], weights=args)


def pack_ct(q, s, z, scheme) -> dict[str, torch.Tensor]:
    """compressed-tensors' own compressor (signed q = q - 8, zero point z - 8)."""
    from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
    from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32

    group = scheme.weights.group_size
    zp = (z - 8).to(torch.int8)
    # the compressor quantises w itself: hand it the dequantised weight so its q is ours exactly
    dq = dequantise(q, s, z, torch.arange(q.shape[1]) // group)
    packed = PackedQuantizationCompressor.compress({"weight": dq, "weight_scale": s, "weight_zero_point": zp}, scheme)
    signed = unpack_from_int32(packed["weight_packed"], 4, packed["weight_shape"])
    assert torch.equal(signed.long(), q - 8), "compressed-tensors packed another q"
    # its own dequantisation returns the scale's dtype (bf16): ours, rounded once more
    back = PackedQuantizationCompressor.decompress(dict(packed), scheme)["weight"]
    assert torch.equal(back, dq.to(back.dtype)), "compressed-tensors dequantises otherwise"
    return {k: v for k, v in packed.items() if k != "weight"}


# ---------------------------------------------------------------------------------------------
# One fixture
# ---------------------------------------------------------------------------------------------


def quantisation_config(spec: dict, ignore: list[str]) -> dict:
    if spec["fmt"] == "gptq":
        return {
            "bits": 4, "group_size": spec["group"], "desc_act": spec["act_order"], "sym": spec["sym"],
            "checkpoint_format": "gptq", "quant_method": "gptq", "true_sequential": True, "damp_percent": 0.01,
            "static_groups": False, "lm_head": False, "dynamic": {"-:.*shared_expert_gate.*": {}},
        }  # fmt: skip
    if spec["fmt"] == "awq":
        return {"bits": 4, "group_size": spec["group"], "zero_point": True, "version": "gemm",
                "quant_method": "awq", "modules_to_not_convert": ignore}  # fmt: skip
    from compressed_tensors.quantization import QuantizationConfig

    cfg = QuantizationConfig(
        config_groups={"group_0": ct_scheme(spec["group"], spec["sym"])},
        format="pack-quantized",
        quantization_status="compressed",
        ignore=ignore,
    )
    return cfg.to_dict()


def make(name: str, spec: dict) -> None:
    base = mf.FIXTURES / spec["base"]
    out = mf.FIXTURES / name
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    base_tensors = {}
    for f in sorted(base.glob("model*.safetensors")):
        with safe_open(str(f), "pt") as sf:
            base_tensors.update({k: sf.get_tensor(k) for k in sf.keys()})
    tensors = mf.split_experts(base_tensors)  # per expert, as the 4-bit packers write them
    gen = torch.Generator().manual_seed(spec["seed"])
    fmt, group = spec["fmt"], spec["group"]
    stored, dequantised, groups_seen = {}, {}, []
    for k in sorted(tensors):
        w = tensors[k]
        if not is_quantised(k, spec["recipe"]):
            stored[k] = w
            continue
        w = w.float()
        n_out, n_in = w.shape
        assert n_in % group == 0 and n_out % 8 == 0, (k, w.shape)
        groups = n_in // group
        if spec["act_order"]:
            g_idx = torch.empty(n_in, dtype=torch.int64)
            g_idx[torch.randperm(n_in, generator=gen)] = torch.arange(n_in) // group
        else:
            g_idx = torch.arange(n_in) // group
        q, s, z = quantise(w, g_idx, groups, spec["sym"], SCALE_DTYPE[fmt])
        module = k[: -len(".weight")]
        if fmt == "gptq":
            parts = pack_gptq(q, s, z, g_idx, zero_minus_one=True)
            dq = read_gptq(parts, zero_plus_one=True)  # what the file means: z = stored + 1
            z_file = ((z - 1) & 0xF) + 1
            assert torch.equal(dq, dequantise(q, s, z_file, g_idx)), k
        elif fmt == "awq":
            parts = pack_awq(q, s, z)
            dq = read_awq(parts, group)
            assert torch.equal(dq, dequantise(q, s, z, g_idx)), k
        else:
            parts = pack_ct(q, s, z, ct_scheme(group, spec["sym"]))
            dq = dequantise(q, s, z, g_idx)
        for p, v in parts.items():
            stored[f"{module}.{p}"] = v.contiguous()
        dequantised[k] = dq
        groups_seen.append(groups)

    # the dequantised fp32 checkpoint, loaded by HF as make_fixtures.py loads its fixtures
    fp32 = {k: dequantised.get(k, v.float() if v.is_floating_point() else v) for k, v in tensors.items()}
    config = json.loads((base / "config.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.json").write_text(json.dumps(config))
        save_file({k: v.contiguous() for k, v in fp32.items()}, str(Path(tmp) / "model.safetensors"))
        model = mf.load_hf(Path(tmp))
    params = dict(model.named_parameters())
    for k, dq in dequantised.items():  # HF holds exactly the dequantised weights
        if ".mlp.experts." in k:
            pre, rest = k.split(".mlp.experts.")
            e, proj = int(rest.split(".")[0]), rest.split(".")[1]
            p = params[f"{pre}.mlp.experts.{'down_proj' if proj == 'down_proj' else 'gate_up_proj'}"][e]
            inter = p.shape[0] // 2
            p = {"gate_proj": p[:inter], "up_proj": p[inter:], "down_proj": p}[proj]
        else:
            p = params[k]
        assert torch.equal(p.detach(), dq), k

    ignore = ["lm_head", "re:.*mlp.gate$", "re:.*shared_expert_gate$", "re:.*in_proj_a$", "re:.*in_proj_b$"]
    if spec["recipe"] == "experts":
        ignore += ["re:.*self_attn.*", "re:.*linear_attn.*", "re:.*shared_expert.*"]
    config["quantization_config"] = quantisation_config(spec, ignore)
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    save_file(stored, str(out / "model.safetensors"), metadata={"format": "pt"})

    # tokens with clear routing on the dequantised model (the base fixture's own if they still are)
    with safe_open(str(base / "hf_reference.safetensors"), "pt") as f:
        tokens = f.get_tensor("tokens")
    rng = np.random.default_rng(spec["seed"])
    vocab = config["text_config"]["vocab_size"]
    for attempt in range(100):
        gap = mf.router_gaps(model, tokens)
        if gap >= mf.ROUTER_MIN_GAP:
            break
        arr = rng.integers(0, vocab - 100, size=mf.T)
        arr[0] = tokens[0].item()
        tokens = torch.from_numpy(arr.astype(np.int64))
    else:
        raise RuntimeError("could not find tokens with clear routing")
    description = f"solo fixture {name}: HF fp32 reference on the dequantised {fmt} weights"
    ref, self_err, meta = make_fp8_fixture.checked_reference(model, tokens, description)
    save_file({"tokens": ref["tokens"], "logits": ref["logits"]}, str(out / "hf_reference.safetensors"), metadata=meta)
    sizes = sum(p.stat().st_size for p in out.iterdir())
    print(f"== {name}: {sizes / 1024:.0f} KiB, {len(dequantised)} 4-bit matrices of {min(groups_seen)}..{max(groups_seen)} "
          f"groups; router gap {gap:.2e} (attempt {attempt + 1}), cached vs single {self_err:.2e}")  # fmt: skip


def main() -> None:
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    for name, spec in FIXTURES.items():
        if sys.argv[1:] and name not in sys.argv[1:]:  # `python scripts/make_int4_fixtures.py tiny-b-ct` makes one
            continue
        torch.manual_seed(spec["seed"])
        make(name, spec)


if __name__ == "__main__":
    main()
