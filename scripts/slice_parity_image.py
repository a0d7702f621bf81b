#!/usr/bin/env python3
"""Image slice parity: a full-width vision tower + a decoder slice, solo against Hugging Face
transformers' fp32 forward, with transformers' own bf16 forward as the noise floor (#45).

Runs on the GPU machine (torch + transformers ≥ 5.17 there). Steps:
  1. build Qwen3.6-35B-A3B as `Qwen3_5MoeForConditionalGeneration`: the release's vision tower
     (27 blocks, 1152 wide, 16 heads, 16-pixel patches, 2×2 merge to 2048) and --layers decoder
     layers of the real widths (slice_parity.real_config), random weights of realistic scale
     (slice_parity.randomise), saved as a bf16 checkpoint with the release's
     preprocessor_config.json in --dir;
  2. a deterministic random W×H picture written as PNG (W and H multiples of 32, so that the
     processor's resize is the identity: the resampling itself is checked against PIL by
     crates/cpu/tests/images.rs), and its pixel values as solo computes them (rescale, normalise,
     patchify with the temporal repeat; cross-checked against transformers' image processor when
     it can be imported);
  3. the prompt: text, <|vision_start|> <|image_pad|>×N <|vision_end|>, text; transformers in bf16
     and in fp32 (the same bf16-rounded weights) on the expanded ids, pixel_values and
     image_grid_thw, every position's logits;
  4. `solo logits --image` with the one-placeholder ids on --backends (cuda; with --cpu the CPU
     reference too): the image and the text up to the last --decode tokens in one prefill, the
     rest one decode step each;
  5. top-1 agreement and mean KL(fp32‖x) for each solo backend and for HF bf16 over all positions,
     the image's and the text's. PASS: for the first init, every solo backend's mean KL ≤ HF
     bf16's (the reference's own rounding noise).

    python3 scripts/slice_parity_image.py --image 512x384 --solo gpu-bin/solo --dir /tmp/solo-slice-image --out $OUT [--cpu]

--tiny runs the same on tiny-a's config (fixtures/tiny-a: a depth-1 tower, 8-pixel merged tokens)
on the CPU with torch's CPU build and `solo logits --backend cpu` (default image 48x32):

    python3 scripts/slice_parity_image.py --tiny --solo target/release/solo --dir /tmp/tiny-image

Without a GPU, --device cpu with --backends cpu runs the full-width tower and --layers 1 with
torch on the CPU (2 min on 2 cores, ~10 GB of memory, for a 256x256 image):

    python3 scripts/slice_parity_image.py --device cpu --layers 1 --backends cpu --image 256x256 \
        --tokens 16 --decode 4 --solo target/debug/solo --dir /tmp/slice-image-cpu

--inputs-only DIR writes step 2 and the prompt (image.png, pixel_values.f32, inputs.json,
preprocessor_config.json) with the standard library alone, no torch:
crates/solo/tests/image_parity_inputs.rs checks them against solo's own decoding, preprocessing
and placeholder expansion.
"""
import argparse, array, inspect, json, math, os, random, struct, subprocess, sys, time, zlib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(REPO, "fixtures", "tiny-a")

# The release's vision_config and image token ids (crates/cuda/src/synthetic.rs real_vision_config).
REAL_VISION = {"depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16, "patch_size": 16,
               "temporal_patch_size": 2, "spatial_merge_size": 2, "in_channels": 3, "out_hidden_size": 2048,
               "num_position_embeddings": 2304, "hidden_act": "gelu_pytorch_tanh"}  # fmt: skip
REAL_IDS = {"image_token_id": 248056, "video_token_id": 248057, "vision_start_token_id": 248053,
            "vision_end_token_id": 248054}  # fmt: skip
# The release's preprocessor_config.json (Qwen2VLImageProcessor's defaults for the rest: rescale
# 1/255, normalise, bicubic).
REAL_PREPROCESSOR = {"size": {"longest_edge": 16777216, "shortest_edge": 65536}, "patch_size": 16,
                     "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5, 0.5, 0.5],
                     "image_std": [0.5, 0.5, 0.5], "processor_class": "Qwen3VLProcessor",
                     "image_processor_type": "Qwen2VLImageProcessorFast"}  # fmt: skip


# ---- without torch: the picture, its pixel values, the prompt --------------------------------


def parse_size(text):
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise SystemExit(f"--image {text}: expected WIDTHxHEIGHT, e.g. 512x384")
    return w, h


def check_size(w, h, pre):
    factor = pre["patch_size"] * pre["merge_size"]
    lo, hi = pre["size"]["shortest_edge"], pre["size"]["longest_edge"]
    if w <= 0 or h <= 0 or w % factor or h % factor or not lo <= w * h <= hi:
        raise SystemExit(
            f"--image {w}x{h}: width and height must be multiples of {factor} (patch × merge) and width × height "
            f"within [{lo}, {hi}] pixels, so that resizing leaves the image as it is"
        )


def picture(w, h, seed):
    """A smooth colour field with hard edges and noise, deterministic in `seed`: RGB bytes, row-major."""
    rng = random.Random(seed)
    out = bytearray(3 * w * h)
    i = 0
    for y in range(h):
        for x in range(w):
            dim = 0.5 if (x // 5 + y // 4) % 3 == 0 else 1.0
            for v in (128 + 100 * math.sin(x / 3 + y / 7), 128 + 100 * math.cos(y / 2 - x / 11), 255 * (x + y) / (w + h)):
                out[i] = min(255, max(0, round(v * dim + rng.gauss(0, 12))))
                i += 1
    return out


def write_png(path, w, h, rgb):
    """8-bit RGB PNG, no filter."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\0" + bytes(rgb[3 * w * y : 3 * w * (y + 1)]) for y in range(h))
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(png)


def pixel_values(rgb, w, h, pre):
    """What solo's preprocessing (and Qwen2VLImageProcessor's) makes of an image it need not
    resize: rescale, normalise, then patches in merge-block order (each merged token's m×m
    patches together), each patch [channel, frame, y, x] with the still image repeated over the
    frames. Returns (float32 array [patches × patch_len], grid_thw)."""
    p, m, t = pre["patch_size"], pre["merge_size"], pre["temporal_patch_size"]
    scale = pre.get("rescale_factor", 1 / 255)
    # absent: the processor's defaults (OpenAI CLIP's), as solo's PreprocessorConfig
    mean = pre.get("image_mean", [0.48145466, 0.4578275, 0.40821073])
    std = pre.get("image_std", [0.26862954, 0.26130258, 0.27577711])
    # in f32 as solo computes it (double then rounded: exact for one operation), one table a channel
    f32 = lambda x: struct.unpack("f", struct.pack("f", x))[0]
    table = [[f32(f32(f32(v * scale) - f32(mean[c])) / f32(std[c])) for v in range(256)] for c in range(3)]
    planes = [array.array("f", (table[c][v] for v in rgb[c::3])) for c in range(3)]
    gh, gw = h // p, w // p
    out = array.array("f")
    for bh in range(gh // m):
        for bw in range(gw // m):
            for ih in range(m):
                for iw in range(m):
                    y0, x0 = (bh * m + ih) * p, (bw * m + iw) * p
                    for c in range(3):
                        rows = [planes[c][(y0 + py) * w + x0 : (y0 + py) * w + x0 + p] for py in range(p)]
                        for _ in range(t):
                            for row in rows:
                                out.extend(row)
    return out, [1, gh, gw]


def prompt(ids, image_tokens, before, after, vocab, seed):
    """The prompt as solo takes it (one <|image_pad|>) and as transformers does (expanded)."""
    rng = random.Random(seed + 1)
    text = lambda n: [rng.randrange(vocab) for _ in range(n)]
    head, tail = text(before), text(after)
    start, pad, end = ids["vision_start_token_id"], ids["image_token_id"], ids["vision_end_token_id"]
    return head + [start, pad, end] + tail, head + [start] + [pad] * image_tokens + [end] + tail


def write_inputs(a, out):
    """Step 2 and the prompt, into `out`; returns the description (also inputs.json)."""
    os.makedirs(out, exist_ok=True)
    if a.tiny:
        with open(os.path.join(TINY, "preprocessor_config.json")) as f:
            pre = json.load(f)
        with open(os.path.join(TINY, "config.json")) as f:
            top = json.load(f)
        ids, vision = {k: top[k] for k in REAL_IDS}, top["vision_config"]
        vocab = 380  # plain BPE ids of tiny-a's tokenizer, below the special tokens
    else:
        pre, ids, vision, vocab = REAL_PREPROCESSOR, REAL_IDS, REAL_VISION, 200000
    w, h = parse_size(a.image or ("48x32" if a.tiny else "512x384"))
    check_size(w, h, pre)
    rgb = picture(w, h, a.seed)
    png = os.path.join(out, "image.png")
    write_png(png, w, h, rgb)
    values, grid = pixel_values(rgb, w, h, pre)
    with open(os.path.join(out, "pixel_values.f32"), "wb") as f:
        values.tofile(f)  # little-endian on every machine this runs on
    with open(os.path.join(out, "preprocessor_config.json"), "w") as f:
        json.dump(pre, f, indent=2)
    image_tokens = grid[0] * grid[1] * grid[2] // pre["merge_size"] ** 2
    solo_ids, hf_ids = prompt(ids, image_tokens, a.text_before, a.tokens, vocab, a.seed)
    if not 1 <= a.decode <= a.tokens:
        raise SystemExit(f"--decode {a.decode}: between 1 and --tokens ({a.tokens})")
    info = {"width": w, "height": h, "image": png, "grid_thw": grid, "image_tokens": image_tokens,
            "patch_len": len(values) // (grid[1] * grid[2]), "config": {"vision_config": vision, **ids}, "solo_ids": solo_ids, "hf_ids": hf_ids,
            "solo_prefill": len(solo_ids) - a.decode, "hf_prefill": len(hf_ids) - a.decode,
            "image_start": a.text_before + 1}  # fmt: skip
    with open(os.path.join(out, "inputs.json"), "w") as f:
        json.dump(info, f)
    return info


# ---- with torch -------------------------------------------------------------------------------


def vision_model(a, device):
    """Qwen3_5MoeForConditionalGeneration, bf16, uninitialised: the release's tower and --layers
    real-width decoder layers, or tiny-a's config with --tiny."""
    import torch
    from transformers import Qwen3_5MoeForConditionalGeneration
    from transformers.models.qwen3_5_moe import Qwen3_5MoeConfig

    if a.tiny:
        cfg = Qwen3_5MoeConfig.from_pretrained(TINY)
    else:
        from slice_parity import real_config

        cfg = Qwen3_5MoeConfig(text_config=real_config(a.layers).to_dict(), vision_config=REAL_VISION,
                               tie_word_embeddings=False, **REAL_IDS)  # fmt: skip
    with torch.device(device):
        return Qwen3_5MoeForConditionalGeneration(cfg).to(torch.bfloat16)


def hf_processor_check(info, pre):
    """transformers' own image processor on the PNG against our pixel values: max |difference|,
    or why it could not run."""
    import torch

    try:
        from PIL import Image

        try:
            from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil as Proc
        except ImportError:
            from transformers import Qwen2VLImageProcessor as Proc
        proc = Proc(**{k: v for k, v in pre.items() if k not in ("processor_class", "image_processor_type")})
        feats = proc([Image.open(info["image"]).convert("RGB")], return_tensors="pt")
    except Exception as e:  # an older or newer transformers, no PIL: say so, go on
        return f"skipped ({type(e).__name__}: {e})"
    if feats["image_grid_thw"].tolist() != [info["grid_thw"]]:
        raise SystemExit(f"transformers' processor gives grid {feats['image_grid_thw'].tolist()}, ours {info['grid_thw']}")
    return (feats["pixel_values"].float() - info["pixel_values"]).abs().max().item()


def load_inputs(a):
    """Step 2 in --dir/inputs, with the pixel values as a tensor and transformers' processor's
    verdict on them."""
    import torch

    info = write_inputs(a, os.path.join(a.dir, "inputs"))
    with open(os.path.join(a.dir, "inputs", "pixel_values.f32"), "rb") as f:
        values = torch.frombuffer(bytearray(f.read()), dtype=torch.float32)
    info["pixel_values"] = values.view(-1, info["patch_len"])
    with open(os.path.join(a.dir, "inputs", "preprocessor_config.json")) as f:
        info["preprocessor"] = json.load(f)
    check = hf_processor_check(info, info["preprocessor"])
    if isinstance(check, float) and check > 1e-5:
        raise SystemExit(f"transformers' processor and ours differ by {check:.2e} on the image")
    print(f"image {info['width']}x{info['height']}: grid {info['grid_thw']}, {info['image_tokens']} tokens; "
          f"transformers' processor vs ours: max |diff| {check}", flush=True)  # fmt: skip
    return info


def run_slice(a, info, init):
    import torch
    from safetensors.torch import load_file
    from slice_parity import make_confident, metrics, randomise

    device = a.device
    ckpt = os.path.join(a.dir, init)
    t0 = time.time()
    torch.manual_seed(a.seed)
    model = vision_model(a, device)
    randomise(model, a.seed, init.removesuffix("-confident"), device=device)
    model.eval()
    cfg = model.config
    ids = torch.tensor(info["hf_ids"])
    mm = (ids == cfg.image_token_id).to(torch.int32)
    # no cache: a slice of GDN layers alone has no attention layer to size a mask by (--layers 1)
    grid = torch.tensor([info["grid_thw"]], device=device)
    inputs = {"pixel_values": info["pixel_values"].to(device), "image_grid_thw": grid, "use_cache": False}
    if "mm_token_type_ids" in inspect.signature(model.model.forward).parameters:
        inputs["mm_token_type_ids"] = mm[None].to(device)
    specials = {cfg.image_token_id, cfg.vision_start_token_id, cfg.vision_end_token_id}
    if init.endswith("-confident"):
        # a confident next-token row for each text position whose next token is text
        keep = torch.tensor([t for t in range(len(ids) - 1) if int(ids[t + 1]) not in specials])
        make_confident(model, ids, keep=keep, **inputs)
    model.save_pretrained(ckpt)  # every time: the weights follow the seed, the prompt and the picture
    with open(os.path.join(ckpt, "preprocessor_config.json"), "w") as f:
        json.dump(info["preprocessor"], f, indent=2)
    print(f"slice ({init} init): tower + {cfg.text_config.num_hidden_layers} layers built and saved in "
          f"{time.time() - t0:.0f} s", flush=True)  # fmt: skip

    with torch.no_grad():
        hf = model(input_ids=ids[None].to(device), **inputs).logits[0].float()
        hf32 = model.float()(input_ids=ids[None].to(device), **inputs).logits[0].float()
    del model
    if device == "cuda":
        torch.cuda.empty_cache()

    def run_solo(backend):
        path = os.path.join(a.out, f"solo_image_{backend}.safetensors")
        cmd = [a.solo, "logits", "--backend", backend, "--model", ckpt, "--prefill", str(info["solo_prefill"]),
               "--tokens", ",".join(map(str, info["solo_ids"])), "--image", info["image"], "--out", path]  # fmt: skip
        t1 = time.time()
        run = subprocess.run(cmd, stderr=subprocess.PIPE, text=True)
        sys.stderr.write(run.stderr)
        if run.returncode != 0:  # the other backends still run; the verdict is FAIL
            lines = run.stderr.strip().splitlines()
            return f"solo logits --backend {backend} exited {run.returncode}: {lines[-1] if lines else ''}"
        print(f"solo logits --backend {backend} --image: {time.time() - t1:.1f} s", flush=True)
        out = load_file(path)["logits"].to(device)
        os.remove(path)
        if out.shape != hf.shape:
            return f"solo --backend {backend} wrote logits {list(out.shape)}, transformers {list(hf.shape)}"
        return out

    # rows: all; the image's placeholders (and <|vision_start|>); the text after the image
    start, n = info["image_start"], info["image_tokens"]
    parts = {"all": slice(None), "image": slice(start - 1, start + n), "text_after": slice(start + n, None)}
    report = {"init": init, "image": [info["width"], info["height"]], "image_tokens": n, "positions": len(ids),
              "prefill": info["hf_prefill"], "hf_bf16_vs_hf_fp32": {k: metrics(hf32[s], hf[s]) for k, s in parts.items()}}  # fmt: skip
    solo = {}
    for backend in a.backends.split(","):
        got = run_solo(backend)
        if isinstance(got, str):
            print(got, flush=True)
            report[f"solo_{backend}_error"] = got
            continue
        report[f"solo_{backend}_vs_hf_fp32"] = {k: metrics(hf32[s], got[s]) for k, s in parts.items()}
        solo[backend] = got
    if {"cuda", "cpu"} <= solo.keys():
        report["solo_cuda_vs_solo_cpu"] = {k: metrics(solo["cpu"][s], solo["cuda"][s]) for k, s in parts.items()}
    return report


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--solo", help="the solo binary")
    ap.add_argument("--image", help="WIDTHxHEIGHT of the random picture (default 512x384; --tiny 48x32)")
    ap.add_argument("--dir", help="checkpoints and inputs (~9 GB a full-width init; default /tmp/solo-slice-image[-tiny])")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--text-before", type=int, default=16, help="text tokens before the image")
    ap.add_argument("--tokens", type=int, default=64, help="text tokens after the image")
    ap.add_argument("--decode", type=int, default=16, help="the last DECODE tokens go one decode step each")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backends", help="solo backends to run (default cuda; --tiny: cpu)")
    ap.add_argument("--cpu", action="store_true", help="also run solo's CPU reference")
    ap.add_argument("--tiny", action="store_true", help="tiny-a's config on the CPU (torch's CPU build)")
    ap.add_argument("--device", help="torch's device for transformers (default cuda; --tiny: cpu)")
    ap.add_argument("--inits", default="hf-router-confident", help="comma-separated, as slice_parity.py's; the first decides PASS/FAIL")
    ap.add_argument("--inputs-only", metavar="DIR", help="write the picture, pixel values and prompt to DIR (no torch)")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    a = ap.parse_args()
    if a.inputs_only:
        info = write_inputs(a, a.inputs_only)
        print(f"{a.inputs_only}: {info['width']}x{info['height']}, grid {info['grid_thw']}, {len(info['solo_ids'])} ids "
              f"({len(info['hf_ids'])} expanded)")  # fmt: skip
        return
    if not a.solo:
        ap.error("--solo is required (unless --inputs-only)")
    a.backends = a.backends or ("cpu" if a.tiny else "cuda")
    a.device = a.device or ("cpu" if a.tiny else "cuda")
    a.dir = a.dir or ("/tmp/solo-slice-image-tiny" if a.tiny else "/tmp/solo-slice-image")
    if a.cpu and "cpu" not in a.backends.split(","):
        a.backends += ",cpu"
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

    info = load_inputs(a)
    reports = [run_slice(a, info, init) for init in a.inits.split(",")]
    with open(os.path.join(a.out, "image_parity.json"), "w") as f:
        json.dump(reports, f, indent=2)
    for r in reports:
        print(f"\n{r['init']} init, image {r['image'][0]}x{r['image'][1]} ({r['image_tokens']} tokens), "
              f"{r['positions']} positions, {r['prefill']} in the prefill")  # fmt: skip
        print(f"{'comparison':>22} | {'rows':>10} | {'top-1':>7} | {'mean KL':>9} | {'max KL':>9} | {'max rel err':>11}")
        for key in [k for k in r if "_vs_" in k and isinstance(r[k], dict)]:
            for part, m in r[key].items():
                print(f"{key.removesuffix('_vs_hf_fp32'):>22} | {part:>10} | {m['top1_agreement']*100:6.2f}% | "
                      f"{m['mean_kl']:9.2e} | {m['max_kl']:9.2e} | {m['max_rel_logit_err']:11.3e}")  # fmt: skip
    first = reports[0]
    floor = first["hf_bf16_vs_hf_fp32"]["all"]["mean_kl"]
    ok = True
    for backend in a.backends.split(","):
        if f"solo_{backend}_error" in first:
            ok = False
            print(f"{first['init']} init: solo {backend}: FAIL ({first[f'solo_{backend}_error']})")
            continue
        kl = first[f"solo_{backend}_vs_hf_fp32"]["all"]["mean_kl"]
        verdict = kl <= floor
        ok &= verdict
        print(f"{first['init']} init: solo {backend} mean KL {kl:.2e} vs HF bf16's {floor:.2e}: " + ("PASS" if verdict else "FAIL"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
