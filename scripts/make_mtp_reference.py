#!/usr/bin/env python3
"""Record the MTP head's logits on the tiny fixtures: the truth solo's MTP draft must reproduce.

    pip install -r scripts/requirements-fixtures.txt
    python scripts/make_mtp_reference.py

transformers ignores `mtp.*`, so this script is the reference of the head's formula, written with
transformers' own decoder layer (fp32, eager attention with an explicit causal mask):

    x_t = fc(concat[RMSN(embed(tok_{t+1}); pre_fc_norm_embedding), RMSN(h_t; pre_fc_norm_hidden)])
    g_t = RMSN(DecoderLayer(x)_t; norm)          one full-attention layer with its own MoE
    draft logits_t = lm_head(g_t)                 predicts tok_{t+2}

h_t is the main model's final-normed hidden state at position t (what lm_head multiplies; taken
from the fixture's `hf_reference.safetensors`), and pair t sits at rope position t. A chained
draft feeds the head its own output: (g_t, d) with d = argmax(logits_t), at position t + 1.

Writes `fixtures/<name>/mtp_reference.safetensors`:
- `logits` [T-1, vocab]: the head over the pairs (h_t, tok_{t+1}), t = 0..T-2, in one pass;
- `chain_token` [1]: argmax of the last row; `chain_logits` [vocab]: the chained draft after it.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import Qwen3_5MoeConfig
from make_fixtures import read_dir_tensors
from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import (
    Qwen3_5MoeDecoderLayer,
    Qwen3_5MoeRMSNorm,
    Qwen3_5MoeTextRotaryEmbedding,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
NAMES = ["tiny-a", "tiny-b", "tiny-fp8"]


def dense(t: dict[str, torch.Tensor], name: str) -> torch.Tensor:
    """A tensor in fp32, dequantised (w = q · s per 128×128 block) when stored F8_E4M3."""
    w = t[name]
    if w.dtype != torch.float8_e4m3fn:
        return w.float()
    s = t[name + "_scale_inv"].float()
    s = s.repeat_interleave(128, 0)[: w.shape[0]].repeat_interleave(128, 1)[:, : w.shape[1]]
    return w.float() * s


def mtp_layer_state(t: dict[str, torch.Tensor], num_experts: int) -> dict[str, torch.Tensor]:
    """`mtp.layers.0.*` in transformers' layout (experts fused as gate_up_proj / down_proj)."""
    p = "mtp.layers.0."
    names = [k[len(p) :] for k in t if k.startswith(p) and not k.endswith("_scale_inv")]
    state = {k: dense(t, p + k) for k in names if ".experts." not in k}
    if p + "mlp.experts.gate_up_proj" in t:
        state["mlp.experts.gate_up_proj"] = dense(t, p + "mlp.experts.gate_up_proj")
        state["mlp.experts.down_proj"] = dense(t, p + "mlp.experts.down_proj")
    else:
        e = range(num_experts)
        gate_up = [torch.cat([dense(t, f"{p}mlp.experts.{x}.{w}_proj.weight") for w in ("gate", "up")]) for x in e]
        state["mlp.experts.gate_up_proj"] = torch.stack(gate_up)
        state["mlp.experts.down_proj"] = torch.stack([dense(t, f"{p}mlp.experts.{x}.down_proj.weight") for x in e])
    return state


def main() -> None:
    torch.manual_seed(0)
    for name in NAMES:
        d = FIXTURES / name
        cfg = Qwen3_5MoeConfig(**json.loads((d / "config.json").read_text())).text_config
        cfg._attn_implementation = "eager"
        cfg._experts_implementation = "eager"
        t = read_dir_tensors(d)  # the checkpoint (and the reference files beside it, unused)
        with safe_open(str(d / "hf_reference.safetensors"), "pt") as st:
            tokens = st.get_tensor("tokens")
            h = st.get_tensor("hidden_states")[-1]  # [T, H]: after the final norm
        prefix = "model.language_model."
        embed = dense(t, prefix + "embed_tokens.weight")
        lm_head = embed if cfg.tie_word_embeddings else dense(t, "lm_head.weight")

        H, eps = cfg.hidden_size, cfg.rms_norm_eps
        norms = {}
        for n in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
            norms[n] = Qwen3_5MoeRMSNorm(H, eps=eps)
            norms[n].load_state_dict({"weight": dense(t, f"mtp.{n}.weight")})
        fc = dense(t, "mtp.fc.weight")  # [H, 2H]
        full = cfg.layer_types.index("full_attention")
        layer = Qwen3_5MoeDecoderLayer(cfg, full).float().eval()
        missing, unexpected = layer.load_state_dict(mtp_layer_state(t, cfg.num_experts), strict=False)
        assert not missing and not unexpected, (missing, unexpected)
        rope = Qwen3_5MoeTextRotaryEmbedding(cfg)

        def head(hidden: torch.Tensor, next_tokens: torch.Tensor, start: int, past: list) -> torch.Tensor:
            """The head over pairs (hidden_i, next_tokens_i) at positions start.., with `past` pairs before."""
            x = torch.cat([norms["pre_fc_norm_embedding"](embed[next_tokens]), norms["pre_fc_norm_hidden"](hidden)], -1)
            x = torch.cat(past + [x @ fc.T])  # the layer re-run over every pair so far (no KV cache)
            n = x.shape[0]
            pos = torch.arange(n).view(1, 1, -1).expand(3, 1, -1)
            mask = torch.full((n, n), float("-inf")).triu(1)[None, None]
            out = layer(x[None], position_embeddings=rope(x[None], pos), attention_mask=mask)
            out = out[0] if isinstance(out, tuple) else out
            return norms["norm"](out[0, start:]), x

        with torch.no_grad():
            g, xs = head(h[:-1], tokens[1:], 0, [])
            logits = g @ lm_head.T  # [T-1, V]
            d_tok = logits[-1].argmax().view(1)
            past = [xs]
            g2, _ = head(g[-1:], d_tok, xs.shape[0], past)
            chain = (g2 @ lm_head.T)[0]
        out = {"logits": logits.contiguous(), "chain_token": d_tok.to(torch.int64), "chain_logits": chain.contiguous()}
        save_file(out, str(d / "mtp_reference.safetensors"))
        print(f"{name}: {logits.shape[0]} draft rows, chained token {d_tok.item()}")


if __name__ == "__main__":
    main()
