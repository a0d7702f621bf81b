#!/usr/bin/env python3
"""FP8 quality: solo on an FP8 checkpoint against the truth (transformers in fp32 on the
dequantised weights), with transformers' own bf16 run of the same weights as the noise floor, and
against solo on the bf16 weights the FP8 ones were made from (Lily-style: top-1 agreement and the
perplexity of the sequence under each).

Runs on the GPU machine (torch + transformers there). Two uses:

    # a full-width random slice (real widths, --layers layers), quantised here with the official
    # recipe (per 128×128 block s = amax/448, q = e4m3(w/s); experts per expert; embeddings,
    # lm_head, router, gates, conv, a/b and norms kept bf16)
    python3 scripts/fp8_parity.py --solo target/release/solo --dir /tmp/fp8-slice --layers 4 --out $OUT

    # any pair of checkpoints a user has (e.g. Qwen/Qwen3.6-35B-A3B-FP8 and Qwen/Qwen3.6-35B-A3B):
    # solo FP8 against solo bf16 only (transformers in fp32 would not fit the GPU)
    python3 scripts/fp8_parity.py --solo target/release/solo --fp8-dir FP8 --bf16-dir BF16 --out $OUT

Pass (slice): mean KL(truth ‖ solo-FP8) ≤ 1.5 × mean KL(truth ‖ transformers-bf16).
"""
import argparse, json, math, os, sys

import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slice_parity import make_confident, metrics, randomise, real_config, solo_logits  # noqa: E402
from transformers import Qwen3_5MoeForCausalLM  # noqa: E402

BLOCK, FP8_MAX = 128, 448.0
QUANTISED = ("linear_attn.in_proj_qkv.weight", "linear_attn.in_proj_z.weight", "linear_attn.out_proj.weight",
             "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
             "self_attn.o_proj.weight", "shared_expert.gate_proj.weight", "shared_expert.up_proj.weight",
             "shared_expert.down_proj.weight", "mlp.experts.gate_up_proj", "mlp.experts.down_proj")
QUANT_CONFIG = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                "weight_block_size": [BLOCK, BLOCK],
                "modules_to_not_convert": ["lm_head", "embed_tokens", "mlp.gate", "shared_expert_gate",
                                           "in_proj_a", "in_proj_b", "conv1d"]}


def quantise(w):
    """w [out, in] (out, in multiples of 128) → (q e4m3, s f32 [out/128, in/128], q·s f32)."""
    o, i = w.shape
    blocks = w.float().view(o // BLOCK, BLOCK, i // BLOCK, BLOCK)
    s = (blocks.abs().amax(dim=(1, 3)) / FP8_MAX).clamp(min=1e-12)
    q = (blocks / s[:, None, :, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    dq = (q.float() * s[:, None, :, None]).view(o, i)
    return q.view(o, i), s, dq


@torch.no_grad()
def make_fp8_checkpoint(model, cfg, out):
    """Writes the FP8 checkpoint of `model` to `out` and puts the dequantised values in `model`."""
    os.makedirs(out, exist_ok=True)
    tensors = {}
    for name, p in model.named_parameters():
        if not name.endswith(QUANTISED):
            tensors[name] = p.detach().to(torch.bfloat16).cpu().contiguous()
            continue
        if name.endswith(("experts.gate_up_proj", "experts.down_proj")):  # [E, out, in]: per expert
            pre = name.rsplit(".", 1)[0]
            inter = p.shape[1] // 2
            for e in range(p.shape[0]):
                parts = ([("gate_proj", p[e, :inter]), ("up_proj", p[e, inter:])] if name.endswith("gate_up_proj")
                         else [("down_proj", p[e])])
                dqs = []
                for kind, w in parts:
                    q, s, dq = quantise(w)
                    tensors[f"{pre}.{e}.{kind}.weight"] = q.cpu().contiguous()
                    tensors[f"{pre}.{e}.{kind}.weight_scale_inv"] = s.cpu().contiguous()
                    dqs.append(dq)
                p[e] = torch.cat(dqs).to(p.dtype)
        else:
            q, s, dq = quantise(p)
            tensors[name] = q.cpu().contiguous()
            tensors[name + "_scale_inv"] = s.cpu().contiguous()
            p.copy_(dq.to(p.dtype))
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    cfg.save_pretrained(out)
    path = os.path.join(out, "config.json")
    c = json.load(open(path))
    c["quantization_config"] = QUANT_CONFIG
    json.dump(c, open(path, "w"), indent=2)


def run_solo(a, ckpt, ids, tag):
    print(f"solo logits ({tag}):", flush=True)
    return solo_logits(a.solo, ckpt, ids, a.prefill, a.out)


def perplexity(logits, ids):
    """Of ids[1:] under logits[:-1]."""
    lp = torch.log_softmax(logits[:-1].float(), -1)
    nll = -lp.gather(-1, ids[1:].cuda()[:, None]).mean()
    return math.exp(nll.item())


def lily(fp8, bf16, ids):
    p8, p16 = perplexity(fp8, ids), perplexity(bf16, ids)
    return {"top1_agreement_fp8_vs_bf16": (fp8.argmax(-1) == bf16.argmax(-1)).float().mean().item(),
            "ppl_fp8": p8, "ppl_bf16": p16, "ppl_delta_rel": p8 / p16 - 1, "kl_bf16_to_fp8": metrics(bf16, fp8)["mean_kl"]}


def slice_report(a):
    torch.manual_seed(a.seed)
    cfg = real_config(a.layers)
    with torch.device("cuda"):
        model = Qwen3_5MoeForCausalLM(cfg).to(torch.bfloat16)
    randomise(model, a.seed, "hf-router")
    model.eval()
    g = torch.Generator().manual_seed(a.seed + 1)
    ids = torch.randint(0, 200000, (a.tokens,), generator=g)
    make_confident(model, ids)
    bf16_dir, fp8_dir = os.path.join(a.dir, "bf16"), os.path.join(a.dir, "fp8")
    model.save_pretrained(bf16_dir)
    make_fp8_checkpoint(model, cfg, fp8_dir)  # model now holds the dequantised weights (in bf16 storage)
    # the truth needs the dequantised values unrounded: rebuild them in fp32 from the checkpoint
    model = model.float()
    st = load_file(os.path.join(fp8_dir, "model.safetensors"))
    with torch.no_grad():
        params = dict(model.named_parameters())
        for name, p in params.items():
            if name.endswith(("experts.gate_up_proj", "experts.down_proj")):
                pre = name.rsplit(".", 1)[0]
                kinds = ["gate_proj", "up_proj"] if name.endswith("gate_up_proj") else ["down_proj"]
                for e in range(p.shape[0]):
                    p[e] = torch.cat([dequantise(st, f"{pre}.{e}.{k}.weight") for k in kinds])
            elif name.endswith(QUANTISED):
                p.copy_(dequantise(st, name))
        truth = model(ids[None].cuda()).logits[0].float()
        hf_bf16 = model.to(torch.bfloat16)(ids[None].cuda()).logits[0].float()
    del model, st
    torch.cuda.empty_cache()
    fp8 = run_solo(a, fp8_dir, ids, "fp8")
    bf16 = run_solo(a, bf16_dir, ids, "bf16")
    r = {"layers": a.layers, "tokens": a.tokens, "prefill": a.prefill,
         "solo_fp8_vs_truth": metrics(truth, fp8), "hf_bf16_vs_truth": metrics(truth, hf_bf16),
         "solo_fp8_vs_truth_decode": metrics(truth[a.prefill:], fp8[a.prefill:]),
         "hf_bf16_vs_truth_decode": metrics(truth[a.prefill:], hf_bf16[a.prefill:]),
         "solo_bf16_vs_truth": metrics(truth, bf16), "lily": lily(fp8, bf16, ids)}
    r["kl_ratio"] = r["solo_fp8_vs_truth"]["mean_kl"] / r["hf_bf16_vs_truth"]["mean_kl"]
    r["pass"] = r["kl_ratio"] <= 1.5
    return r


def dequantise(st, name):
    q, s = st[name].cuda(), st[name + "_scale_inv"].cuda().float()
    o, i = q.shape
    return (q.float().view(o // BLOCK, BLOCK, i // BLOCK, BLOCK) * s[:, None, :, None]).view(o, i)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--solo", required=True)
    ap.add_argument("--dir", default="/tmp/solo-fp8-slice")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=576)
    ap.add_argument("--prefill", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fp8-dir", help="an FP8 checkpoint to compare with --bf16-dir (no slice is made)")
    ap.add_argument("--bf16-dir")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    a = ap.parse_args()
    if a.fp8_dir:
        ids = torch.randint(0, 200000, (a.tokens,), generator=torch.Generator().manual_seed(a.seed))
        r = {"lily": lily(run_solo(a, a.fp8_dir, ids, "fp8"), run_solo(a, a.bf16_dir, ids, "bf16"), ids)}
    else:
        r = slice_report(a)
    json.dump(r, open(os.path.join(a.out, f"fp8_parity_{a.layers}l.json"), "w"), indent=2)
    for k, m in r.items():
        if isinstance(m, dict) and "mean_kl" in m:
            print(f"{k:>26} | top-1 {m['top1_agreement']*100:6.2f}% | mean KL {m['mean_kl']:9.2e} | max rel {m['max_rel_logit_err']:9.2e}")
    print("lily:", json.dumps(r["lily"]))
    if "kl_ratio" in r:
        print(f"solo-FP8 KL / HF-bf16 KL = {r['kl_ratio']:.2f} (≤ 1.5 to pass): {'PASS' if r['pass'] else 'FAIL'}")
        sys.exit(0 if r["pass"] else 1)


if __name__ == "__main__":
    main()
