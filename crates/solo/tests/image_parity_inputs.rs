//! What scripts/slice_parity_image.py feeds transformers is what solo computes. Its torch-free
//! part (`--inputs-only`: the PNG, the pixel values it hands transformers, the prompt as solo
//! takes it and as transformers does) against solo's own decoding and preprocessing, its
//! release constants against solo's (`real_vision_config`), and, on tiny-a, `solo logits --image`
//! on the one-placeholder prompt against the CPU reference run in-process on the script's
//! expanded prompt and pixel values. The Python comes from `$SOLO_PYTHON`, else `python3`
//! (the standard library is enough).

mod common;

use common::{root, solo_with};
use safetensors::SafeTensors;
use solo_model::image::{self, DecodeLimits, ImagePatches};
use solo_model::vision::{PreprocessorConfig, VisionConfig};
use solo_model::{Backend, Logits, PromptImage};
use std::path::Path;
use std::sync::Arc;

/// `slice_parity_image.py ARGS --inputs-only DIR`: inputs.json.
fn script_inputs(args: &[&str], dir: &Path) -> serde_json::Value {
    let python = std::env::var("SOLO_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = std::process::Command::new(&python)
        .arg(root().join("scripts/slice_parity_image.py"))
        .args(args)
        .arg("--inputs-only")
        .arg(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&std::fs::read_to_string(dir.join("inputs.json")).unwrap()).unwrap()
}

fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

fn num(v: &serde_json::Value) -> usize {
    v.as_u64().unwrap() as usize
}

/// The script's pixel values against solo's preprocessing of the script's PNG; returns them.
fn check_pixels(dir: &Path, inputs: &serde_json::Value, vision: &VisionConfig) -> ImagePatches {
    let bytes = std::fs::read(dir.join("image.png")).unwrap();
    let rgb = image::decode(&bytes, DecodeLimits { max_pixels: 1 << 26 }).unwrap();
    assert_eq!((rgb.width, rgb.height), (num(&inputs["width"]), num(&inputs["height"])));
    let pre = PreprocessorConfig::from_dir(dir, vision).unwrap();
    let ours = image::preprocess(&rgb, &pre).unwrap();
    let grid: Vec<usize> = inputs["grid_thw"].as_array().unwrap().iter().map(num).collect();
    assert_eq!(ours.grid.to_vec(), grid, "grid");
    let theirs: Vec<f32> = std::fs::read(dir.join("pixel_values.f32"))
        .unwrap()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(ours.values.len(), theirs.len(), "pixel values");
    let err = ours.values.iter().zip(&theirs).fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
    assert!(err == 0.0, "the script's pixel values differ from solo's by up to {err}");
    let merged = grid.iter().product::<usize>() / vision.spatial_merge_size.pow(2);
    assert_eq!(num(&inputs["image_tokens"]), merged);
    ImagePatches { grid: ours.grid, values: theirs, hash: [0; 32] }
}

/// The release's widths, ids and preprocessor: the script's agree with solo's.
#[test]
fn release_inputs_are_what_solo_computes() {
    let tmp = tempfile::tempdir().unwrap();
    let inputs = script_inputs(&["--image", "320x256"], tmp.path());
    let vision = solo_cuda::synthetic::real_vision_config();
    assert_eq!(VisionConfig::from_top(&inputs["config"]).unwrap().unwrap(), vision, "vision_config and token ids");
    check_pixels(tmp.path(), &inputs, &vision);
    let (solo_ids, hf_ids) = (ids(&inputs["solo_ids"]), ids(&inputs["hf_ids"]));
    assert_eq!(hf_ids.len(), solo_ids.len() - 1 + 80, "320×256: 10×8 merged tokens");
    assert_eq!(hf_ids.iter().filter(|&&t| t == vision.image_token_id).count(), 80);
}

/// tiny-a end to end: `solo logits --image` on the script's one-placeholder prompt and PNG gives
/// what the CPU reference gives on the script's expanded prompt and pixel values (what the script
/// hands transformers), row for row.
#[test]
fn tiny_inputs_through_solo_logits() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let inputs = script_inputs(&["--tiny", "--image", "48x40", "--decode", "5"], dir);
    let model = solo_cpu::load(&root().join("fixtures/tiny-a")).unwrap();
    let vision = model.config.vision.clone().unwrap();
    assert_eq!(VisionConfig::from_top(&inputs["config"]).unwrap().unwrap(), vision);
    let patches = check_pixels(dir, &inputs, &vision);

    let (solo_ids, hf_ids) = (ids(&inputs["solo_ids"]), ids(&inputs["hf_ids"]));
    let out = dir.join("logits.safetensors");
    let prefill = num(&inputs["solo_prefill"]).to_string();
    let image = dir.join("image.png");
    let tokens = solo_ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    let args = ["logits", "--model", "fixtures/tiny-a", "--backend", "cpu", "--tokens", &tokens, "--prefill", &prefill];
    let file_args = ["--image", image.to_str().unwrap(), "--out", out.to_str().unwrap()];
    solo_with::<&str>(&[&args[..], &file_args].concat(), &[], &[]).ok();
    let bytes = std::fs::read(&out).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let cli: Vec<f32> = st
        .tensor("logits")
        .unwrap()
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();

    // the expanded prompt, the image placed where the script says, prefill then decode as it says
    let m = vision.spatial_merge_size;
    let grid = [patches.grid[0], patches.grid[1] / m, patches.grid[2] / m];
    let embeds = Arc::new(model.encode_image(&patches).unwrap());
    let images = [PromptImage { start: num(&inputs["image_start"]), grid, embeds }];
    let hf_prefill = num(&inputs["hf_prefill"]);
    assert_eq!(hf_ids.len() - hf_prefill, 5);
    let mut state = model.new_state().unwrap();
    let mut want = model.prefill_with_images(&mut state, &hf_ids[..hf_prefill], &images, Logits::All).unwrap();
    for &t in &hf_ids[hf_prefill..] {
        want.extend(model.decode(&mut state, t).unwrap());
    }
    assert_eq!(cli.len(), hf_ids.len() * model.config.vocab_size, "rows");
    let err = cli.iter().zip(&want).fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
    let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    assert!(err <= 1e-6 * scale, "solo logits --image vs the script's inputs: max |diff| {err} (scale {scale})");
}
