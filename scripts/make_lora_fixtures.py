#!/usr/bin/env python3
"""Make the LoRA adapters the CPU reference is tested against, and PEFT's own logits with them.

    pip install -r scripts/requirements-fixtures.txt peft==0.21.2
    python scripts/make_lora_fixtures.py

For each tiny checkpoint (fixtures/tiny-a, fixtures/tiny-b) this wraps transformers' fp32 model
with PEFT, fills every LoRA A and B with random values (PEFT's default init leaves B at zero, which
would test nothing), and writes fixtures/lora/<name>/:

    adapter_config.json, adapter_model.safetensors   exactly what `save_pretrained` writes
    peft_reference.safetensors                       tokens I64 [T] (the fixture's prompt) and
                                                     logits F32 [T, vocab]: PEFT's forward, fp32

The two adapters cover what solo reads (README "LoRA adapters"):
  tiny-a: target_modules listed by name (attention q/k/v/o, every GDN projection, the shared
          expert's gate/up/down and its gate), target_parameters on both fused expert tensors
          (nested ParamWrappers: `experts.base_layer.lora_A` is gate_up_proj, `experts.lora_A`
          down_proj), lora_alpha / r scaling, weights saved in BF16;
  tiny-b: target_modules "all-linear" (which also adapts the vision tower: solo ignores those),
          target_parameters on gate_up_proj only (`experts.lora_A`), rsLoRA (alpha / sqrt(r)),
          weights saved in F32.
The adapter is redrawn until every routing decision keeps a margin >= 1e-3 (as the checkpoints'
prompts were), so an f32 reimplementation cannot flip an expert choice by rounding. PEFT's
logits are also checked against the merged model's (merge_and_unload), and against the base
model's to make sure the adapter changes the output.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import tempfile
from pathlib import Path

import peft
import torch
from peft import LoraConfig, get_peft_model
from safetensors import safe_open
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import load_hf, router_gaps  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
ROUTER_MIN_GAP = 1e-3

# Names transformers gives the linear layers the adapters target (the release's names).
ATTENTION = ["q_proj", "k_proj", "v_proj", "o_proj"]
GDN = ["in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj"]
SHARED = ["gate_proj", "up_proj", "down_proj", "shared_expert_gate"]

ADAPTERS = {
    "tiny-a": dict(
        config=dict(r=4, lora_alpha=8, use_rslora=False, target_modules=ATTENTION + GDN + SHARED,
                    target_parameters=["mlp.experts.gate_up_proj", "mlp.experts.down_proj"]),
        dtype=torch.bfloat16,
    ),
    "tiny-b": dict(
        config=dict(r=8, lora_alpha=16, use_rslora=True, target_modules="all-linear",
                    target_parameters=["gate_up_proj"]),
        dtype=torch.float32,
    ),
}


def randomise(model, cfg: dict, dtype: torch.dtype, seed: int) -> None:
    """A ~ N(0, 1/in), B ~ N(0, σ²) with σ chosen so that the update s·B·A has entries of
    about 0.3 of the base weight's N(0, 1/in); values rounded to the saved dtype."""
    g = torch.Generator().manual_seed(seed)
    r, alpha = cfg["r"], cfg["lora_alpha"]
    scale = alpha / math.sqrt(r) if cfg["use_rslora"] else alpha / r
    sigma = math.sqrt(0.09 / (r * scale * scale))
    for name, p in sorted(model.named_parameters()):
        if ".lora_A." in name:
            values = torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1])
        elif ".lora_B." in name:
            values = torch.randn(p.shape, generator=g) * sigma
        else:
            continue
        with torch.no_grad():
            p.copy_(values.to(dtype).float())


def logits_of(model, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids[None], use_cache=False).logits[0].float()


def make(name: str) -> dict:
    spec = ADAPTERS[name]
    src = FIXTURES / name
    with safe_open(src / "hf_reference.safetensors", "pt") as f:
        ids = f.get_tensor("tokens")
    base_logits = logits_of(load_hf(src), ids)
    for attempt in range(50):
        model = load_hf(src)
        config = LoraConfig(lora_dropout=0.0, bias="none", **spec["config"])
        pm = get_peft_model(model, config)
        pm.eval()
        randomise(pm, spec["config"], spec["dtype"], seed=1000 + attempt)
        gap = router_gaps(pm.base_model.model, ids)  # the wrapped model: LoRA applied
        if gap >= ROUTER_MIN_GAP:
            break
    else:
        raise SystemExit(f"{name}: no adapter with router gaps >= {ROUTER_MIN_GAP}")
    logits = logits_of(pm, ids)

    out = FIXTURES / "lora" / name
    if out.exists():
        shutil.rmtree(out)
    with tempfile.TemporaryDirectory() as tmp:
        pm.save_pretrained(tmp)
        out.mkdir(parents=True)
        # As saved, but naming the base model by its place in the repo instead of this machine's path.
        config = json.loads((Path(tmp) / "adapter_config.json").read_text())
        config["base_model_name_or_path"] = f"fixtures/{name}"
        (out / "adapter_config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        # Stored in the adapter's dtype (its values are exact in it), as a bf16 training run saves it.
        with safe_open(Path(tmp) / "adapter_model.safetensors", "pt") as f:
            tensors = {k: f.get_tensor(k).to(spec["dtype"]) for k in f.keys()}
            metadata = f.metadata()
        save_file(tensors, str(out / "adapter_model.safetensors"), metadata=metadata)
    save_file({"tokens": ids, "logits": logits.contiguous()}, str(out / "peft_reference.safetensors"))

    # The merged model computes the same function.
    merged = logits_of(pm.merge_and_unload(), ids)
    scale = logits.abs().max().item()
    merged_rel = (merged - logits).abs().max().item() / scale
    assert merged_rel < 1e-4, f"{name}: merged vs PEFT {merged_rel:.2e}"
    changed = (logits.argmax(-1) != base_logits.argmax(-1)).float().mean().item()
    base_rel = (logits - base_logits).abs().max().item() / scale
    assert base_rel > 0.05 and changed > 0.05, f"{name}: the adapter barely changes the logits"
    with safe_open(out / "adapter_model.safetensors", "pt") as f:
        names = list(f.keys())
    return dict(name=name, gap=gap, attempt=attempt, merged_rel=merged_rel, base_rel=base_rel, changed=changed,
                tensors=len(names), bytes=(out / "adapter_model.safetensors").stat().st_size)


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    rows = [make(name) for name in ADAPTERS]
    for r in rows:
        print(f"{r['name']}: {r['tensors']} tensors, {r['bytes']} bytes, min router gap {r['gap']:.2e} "
              f"(draw {r['attempt']}), merged vs PEFT {r['merged_rel']:.1e}, vs base {r['base_rel']:.2f} "
              f"of max |logit|, argmax changed at {100 * r['changed']:.0f}% of positions")
    print(f"peft {peft.__version__}, torch {torch.__version__}")


if __name__ == "__main__":
    main()
