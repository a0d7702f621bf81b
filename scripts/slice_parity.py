#!/usr/bin/env python3
"""Full-width slice parity: solo's CUDA backend against Hugging Face transformers in bf16 on the GPU.

Runs on the GPU machine (torch + transformers ≥ 5.17 there). Steps:
  1. build Qwen3.6-35B-A3B's text model with the real widths and --layers layers (default 4:
     three Gated DeltaNet layers and one full-attention layer), random weights of realistic scale,
     and save it as a bf16 checkpoint in --dir (local disk; ~8 GB for 4 layers);
  2. HF forward in bf16 over --tokens random ids (one pass; every position's logits);
  3. `solo logits --backend cuda` on the same ids: the first --prefill tokens in one prefill,
     the rest one decode step each;
  4. report top-1 agreement, mean KL(HF‖solo) and max relative logit error, for the prefill
     and decode positions. Pass: top-1 ≥ 99 % and mean KL ≤ 1e-3 nats. Also reported: solo
     against HF in fp32 (same weights), HF bf16 against HF fp32 (the reference's own rounding
     noise) and, with --cpu, solo's CUDA backend against its CPU reference.

    python3 scripts/slice_parity.py --solo target/release/solo --dir /tmp/slice --out $OUT
"""
import argparse, json, math, os, subprocess, sys, time

import torch
from safetensors.torch import load_file
from transformers import Qwen3_5MoeForCausalLM
from transformers.models.qwen3_5_moe import Qwen3_5MoeTextConfig


def real_config(layers):
    return Qwen3_5MoeTextConfig(
        vocab_size=248320, hidden_size=2048, num_hidden_layers=layers,
        layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(layers)],
        num_attention_heads=16, num_key_value_heads=2, head_dim=256, attn_output_gate=True,
        linear_num_key_heads=16, linear_num_value_heads=32, linear_key_head_dim=128,
        linear_value_head_dim=128, linear_conv_kernel_dim=4,
        num_experts=256, num_experts_per_tok=8, moe_intermediate_size=512,
        shared_expert_intermediate_size=512, rms_norm_eps=1e-6, max_position_embeddings=262144,
        rope_parameters={"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                         "mrope_section": [11, 11, 10], "mrope_interleaved": True},
        tie_word_embeddings=False, eos_token_id=248044,
    )


@torch.no_grad()
def randomise(model, seed, init, device="cuda"):
    """Every parameter random. `hf`: the scales of Hugging Face's own initialiser for this model
    (`initializer_range` 0.02 for matrices and embeddings, conv1d U(±1/√4), A_log = log U(1, 16),
    dt_bias ≈ 1), with the norm weights perturbed too so that (1 + w) is exercised. `hf-router`:
    the same, but router weights 4.4× wider (router logits σ ≈ 4 instead of 0.9), so that the
    renormalised top-8 weights are skewed as a trained router's are (with σ 0.9 all eight weigh
    ~1/8, and a top-8 near-tie that rounding flips swaps an eighth of the MoE output). `wide`: a
    stress case with larger activations and sharper logits (matrices ~N(0, 1/fan_in), embeddings
    N(0, 1), lm_head 3/√2048, norms ~N(0, 0.1)), under which bf16 rounding alone moves HF's own
    logits by KL ~1e-2: a test of robustness, not of parity. The vision tower (`model.visual.*`,
    when there is one): LayerNorm weights (plain w) ~N(1, 0.05), biases ~N(0, 0.02), matrices
    N(0, 0.02) (`wide`: N(0, 1/fan_in))."""
    g = torch.Generator(device=device).manual_seed(seed)
    for name, p in model.named_parameters():
        def normal(std, mean=0.0):
            return torch.randn(p.shape, generator=g, device=device, dtype=torch.float32) * std + mean
        def uniform(lo, hi):
            return torch.rand(p.shape, generator=g, device=device, dtype=torch.float32) * (hi - lo) + lo
        if "visual." in name:
            if p.ndim == 1:
                v = normal(0.05, 1.0) if "norm" in name and name.endswith(".weight") else normal(0.02)
            else:
                v = normal(0.02 if init.startswith("hf") else 1.0 / math.sqrt(p[0].numel()))
        elif name.endswith("A_log"):
            v = torch.log(uniform(1.0, 16.0))
        elif name.endswith("dt_bias"):
            v = normal(0.1, 1.0) if init.startswith("hf") else normal(1.0)
        elif name.endswith("linear_attn.norm.weight"):
            v = normal(0.05 if init.startswith("hf") else 0.1, 1.0)
        elif p.ndim == 1:
            v = normal(0.05 if init.startswith("hf") else 0.1)
        elif name.endswith("conv1d.weight"):
            v = uniform(-0.5, 0.5)
        elif init == "hf-router" and name.endswith("mlp.gate.weight"):
            v = normal(4.0 / math.sqrt(p.shape[-1]))
        elif init in ("hf", "hf-router"):
            v = normal(0.02)
        elif name.endswith("lm_head.weight"):
            v = normal(3.0 / math.sqrt(p.shape[-1]))
        elif name.endswith("embed_tokens.weight"):
            v = normal(1.0)
        else:
            v = normal(1.0 / math.sqrt(p.shape[-1]))
        p.copy_(v.to(p.dtype))


@torch.no_grad()
def make_confident(model, ids, margin=8.0, keep=None, **inputs):
    """Gives the slice a trained model's confidence on the test sequence: the lm_head row of each
    next token ids[t+1] becomes the direction of the final hidden state at t, scaled so that its
    logit stands ~`margin` above the random rows' (σ ≈ 0.9). A random-weight model otherwise has a
    flat next-token distribution over 248,320 ids whose top two logits are ~0.2σ apart, so top-1
    agreement between any two bf16 engines is a coin toss (HF bf16 vs HF fp32: 85–91 %). The rest
    of the network, and so every kernel, is untouched; the final position keeps a flat row.
    `keep`: the positions t that get a row (default: all but the last); `inputs`: more arguments
    of the forward (an image's pixel_values and image_grid_thw)."""
    w = model.lm_head.weight
    h = model.model(input_ids=ids[None].to(w.device), **inputs).last_hidden_state[0].float()  # after the final norm
    centred = h[:-1] - h[:-1].mean(dim=0)  # so that one position's row does not fire at the others
    rows = centred / centred.norm(dim=-1, keepdim=True) * (margin / centred.norm(dim=-1).mean())
    t = torch.arange(len(ids) - 1) if keep is None else keep
    w[ids[1:][t].to(w.device)] = rows[t.to(w.device)].to(w.dtype)


def metrics(hf, solo):
    """hf, solo: [N, V] f32 on the GPU."""
    lp_hf = torch.log_softmax(hf, -1)
    lp_solo = torch.log_softmax(solo, -1)
    kl = (lp_hf.exp() * (lp_hf - lp_solo)).sum(-1)
    rel = (hf - solo).abs().amax(-1) / hf.abs().amax(-1)
    top1 = (hf.argmax(-1) == solo.argmax(-1)).float()
    return {"positions": hf.shape[0], "top1_agreement": top1.mean().item(), "mean_kl": kl.mean().item(),
            "max_kl": kl.max().item(), "max_rel_logit_err": rel.max().item(), "mean_rel_logit_err": rel.mean().item()}


def solo_logits(solo, model, ids, prefill, out_dir, backend="cuda", extra=()):
    """`solo logits` on `ids` (the first `prefill` in one prefill, the rest one decode step each),
    with `extra` arguments: the logits [N, V] on the GPU."""
    path = os.path.join(out_dir, f"solo_{backend}.safetensors")
    cmd = [solo, "logits", "--backend", backend, "--model", model, *extra, "--prefill", str(prefill),
           "--tokens", ",".join(map(str, ids.tolist())), "--out", path]
    t1 = time.time()
    subprocess.run(cmd, check=True)
    print(f"solo logits --backend {backend} {' '.join(extra)}: {time.time() - t1:.1f} s", flush=True)
    out = load_file(path)["logits"].cuda()
    os.remove(path)
    return out


def run_slice(a, init):
    ckpt = os.path.join(a.dir, init)
    t0 = time.time()
    torch.manual_seed(a.seed)
    cfg = real_config(a.layers)
    with torch.device("cuda"):
        model = Qwen3_5MoeForCausalLM(cfg).to(torch.bfloat16)
    randomise(model, a.seed, init.removesuffix("-confident"))
    model.eval()
    g = torch.Generator().manual_seed(a.seed + 1)
    ids = torch.randint(0, 200000, (a.tokens,), generator=g)
    if init.endswith("-confident"):
        make_confident(model, ids)
    if not os.path.exists(os.path.join(ckpt, "config.json")):
        model.save_pretrained(ckpt)
    print(f"slice ({init} init): {a.layers} layers built and saved in {time.time() - t0:.0f} s", flush=True)

    with torch.no_grad():
        hf = model(ids[None].cuda()).logits[0].float()
        # The same weights in fp32: how far bf16 rounding alone moves HF's own logits.
        hf32 = model.float()(ids[None].cuda()).logits[0].float()
    del model
    torch.cuda.empty_cache()

    def run_solo(backend):
        return solo_logits(a.solo, ckpt, ids, a.prefill, a.out, backend)

    solo = run_solo("cuda")
    report = {"init": init, "layers": a.layers, "tokens": a.tokens, "prefill": a.prefill,
              "all": metrics(hf, solo), "prefill_positions": metrics(hf[:a.prefill], solo[:a.prefill]),
              "decode_positions": metrics(hf[a.prefill:], solo[a.prefill:]),
              "solo_cuda_vs_hf_fp32": metrics(hf32, solo), "hf_bf16_vs_hf_fp32": metrics(hf32, hf)}
    if a.cpu:
        cpu = run_solo("cpu")
        report["solo_cuda_vs_solo_cpu"] = metrics(cpu, solo)
        report["solo_cpu_vs_hf_fp32"] = metrics(hf32, cpu)
    return report


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--solo", required=True)
    ap.add_argument("--dir", default="/tmp/solo-slice")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=576)
    ap.add_argument("--prefill", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cpu", action="store_true", help="also run solo's CPU reference (slow)")
    ap.add_argument("--inits", default="hf-router-confident,hf-router,hf,wide", help="weight distributions to test (hf, hf-router, wide; a -confident suffix adds make_confident); the first decides PASS/FAIL")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    a = ap.parse_args()

    reports = [run_slice(a, init) for init in a.inits.split(",")]
    with open(os.path.join(a.out, "slice_parity.json"), "w") as f:
        json.dump(reports, f, indent=2)
    for report in reports:
        print(f"\n{report['init']} init, {a.layers} layers, {a.prefill} prefill + {a.tokens - a.prefill} decode positions")
        print(f"{'comparison':>22} | {'top-1':>7} | {'mean KL':>9} | {'max KL':>9} | {'max rel err':>11}")
        for key in [k for k in report if isinstance(report[k], dict)]:
            m = report[key]
            print(f"{key:>22} | {m['top1_agreement']*100:6.2f}% | {m['mean_kl']:9.2e} | {m['max_kl']:9.2e} | {m['max_rel_logit_err']:11.3e}")
    first = reports[0]["all"]
    ok = first["top1_agreement"] >= 0.99 and first["mean_kl"] <= 1e-3
    print(f"\n{reports[0]['init']} init, solo CUDA vs HF bf16: " + ("PASS" if ok else "FAIL"))
    sys.exit(0 if ok else 1)

if __name__ == "__main__":
    main()
