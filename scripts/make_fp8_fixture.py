#!/usr/bin/env python3
"""Make fixtures/tiny-fp8: a tiny random checkpoint in the official FP8 release's format, and HF's
fp32 outputs on its dequantised weights (the truth a reader of the FP8 format must reproduce).

    pip install -r scripts/requirements-fixtures.txt
    python scripts/make_fp8_fixture.py

The format (what `Qwen/Qwen3.6-35B-A3B-FP8` ships): config.json carries
`quantization_config = {quant_method: "fp8", fmt: "e4m3", activation_scheme: "dynamic",
weight_block_size: [128, 128], modules_to_not_convert: [...]}`; each quantised `X.weight` is
F8_E4M3 with a sibling `X.weight_scale_inv` of shape [ceil(out/128), ceil(in/128)] that is a
multiplier: w = q · s of its block. Experts are stored per expert. Quantised: the GDN in_proj_qkv,
in_proj_z, out_proj; attention q/k/v/o_proj; every expert's and the shared expert's gate/up/down.
Kept bf16 (or f32): embeddings, lm_head, router, shared_expert_gate, in_proj_a/b, conv1d, A_log,
dt_bias, norms, mtp.*, the vision tower.

The recipe is the official one: per 128×128 block s = amax / 448 (stored as given by
`SCALE_DTYPE`), q = e4m3(w / s) (round to nearest even, |w / s| ≤ 448). Widths are chosen so that
matrices span several blocks and no width is a multiple of 128 (hidden 160, conv_dim 288, expert
width 136, ...): a reader that ignores the ragged last block, or indexes scales by the wrong dim,
fails. Scales of attention/GDN matrices are stored F32, of the experts BF16 (both occur).

The fp32 model the reference runs holds exactly q · s (the product in f32), so the checkpoint *is*
the model: the script asserts that reading the files back and dequantising gives the model's
parameters bit for bit. The reference is the same as for tiny-a/tiny-b (fixtures/README.md):
one fp32 forward over T tokens, plus HF's cached path checked against it.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402

L, F = mf.L, mf.F
NAME = "tiny-fp8"
FP8_MAX = 448.0
BLOCK = 128

SPEC = dict(
    seed=3003,
    text=dict(
        vocab_size=448,
        hidden_size=160,  # 2 column blocks: 128 + 32
        num_hidden_layers=4,
        layer_types=[L, F, L, L],
        full_attention_interval=4,
        num_attention_heads=2,
        num_key_value_heads=1,  # GQA group 2
        head_dim=80,  # q_proj 2·2·80 = 320 rows (3 blocks), k/v 80 rows; rotary dim 80 · 0.25 = 20
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=32,  # key_dim 64
        linear_value_head_dim=40,  # value_dim 160, conv_dim 288 (3 row blocks)
        linear_conv_kernel_dim=4,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=136,  # 2 blocks each way
        shared_expert_intermediate_size=144,
        rms_norm_eps=1e-6,
        max_position_embeddings=4096,
        rope_parameters=dict(
            rope_type="default",
            rope_theta=10000000.0,
            partial_rotary_factor=0.25,
            mrope_section=[4, 3, 3],  # sums to rotary_dim / 2 = 10
            mrope_interleaved=True,
        ),
    ),
    vision=dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, patch_size=4, temporal_patch_size=2,
                spatial_merge_size=2, num_position_embeddings=16),  # fmt: skip
    experts_layout="per_expert",
    shards=1,
    f32_tensors=("linear_attn.A_log",),
    template_in="file",
)

QUANTISED = (
    "linear_attn.in_proj_qkv.weight", "linear_attn.in_proj_z.weight", "linear_attn.out_proj.weight",
    "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
    "gate_proj.weight", "up_proj.weight", "down_proj.weight",  # routed experts and the shared expert
)  # fmt: skip
NOT_CONVERTED = ["lm_head", "model.language_model.embed_tokens", "mlp.gate", "mlp.shared_expert_gate",
                 "linear_attn.in_proj_a", "linear_attn.in_proj_b", "linear_attn.conv1d", "mtp", "model.visual"]  # fmt: skip


def is_quantised(name: str) -> bool:
    return name.startswith("model.language_model.layers.") and name.endswith(QUANTISED)


def scale_dtype(name: str) -> torch.dtype:
    return torch.bfloat16 if ".mlp." in name else torch.float32


def quantise(w: torch.Tensor, sdtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The official block recipe: (q e4m3 [out, in], s [ceil(out/128), ceil(in/128)], q·s f32)."""
    out_dim, in_dim = w.shape
    rb, cb = -(-out_dim // BLOCK), -(-in_dim // BLOCK)
    pad = torch.zeros(rb * BLOCK, cb * BLOCK)
    pad[:out_dim, :in_dim] = w.float()
    blocks = pad.view(rb, BLOCK, cb, BLOCK)
    amax = blocks.abs().amax(dim=(1, 3)).clamp(min=1e-12)
    s = (amax / FP8_MAX).to(sdtype).float()
    s_full = s.repeat_interleave(BLOCK, 0).repeat_interleave(BLOCK, 1)[:out_dim, :in_dim]
    q = (w.float() / s_full).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.contiguous(), s.to(sdtype).contiguous(), q.float() * s_full


def dequantise(q: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    s_full = s.float().repeat_interleave(BLOCK, 0).repeat_interleave(BLOCK, 1)[: q.shape[0], : q.shape[1]]
    return q.float() * s_full


def main() -> None:
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    out = mf.FIXTURES / NAME
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)

    template = mf.find_chat_template()
    tok = mf.build_tokenizer()
    tok_json = mf.tokenizer_json(tok)
    ids = mf.token_ids(tok)
    spec = SPEC
    gen = torch.Generator().manual_seed(spec["seed"])
    torch.manual_seed(spec["seed"])

    cfg = mf.build_config(spec, ids)
    tc = cfg.text_config
    model = mf.Qwen3_5MoeForConditionalGeneration(cfg)
    mf.randomize_(model, gen)
    mf.round_to_storage_(model, spec)
    model.set_attn_implementation("eager")
    model.set_experts_implementation("eager")
    model.eval()

    # 1. the stored tensors: per expert, quantised where the release quantises
    params = dict(model.named_parameters())
    tensors = mf.split_experts({k: p.detach().to(mf.stored_dtype(k, spec)).contiguous() for k, p in params.items()})
    dequantised = {}
    for k in sorted(tensors):
        if is_quantised(k):
            q, s, dq = quantise(tensors[k], scale_dtype(k))
            tensors[k] = q
            tensors[k + "_scale_inv"] = s
            dequantised[k] = dq
    n_fp8 = len(dequantised)

    # 2. the fp32 model holds exactly q · s (experts fused back as the module stores them)
    with torch.no_grad():
        for k, p in params.items():
            if k.endswith(".mlp.experts.gate_up_proj"):
                pre = k[: -len(".gate_up_proj")]
                for e in range(p.shape[0]):
                    inter = p.shape[1] // 2
                    p[e, :inter] = dequantised[f"{pre}.{e}.gate_proj.weight"]
                    p[e, inter:] = dequantised[f"{pre}.{e}.up_proj.weight"]
            elif k.endswith(".mlp.experts.down_proj"):
                pre = k[: -len(".down_proj")]
                for e in range(p.shape[0]):
                    p[e] = dequantised[f"{pre}.{e}.down_proj.weight"]
            elif k in dequantised:
                p.copy_(dequantised[k])
    tensors.update(mf.mtp_tensors(cfg, gen, spec["experts_layout"]))
    files = mf.save_checkpoint(out, tensors, spec, cfg)

    # 3. config.json as the release writes it (quantization_config at the top level)
    with mf.tempfile.TemporaryDirectory() as tmp:
        mf.copy.deepcopy(model).to(torch.bfloat16).save_pretrained(tmp)  # only for HF's config.json
        native_cfg = json.loads((Path(tmp) / "config.json").read_text())
    native_cfg["text_config"]["dtype"] = "bfloat16"
    native_cfg["quantization_config"] = {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "modules_to_not_convert": NOT_CONVERTED,
        "quant_method": "fp8",
        "weight_block_size": [BLOCK, BLOCK],
    }
    (out / "config.json").write_text(json.dumps(native_cfg, indent=2, sort_keys=True) + "\n")
    gen_cfg = {
        "bos_token_id": ids["<|endoftext|>"],
        "do_sample": True,
        "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
        "pad_token_id": ids["<|endoftext|>"],
        "temperature": 1.0,
        "top_k": 20,
        "top_p": 0.95,
        "transformers_version": transformers.__version__,
    }
    (out / "generation_config.json").write_text(json.dumps(gen_cfg, indent=2) + "\n")
    (out / "tokenizer.json").write_text(tok_json)
    (out / "tokenizer_config.json").write_text(
        json.dumps(mf.tokenizer_config(ids, None), indent=2, ensure_ascii=False) + "\n"
    )
    (out / "chat_template.jinja").write_bytes(template)
    return finish(out, model, tensors, dequantised, files, n_fp8, ids, tok, spec)


def checked_reference(model, tokens, description: str) -> tuple[dict, float, dict]:
    """HF's one fp32 forward over `tokens` (mf.reference_forward), its cached path checked against
    it, and the safetensors metadata to store the reference with."""
    ref = mf.reference_forward(model, tokens)
    dec = mf.cached_decode_logits(model, tokens)
    self_err = (dec - ref["logits"]).abs().max().item() / ref["logits"].abs().max().item()
    assert self_err < mf.SELF_CONSISTENCY_RTOL, self_err
    versions = {"transformers": transformers.__version__, "torch": torch.__version__, "T": mf.T}
    meta = {"solo": json.dumps({"description": description, **versions}, sort_keys=True)}
    return ref, self_err, meta


def finish(out, model, tensors, dequantised, files, n_fp8, ids, tok, spec) -> None:
    # 4. the files, read back and dequantised, are the fp32 model bit for bit
    stored = mf.read_dir_tensors(out)
    for k, dq in dequantised.items():
        assert stored[k].dtype == torch.float8_e4m3fn, k
        assert torch.equal(dequantise(stored[k], stored[k + "_scale_inv"]), dq), k
    lm = dict(model.named_parameters())
    for k, v in stored.items():
        if k in lm and k not in dequantised:
            assert torch.equal(v.float(), lm[k].detach()), k

    # 5. tokens with clear routing, the reference, HF's cached path against it
    import numpy as np

    n_tok = tok.get_vocab_size(with_added_tokens=True)
    rng = np.random.default_rng(spec["seed"])
    for attempt in range(100):
        arr = rng.integers(0, n_tok, size=mf.T)
        arr[0] = ids["<|im_start|>"]
        tokens = torch.from_numpy(arr.astype(np.int64))
        gap = mf.router_gaps(model, tokens)
        if gap >= mf.ROUTER_MIN_GAP:
            break
    else:
        raise RuntimeError("could not find tokens with clear routing")
    ref, self_err, meta = checked_reference(model, tokens, f"solo fixture {NAME}: HF fp32 reference on the dequantised FP8 weights")
    save_file(ref, str(out / "hf_reference.safetensors"), metadata=meta)
    sizes = {p.name: p.stat().st_size for p in sorted(out.iterdir())}
    print(f"== {NAME}: {sum(sizes.values()) / 1024:.0f} KiB, {n_fp8} FP8 matrices, files {files}")
    print(f"   router gap {gap:.2e} (attempt {attempt + 1}), cached vs single {self_err:.2e}, "
          f"max |logit| {ref['logits'].abs().max():.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
