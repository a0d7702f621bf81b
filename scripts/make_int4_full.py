#!/usr/bin/env python3
"""A full-size GPTQ-Int4 checkpoint of random weights (issue #43's 24 GiB run), written on the GPU
machine without the 35B model in memory.

The official GPTQ-Int4 shape: the routed experts 4-bit (GPTQ v1, symmetric, groups of 128, no
act-order, stored per expert as `model.layers.{l}.mlp.experts.{e}.{gate_proj,up_proj,down_proj}.
{qweight,qzeros,scales}`, int4_parity.py's make_int4_checkpoint names and make_int4_fixtures.py's
pack_gptq packing); everything else bf16 (shared expert, routers, embeddings, lm_head, norms,
conv1d, A_log, dt_bias). No MTP head (solo loads one only when `mtp.fc.weight` is there).

The bf16 tensors' names and shapes are those of transformers' Qwen3_5MoeForCausalLM built on the
`meta` device from slice_parity.py's real_config (a text-only save: `model.` prefix, as solo reads
it), checked against the table solo's loader reads (crates/model/src/weights.rs, `solo_names`)
before anything is written; their values are slice_parity.py's randomise(..., 'hf-router')
(run on each shard's tensors on the GPU). The experts are not quantised from floats: the 4-bit
values are random words (every nibble uniform in 0..15), the zero point 8 (stored 7 in each
nibble: GPTQ v1 stores z - 1), f16 scales s = 0.02 / sqrt(21.5) x U(0.9, 1.1), so that (q - 8) * s
has hf-router's standard deviation for the experts (0.02). One matrix is checked against
pack_gptq / read_gptq before the first shard is written.

Shards of --layers-per-shard layers (~2 GB each; the embedding, final norm and lm_head in the
first) go to DIR.partial, renamed to DIR when the last is written: config.json (real_config +
int4_parity.py's QUANT_CONFIG), generation_config.json, model-*.safetensors,
model.safetensors.index.json, tokenizer.json (serve_load.py's word-level tokenizer of the real
vocabulary), chat_template.jinja (tiny-a's).

    python3 scripts/make_int4_full.py /tmp/solo-int4-full           # GPU machine: ~22 GB
    python3 scripts/make_int4_full.py /tmp/x --dry-run              # names, shards, bytes; no torch
"""
import argparse, json, math, os, shutil, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

GROUP = 128
QUANT_CONFIG = {"bits": 4, "group_size": GROUP, "desc_act": False, "sym": True, "checkpoint_format": "gptq",
                "quant_method": "gptq", "dynamic": {"-:.*shared_expert.*": {}}}  # int4_parity.py's
ZERO_WORD = 0x77777777  # eight nibbles of z - 1 = 7 (symmetric: z = 8)
Q_RMS = math.sqrt(sum((q - 8) ** 2 for q in range(16)) / 16)  # sqrt(21.5): rms of q - 8, q uniform in 0..15
EXPERT_STD = 0.02  # randomise(..., 'hf-router')'s experts: N(0, 0.02)
PROJS = ("gate_proj", "up_proj", "down_proj")


def solo_names(c, group=GROUP):
    """What solo's loader takes from a text-only save of config `c` (a dict of the text config's
    keys): {name: shape} of the 16-bit tensors, and {module: (out, in)} of the 4-bit experts (each
    stored as module.qweight [in/8, out] I32, module.qzeros [in/group, out/8] I32, module.scales
    [in/group, out] F16)."""
    h, v = c["hidden_size"], c["vocab_size"]
    hk, hv, dk, dv = (c["linear_num_key_heads"], c["linear_num_value_heads"], c["linear_key_head_dim"],
                      c["linear_value_head_dim"])
    conv, vdim = 2 * hk * dk + hv * dv, hv * dv
    hq, hkv, d = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    e, inter, shared = c["num_experts"], c["moe_intermediate_size"], c["shared_expert_intermediate_size"]
    dense = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,), "lm_head.weight": (v, h)}
    experts = {}
    for i, kind in enumerate(c["layer_types"]):
        p = f"model.layers.{i}."
        if kind == "linear_attention":
            a = p + "linear_attn."
            dense.update({a + "in_proj_qkv.weight": (conv, h), a + "in_proj_z.weight": (vdim, h),
                          a + "in_proj_b.weight": (hv, h), a + "in_proj_a.weight": (hv, h),
                          a + "conv1d.weight": (conv, 1, c["linear_conv_kernel_dim"]), a + "A_log": (hv,),
                          a + "dt_bias": (hv,), a + "norm.weight": (dv,), a + "out_proj.weight": (h, vdim)})
        else:
            a = p + "self_attn."
            dense.update({a + "q_proj.weight": (hq * 2 * d, h), a + "k_proj.weight": (hkv * d, h),
                          a + "v_proj.weight": (hkv * d, h), a + "o_proj.weight": (h, hq * d),
                          a + "q_norm.weight": (d,), a + "k_norm.weight": (d,)})
        m = p + "mlp."
        dense.update({p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
                      m + "gate.weight": (e, h), m + "shared_expert_gate.weight": (1, h),
                      m + "shared_expert.gate_proj.weight": (shared, h), m + "shared_expert.up_proj.weight": (shared, h),
                      m + "shared_expert.down_proj.weight": (h, shared)})
        for x in range(e):
            for proj in PROJS:
                shape = (h, inter) if proj == "down_proj" else (inter, h)
                assert shape[1] % group == 0 and shape[0] % 8 == 0, (proj, shape, group)
                experts[f"{m}experts.{x}.{proj}"] = shape
    return dense, experts


def int4_parts(out, inp, group=GROUP):
    """{suffix: (shape, bytes a value)} of one GPTQ module."""
    g = inp // group
    return {"qweight": ((inp // 8, out), 4), "qzeros": ((g, out // 8), 4), "scales": ((g, out), 2)}


def layer_of(name):
    return int(name.split(".")[2]) if name.startswith("model.layers.") else -1


def plan_shards(dense, experts, layers, per_shard, group=GROUP):
    """[[(kind, name, shape)...] per shard]: the non-layer tensors first, then per_shard layers each."""
    shards = [[("bf16", n, s) for n, s in dense.items() if layer_of(n) < 0]]
    for first in range(0, layers, per_shard):
        ls = range(first, min(first + per_shard, layers))
        shards.append([("bf16", n, s) for n, s in dense.items() if layer_of(n) in ls]
                      + [("int4", n, s) for n, s in experts.items() if layer_of(n) in ls])
    return shards


def shard_bytes(shard, group=GROUP):
    total = 0
    for kind, _, shape in shard:
        if kind == "bf16":
            total += 2 * math.prod(shape)
        else:
            total += sum(math.prod(s) * b for s, b in int4_parts(*shape, group).values())
    return total


def shard_file(i, n):
    return f"model-{i + 1:05d}-of-{n:05d}.safetensors"


def write_side_files(out):
    """generation_config.json (the release's stop ids: <|im_end|>, <|endoftext|>), the word-level
    tokenizer of the real vocabulary and the chat template."""
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": [248046, 248044], "pad_token_id": 248044}, f, indent=2)
    shutil.copy(os.path.join(HERE, "..", "fixtures", "tiny-a", "chat_template.jinja"), out)
    subprocess.run([sys.executable, os.path.join(HERE, "serve_load.py"), "--make-tokenizer", out], check=True)


def hf_names(layers):
    """transformers' Qwen3_5MoeForCausalLM(real_config(layers)) on the meta device: its config and
    {name: shape} of every parameter."""
    import torch
    from transformers import Qwen3_5MoeForCausalLM
    from slice_parity import real_config
    cfg = real_config(layers)
    try:
        with torch.device("meta"):
            model = Qwen3_5MoeForCausalLM(cfg)
    except Exception as e:  # the run goes on with solo's table alone, said plainly
        print(f"WARNING: Qwen3_5MoeForCausalLM on the meta device failed ({type(e).__name__}: {e}); "
              "the names are solo's table alone, unchecked against transformers", flush=True)
        return cfg, None
    return cfg, {n: tuple(p.shape) for n, p in model.named_parameters()}


def check_names(hf, dense, experts, c):
    """HF's parameters against solo's table: the same 16-bit tensors, and fused experts whose
    per-expert slices are the 4-bit modules. Exits naming the differences."""
    e, inter, h = c["num_experts"], c["moe_intermediate_size"], c["hidden_size"]
    fused = {n: s for n, s in hf.items() if n.endswith(("mlp.experts.gate_up_proj", "mlp.experts.down_proj"))}
    rest = {n: s for n, s in hf.items() if n not in fused}
    bad = [f"HF has {n} {s}, solo reads no such tensor" for n, s in rest.items() if n not in dense]
    bad += [f"solo reads {n} {s}, HF has none" for n, s in dense.items() if n not in rest]
    bad += [f"{n}: HF {rest[n]}, solo {s}" for n, s in dense.items() if n in rest and rest[n] != tuple(s)]
    for n, s in fused.items():
        want = (e, 2 * inter, h) if n.endswith("gate_up_proj") else (e, h, inter)
        if s != want:
            bad.append(f"{n}: HF {s}, solo's per-expert slices need {want}")
    layers_with_experts = {layer_of(n) for n in experts}
    if {layer_of(n) for n in fused} != layers_with_experts or len(fused) != 2 * len(layers_with_experts):
        bad.append(f"HF's fused experts are in layers {sorted({layer_of(n) for n in fused})}")
    if bad:
        raise SystemExit("names differ between transformers and solo's loader:\n  " + "\n  ".join(bad[:20]))
    print(f"names: {len(rest)} bf16 tensors and {len(fused)} fused expert tensors of HF's "
          f"Qwen3_5MoeForCausalLM = solo's table ({len(dense)} bf16, {len(experts)} per-expert int4 modules)", flush=True)


def check_packing(qweight, qzeros, scales):
    """One matrix as make_int4_fixtures.py packs and reads it: pack_gptq of its nibbles (z = 8,
    stored minus one) gives back the same three tensors; read_gptq's (q - z) * s is returned."""
    import torch
    from make_int4_fixtures import pack_gptq, read_gptq
    inp, out = qweight.shape[0] * 8, qweight.shape[1]
    g_idx = torch.arange(inp) // GROUP
    shifts = torch.arange(0, 32, 4, dtype=torch.int32)
    q = ((qweight[:, None, :] >> shifts[None, :, None]) & 0xF).reshape(inp, out).t().long()  # [out, in]
    z = torch.full((out, inp // GROUP), 8, dtype=torch.int64)
    ref = pack_gptq(q, scales.t(), z, g_idx, zero_minus_one=True)
    for k, mine in (("qweight", qweight), ("qzeros", qzeros), ("scales", scales)):
        assert ref[k].dtype == mine.dtype and torch.equal(ref[k], mine), f"{k} is not pack_gptq's"
    return read_gptq(ref, zero_plus_one=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--layers", type=int, default=40, help="decoder layers (the release: 40)")
    ap.add_argument("--layers-per-shard", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dry-run", action="store_true", help="print the names, shards and bytes; write nothing")
    a = ap.parse_args()
    t0 = time.time()

    if a.dry_run:  # the table alone, without torch: real_config's values
        c = dict(vocab_size=248320, hidden_size=2048, linear_num_key_heads=16, linear_num_value_heads=32,
                 linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4,
                 num_attention_heads=16, num_key_value_heads=2, head_dim=256, num_experts=256,
                 moe_intermediate_size=512, shared_expert_intermediate_size=512,
                 layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(a.layers)])
    else:
        cfg, hf = hf_names(a.layers)
        c = cfg.to_dict()
    dense, experts = solo_names(c)
    shards = plan_shards(dense, experts, a.layers, a.layers_per_shard)
    sizes = [shard_bytes(s) for s in shards]
    print(f"{len(dense)} bf16 tensors, {len(experts)} int4 modules ({3 * len(experts)} tensors) in {len(shards)} "
          f"shards of {min(sizes) / 1e9:.2f}..{max(sizes) / 1e9:.2f} GB: {sum(sizes) / 1e9:.2f} GB", flush=True)
    if a.dry_run:
        for i, s in enumerate(shards):
            print(f"  {shard_file(i, len(shards))}: {len(s)} tensors/modules, {sizes[i] / 1e9:.2f} GB, "
                  f"first {s[0][1]}, last {s[-1][1]}")
        return
    if hf is not None:
        check_names(hf, dense, experts, c)

    import torch
    from safetensors.torch import save_file
    from slice_parity import randomise

    class Params:  # what randomise() walks: a shard's bf16 tensors, by name
        def __init__(self, named):
            self.named = named

        def named_parameters(self):
            return iter(self.named)

    final, out = a.dir.rstrip("/"), a.dir.rstrip("/") + ".partial"
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    g = torch.Generator(device="cuda").manual_seed(a.seed)
    scale = EXPERT_STD / Q_RMS
    weight_map, total, checked = {}, 0, False
    for i, shard in enumerate(shards):
        t1 = time.time()
        named = [(n, torch.empty(s, dtype=torch.bfloat16, device="cuda")) for kind, n, s in shard if kind == "bf16"]
        randomise(Params(named), a.seed + 1 + i, "hf-router")
        tensors = {n: t.cpu() for n, t in named}
        del named
        # the experts, one projection of a layer at a time: [E, ...] on the GPU, then each expert's own copy
        by_proj = {}
        for kind, n, s in shard:
            if kind == "int4":
                layer_proj = (n.split(".experts.")[0], n.rsplit(".", 1)[1])
                by_proj.setdefault(layer_proj, []).append((n, s))
        for (_, _), modules in by_proj.items():
            (out_f, in_f), e = modules[0][1], len(modules)
            groups = in_f // GROUP
            words = torch.randint(0, 1 << 32, (e, in_f // 8, out_f), generator=g, device="cuda", dtype=torch.int64)
            qweight = (words - ((words >> 31) << 32)).to(torch.int32).cpu()  # the same 32 bits, signed
            del words
            jitter = torch.rand((e, groups, out_f), generator=g, device="cuda") * 0.2 + 0.9
            scales = (jitter * scale).to(torch.float16).cpu()
            qzeros = torch.full((groups, out_f // 8), ZERO_WORD, dtype=torch.int32)
            for x, (n, _) in enumerate(modules):
                tensors[n + ".qweight"] = qweight[x].clone()
                tensors[n + ".qzeros"] = qzeros.clone()
                tensors[n + ".scales"] = scales[x].clone()
            if not checked:
                checked = True
                try:
                    w = check_packing(tensors[modules[0][0] + ".qweight"], qzeros, tensors[modules[0][0] + ".scales"])
                    print(f"packing: {modules[0][0]} is pack_gptq's (z 8 stored as 7); dequantised mean "
                          f"{w.mean():.2e}, std {w.std():.4f} (hf-router's experts: {EXPERT_STD})", flush=True)
                except ImportError as e:  # make_int4_fixtures.py's imports: the check, not the checkpoint
                    print(f"WARNING: packing not checked against pack_gptq ({e})", flush=True)
            del qweight, scales
        name = shard_file(i, len(shards))
        save_file(tensors, os.path.join(out, name), metadata={"format": "pt"})
        nbytes = sum(t.numel() * t.element_size() for t in tensors.values())
        total += nbytes
        weight_map.update({k: name for k in tensors})
        del tensors
        torch.cuda.empty_cache()
        print(f"{name}: {nbytes / 1e9:.2f} GB in {time.time() - t1:.1f} s", flush=True)

    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=1)
    cfg.save_pretrained(out)
    path = os.path.join(out, "config.json")
    c = json.load(open(path))
    c["quantization_config"] = QUANT_CONFIG
    json.dump(c, open(path, "w"), indent=2)
    write_side_files(out)
    shutil.rmtree(final, ignore_errors=True)
    os.rename(out, final)
    on_disk = sum(os.path.getsize(os.path.join(final, f)) for f in os.listdir(final))
    print(f"wrote {final}: {len(weight_map)} tensors, {total / 1e9:.2f} GB of tensors, {on_disk / 1e9:.2f} GB "
          f"on disk, in {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
