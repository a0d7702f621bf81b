#!/usr/bin/env python3
"""Make fixtures/gguf/: tiny GGUF files of the real architecture and llama.cpp's logits on them.

    scripts/build_llama_cpp.sh            # once: llama.cpp's CPU library + scripts/llama_logits.cpp
    /path/to/venv/bin/python scripts/make_gguf_fixtures.py

Not part of CI: the tests (crates/model/tests/gguf_*.rs) read only the committed outputs.

Two random checkpoints of Qwen3_5MoeForConditionalGeneration (the pieces of make_fixtures.py):
  small  hidden 64, 4 layers (3 GDN + 1 attention), 8 experts, the MTP block: written F32 and BF16.
  wide   hidden 256, 2 layers (GDN + attention), 4 experts, no MTP: hidden 256 so that ggml's
         256-element super-blocks (k-quants, IQ4_XS) fit the rows that read the hidden state; the
         rows 32 or 128 wide (expert/shared down projections, ssm_out, attn_output) take the
         32-element types (llama-quantize's own fallbacks: Q4_K -> Q5_0, Q6_K -> Q8_0, ...).
Each is written as GGUF the way llama.cpp's converter writes `qwen35moe` (convert_hf_to_gguf.py,
Qwen3_5MoeTextModel and its bases Qwen3NextModel / _LinearAttentionVReorderBase / _Qwen35MtpMixin):
norms stored as 1 + w (not the GDN's gated norm), A_log -> ssm_a = -exp(A_log), dt_bias ->
ssm_dt.bias, conv1d squeezed to [C, K], experts stacked per projection, the GDN's value heads
reordered from grouped-by-key-head to tiled, MTP tensors as blk.{L}.nextn.*, the vocabulary as
tokenizer.ggml.* (gpt2 model, pre `qwen35`). The wide file is then quantized by libllama's
llama_model_quantize (what llama-quantize runs): Q8_0, Q4_K_M, and a mix forcing every other type
solo reads onto some tensor. A converter-replication check: llama.cpp's logits on each F32 file
must match transformers' fp32 logits (rel <= 1e-4), or the GGUF is not what the converter writes.

For every committed file, llama.cpp (CPU, f32 KV cache, no flash attention) records logits for
T tokens: the first PREFILL in one llama_decode, the rest one token per call. For a quantized
file it records twice: on the file itself (llama.cpp quantizes activations to Q8 for these
matmuls) and on an F32 copy of it dequantized by the `gguf` package (the exact weights): solo's
exact-dequantizing CPU reference must match the second tightly and the first to llama.cpp's own
rounding (crates/model/tests/gguf_parity.rs gives the tolerances).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import gguf
import numpy as np
import torch
from safetensors.numpy import save_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "fixtures" / "gguf"
LLAMA = REPO / "target" / "llama.cpp" / "build" / "bin" / "llama-logits"

L, F = "linear_attention", "full_attention"
ROPE = dict(rope_type="default", rope_theta=10000000.0, partial_rotary_factor=0.25, mrope_interleaved=True)
VISION = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, patch_size=4, temporal_patch_size=2,
              spatial_merge_size=2, num_position_embeddings=16)  # fmt: skip
SPECS = {
    "small": dict(
        seed=4801,
        text=dict(vocab_size=512, hidden_size=64, num_hidden_layers=4, layer_types=[L, L, L, F],
                  full_attention_interval=4, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                  linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
                  linear_conv_kernel_dim=4, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                  shared_expert_intermediate_size=48, rms_norm_eps=1e-6, max_position_embeddings=8192,
                  rope_parameters=dict(ROPE, mrope_section=[2, 1, 1])),  # fmt: skip
        mtp=True,
    ),
    "wide": dict(
        seed=4802,
        text=dict(vocab_size=512, hidden_size=256, num_hidden_layers=2, layer_types=[L, F],
                  full_attention_interval=2, num_attention_heads=2, num_key_value_heads=1, head_dim=64,
                  linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=32, linear_value_head_dim=32,
                  linear_conv_kernel_dim=4, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                  shared_expert_intermediate_size=32, rms_norm_eps=1e-6, max_position_embeddings=8192,
                  rope_parameters=dict(ROPE, mrope_section=[4, 2, 2])),  # fmt: skip
        mtp=False,
    ),
}
# ggml type ids (ggml.h) and llama_ftype ids (llama.h)
T_F16, T_Q4_0, T_Q4_1, T_Q5_0, T_Q5_1, T_Q8_0 = 1, 2, 3, 6, 7, 8
T_Q2_K, T_Q3_K, T_Q4_K, T_Q5_K, T_Q6_K, T_IQ4_NL, T_IQ4_XS, T_BF16, T_MXFP4 = 10, 11, 12, 13, 14, 20, 23, 30, 39
FTYPE_Q8_0, FTYPE_Q4_K_M = 7, 15
# The mix: a Q4_K_M base with one tensor forced to each remaining type (widths permitting).
MIX = [
    ("blk.0.attn_qkv", T_Q2_K), ("blk.0.attn_gate", T_Q3_K), ("blk.0.ffn_gate_exps", T_Q5_K),
    ("blk.0.ffn_up_exps", T_IQ4_XS), ("blk.0.ffn_down_exps", T_Q4_1), ("blk.0.ssm_out", T_MXFP4),
    ("blk.0.ffn_gate_shexp", T_Q4_0), ("blk.0.ffn_up_shexp", T_IQ4_NL), ("blk.0.ffn_down_shexp", T_Q5_1),
    ("blk.1.attn_q", T_Q3_K), ("blk.1.attn_k", T_Q2_K), ("blk.1.attn_v", T_F16), ("blk.1.attn_output", T_Q5_0),
    ("blk.1.ffn_gate_exps", T_BF16), ("blk.1.ffn_up_exps", T_Q6_K), ("blk.1.ffn_down_exps", T_Q8_0),
    ("token_embd", T_Q4_K),
]  # fmt: skip

PROMPT = "<|im_start|>user\nName the two colors of a chessboard.<|im_end|>\n<|im_start|>assistant\n<think>\n"
PREFILL = 12  # of T = len(tokens): the rest are single-token decode steps
TOKENIZE_CASES = [
    "Hello world", "The quick brown fox jumps over the lazy dog.", "  spaces\tand\nnewlines\n\n",
    "It's 2025-01-31 at 09:45; don't stop!", "Café naïve résumé — déjà vu", "<|im_start|>user\nHi<|im_end|>",
    "<think>\nhmm</think>\n\n<tool_call>", "def forward(self, x):\n    return x + 1",
]  # fmt: skip


def build_model(spec: dict, ids: dict[str, int]):
    cfg = mf.build_config(dict(text=spec["text"], vision=VISION), ids)
    gen = torch.Generator().manual_seed(spec["seed"])
    torch.manual_seed(spec["seed"])
    model = mf.Qwen3_5MoeForConditionalGeneration(cfg)
    mf.randomize_(model, gen)
    mf.round_to_storage_(model, dict(f32_tensors=()))  # bf16-representable values: every GGUF type starts exact
    model.set_attn_implementation("eager")
    model.set_experts_implementation("eager")
    model.eval()
    tensors = {k[len("model.language_model."):] if k.startswith("model.language_model.") else k: v.detach().float()
               for k, v in model.named_parameters() if not k.startswith("model.visual.")}  # fmt: skip
    if spec["mtp"]:
        tensors.update({k: v.float() for k, v in mf.mtp_tensors(cfg, gen, "fused").items()})
    return model, cfg.text_config, tensors


def v_reorder(t: np.ndarray, axis: int, hk: int, r: int, hd: int) -> np.ndarray:
    """_LinearAttentionVReorderBase._reorder_v_heads: value heads grouped by key head -> tiled."""
    shape = list(t.shape)
    t = t.reshape(shape[:axis] + [hk, r, hd] + shape[axis + 1:])
    return np.swapaxes(t, axis, axis + 1).reshape(shape).copy()


def gguf_tensors(tc, hf: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """The converter's names and transforms, HF tensor -> GGUF tensor (torch-order shapes)."""
    hk, hv = tc.linear_num_key_heads, tc.linear_num_value_heads
    dk, dv, r = tc.linear_key_head_dim, tc.linear_value_head_dim, hv // hk
    n = tc.num_hidden_layers
    out = {}
    for name, t in hf.items():
        x = t.numpy().astype(np.float32)
        if name.startswith("mtp."):  # _Qwen35MtpMixin: mtp.layers.0 -> blk.{n}, the head's own tensors -> nextn.*
            name = name.replace("mtp.layers.0.", f"layers.{n}.")
            name = {"mtp.fc.weight": f"layers.{n}.eh_proj.weight", "mtp.pre_fc_norm_embedding.weight": f"layers.{n}.enorm.weight",
                    "mtp.pre_fc_norm_hidden.weight": f"layers.{n}.hnorm.weight",
                    "mtp.norm.weight": f"layers.{n}.shared_head.norm.weight"}.get(name, name)  # fmt: skip
        if name.endswith(".A_log"):
            x = -np.exp(x)
        if name.endswith("norm.weight") and not name.endswith("linear_attn.norm.weight"):
            x = x + np.float32(1)
        if "linear_attn." in name and hk != hv:
            if "in_proj_qkv" in name:
                x = np.concatenate([x[: 2 * hk * dk], v_reorder(x[2 * hk * dk:], 0, hk, r, dv)])
            elif "in_proj_z" in name:
                x = v_reorder(x, 0, hk, r, dv)
            elif "in_proj_a" in name or "in_proj_b" in name or name.endswith((".A_log", ".dt_bias")):
                x = v_reorder(x, 0, hk, r, 1)
            elif "conv1d" in name:
                x = x.squeeze(1)
                x = np.concatenate([x[: 2 * hk * dk], v_reorder(x[2 * hk * dk:], 0, hk, r, dv)])
            elif "out_proj" in name:
                x = v_reorder(x, 1, hk, r, dv)
        if "conv1d" in name and x.ndim == 3:
            x = x.squeeze(1)
        b = name.split(".")[1] if name.startswith("layers.") else None
        p = f"blk.{b}." if b is not None else ""
        rest = name.split(".", 2)[2] if b is not None else name
        simple = {
            "embed_tokens.weight": "token_embd.weight", "norm.weight": "output_norm.weight", "lm_head.weight": "output.weight",
            "input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "post_attention_norm.weight",
            "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
            "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
            "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
            "linear_attn.in_proj_qkv.weight": "attn_qkv.weight", "linear_attn.in_proj_z.weight": "attn_gate.weight",
            "linear_attn.in_proj_b.weight": "ssm_beta.weight", "linear_attn.in_proj_a.weight": "ssm_alpha.weight",
            "linear_attn.conv1d.weight": "ssm_conv1d.weight", "linear_attn.A_log": "ssm_a",
            "linear_attn.dt_bias": "ssm_dt.bias", "linear_attn.norm.weight": "ssm_norm.weight",
            "linear_attn.out_proj.weight": "ssm_out.weight", "mlp.gate.weight": "ffn_gate_inp.weight",
            "mlp.experts.down_proj": "ffn_down_exps.weight", "mlp.shared_expert.gate_proj.weight": "ffn_gate_shexp.weight",
            "mlp.shared_expert.up_proj.weight": "ffn_up_shexp.weight", "mlp.shared_expert.down_proj.weight": "ffn_down_shexp.weight",
            "mlp.shared_expert_gate.weight": "ffn_gate_inp_shexp.weight", "eh_proj.weight": "nextn.eh_proj.weight",
            "enorm.weight": "nextn.enorm.weight", "hnorm.weight": "nextn.hnorm.weight",
            "shared_head.norm.weight": "nextn.shared_head_norm.weight",
        }  # fmt: skip
        if rest == "mlp.experts.gate_up_proj":  # [E, 2I, H]: gate rows, then up rows
            i = x.shape[1] // 2
            out[p + "ffn_gate_exps.weight"], out[p + "ffn_up_exps.weight"] = x[:, :i].copy(), x[:, i:].copy()
            continue
        if rest == "mlp.shared_expert_gate.weight":
            x = x.reshape(-1)
        out[p + simple[rest]] = x
    return out


def stays_f32(name: str, x: np.ndarray) -> bool:
    """What the converter keeps F32 in a 16-bit file: 1-D tensors, norms, the router, the conv."""
    return x.ndim <= 1 or name.endswith("_norm.weight") or "ffn_gate_inp" in name or "ssm_conv1d" in name


def write_gguf(path: Path, tc, tensors: dict[str, np.ndarray], tok, ids, template: str, dtype: str, mtp: bool) -> None:
    w = gguf_writer(path, tc, tok, ids, template, dtype, mtp)
    for name, x in tensors.items():
        add_tensor(w, name, x, dtype)
    finish_gguf(w)


def gguf_writer(path: Path, tc, tok, ids, template: str, dtype: str, mtp: bool, title="solo tiny qwen35moe fixture"):
    """A GGUFWriter with write_gguf's metadata (the model's and the vocabulary's), no tensors yet:
    add them with add_tensor (a tensor at a time, so that a large model need not be held twice),
    then finish_gguf."""
    w = gguf.GGUFWriter(str(path), "qwen35moe")
    n = tc.num_hidden_layers
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(title)
    w.add_file_type(gguf.LlamaFileType.ALL_F32 if dtype == "f32" else gguf.LlamaFileType.MOSTLY_BF16)
    w.add_context_length(tc.max_position_embeddings)
    w.add_block_count(n + (1 if mtp else 0))
    w.add_embedding_length(tc.hidden_size)
    w.add_head_count(tc.num_attention_heads)
    w.add_head_count_kv(tc.num_key_value_heads)
    w.add_key_length(tc.head_dim)
    w.add_value_length(tc.head_dim)
    w.add_rope_freq_base(tc.rope_parameters["rope_theta"])
    w.add_layer_norm_rms_eps(tc.rms_norm_eps)
    w.add_expert_count(tc.num_experts)
    w.add_expert_used_count(tc.num_experts_per_tok)
    w.add_expert_feed_forward_length(tc.moe_intermediate_size)
    w.add_expert_shared_feed_forward_length(tc.shared_expert_intermediate_size)
    w.add_ssm_conv_kernel(tc.linear_conv_kernel_dim)
    w.add_ssm_state_size(tc.linear_key_head_dim)
    w.add_ssm_group_count(tc.linear_num_key_heads)
    w.add_ssm_time_step_rank(tc.linear_num_value_heads)
    w.add_ssm_inner_size(tc.linear_value_head_dim * tc.linear_num_value_heads)
    w.add_full_attention_interval(tc.full_attention_interval)
    w.add_rope_dimension_count(int(tc.head_dim * tc.rope_parameters["partial_rotary_factor"]))
    w.add_rope_dimension_sections(list(tc.rope_parameters["mrope_section"]) + [0])
    if mtp:
        w.add_nextn_predict_layers(1)
    # vocabulary: _set_vocab_gpt2 (ids past the tokenizer are [PADn], UNUSED)
    vocab = tok.get_vocab(with_added_tokens=True)
    by_id = {i: t for t, i in vocab.items()}
    added = {content: special for content, special in mf.ADDED_TOKENS}
    tokens, types = [], []
    for i in range(tc.vocab_size):
        t = by_id.get(i)
        if t is None:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
        elif t in added:
            tokens.append(t)
            types.append(gguf.TokenType.CONTROL if added[t] else gguf.TokenType.USER_DEFINED)
        else:
            tokens.append(t)
            types.append(gguf.TokenType.NORMAL)
    merges = [" ".join(m) if isinstance(m, (list, tuple)) else m for m in json.loads(tok.to_str())["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen35")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_eos_token_id(ids["<|im_end|>"])
    w.add_pad_token_id(ids["<|endoftext|>"])
    w.add_bos_token_id(ids["<|endoftext|>"])
    w.add_add_bos_token(False)
    w.add_chat_template(template)
    return w


def add_tensor(w: gguf.GGUFWriter, name: str, x: np.ndarray, dtype: str) -> None:
    """One tensor (a gguf_tensors value) in the converter's type for a `dtype` file (f32, bf16)."""
    if dtype == "f32" or stays_f32(name, x):
        w.add_tensor(name, x.astype(np.float32))
    else:
        w.add_tensor(name, gguf.quants.quantize(x, gguf.GGMLQuantizationType.BF16), raw_dtype=gguf.GGMLQuantizationType.BF16)


def finish_gguf(w: gguf.GGUFWriter) -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def llama_logits(path: Path, tokens: list[int], prefill: int = PREFILL, llama: Path = LLAMA) -> np.ndarray:
    with tempfile.NamedTemporaryFile(suffix=".f32") as f:
        subprocess.run([str(llama), str(path), ",".join(map(str, tokens)), str(prefill), f.name], check=True)
        return np.fromfile(f.name, dtype=np.float32).reshape(len(tokens), -1)


def dequantized_copy(src: Path, dst: Path) -> None:
    """The same file with every tensor dequantized to F32 by the `gguf` package (metadata kept)."""
    r = gguf.GGUFReader(str(src))
    w = gguf.GGUFWriter(str(dst), "qwen35moe")
    for field in r.fields.values():
        if field.name.startswith("GGUF.") or field.name in ("general.architecture", "general.alignment", "general.file_type"):
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            w.add_key_value(field.name, field.contents(), vtype, field.types[-1])
        else:
            w.add_key_value(field.name, field.contents(), vtype)
    for t in r.tensors:
        x = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        w.add_tensor(t.name, x.reshape([int(d) for d in reversed(t.shape)]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def quantize(src: Path, dst: Path, ftype: int, overrides=(), llama: Path = LLAMA) -> None:
    args = [str(llama), "--quantize", str(src), str(dst), str(ftype)] + [f"^{re}\\.weight$={t}" for re, t in overrides]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def tensor_types(path: Path) -> dict[str, str]:
    return {t.name: t.tensor_type.name for t in gguf.GGUFReader(str(path)).tensors}


def save_logits(name: str, tokens: list[int], **rows: np.ndarray) -> None:
    arrays = {"tokens": np.array(tokens, dtype=np.int64), "prefill": np.array([PREFILL], dtype=np.int64)}
    arrays.update({k: v.astype(np.float32) for k, v in rows.items()})
    save_file(arrays, str(OUT / f"{name}.logits.safetensors"))


DEQUANT_TYPES = ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
                 "IQ4_NL", "IQ4_XS", "MXFP4"]  # fmt: skip
DEQUANT_BLOCKS = 24


def write_dequant_cases() -> None:
    """dequant.safetensors: per type, random blocks (`{T}.blocks`, U8) and the `gguf` package's numpy
    dequantization of them (`{T}.values`, F32), for the bit-for-bit test of solo's dequantizers.
    Every byte is random except f16 scale fields, drawn as finite f16 values so that no value is NaN
    (NaN payloads are not part of the format)."""
    rng = np.random.default_rng(4848)
    arrays = {}
    for name in DEQUANT_TYPES:
        qtype = gguf.GGMLQuantizationType[name]
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        raw = rng.integers(0, 256, size=(DEQUANT_BLOCKS, size), dtype=np.uint8)
        scale_at = {"F16": [0], "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0], "IQ4_NL": [0],
                    "IQ4_XS": [0], "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208]}  # fmt: skip
        for at in scale_at.get(name, []):
            raw[:, at:at + 2] = rng.normal(0, 0.05, size=(DEQUANT_BLOCKS, 1)).astype(np.float16).view(np.uint8)
        if name == "F32":
            raw = rng.normal(0, 1, size=(DEQUANT_BLOCKS, 1)).astype(np.float32).view(np.uint8)
        if name == "BF16":
            raw = (rng.normal(0, 1, size=(DEQUANT_BLOCKS, 1)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)
        values = gguf.quants.dequantize(raw.reshape(-1), qtype).astype(np.float32).reshape(-1)
        assert values.size == DEQUANT_BLOCKS * block and np.isfinite(values).all(), name
        arrays[f"{name}.blocks"] = raw.reshape(-1)
        arrays[f"{name}.values"] = values
    save_file(arrays, str(OUT / "dequant.safetensors"))


def rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def main() -> None:
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    mf.transformers.logging.set_verbosity_error()
    if not LLAMA.exists():
        sys.exit(f"{LLAMA} is missing: run scripts/build_llama_cpp.sh first")
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("*"):
        old.unlink()
    write_dequant_cases()
    tok = mf.build_tokenizer()
    ids = mf.token_ids(tok)
    template = mf.find_chat_template().decode("utf-8")
    tokens = tok.encode(PROMPT, add_special_tokens=False).ids
    print(f"T = {len(tokens)} tokens, prefill {PREFILL}")
    summary = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for base, spec in SPECS.items():
            model, tc, hf = build_model(spec, ids)
            with torch.no_grad():
                ref = model(input_ids=torch.tensor([tokens])).logits[0].numpy()
            gt = gguf_tensors(tc, hf)
            f32 = (OUT if base == "small" else tmp) / f"{base}-f32.gguf"
            write_gguf(f32, tc, gt, tok, ids, template, "f32", spec["mtp"])
            lf = llama_logits(f32, tokens)
            err = rel(lf, ref)
            print(f"{base}: llama.cpp F32 vs transformers fp32: rel {err:.2e}, argmax equal {bool((lf.argmax(1) == ref.argmax(1)).all())}")
            assert err <= 1e-4, f"{base}: the GGUF is not what llama.cpp's converter writes (rel {err:.2e})"
            if base == "small":
                save_logits("small-f32", tokens, llama=lf, transformers=ref)
                bf16 = OUT / "small-bf16.gguf"
                write_gguf(bf16, tc, gt, tok, ids, template, "bf16", spec["mtp"])
                deq = tmp / "small-bf16-deq.gguf"
                dequantized_copy(bf16, deq)
                save_logits("small-bf16", tokens, llama=llama_logits(bf16, tokens), llama_dequantized=llama_logits(deq, tokens))
                summary["small-bf16"] = tensor_types(bf16)
                continue
            for name, ftype, overrides in (("wide-q8_0", FTYPE_Q8_0, ()), ("wide-q4_k_m", FTYPE_Q4_K_M, ()),
                                           ("wide-mix", FTYPE_Q4_K_M, MIX)):  # fmt: skip
                q = OUT / f"{name}.gguf"
                quantize(f32, q, ftype, overrides)
                deq = tmp / f"{name}-deq.gguf"
                dequantized_copy(q, deq)
                lq, ld = llama_logits(q, tokens), llama_logits(deq, tokens)
                print(f"{name}: llama.cpp on the file vs on its dequantized copy: rel {rel(lq, ld):.2e}")
                save_logits(name, tokens, llama=lq, llama_dequantized=ld)
                summary[name] = tensor_types(q)
        # llama.cpp's tokenizer on the small file, for the tokenizer built from tokenizer.ggml.*
        cases = {}
        for text in TOKENIZE_CASES:
            out = subprocess.run([str(LLAMA), str(OUT / "small-f32.gguf"), "--tokenize", text], check=True,
                                 capture_output=True, text=True).stdout.strip()  # fmt: skip
            cases[text] = [int(x) for x in out.split(",")] if out else []
            assert cases[text] == tok.encode(text, add_special_tokens=False).ids, text
        (OUT / "tokenize.json").write_text(json.dumps(cases, indent=1, ensure_ascii=False) + "\n")
    for name, types in summary.items():
        counts = {}
        for t in types.values():
            counts[t] = counts.get(t, 0) + 1
        print(f"{name}: {counts}")
    (OUT / "types.json").write_text(json.dumps(summary, indent=1) + "\n")
    for p in sorted(OUT.iterdir()):
        print(f"  {p.name}: {p.stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
