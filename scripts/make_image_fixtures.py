#!/usr/bin/env python3
"""Image-input fixtures for solo's vision tower, from Hugging Face transformers (fp32, CPU).

    pip install -r scripts/requirements-fixtures.txt pillow==13.0.0
    python scripts/make_image_fixtures.py

Writes (small, committed):
- fixtures/images/*.{png,jpg,gif,webp}: a few small synthetic pictures (seeded), one of them in
  every format solo decodes, and `decoded.safetensors`: PIL's RGB pixels of each file.
- fixtures/tiny-a/preprocessor_config.json: the image processor's settings (the release's keys
  and mean/std), sizes scaled down to the tiny tower.
- fixtures/tiny-a/image_reference.safetensors: per case (`one`: a text + image + text
  prompt; `two`: two images of other shapes in one prompt), transformers' own preprocessing
  (`Qwen2VLImageProcessorPil`: smart resize, PIL bicubic, rescale, normalise, patchify with the
  temporal repeat), the merged image embeddings (`get_image_features`), the 3-D rotary positions
  (`get_rope_index`) and the logits of every position of the prompt.

Only tiny-a: tiny-b's tower has a head dim of 6, and the tower's 2-D rotary form needs a multiple
of 4 (transformers fails on it too). The tiny checkpoint is read as it is (their `model.visual.*` tensors were written by
scripts/make_fixtures.py); nothing there is changed.
"""

import json
from pathlib import Path

import numpy as np
import PIL
import torch
import transformers
from PIL import Image
from safetensors.torch import save_file
from transformers import Qwen3_5MoeForConditionalGeneration
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
IMAGES = FIXTURES / "images"

# Per fixture: the processor's settings (patch and merge sizes are the tower's own).
PROCESSORS = {
    "tiny-a": {"patch_size": 4, "merge_size": 2, "temporal_patch_size": 2,
               "size": {"shortest_edge": 256, "longest_edge": 2304},
               "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]},
}  # fmt: skip

# (name, width, height): 45×29 is resized up and down to a multiple of the factor, 100×70 is
# shrunk under max_pixels, 10×6 grown over min_pixels.
PICTURES = [("wide", 45, 29), ("large", 100, 70), ("small", 10, 6)]
CASES = {"one": ["wide"], "two": ["large", "small"]}


def picture(seed: int, w: int, h: int) -> np.ndarray:
    """A smooth colour field with a few hard edges and some noise: uint8 [h, w, 3]."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.stack([
        128 + 100 * np.sin(x / (3 + seed) + y / 7),
        128 + 100 * np.cos(y / (2 + seed) - x / 11),
        255 * (x + y) / (w + h),
    ], axis=-1)  # fmt: skip
    img[(x // 5 + y // 4) % 3 == 0] *= 0.5  # edges that bicubic ringing shows
    img += rng.normal(0, 12, img.shape)
    return np.clip(np.round(img), 0, 255).astype(np.uint8)


def write_images() -> dict[str, Image.Image]:
    IMAGES.mkdir(parents=True, exist_ok=True)
    pics = {}
    decoded = {}
    for seed, (name, w, h) in enumerate(PICTURES):
        img = Image.fromarray(picture(seed, w, h), "RGB")
        path = IMAGES / f"{name}.png"
        img.save(path, optimize=True)
        pics[name] = Image.open(path).convert("RGB")
        decoded[name + ".png"] = torch.from_numpy(np.asarray(pics[name]).copy())
    # The first picture in the other formats solo decodes.
    wide = pics["wide"]
    wide.save(IMAGES / "wide.jpg", quality=90)
    wide.save(IMAGES / "wide.webp", lossless=True)
    frames = [wide.quantize(64, dither=Image.Dither.NONE), Image.new("RGB", wide.size, (255, 0, 0)).quantize(4)]
    frames[0].save(IMAGES / "wide.gif", save_all=True, append_images=frames[1:], duration=100)
    for ext in ("jpg", "webp", "gif"):
        with Image.open(IMAGES / f"wide.{ext}") as f:
            f.seek(0)
            decoded[f"wide.{ext}"] = torch.from_numpy(np.asarray(f.convert("RGB")).copy())
    save_file(decoded, str(IMAGES / "decoded.safetensors"))
    return pics


def load_hf(d: Path):
    model = Qwen3_5MoeForConditionalGeneration.from_pretrained(
        str(d), dtype=torch.float32, attn_implementation="eager", experts_implementation="eager"
    )
    model.eval()
    return model


def prompt_tokens(cfg, grids: list[list[int]], merge: int, rng: np.random.Generator) -> list[int]:
    """Text, then per image <vision_start> <image_pad>×n <vision_end> and more text."""
    text = lambda n: rng.integers(0, 380, n).tolist()  # plain BPE ids, no special token
    ids = text(9)
    for t, h, w in grids:
        ids += [cfg.vision_start_token_id] + [cfg.image_token_id] * (t * h * w // merge**2) + [cfg.vision_end_token_id]
        ids += text(7)
    return ids


def make(name: str, pics: dict[str, Image.Image]) -> None:
    d = FIXTURES / name
    settings = PROCESSORS[name]
    config = {"image_processor_type": "Qwen2VLImageProcessor", "processor_class": "Qwen3VLProcessor",
              "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True, "do_convert_rgb": True,
              "resample": 3, **settings}  # fmt: skip
    (d / "preprocessor_config.json").write_text(json.dumps(config, indent=2) + "\n")
    proc = Qwen2VLImageProcessorPil(**{k: v for k, v in config.items() if k not in ("image_processor_type", "processor_class")})
    model = load_hf(d)
    cfg = model.config
    merge = cfg.vision_config.spatial_merge_size
    assert merge == settings["merge_size"] and cfg.vision_config.patch_size == settings["patch_size"]
    rng = np.random.default_rng(45)
    out = {}
    for case, names in CASES.items():
        feats = proc([pics[n] for n in names], return_tensors="pt")
        pixel_values, grid = feats["pixel_values"], feats["image_grid_thw"]
        ids = torch.tensor(prompt_tokens(cfg, grid.tolist(), merge, rng))
        mm = (ids == cfg.image_token_id).to(torch.int32)
        with torch.no_grad():
            embeds = torch.cat(model.model.get_image_features(pixel_values, grid).pooler_output)
            positions, _ = model.model.get_rope_index(ids[None], mm[None], image_grid_thw=grid)
            logits = model(input_ids=ids[None], pixel_values=pixel_values, image_grid_thw=grid,
                           mm_token_type_ids=mm[None], use_cache=False).logits[0]  # fmt: skip
        gaps = router_gap(model, ids, pixel_values, grid, mm)
        print(f"{name}/{case}: grids {grid.tolist()}, {len(ids)} tokens, {embeds.shape[0]} image tokens, "
              f"min router gap {gaps:.2e}")  # fmt: skip
        out[f"{case}.pixel_values"] = pixel_values.float().contiguous()
        out[f"{case}.grid_thw"] = grid.to(torch.int64)
        out[f"{case}.image_embeds"] = embeds.float().contiguous()
        out[f"{case}.tokens"] = ids.to(torch.int64)
        out[f"{case}.positions"] = positions[:, 0].to(torch.int64).contiguous()
        out[f"{case}.logits"] = logits.float().contiguous()
    meta = {"transformers": transformers.__version__, "torch": torch.__version__, "pillow": PIL.__version__,
            "images": json.dumps(CASES)}  # fmt: skip
    save_file(out, str(d / "image_reference.safetensors"), metadata=meta)


def router_gap(model, ids, pixel_values, grid, mm) -> float:
    """Smallest (k-th minus (k+1)-th) router logit: an f32 reimplementation must not flip one."""
    k = model.config.text_config.num_experts_per_tok
    gaps = []

    def hook(_m, _inp, out):
        top = torch.topk(out[0].float(), k + 1, dim=-1).values
        gaps.append((top[:, k - 1] - top[:, k]).min().item())

    hs = [layer.mlp.gate.register_forward_hook(hook) for layer in model.model.language_model.layers]
    with torch.no_grad():
        model(input_ids=ids[None], pixel_values=pixel_values, image_grid_thw=grid, mm_token_type_ids=mm[None])
    for h in hs:
        h.remove()
    return min(gaps)


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    pics = write_images()
    for name in PROCESSORS:
        make(name, pics)


if __name__ == "__main__":
    main()
