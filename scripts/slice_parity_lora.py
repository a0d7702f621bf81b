#!/usr/bin/env python3
"""Full-width slice with a random PEFT LoRA adapter: solo's CUDA backend against transformers +
PEFT, the issue's bar being KL(PEFT fp32 ‖ solo) ≤ KL(PEFT fp32 ‖ PEFT bf16).

Runs on the GPU machine (torch + transformers there; PEFT and accelerate, pure Python, from
gpu-bin/peftlib when the machine lacks them: `pip install --no-deps --target gpu-bin/peftlib
peft==0.21.2 accelerate psutil`). Steps, for each adapter shape of --targets:
  1. the slice of slice_parity.py (real widths, --layers layers, the hf-router-confident init),
     saved as a bf16 checkpoint in --dir (shared with slice_parity.py's);
  2. PEFT wraps it with a rank --rank adapter: `mixers` adapts the attention and GDN projections
     (the decode step's fused form), `all` every linear layer and the routed experts' fused
     tensors (target_parameters: the layer-by-layer forward); A ~ N(0, 1/in) and B drawn so that
     s·B·A is ~0.3 of the base weights' scale; saved with save_pretrained;
  3. PEFT's forward in bf16 and in fp32 over --tokens random ids; `solo logits --backend cuda
     --lora` on the same ids (the first --prefill in one prefill, the rest one decode step each);
  4. top-1 agreement and KL for solo and PEFT bf16 against PEFT fp32, and how far the adapter
     moves PEFT fp32's own logits.

    python3 scripts/slice_parity_lora.py --solo gpu-bin/solo --dir /tmp/solo-slice --out $OUT
"""
import argparse, json, math, os, sys, time

import torch
from transformers import Qwen3_5MoeForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slice_parity import make_confident, metrics, randomise, real_config, solo_logits  # noqa: E402

try:
    import peft  # noqa: F401
except ImportError:
    sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpu-bin", "peftlib"))
from peft import LoraConfig, get_peft_model  # noqa: E402

ATTENTION = ["q_proj", "k_proj", "v_proj", "o_proj"]
GDN = ["in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj"]
SHARED = ["gate_proj", "up_proj", "down_proj", "shared_expert_gate"]
TARGETS = {
    "mixers": dict(target_modules=ATTENTION + GDN),
    "all": dict(target_modules=ATTENTION + GDN + SHARED,
                target_parameters=["mlp.experts.gate_up_proj", "mlp.experts.down_proj"]),
}
BASE_STD = 0.02  # the hf init's matrices


@torch.no_grad()
def randomise_lora(model, rank, alpha, seed):
    """A ~ N(0, 1/in); B ~ N(0, σ²) with s·√r·σ/√in = 0.3 · BASE_STD, so ΔW's entries are ~0.3 of
    the base weights'."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    s = alpha / rank
    params = dict(model.named_parameters())
    for name, p in sorted(params.items()):
        if ".lora_A." in name:
            p.copy_((torch.randn(p.shape, generator=g, device="cuda") / math.sqrt(p.shape[1])).to(p.dtype))
        elif ".lora_B." in name:
            fan_in = params[name.replace(".lora_B.", ".lora_A.")].shape[1]
            sigma = 0.3 * BASE_STD * math.sqrt(fan_in) / (s * math.sqrt(rank))
            p.copy_((torch.randn(p.shape, generator=g, device="cuda") * sigma).to(p.dtype))


def run(a, targets):
    init = "hf-router-confident"
    ckpt = os.path.join(a.dir, init)
    t0 = time.time()
    torch.manual_seed(a.seed)
    with torch.device("cuda"):
        model = Qwen3_5MoeForCausalLM(real_config(a.layers)).to(torch.bfloat16)
    randomise(model, a.seed, "hf-router")
    model.eval()
    g = torch.Generator().manual_seed(a.seed + 1)
    ids = torch.randint(0, 200000, (a.tokens,), generator=g)
    make_confident(model, ids)
    if not os.path.exists(os.path.join(ckpt, "config.json")):
        model.save_pretrained(ckpt)
    config = LoraConfig(r=a.rank, lora_alpha=2 * a.rank, **TARGETS[targets])
    pm = get_peft_model(model, config)
    randomise_lora(pm, a.rank, 2 * a.rank, a.seed + 2)
    adapter = os.path.join(a.dir, f"lora-{targets}-r{a.rank}")
    pm.save_pretrained(adapter)
    print(f"slice + {targets} adapter (rank {a.rank}) built and saved in {time.time() - t0:.0f} s", flush=True)

    x = ids[None].cuda()
    with torch.no_grad():
        bf16 = pm(input_ids=x).logits[0].float()
        pm.float()
        fp32 = pm(input_ids=x).logits[0].float()
        with pm.disable_adapter():
            base32 = pm(input_ids=x).logits[0].float()
    del pm, model
    torch.cuda.empty_cache()

    solo = solo_logits(a.solo, ckpt, ids, a.prefill, a.out, extra=("--lora", adapter))
    return {"targets": targets, "rank": a.rank, "layers": a.layers, "tokens": a.tokens, "prefill": a.prefill,
            "solo_vs_peft_fp32": metrics(fp32, solo),
            "solo_vs_peft_fp32_prefill": metrics(fp32[:a.prefill], solo[:a.prefill]),
            "solo_vs_peft_fp32_decode": metrics(fp32[a.prefill:], solo[a.prefill:]),
            "peft_bf16_vs_peft_fp32": metrics(fp32, bf16),
            "adapter_moves_fp32": metrics(fp32, base32)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--solo", required=True)
    ap.add_argument("--dir", default="/tmp/solo-slice")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=576)
    ap.add_argument("--prefill", type=int, default=512)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--targets", default="all,mixers", help="adapter shapes to test: all, mixers")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    a = ap.parse_args()

    reports = [run(a, t) for t in a.targets.split(",")]
    with open(os.path.join(a.out, "slice_parity_lora.json"), "w") as f:
        json.dump(reports, f, indent=2)
    ok = True
    for r in reports:
        print(f"\n{r['targets']} adapter, rank {r['rank']}, {a.layers} layers, {a.prefill} prefill + "
              f"{a.tokens - a.prefill} decode positions")
        print(f"{'comparison':>26} | {'top-1':>7} | {'mean KL':>9} | {'max KL':>9}")
        for key in [k for k in r if isinstance(r[k], dict)]:
            m = r[key]
            print(f"{key:>26} | {m['top1_agreement']*100:6.2f}% | {m['mean_kl']:9.2e} | {m['max_kl']:9.2e}")
        passed = r["solo_vs_peft_fp32"]["mean_kl"] <= r["peft_bf16_vs_peft_fp32"]["mean_kl"]
        print(f"{r['targets']}: KL(PEFT fp32 ‖ solo) ≤ KL(PEFT fp32 ‖ PEFT bf16): " + ("PASS" if passed else "FAIL"))
        ok &= passed
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
