#!/usr/bin/env python3
"""int4 quality (issue #40): solo on a GPTQ-Int4 checkpoint of the official shape (routed experts
4-bit, symmetric, groups of 128, desc_act off; everything else bf16) against the truth
(transformers in fp32 on the dequantised weights), with transformers' own bf16 run of the same
weights as the noise floor; and, Lily-style, against solo on the bf16 weights the int4 ones were
made from (top-1 agreement, perplexity delta: the quantisation's own cost, reported).

Runs on the GPU machine (torch + transformers there), on a full-width random slice:

    python3 scripts/int4_parity.py --solo gpu-bin/solo --dir /tmp/int4-slice --layers 4 --out $OUT

The checkpoint is written in GPTQ's exact packing by make_int4_fixtures.py's packer (the one the
CPU fixtures use). Pass: mean KL(truth ‖ solo-int4) ≤ 1.5 × mean KL(truth ‖ transformers-bf16).
"""
import argparse, json, os, sys

import torch
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fp8_parity import perplexity, run_solo  # noqa: E402
from make_int4_fixtures import pack_gptq, quantise  # noqa: E402
from slice_parity import make_confident, metrics, randomise, real_config  # noqa: E402
from transformers import Qwen3_5MoeForCausalLM  # noqa: E402

GROUP = 128
QUANT_CONFIG = {"bits": 4, "group_size": GROUP, "desc_act": False, "sym": True, "checkpoint_format": "gptq",
                "quant_method": "gptq", "dynamic": {"-:.*shared_expert.*": {}}}


@torch.no_grad()
def make_int4_checkpoint(model, cfg, out):
    """Writes the GPTQ checkpoint of `model` to `out` and puts the dequantised values (f32) in `model`."""
    os.makedirs(out, exist_ok=True)
    tensors = {}
    for name, p in model.named_parameters():
        if not name.endswith(("mlp.experts.gate_up_proj", "mlp.experts.down_proj")):
            tensors[name] = p.detach().to(torch.bfloat16).cpu().contiguous()
            continue
        pre = name.rsplit(".", 1)[0]
        inter = p.shape[1] // 2
        for e in range(p.shape[0]):
            parts = ([("gate_proj", p[e, :inter]), ("up_proj", p[e, inter:])] if name.endswith("gate_up_proj")
                     else [("down_proj", p[e])])
            dqs = []
            for kind, w in parts:
                w = w.float().cpu()  # (the packer works on the CPU)
                g_idx = torch.arange(w.shape[1]) // GROUP
                q, s, z = quantise(w, g_idx, w.shape[1] // GROUP, True, torch.float16)
                for k, v in pack_gptq(q, s, z, g_idx, zero_minus_one=True).items():
                    if k != "g_idx":
                        tensors[f"{pre}.{e}.{kind}.{k}"] = v.cpu().contiguous()
                dqs.append((q - z[:, g_idx]).float() * s.float()[:, g_idx])
            p[e] = torch.cat(dqs).to(p.device, p.dtype)
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    cfg.save_pretrained(out)
    path = os.path.join(out, "config.json")
    c = json.load(open(path))
    c["quantization_config"] = QUANT_CONFIG
    json.dump(c, open(path, "w"), indent=2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--solo", required=True)
    ap.add_argument("--dir", default="/tmp/solo-int4-slice")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=576)
    ap.add_argument("--prefill", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    cfg = real_config(a.layers)
    with torch.device("cuda"):
        model = Qwen3_5MoeForCausalLM(cfg).to(torch.bfloat16)
    randomise(model, a.seed, "hf-router")
    model.eval()
    ids = torch.randint(0, 200000, (a.tokens,), generator=torch.Generator().manual_seed(a.seed + 1))
    make_confident(model, ids)
    bf16_dir, int4_dir = os.path.join(a.dir, "bf16"), os.path.join(a.dir, "int4")
    model.save_pretrained(bf16_dir)
    model = model.float()  # the dequantised experts exactly: (q − z) · s in f32
    make_int4_checkpoint(model, cfg, int4_dir)
    with torch.no_grad():
        truth = model(ids[None].cuda()).logits[0].float()
        hf_bf16 = model.to(torch.bfloat16)(ids[None].cuda()).logits[0].float()
    del model
    torch.cuda.empty_cache()
    int4 = run_solo(a, int4_dir, ids, "int4")
    bf16 = run_solo(a, bf16_dir, ids, "bf16")
    r = {"layers": a.layers, "tokens": a.tokens, "prefill": a.prefill,
         "solo_int4_vs_truth": metrics(truth, int4), "hf_bf16_vs_truth": metrics(truth, hf_bf16),
         "solo_int4_vs_truth_decode": metrics(truth[a.prefill:], int4[a.prefill:]),
         "hf_bf16_vs_truth_decode": metrics(truth[a.prefill:], hf_bf16[a.prefill:]),
         "solo_bf16_vs_truth": metrics(truth, bf16)}
    p4, p16 = perplexity(int4, ids), perplexity(bf16, ids)
    r["lily"] = {"top1_agreement_int4_vs_bf16": (int4.argmax(-1) == bf16.argmax(-1)).float().mean().item(),
                 "ppl_int4": p4, "ppl_bf16": p16, "ppl_delta_rel": p4 / p16 - 1,
                 "kl_bf16_to_int4": metrics(bf16, int4)["mean_kl"]}
    r["kl_ratio"] = r["solo_int4_vs_truth"]["mean_kl"] / r["hf_bf16_vs_truth"]["mean_kl"]
    r["pass"] = r["kl_ratio"] <= 1.5
    json.dump(r, open(os.path.join(a.out, f"int4_parity_{a.layers}l.json"), "w"), indent=2)
    for k, m in r.items():
        if isinstance(m, dict) and "mean_kl" in m:
            print(f"{k:>26} | top-1 {m['top1_agreement']*100:6.2f}% | mean KL {m['mean_kl']:9.2e} | max rel {m['max_rel_logit_err']:9.2e}")
    print("lily:", json.dumps(r["lily"]))
    print(f"solo-int4 KL / HF-bf16 KL = {r['kl_ratio']:.2f} (≤ 1.5 to pass): {'PASS' if r['pass'] else 'FAIL'}")
    sys.exit(0 if r["pass"] else 1)


if __name__ == "__main__":
    main()
