#!/usr/bin/env python3
"""Make the tiny reference checkpoints the Rust CPU implementation is tested against.

    pip install -r scripts/requirements-fixtures.txt
    python scripts/make_fixtures.py

Writes fixtures/tiny-a/, fixtures/tiny-b/ and fixtures/README.md (which describes both in full): two
random checkpoints of the real architecture (`Qwen3_5MoeForConditionalGeneration`, model_type
`qwen3_5_moe`) at toy widths that differ in every width and in the on-disk layout (tiny-a: one file,
fused experts, F32 A_log, chat_template.jinja; tiny-b: two shards + index, per-expert tensors, all
BF16, template only in tokenizer_config.json), each with `hf_reference.safetensors`: HF's fp32
outputs for a T = 150 token prompt. Deterministic (seeded, single-threaded), CPU, a few seconds.

hf_reference.safetensors (HF, fp32, eager, ONE forward over all T tokens, no cache):
    tokens             I64 [T]
    logits             F32 [T, vocab]
    hidden_states      F32 [L+1, T, hidden]   HF `output_hidden_states`:
                           [0] = embed_tokens(tokens)              (input of layer 0)
                           [i] = output of decoder layer i-1       (residual stream), 1 <= i <= L-1
                           [L] = model.norm(output of layer L-1)   AFTER the final RMSNorm: HF replaces
                                 the last entry with last_hidden_state; exactly what lm_head multiplies
    last_layer_output  F32 [T, hidden]        output of decoder layer L-1 before the final norm
All of this is asserted below, as is HF's cached path (prefill 64 tokens, then one at a time)
reproducing the single-forward logits to 1e-4 relative (that copy is not stored).
"""

from __future__ import annotations

import copy
import json
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import safetensors
import tokenizers
import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import AutoTokenizer, Qwen3_5MoeConfig, Qwen3_5MoeForConditionalGeneration

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"

T = 150  # prompt length: crosses the GDN chunk size (64) twice, ragged last chunk of 22
DECODE_PREFILL = 64  # the cached-path check prefills this many tokens, then decodes one at a time
ROUTER_MIN_GAP = 1e-3  # min logit gap between the k-th and (k+1)-th expert, so an f32 reimplementation
#                        cannot flip a routing decision through rounding
SELF_CONSISTENCY_RTOL = 1e-4

# ---------------------------------------------------------------------------------------------
# Tokenizer: a small byte-level BPE with Qwen's pre-tokenizer, normalizer, decoder and added tokens
# ---------------------------------------------------------------------------------------------

# Qwen3.5's split regex (Qwen2's plus \p{M} in the letter class; llama.cpp calls it `qwen35`).
QWEN35_SPLIT_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
    r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Qwen's added tokens in the real order (Qwen3.5 ids 248044..248069); (content, special).
ADDED_TOKENS = [(t, True) for t in (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
    "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
    "<|image_pad|>", "<|video_pad|>")]  # fmt: skip
ADDED_TOKENS += [("<tool_call>", False), ("</tool_call>", False)]
ADDED_TOKENS += [(t, True) for t in ("<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>")]
ADDED_TOKENS += [("<tool_response>", False), ("</tool_response>", False), ("<think>", False), ("</think>", False)]
assert len(ADDED_TOKENS) == 26
ADDITIONAL_SPECIAL_TOKENS = [t for t, _ in ADDED_TOKENS[1:14]]  # im_start .. video_pad, as Qwen's config
BPE_VOCAB_SIZE = 380  # 256 byte symbols + 124 merges; + 26 added tokens = 406 ids in all

TRAINING_TEXT = """\
The quick brown fox jumps over the lazy dog. The dog was not amused, and the fox ran into the forest.
A language model reads a prompt, one token at a time, and writes the next token. The user asks a
question; the assistant thinks, then answers. The system message tells the assistant what to do.
When the assistant needs a tool, it writes a tool call, and the tool response comes back to it.
It's what they're saying: we'll see, I'd say, you've been there, I'm sure. Don't stop; it isn't hard.
The weather today is sunny with a light wind from the west. Tomorrow there will be rain in the morning
and clouds in the afternoon. Temperatures stay between 12 and 18 degrees, 2025-01-31 at 09:45.
Name the two colors of a chessboard. They are black and white, or dark and light squares.
def forward(self, hidden_states, position_ids=None):
    residual = hidden_states
    hidden_states = self.input_layernorm(hidden_states)
    hidden_states = self.attention(hidden_states, position_ids)
    return residual + hidden_states

fn main() {
    let tokens: Vec<u32> = tokenizer.encode("hello world", false)?;
    for (i, token) in tokens.iter().enumerate() {
        println!("{i}: {token}");
    }
}
{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}
<function=get_weather>
<parameter=city>
Paris
</parameter>
</function>
import numpy as np
x = np.zeros((3, 4), dtype=np.float32)
print(x.shape, x.sum())
Café naïve résumé — déjà vu. Ünïcödé with combining marks: e\u0301 a\u0300 o\u0308.
"""


def build_tokenizer() -> Tokenizer:
    tok = Tokenizer(
        models.BPE(
            dropout=None,
            unk_token=None,
            continuing_subword_prefix="",
            end_of_word_suffix="",
            fuse_unk=False,
            byte_fallback=False,
        )
    )
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN35_SPLIT_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(
        vocab_size=BPE_VOCAB_SIZE,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    lines = TRAINING_TEXT.splitlines(keepends=True)
    tok.train_from_iterator(lines * 3, trainer=trainer)
    assert tok.get_vocab_size(with_added_tokens=False) == BPE_VOCAB_SIZE, tok.get_vocab_size()
    for content, special in ADDED_TOKENS:
        at = AddedToken(content, single_word=False, lstrip=False, rstrip=False, normalized=False, special=special)
        n = tok.add_special_tokens([at]) if special else tok.add_tokens([at])
        assert n == 1, content
    return tok


def tokenizer_json(tok: Tokenizer) -> str:
    s = tok.to_str(pretty=True)
    # Training twice must give the same file, or the fixtures are not reproducible.
    assert build_tokenizer().to_str(pretty=True) == s, "BPE training is not deterministic"
    return s


def token_ids(tok: Tokenizer) -> dict[str, int]:
    ids = {content: tok.token_to_id(content) for content, _ in ADDED_TOKENS}
    assert list(ids.values()) == list(range(BPE_VOCAB_SIZE, BPE_VOCAB_SIZE + len(ADDED_TOKENS)))
    return ids


def tokenizer_config(ids: dict[str, int], chat_template: str | None) -> dict:
    cfg = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": {
            str(ids[content]): {
                "content": content,
                "lstrip": False,
                "normalized": False,
                "rstrip": False,
                "single_word": False,
                "special": special,
            }
            for content, special in ADDED_TOKENS
        },
        "additional_special_tokens": ADDITIONAL_SPECIAL_TOKENS,
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 262144,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
    if chat_template is not None:
        cfg["chat_template"] = chat_template
    return cfg


def find_chat_template() -> bytes:
    candidates = [
        os.environ.get("SOLO_CHAT_TEMPLATE"),
        str(REPO / "shared" / "fixtures" / "qwen3.6-chat_template.jinja"),
        str(REPO.parent / "shared" / "fixtures" / "qwen3.6-chat_template.jinja"),  # beside the checkout
        str(FIXTURES / "tiny-a" / "chat_template.jinja"),  # the committed copy, for re-runs elsewhere
    ]
    for c in candidates:
        if c and os.path.isfile(c):
            return Path(c).read_bytes()
    raise FileNotFoundError(f"Qwen3.6 chat template not found in any of {candidates}")


# ---------------------------------------------------------------------------------------------
# Model configs
# ---------------------------------------------------------------------------------------------

L, F = "linear_attention", "full_attention"

FIXTURE_SPECS = {
    "tiny-a": dict(
        seed=1001,
        text=dict(
            vocab_size=512,
            hidden_size=64,
            num_hidden_layers=4,
            layer_types=[L, L, L, F],
            full_attention_interval=4,  # consistent with layer_types, as in the release
            num_attention_heads=4,
            num_key_value_heads=2,  # GQA group 2
            head_dim=32,  # rotary dim 32 * 0.25 = 8
            linear_num_key_heads=2,
            linear_num_value_heads=4,  # v-head j reads k-head j // 2
            linear_key_head_dim=16,
            linear_value_head_dim=24,
            linear_conv_kernel_dim=4,
            num_experts=8,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=48,
            rms_norm_eps=1e-6,
            max_position_embeddings=8192,
            rope_parameters=dict(
                rope_type="default",
                rope_theta=10000000.0,
                partial_rotary_factor=0.25,
                mrope_section=[2, 1, 1],  # sums to rotary_dim / 2 = 4, as [11, 11, 10] sums to 32
                mrope_interleaved=True,
            ),
        ),
        vision=dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, patch_size=4, temporal_patch_size=2,
                    spatial_merge_size=2, num_position_embeddings=16),  # fmt: skip
        experts_layout="fused",
        shards=1,
        f32_tensors=("linear_attn.A_log",),  # stored F32, as in the release; the rest BF16
        template_in="file",
    ),
    "tiny-b": dict(
        seed=2002,
        text=dict(
            vocab_size=480,
            hidden_size=48,
            num_hidden_layers=6,
            layer_types=[L, F, L, L, F, L],
            full_attention_interval=4,  # deliberately contradicts layer_types: HF ignores it, so must we
            num_attention_heads=6,
            num_key_value_heads=2,  # GQA group 3
            head_dim=16,  # rotary dim 16 * 0.75 = 12 (tiny-a: 8)
            linear_num_key_heads=2,
            linear_num_value_heads=6,  # v-head j reads k-head j // 3
            linear_key_head_dim=24,
            linear_value_head_dim=16,
            linear_conv_kernel_dim=3,
            num_experts=6,
            num_experts_per_tok=3,
            moe_intermediate_size=24,
            shared_expert_intermediate_size=40,
            rms_norm_eps=1e-5,
            max_position_embeddings=2048,
            rope_parameters=dict(
                rope_type="default",
                rope_theta=10000.0,
                partial_rotary_factor=0.75,
                mrope_section=[2, 2, 2],  # sums to rotary_dim / 2 = 6
                mrope_interleaved=True,
            ),
        ),
        vision=dict(depth=1, hidden_size=12, intermediate_size=20, num_heads=2, patch_size=2, temporal_patch_size=2,
                    spatial_merge_size=2, num_position_embeddings=9),  # fmt: skip
        experts_layout="per_expert",
        shards=2,
        f32_tensors=(),  # everything BF16, A_log included (what save_pretrained writes)
        template_in="tokenizer_config",
    ),
}


def build_config(spec: dict, ids: dict[str, int]) -> Qwen3_5MoeConfig:
    text = dict(spec["text"])
    text.update(
        hidden_act="silu",
        attention_bias=False,
        tie_word_embeddings=False,
        # the release's extra text_config keys (HF keeps unknown keys as attributes)
        attn_output_gate=True,
        mamba_ssm_dtype="float32",
        mtp_num_hidden_layers=1,
        mtp_use_dedicated_embeddings=False,
        # token ids remapped to the tiny tokenizer, as in the release's text_config
        eos_token_id=ids["<|endoftext|>"],
        bos_token_id=None,
        pad_token_id=None,
    )
    vision = dict(spec["vision"])
    vision.update(out_hidden_size=text["hidden_size"], in_channels=3, hidden_act="gelu_pytorch_tanh")
    return Qwen3_5MoeConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
    )


# ---------------------------------------------------------------------------------------------
# Weights: every parameter randomised at a realistic scale
# ---------------------------------------------------------------------------------------------

ZERO_CENTRED_NORMS = ("input_layernorm.weight", "post_attention_layernorm.weight", "q_norm.weight", "k_norm.weight")
LM_HEAD_GAIN = 3.0  # logits std ~ 3
ROUTER_GAIN = 3.0  # router logits std ~ 3: clear but varied top-k
SHARED_GATE_GAIN = 2.0


def randomize_(model: torch.nn.Module, gen: torch.Generator) -> None:
    def normal(shape, std, mean=0.0):
        return torch.randn(shape, generator=gen, dtype=torch.float32) * std + mean

    for name, p in model.named_parameters():
        shape = tuple(p.shape)
        if name.startswith("model.visual."):
            if name.endswith(".bias"):
                v = normal(shape, 0.02)
            elif ".norm" in name and len(shape) == 1:  # LayerNorm weight (plain w)
                v = normal(shape, 0.1, 1.0)
            else:
                fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
                v = normal(shape, 1.0 / math.sqrt(fan_in))
        elif name.endswith("embed_tokens.weight"):
            v = normal(shape, 1.0)
        elif name == "lm_head.weight":
            v = normal(shape, LM_HEAD_GAIN / math.sqrt(shape[1]))
        elif name.endswith(ZERO_CENTRED_NORMS) or name == "model.language_model.norm.weight":
            v = normal(shape, 0.2)  # used as (1 + w)
        elif name.endswith("linear_attn.norm.weight"):
            v = normal(shape, 0.2, 1.0)  # gated norm: plain w
        elif name.endswith("linear_attn.A_log"):
            # A = exp(A_log) spread log-uniformly over [0.03, 12] across the heads (shuffled). With
            # dt_bias ~ N(-1, 0.8) the per-head mean decay exp(g) spans ~0.995 (the state survives
            # whole chunks) to ~0.005 (the state is nearly reset every token); see the README table.
            n = shape[0]
            a = torch.linspace(math.log(0.03), math.log(12.0), n) + normal((n,), 0.2)
            v = a[torch.randperm(n, generator=gen)]
        elif name.endswith("linear_attn.dt_bias"):
            v = normal(shape, 0.8, -1.0)
        elif name.endswith("linear_attn.conv1d.weight"):  # [C, 1, K] depthwise
            v = normal(shape, 1.0 / math.sqrt(shape[-1]))
        elif name.endswith("linear_attn.in_proj_a.weight"):
            v = normal(shape, 0.7 / math.sqrt(shape[1]))
        elif name.endswith("linear_attn.in_proj_b.weight"):
            v = normal(shape, 1.5 / math.sqrt(shape[1]))
        elif name.endswith("mlp.gate.weight"):
            v = normal(shape, ROUTER_GAIN / math.sqrt(shape[1]))
        elif name.endswith("mlp.shared_expert_gate.weight"):
            v = normal(shape, SHARED_GATE_GAIN / math.sqrt(shape[1]))
        elif name.endswith("mlp.experts.gate_up_proj"):  # [E, 2I, H]
            v = normal(shape, 1.0 / math.sqrt(shape[2]))
        elif name.endswith("mlp.experts.down_proj"):  # [E, H, I]
            v = normal(shape, 1.0 / math.sqrt(shape[2]))
        elif name.endswith(".weight") and len(shape) == 2:  # every other Linear: [out, in]
            v = normal(shape, 1.0 / math.sqrt(shape[1]))
        else:
            raise AssertionError(f"no init rule for {name} {shape}")
        assert v.shape == p.shape
        with torch.no_grad():
            p.copy_(v)


def stored_dtype(name: str, spec: dict) -> torch.dtype:
    return torch.float32 if name.endswith(spec["f32_tensors"]) else torch.bfloat16


def round_to_storage_(model: torch.nn.Module, spec: dict) -> None:
    """Round every parameter to the dtype it is stored in, so the fp32 model IS the checkpoint."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(p.to(stored_dtype(name, spec)).to(torch.float32))


# ---------------------------------------------------------------------------------------------
# Checkpoint layout
# ---------------------------------------------------------------------------------------------


def read_dir_tensors(d: Path) -> dict[str, torch.Tensor]:
    out = {}
    for f in sorted(d.glob("*.safetensors")):
        with safe_open(str(f), "pt") as sf:
            for k in sf.keys():
                out[k] = sf.get_tensor(k)
    return out


def describe_native_layout(native: dict[str, torch.Tensor]) -> dict:
    per_expert = sorted(k for k in native if ".mlp.experts." in k and k.split(".mlp.experts.")[1][0].isdigit())
    fused = sorted(k for k in native if k.endswith((".mlp.experts.gate_up_proj", ".mlp.experts.down_proj")))
    a_log = [v.dtype for k, v in native.items() if k.endswith("A_log")]
    return {
        "experts": "per_expert" if per_expert else "fused",
        "example": (per_expert or fused)[:3],
        "A_log_dtype": str(a_log[0]).replace("torch.", ""),
    }


def fuse_experts(tensors: dict[str, torch.Tensor], num_experts: int) -> dict[str, torch.Tensor]:
    """{prefix}.experts.{e}.{gate,up,down}_proj.weight -> {prefix}.experts.gate_up_proj [E,2I,H] (gate rows
    first) and {prefix}.experts.down_proj [E,H,I]."""
    out, prefixes = {}, set()
    for k, v in tensors.items():
        if ".mlp.experts." in k and k.split(".mlp.experts.")[1][0].isdigit():
            prefixes.add(k.split(".mlp.experts.")[0] + ".mlp.experts")
        else:
            out[k] = v
    for pre in sorted(prefixes):
        g = [tensors[f"{pre}.{e}.gate_proj.weight"] for e in range(num_experts)]
        u = [tensors[f"{pre}.{e}.up_proj.weight"] for e in range(num_experts)]
        d = [tensors[f"{pre}.{e}.down_proj.weight"] for e in range(num_experts)]
        out[f"{pre}.gate_up_proj"] = torch.stack([torch.cat([g[e], u[e]], dim=0) for e in range(num_experts)])
        out[f"{pre}.down_proj"] = torch.stack(d)
    assert len(out) + 3 * num_experts * len(prefixes) - 2 * len(prefixes) == len(tensors)
    return out


def split_experts(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = {}
    for k, v in tensors.items():
        if k.endswith(".mlp.experts.gate_up_proj"):
            pre = k[: -len(".gate_up_proj")]
            inter = v.shape[1] // 2
            for e in range(v.shape[0]):
                out[f"{pre}.{e}.gate_proj.weight"] = v[e, :inter].clone()
                out[f"{pre}.{e}.up_proj.weight"] = v[e, inter:].clone()
        elif k.endswith(".mlp.experts.down_proj"):
            pre = k[: -len(".down_proj")]
            for e in range(v.shape[0]):
                out[f"{pre}.{e}.down_proj.weight"] = v[e].clone()
        else:
            out[k] = v
    return out


def mtp_tensors(cfg: Qwen3_5MoeConfig, gen: torch.Generator, experts_layout: str) -> dict[str, torch.Tensor]:
    """A full MTP block (names and shapes of the release's `mtp.*`), random; HF and solo must skip it."""
    tc = cfg.text_config
    H, hd, nh, nkv = tc.hidden_size, tc.head_dim, tc.num_attention_heads, tc.num_key_value_heads
    E, I, Is = tc.num_experts, tc.moe_intermediate_size, tc.shared_expert_intermediate_size

    def w(*shape):
        return (torch.randn(shape, generator=gen) / math.sqrt(shape[-1])).to(torch.bfloat16)

    def nrm(n):
        return (torch.randn((n,), generator=gen) * 0.2).to(torch.bfloat16)

    p = "mtp.layers.0."
    t = {
        "mtp.fc.weight": w(H, 2 * H),
        "mtp.norm.weight": nrm(H),
        "mtp.pre_fc_norm_embedding.weight": nrm(H),
        "mtp.pre_fc_norm_hidden.weight": nrm(H),
        p + "input_layernorm.weight": nrm(H),
        p + "post_attention_layernorm.weight": nrm(H),
        p + "self_attn.q_proj.weight": w(nh * hd * 2, H),
        p + "self_attn.k_proj.weight": w(nkv * hd, H),
        p + "self_attn.v_proj.weight": w(nkv * hd, H),
        p + "self_attn.o_proj.weight": w(H, nh * hd),
        p + "self_attn.q_norm.weight": nrm(hd),
        p + "self_attn.k_norm.weight": nrm(hd),
        p + "mlp.gate.weight": w(E, H),
        p + "mlp.shared_expert.gate_proj.weight": w(Is, H),
        p + "mlp.shared_expert.up_proj.weight": w(Is, H),
        p + "mlp.shared_expert.down_proj.weight": w(H, Is),
        p + "mlp.shared_expert_gate.weight": w(1, H),
        p + "mlp.experts.gate_up_proj": w(E, 2 * I, H),
        p + "mlp.experts.down_proj": w(E, H, I),
    }
    return split_experts(t) if experts_layout == "per_expert" else t


def shard_plan(names: list[str], cfg: Qwen3_5MoeConfig) -> dict[str, int]:
    """Two shards, split in the middle of the layer stack (HF-style: a layer may not straddle, but the
    globals and the tail of the stack land in the second file)."""
    n_layers = cfg.text_config.num_hidden_layers
    plan = {}
    for k in names:
        if k.startswith("model.language_model.layers."):
            layer = int(k.split(".")[3])
            plan[k] = 1 if layer < n_layers // 2 else 2
        elif k.startswith("model.language_model.embed_tokens"):
            plan[k] = 1
        else:  # final norm, lm_head, visual, mtp
            plan[k] = 2
    return plan


def save_checkpoint(out: Path, tensors: dict[str, torch.Tensor], spec: dict, cfg) -> list[str]:
    meta = {"format": "pt"}
    if spec["shards"] == 1:
        save_file(tensors, str(out / "model.safetensors"), metadata=meta)
        return ["model.safetensors"]
    plan = shard_plan(sorted(tensors), cfg)
    n = spec["shards"]
    files = [f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(1, n + 1)]
    for i, fname in enumerate(files, start=1):
        part = {k: v for k, v in tensors.items() if plan[k] == i}
        assert part, f"empty shard {fname}"
        save_file(part, str(out / fname), metadata=meta)
    index = {
        "metadata": {
            "total_parameters": sum(v.numel() for v in tensors.values()),
            "total_size": sum(v.numel() * v.element_size() for v in tensors.values()),
        },
        "weight_map": {k: files[plan[k] - 1] for k in sorted(tensors)},
    }
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    return files


# ---------------------------------------------------------------------------------------------
# HF runs
# ---------------------------------------------------------------------------------------------


def load_hf(d: Path) -> Qwen3_5MoeForConditionalGeneration:
    model, info = Qwen3_5MoeForConditionalGeneration.from_pretrained(
        str(d),
        dtype=torch.float32,
        attn_implementation="eager",
        experts_implementation="eager",
        output_loading_info=True,
    )
    assert not info["missing_keys"], info["missing_keys"]
    assert not info.get("mismatched_keys"), info["mismatched_keys"]
    unexpected = [k for k in info["unexpected_keys"] if not k.startswith("mtp.")]
    assert not unexpected, unexpected
    model.eval()
    return model


def router_gaps(model, ids: torch.Tensor) -> float:
    """Smallest (k-th minus (k+1)-th) router logit over all tokens and layers, from one forward."""
    k = model.config.text_config.num_experts_per_tok
    gaps = []

    def hook(_m, _inp, out):
        logits = out[0].float()
        top = torch.topk(logits, k + 1, dim=-1).values
        gaps.append((top[:, k - 1] - top[:, k]).min().item())

    hs = [layer.mlp.gate.register_forward_hook(hook) for layer in model.model.language_model.layers]
    with torch.no_grad():
        model(input_ids=ids[None], use_cache=False)
    for h in hs:
        h.remove()
    return min(gaps)


def reference_forward(model, ids: torch.Tensor) -> dict[str, torch.Tensor]:
    lm = model.model.language_model
    captured = {}
    layer_outs = []
    hooks = [layer.register_forward_hook(lambda _m, _i, o: layer_outs.append(o.detach().clone())) for layer in lm.layers]
    hooks.append(lm.norm.register_forward_hook(lambda _m, i, o: captured.update(norm_in=i[0], norm_out=o)))
    with torch.no_grad():
        out = model(input_ids=ids[None], use_cache=False, output_hidden_states=True)
    for h in hooks:
        h.remove()
    n_layers = len(lm.layers)
    hs = out.hidden_states
    assert len(hs) == n_layers + 1
    # Pin down exactly what HF's hidden_states hold.
    with torch.no_grad():
        assert torch.equal(hs[0], lm.embed_tokens(ids[None]))
        for i in range(1, n_layers):
            assert torch.equal(hs[i], layer_outs[i - 1]), i
        assert torch.equal(captured["norm_in"], layer_outs[-1])
        assert torch.equal(hs[n_layers], captured["norm_out"]), "hidden_states[L] is not the final-normed state"
        assert torch.equal(model.lm_head(hs[n_layers]), out.logits)
    return {
        "tokens": ids.to(torch.int64).clone(),
        "logits": out.logits[0].float().contiguous(),
        "hidden_states": torch.stack([h[0] for h in hs]).float().contiguous(),
        "last_layer_output": layer_outs[-1][0].float().contiguous(),
    }


def cached_decode_logits(model, ids: torch.Tensor) -> torch.Tensor:
    """HF's other path: prefill DECODE_PREFILL tokens (chunked GDN, conv over the prompt), then one
    token per step (recurrent GDN kernel, conv-state update, KV cache)."""
    rows = []
    with torch.no_grad():
        out = model(input_ids=ids[None, :DECODE_PREFILL], use_cache=True)
        cache = out.cache
        rows.append(out.logits[0])
        for t in range(DECODE_PREFILL, len(ids)):
            out = model(input_ids=ids[None, t : t + 1], cache=cache, use_cache=True)
            cache = out.cache
            rows.append(out.logits[0])
    return torch.cat(rows).float()


def gdn_decay_stats(model, ids: torch.Tensor) -> list[float]:
    """(min, max) over all GDN v-heads of the per-token decay exp(g) averaged over the prompt, to show
    that the heads span fast to slow forgetting."""
    per_head, hooks = [], []
    for layer in model.model.language_model.layers:
        if hasattr(layer, "linear_attn"):
            m = layer.linear_attn

            def on_a(_mod, _args, a, m=m):  # a = in_proj_a(x), [1, T, Hv]
                g = -m.A_log.float().exp() * torch.nn.functional.softplus(a.float() + m.dt_bias)
                per_head.append(g.exp()[0].mean(0))

            hooks.append(m.in_proj_a.register_forward_hook(on_a))
    with torch.no_grad():
        model(input_ids=ids[None], use_cache=False)
    for h in hooks:
        h.remove()
    allh = torch.cat(per_head)
    return [float(allh.min()), float(allh.max())]


# ---------------------------------------------------------------------------------------------
# One fixture
# ---------------------------------------------------------------------------------------------


def make_fixture(name: str, spec: dict, tok: Tokenizer, tok_json: str, ids: dict[str, int], template: bytes) -> dict:
    out = FIXTURES / name
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    gen = torch.Generator().manual_seed(spec["seed"])
    torch.manual_seed(spec["seed"])  # HF's own init draws from the global generator; we overwrite all of it

    cfg = build_config(spec, ids)
    tc = cfg.text_config
    model = Qwen3_5MoeForConditionalGeneration(cfg)
    randomize_(model, gen)
    round_to_storage_(model, spec)
    model.set_attn_implementation("eager")
    model.set_experts_implementation("eager")
    model.eval()

    # 1. What does save_pretrained write natively?
    with tempfile.TemporaryDirectory() as tmp:
        bf16 = copy.deepcopy(model).to(torch.bfloat16)
        bf16.save_pretrained(tmp)
        native = read_dir_tensors(Path(tmp))
        native_cfg = json.loads((Path(tmp) / "config.json").read_text())
    native_layout = describe_native_layout(native)

    # 2. Convert to this fixture's layout, put back the tensors stored F32, add mtp.*
    fused_native = fuse_experts(native, tc.num_experts) if native_layout["experts"] == "per_expert" else native
    params = dict(model.named_parameters())
    assert set(fused_native) == set(params), set(fused_native) ^ set(params)
    tensors = {}
    for k, p in params.items():
        # save_pretrained + fusion must be lossless w.r.t. the in-memory (already rounded) weights
        assert torch.equal(fused_native[k].float(), p.detach().to(torch.bfloat16).float()), k
        tensors[k] = p.detach().to(stored_dtype(k, spec)).contiguous()
    if spec["experts_layout"] == "per_expert":
        tensors = split_experts(tensors)
    tensors.update(mtp_tensors(cfg, gen, spec["experts_layout"]))
    files = save_checkpoint(out, tensors, spec, cfg)

    # 3. config.json (the full Qwen3_5MoeConfig as HF writes it), generation_config.json
    native_cfg["text_config"]["dtype"] = "bfloat16"
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

    # 4. tokenizer + chat template
    (out / "tokenizer.json").write_text(tok_json)
    in_config = template.decode("utf-8") if spec["template_in"] == "tokenizer_config" else None
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(ids, in_config), indent=2, ensure_ascii=False) + "\n")
    if spec["template_in"] == "file":
        (out / "chat_template.jinja").write_bytes(template)
    check_tokenizer(out, tok, ids)

    # 5. HF must load this layout and reproduce the in-memory model exactly
    loaded = load_hf(out)
    lsd, msd = loaded.state_dict(), model.state_dict()
    assert set(lsd) == set(msd)
    for k in msd:
        assert lsd[k].dtype == torch.float32 and torch.equal(lsd[k], msd[k]), k
    assert loaded.config.text_config.layer_types == spec["text"]["layer_types"]
    assert loaded.config.text_config.linear_conv_kernel_dim == spec["text"]["linear_conv_kernel_dim"]

    # 6. tokens: random ids over the tokenizer's range with some special tokens; re-drawn until no
    #    routing decision is within ROUTER_MIN_GAP of a tie
    n_tok = tok.get_vocab_size(with_added_tokens=True)
    rng = np.random.default_rng(spec["seed"])
    specials = [ids[s] for s in ("<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>")]
    for attempt in range(100):
        arr = rng.integers(0, n_tok, size=T)
        arr[0] = ids["<|im_start|>"]
        pos = rng.choice(np.arange(1, T), size=len(specials), replace=False)
        arr[pos] = specials
        tokens = torch.from_numpy(arr.astype(np.int64))
        gap = router_gaps(loaded, tokens)
        if gap >= ROUTER_MIN_GAP:
            break
    else:
        raise RuntimeError("could not find tokens with clear routing")

    # 7. the reference: one fp32 forward of the loaded checkpoint; it must equal the in-memory model
    ref = reference_forward(loaded, tokens)
    with torch.no_grad():
        mem_logits = model(input_ids=tokens[None], use_cache=False).logits[0]
    assert torch.equal(mem_logits, ref["logits"]), (mem_logits - ref["logits"]).abs().max()

    # 8. HF self-consistency: prefill + token-by-token decode vs the single forward
    dec = cached_decode_logits(loaded, tokens)
    scale = ref["logits"].abs().max().item()
    self_err = (dec - ref["logits"]).abs().max().item() / scale
    assert self_err < SELF_CONSISTENCY_RTOL, self_err

    # One metadata key: safetensors writes the metadata map in hash order, so several keys would make
    # the file bytes differ from run to run.
    meta = {
        "solo": json.dumps(
            {
                "description": f"solo fixture {name}: HF fp32 reference outputs, see fixtures/README.md",
                "transformers": transformers.__version__,
                "torch": torch.__version__,
                "T": T,
                "hidden_states": "[0]=embeddings, [i]=output of layer i-1 (1<=i<L), [L]=final_norm(output of layer L-1)",
            },
            sort_keys=True,
        )
    }
    save_file(ref, str(out / "hf_reference.safetensors"), metadata=meta)

    decay = gdn_decay_stats(loaded, tokens)
    logits = ref["logits"]
    return {
        "name": name,
        "files": files,
        "native_layout": native_layout,
        "tensor_dtypes": dtype_summary(tensors),
        "n_tensors": len(tensors),
        "n_tokens_vocab": n_tok,
        "tokens_range": (int(tokens.min()), int(tokens.max())),
        "router_min_gap": gap,
        "token_attempts": attempt + 1,
        "max_abs_logit": float(logits.abs().max()),
        "logit_std": float(logits.std()),
        "self_consistency_rel": self_err,
        "mem_vs_loaded_max_abs": float((mem_logits - logits).abs().max()),
        "gdn_mean_decay_range": decay,
        "hidden_max_abs": [float(h.abs().max()) for h in ref["hidden_states"]],
        "config": spec["text"],
        "ids": ids,
    }


def dtype_summary(tensors: dict[str, torch.Tensor]) -> dict[str, str]:
    """{kind of tensor (name with layer/expert indices replaced by N/E): dtype}"""
    import re

    kinds = {}
    for k, v in tensors.items():
        kind = re.sub(r"\.layers\.\d+\.", ".layers.N.", k)
        kind = re.sub(r"\.experts\.\d+\.", ".experts.E.", kind)
        kind = re.sub(r"\.blocks\.\d+\.", ".blocks.N.", kind)
        d = str(v.dtype).replace("torch.", "")
        kinds.setdefault(kind, set()).add(d)
    return {k: ",".join(sorted(v)) for k, v in sorted(kinds.items())}


def check_tokenizer(d: Path, tok: Tokenizer, ids: dict[str, int]) -> None:
    hf = AutoTokenizer.from_pretrained(str(d))
    # includes combining marks (q + U+0301, Devanagari): the qwen35 regex keeps \\p{M} inside words
    text = (
        "<|im_start|>user\nHello, world! It's 2025 — café. naq\u0301x क्षि<|im_end|>\n"
        "<think>\n</think>\n\n<tool_call>x</tool_call>"
    )
    want = tok.encode(text, add_special_tokens=False).ids
    got = hf(text, add_special_tokens=False)["input_ids"]
    assert got == want, (got, want)
    assert hf.decode(got) == text
    assert hf.eos_token == "<|im_end|>" and hf.pad_token == "<|endoftext|>" and hf.bos_token is None
    assert hf.convert_tokens_to_ids("<think>") == ids["<think>"]
    msgs = [{"role": "user", "content": "Name the two colors of a chessboard."}]
    rendered = hf.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert rendered.endswith("<|im_start|>assistant\n<think>\n"), rendered


# ---------------------------------------------------------------------------------------------
# README
# ---------------------------------------------------------------------------------------------


def write_readme(results: list[dict], ids: dict[str, int], n_tok: int) -> None:
    keys = [
        "vocab_size", "hidden_size", "num_hidden_layers", "layer_types", "full_attention_interval",
        "num_attention_heads", "num_key_value_heads", "head_dim", "linear_num_key_heads",
        "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim",
        "num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size",
        "rms_norm_eps", "max_position_embeddings", "rope_parameters",
    ]  # fmt: skip
    a, b = results

    def fmt(v):
        if isinstance(v, list) and v and isinstance(v[0], str):
            return "[" + ", ".join("F" if x == F else "L" for x in v) + "]"
        if isinstance(v, dict):
            return ", ".join(f"{k}={v[k]}" for k in v)
        return str(v)

    rows = "\n".join(f"| {k} | {fmt(a['config'][k])} | {fmt(b['config'][k])} |" for k in keys)

    def derived(c):
        rd = int(c["head_dim"] * c["rope_parameters"]["partial_rotary_factor"])
        kd = c["linear_num_key_heads"] * c["linear_key_head_dim"]
        vd = c["linear_num_value_heads"] * c["linear_value_head_dim"]
        return rd, kd, vd, 2 * kd + vd

    da, db = derived(a["config"]), derived(b["config"])
    special = ", ".join(f"`{k}`={v}" for k, v in ids.items())
    dtypes_a = "\n".join(f"| `{k}` | {v} |" for k, v in a["tensor_dtypes"].items())
    dtypes_b = "\n".join(f"| `{k}` | {v} |" for k, v in b["tensor_dtypes"].items())

    def stats(r):
        return (
            f"| {r['name']} | {r['tokens_range'][0]}..{r['tokens_range'][1]} | {r['max_abs_logit']:.3f} | "
            f"{r['logit_std']:.3f} | {r['router_min_gap']:.2e} | {r['self_consistency_rel']:.2e} | "
            f"{r['gdn_mean_decay_range'][0]:.2e}..{r['gdn_mean_decay_range'][1]:.3f} |"
        )

    text = f"""# Test fixtures

Generated by `scripts/make_fixtures.py`; do not edit by hand. Regenerate with

    pip install -r scripts/requirements-fixtures.txt
    python scripts/make_fixtures.py

(transformers {transformers.__version__}, torch {torch.__version__}, safetensors {safetensors.__version__},
tokenizers {tokenizers.__version__}; deterministic: seeded, single-threaded, CPU, a few seconds).

Two tiny random checkpoints of the real architecture (`Qwen3_5MoeForConditionalGeneration`,
model_type `qwen3_5_moe`, text model under `text_config`) in the real HF layout, plus HF's fp32
outputs for a {T}-token prompt. They differ in every width a Rust implementation could hard-code, and
in the on-disk layout, so a loader or forward pass that passes both has read everything from the
config and the safetensors headers.

## The two fixtures

| text_config | tiny-a | tiny-b |
|---|---|---|
{rows}
| *derived:* rotary dim / GDN key_dim / value_dim / conv_dim | {da[0]} / {da[1]} / {da[2]} / {da[3]} | {db[0]} / {db[1]} / {db[2]} / {db[3]} |
| attention GQA group / GDN v-heads per k-head | {a['config']['num_attention_heads'] // a['config']['num_key_value_heads']} / {a['config']['linear_num_value_heads'] // a['config']['linear_num_key_heads']} | {b['config']['num_attention_heads'] // b['config']['num_key_value_heads']} / {b['config']['linear_num_value_heads'] // b['config']['linear_num_key_heads']} |

Both also have `attn_output_gate: true`, `mamba_ssm_dtype: "float32"`, `mtp_num_hidden_layers: 1`,
`mtp_use_dedicated_embeddings: false`, `hidden_act: silu`, `tie_word_embeddings: false`, and a
depth-1 vision tower (`vision_config`, tensors `model.visual.*`) that the text engine ignores.
tiny-b's `full_attention_interval: 4` deliberately contradicts its `layer_types`: HF only uses the
interval when `layer_types` is absent, so **read `layer_types`**.

| | tiny-a | tiny-b |
|---|---|---|
| weight files | `{', '.join(a['files'])}` | `{', '.join(b['files'])}` + `model.safetensors.index.json` (`weight_map`) |
| routed experts | **fused**: `mlp.experts.gate_up_proj` [E, 2I, H] (rows 0..I-1 gate, I..2I-1 up), `mlp.experts.down_proj` [E, H, I], no `.weight` suffix (the bf16 release's layout) | **per expert**: `mlp.experts.{{e}}.gate_proj.weight` [I, H], `up_proj.weight` [I, H], `down_proj.weight` [H, I] (what `save_pretrained` writes; the FP8 release's layout) |
| `linear_attn.A_log` | **F32** (as the release) | BF16 (as `save_pretrained` writes it) |
| every other tensor | BF16 | BF16 |
| chat template | `chat_template.jinja` (byte-exact Qwen3.6 template) | no `.jinja`; the same template in `tokenizer_config.json` → `chat_template` |
| `mtp.*` | a full MTP block (fc, norms, one attention layer, MoE in the fused layout) | the same, experts per expert |

`mtp.*` tensors must be skipped by the loader (HF ignores `^mtp.*`). Tensor dtypes as saved:

<details><summary>tiny-a</summary>

| tensor kind | dtype |
|---|---|
{dtypes_a}

</details>
<details><summary>tiny-b</summary>

| tensor kind | dtype |
|---|---|
{dtypes_b}

</details>

Weights: every parameter is random at a realistic scale: linear weights N(0, 1/fan_in), embeddings
N(0, 1), lm_head N(0, {LM_HEAD_GAIN}²/H), router N(0, {ROUTER_GAIN}²/H); zero-centred norms (input, post,
final, q_norm, k_norm; used as 1+w) N(0, 0.2²); the GDN gated norm (plain w) 1 + N(0, 0.2²);
A = exp(A_log) log-spread over [0.03, 12] across heads, dt_bias N(-1, 0.8²), so per-head decays range
from state-keeping to state-resetting. The fp32 model is rounded to the stored dtype before anything
is computed, so the checkpoint *is* the model the reference ran.

## Tokenizer (same in both)

`tokenizer.json`: byte-level BPE trained with `tokenizers` on built-in English + code text:
{BPE_VOCAB_SIZE} BPE tokens (256 byte symbols + {BPE_VOCAB_SIZE - 256} merges) then Qwen's 26 added tokens, {n_tok} ids in all
(fewer than either `vocab_size`; the rest of the embedding rows are padding, like the release's 248320).
Qwen3.5 pre-tokenizer (Split with the `qwen35` regex, `\\p{{M}}` in the letter class, then ByteLevel
with `use_regex: false`), NFC normalizer, ByteLevel decoder and post-processor.
`tokenizer_config.json`: `Qwen2Tokenizer`, eos `<|im_end|>`, pad `<|endoftext|>`, no bos,
`add_bos_token: false`. Added tokens keep the real strings and `special` flags (`<tool_call>`,
`</tool_call>`, `<tool_response>`, `</tool_response>`, `<think>`, `</think>` are `special: false`):
{special}.

Ids in the configs, remapped like the release: `text_config.eos_token_id` = {ids['<|endoftext|>']} (`<|endoftext|>`);
`generation_config.json` `eos_token_id` = [{ids['<|im_end|>']}, {ids['<|endoftext|>']}] (`<|im_end|>`, `<|endoftext|>`), pad and bos
{ids['<|endoftext|>']}; top-level `image_token_id` {ids['<|image_pad|>']}, `video_token_id` {ids['<|video_pad|>']},
`vision_start_token_id` {ids['<|vision_start|>']}, `vision_end_token_id` {ids['<|vision_end|>']}.

## Reference outputs: `hf_reference.safetensors`

HF transformers in fp32 (`from_pretrained(dir, dtype=torch.float32, attn_implementation="eager",
experts_implementation="eager")`, eval, no_grad), **one forward over all {T} tokens without a cache**
(so the GDN layers run HF's chunked prefill: chunks of 64, 64 and a ragged 22).

| tensor | dtype | shape | holds |
|---|---|---|---|
| `tokens` | I64 | [{T}] | the prompt: ids drawn uniformly from [0, {n_tok}) (the tokenizer's ids, not the padding rows), position 0 = `<|im_start|>`, plus `<|im_end|>`, `<|endoftext|>`, `<think>`, `</think>`, `<tool_call>` at random positions; positions are 0..{T - 1} |
| `logits` | F32 | [{T}, vocab_size] | lm_head output at every position |
| `hidden_states` | F32 | [num_hidden_layers + 1, {T}, hidden_size] | HF `output_hidden_states`: **[0]** = `embed_tokens(tokens)`; **[i]** for 1 ≤ i ≤ L−1 = output of decoder layer i−1 (the residual stream after its MoE add); **[L]** = `model.norm(output of layer L−1)`, i.e. *after* the final RMSNorm (HF replaces the last entry with `last_hidden_state`) — exactly what lm_head multiplies |
| `last_layer_output` | F32 | [{T}, hidden_size] | output of decoder layer L−1 *before* the final norm (what `hidden_states[L]` would hold without HF's replacement) |

The script asserts each of these identities, that HF loads both layouts and reproduces the
in-memory model bit-for-bit, and that HF's cached path (prefill the first {DECODE_PREFILL} tokens, then one
token at a time through the recurrent GDN kernel, the conv-state update and the KV cache) matches the
single forward to {SELF_CONSISTENCY_RTOL:g} of max |logit| (that copy is not stored). The prompt is re-drawn until every
routing decision has a margin ≥ {ROUTER_MIN_GAP:g} between the k-th and (k+1)-th router logit, so an f32
reimplementation cannot flip an expert choice by rounding.

| fixture | token id range | max \\|logit\\| | logit std | min router gap | HF cached vs single forward (rel. to max \\|logit\\|) | GDN per-head mean exp(g) range |
|---|---|---|---|---|---|---|
{stats(a)}
{stats(b)}

## What HF does here that a reimplementation must copy

Read from transformers {transformers.__version__} `models/qwen3_5_moe/modeling_qwen3_5_moe.py`; the fp32 reference
has no intermediate bf16 rounding at all (every `.to(x.dtype)` in HF is a no-op in fp32), so an f32
implementation should agree to roughly 1e-5 relative.

- **Two different epsilons in a GDN layer.** The q/k l2norm uses a hard-coded `1e-6`
  (`x * rsqrt(sum(x²) + 1e-6)`) whatever the config says; the gated output norm, like every other
  RMSNorm, uses `rms_norm_eps` (tiny-b: `1e-5`). The q scale `1/sqrt(linear_key_head_dim)` comes after the l2norm.
- **Partial RoPE:** rotary dim = `int(head_dim * partial_rotary_factor)`; `inv_freq[i] = theta^(-2i/rd)`;
  NeoX `rotate_half` inside the first rd dims only (pairs (i, i + rd/2)); the rest pass through.
  q_norm/k_norm (1+w, over the whole head_dim) come before RoPE. Positions are 0-based absolute.
- **mRoPE = 1-D RoPE for text.** With no image/video HF expands the 1-D positions to three identical
  T/H/W rows, so the interleaved section assignment (`mrope_section`, which sums to rd/2 here as
  [11,11,10] sums to 32 in the release) cannot change anything.
- **Conv:** `F.conv1d(padding=K-1)[..., :T]` then SiLU, depthwise, no bias, K from
  `linear_conv_kernel_dim` (tiny-b: 3). HF's cache keeps the last **K** pre-conv columns (not K−1); only
  the last K−1 are ever read. Decode (T=1 with a cache) runs `causal_conv1d_update` and the recurrent
  delta rule; anything longer runs the chunked delta rule (chunk 64, zero-padded ragged tail) with
  `initial_state` from the cache.
- **GDN head sharing:** `repeat_interleave`: v-head j reads q/k head `j // (Hv/Hk)` (tiny-a 2, tiny-b 3).
- **Attention:** q_proj rows are per-head `[q_h | gate_h]` blocks of head_dim; scale `head_dim^-0.5`;
  query head h reads kv head `h // (heads/kv_heads)`; output `* sigmoid(gate)` before o_proj.
- **Router:** softmax over all experts, `torch.topk` of the probabilities, renormalise over the k
  (always; there is no `norm_topk_prob` key). Shared expert scaled by `sigmoid(shared_expert_gate(x))`.
- **`save_pretrained` writes experts per expert** (`experts.{{e}}.{{gate,up,down}}_proj.weight`, via the
  `qwen2_moe` weight-conversion mapping run in reverse) and A_log as BF16; `from_pretrained` accepts
  the fused layout as well (those names are the module's own parameters).
- **Tokenizer:** `AutoTokenizer` ignores `tokenizer_class: Qwen2Tokenizer` for model_type
  `qwen3_5_moe` (listed in `MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS`) and rebuilds a
  `Qwen3_5Tokenizer` from the vocab and merges with the same `qwen35` regex; its ids equal those of
  `tokenizer.json` read directly (asserted, including combining marks).

## Chat template cases

`chat_template_cases.json` (if present) is written by `scripts/template_cases.py`, which
`make_fixtures.py` calls at the end with the tiny-a tokenizer.
"""
    (FIXTURES / "README.md").write_text(text)


def main() -> None:
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    FIXTURES.mkdir(exist_ok=True)

    template = find_chat_template()
    tok = build_tokenizer()
    tok_json = tokenizer_json(tok)
    ids = token_ids(tok)
    n_tok = tok.get_vocab_size(with_added_tokens=True)

    results = []
    for name, spec in FIXTURE_SPECS.items():
        r = make_fixture(name, spec, tok, tok_json, ids, template)
        results.append(r)
        sizes = {p.name: p.stat().st_size for p in sorted((FIXTURES / name).iterdir())}
        print(f"== {name}: {sum(sizes.values()) / 1024:.0f} KiB {sizes}")
        for k in ("native_layout", "tokens_range", "token_attempts", "router_min_gap", "max_abs_logit", "logit_std",
                  "self_consistency_rel", "mem_vs_loaded_max_abs", "gdn_mean_decay_range", "hidden_max_abs"):  # fmt: skip
            print(f"   {k}: {r[k]}")
        print("   dtypes:", json.dumps(r["tensor_dtypes"], indent=None))

    # the two fixtures' chat templates must render identically (file vs tokenizer_config fallback)
    ta, tb = (AutoTokenizer.from_pretrained(str(FIXTURES / n)) for n in ("tiny-a", "tiny-b"))
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert ta.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True) == tb.apply_chat_template(
        msgs, tokenize=False, add_generation_prompt=True
    )

    write_readme(results, ids, n_tok)

    cases = REPO / "scripts" / "template_cases.py"
    if os.path.exists(cases):
        sys.path.insert(0, str(cases.parent))
        import template_cases  # noqa: E402  (written by someone else, concurrently)

        template_cases.write_template_cases(str(FIXTURES / "tiny-a"), str(FIXTURES / "chat_template_cases.json"))
        print("wrote", FIXTURES / "chat_template_cases.json")


if __name__ == "__main__":
    main()
