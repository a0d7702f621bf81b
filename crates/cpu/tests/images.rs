//! Image input on the CPU reference against transformers (scripts/make_image_fixtures.py, fp32):
//! decoding, preprocessing (PIL's bicubic included) within 1e-5, the tower's merged tokens
//! within 1e-4 relative, and the logits of prompts with one and two images within 1e-4 with the
//! same argmax, in one prefill, in pieces that cut through an image, and as prefill then decode.

mod common;

use common::*;
use safetensors::{Dtype, SafeTensors};
use solo_model::image::{self, DecodeLimits, ImagePatches, Rgb8};
use solo_model::vision::PreprocessorConfig;
use solo_model::{Backend, Logits, PromptImage};
use std::sync::Arc;

const LIMITS: DecodeLimits = DecodeLimits { max_pixels: 1 << 24 };

struct Case {
    pixel_values: Vec<f32>,
    grids: Vec<[usize; 3]>,
    image_embeds: Vec<f32>,
    tokens: Vec<u32>,
    /// [3, T]
    positions: Vec<i64>,
    logits: Vec<f32>,
}

fn floats(st: &SafeTensors, key: &str) -> Vec<f32> {
    let t = st.tensor(key).unwrap_or_else(|_| panic!("no {key}"));
    assert_eq!(t.dtype(), Dtype::F32, "{key}");
    t.data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
}

fn ints(st: &SafeTensors, key: &str) -> Vec<i64> {
    let t = st.tensor(key).unwrap_or_else(|_| panic!("no {key}"));
    assert_eq!(t.dtype(), Dtype::I64, "{key}");
    t.data().chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap())).collect()
}

fn case(name: &str) -> Case {
    let bytes = std::fs::read(fixture_dir("tiny-a").join("image_reference.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let k = |s: &str| format!("{name}.{s}");
    let grids = ints(&st, &k("grid_thw")).chunks(3).map(|g| [g[0] as usize, g[1] as usize, g[2] as usize]).collect();
    Case {
        pixel_values: floats(&st, &k("pixel_values")),
        grids,
        image_embeds: floats(&st, &k("image_embeds")),
        tokens: ints(&st, &k("tokens")).into_iter().map(|t| t as u32).collect(),
        positions: ints(&st, &k("positions")),
        logits: floats(&st, &k("logits")),
    }
}

/// PIL's decoding of each fixture image: [h, w, 3] u8.
fn pil_decoded(file: &str) -> Vec<u8> {
    let bytes = std::fs::read(fixture_dir("images").join("decoded.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    st.tensor(file).unwrap().data().to_vec()
}

fn load_image(file: &str) -> Rgb8 {
    let bytes = std::fs::read(fixture_dir("images").join(file)).unwrap();
    image::decode(&bytes, LIMITS).unwrap_or_else(|e| panic!("{file}: {e:#}"))
}

fn preprocessor(m: &solo_cpu::CpuModel) -> PreprocessorConfig {
    PreprocessorConfig::from_dir(&fixture_dir("tiny-a"), m.config.vision.as_ref().unwrap()).unwrap()
}

const CASES: [(&str, &[&str]); 2] = [("one", &["wide.png"]), ("two", &["large.png", "small.png"])];

fn patches(m: &solo_cpu::CpuModel, files: &[&str]) -> Vec<ImagePatches> {
    let cfg = preprocessor(m);
    files.iter().map(|f| image::preprocess(&load_image(f), &cfg).unwrap()).collect()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).fold(0.0f32, |m, (x, y)| m.max((x - y).abs()))
}

#[test]
fn decodes_png_gif_webp_as_pil_and_jpeg_closely() {
    for file in ["wide.png", "large.png", "small.png", "wide.gif", "wide.webp"] {
        let img = load_image(file);
        assert_eq!(img.data, pil_decoded(file), "{file}: pixels differ from PIL's");
    }
    // JPEG decoders differ in their IDCT and chroma upsampling: close, not equal.
    let (ours, pil) = (load_image("wide.jpg").data, pil_decoded("wide.jpg"));
    assert_eq!(ours.len(), pil.len());
    let mean = ours.iter().zip(&pil).map(|(a, b)| (*a as f64 - *b as f64).abs()).sum::<f64>() / ours.len() as f64;
    assert!(mean < 2.0, "wide.jpg: mean |ours − PIL| = {mean}");
}

#[test]
fn preprocessing_matches_transformers() {
    let m = model("tiny-a");
    for (name, files) in CASES {
        let c = case(name);
        let got = patches(&m, files);
        let grids: Vec<[usize; 3]> = got.iter().map(|p| p.grid).collect();
        assert_eq!(grids, c.grids, "{name}: grids");
        let values: Vec<f32> = got.iter().flat_map(|p| p.values.iter().copied()).collect();
        let err = max_abs_diff(&values, &c.pixel_values);
        eprintln!("{name}: pixel values max |ours − HF| = {err:.2e}");
        assert!(err <= 1e-5, "{name}: pixel values differ by {err}");
    }
}

#[test]
fn tower_matches_transformers() {
    let m = model("tiny-a");
    for (name, files) in CASES {
        let c = case(name);
        let embeds: Vec<f32> = patches(&m, files).iter().flat_map(|p| m.encode_image(p).unwrap()).collect();
        let scale = c.image_embeds.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        let rel = max_abs_diff(&embeds, &c.image_embeds) / scale;
        eprintln!("{name}: merged image tokens, relative error {rel:.2e}");
        assert!(rel <= 1e-4, "{name}: image embeddings relative error {rel}");
    }
}

/// The case's images placed at their placeholders, from the tower run on HF's own pixel values
/// (so this checks the decoder side on its own).
fn prompt_images(m: &solo_cpu::CpuModel, c: &Case) -> Vec<PromptImage> {
    let v = m.config.vision.as_ref().unwrap();
    let image_token = v.image_token_id;
    let mut out = Vec::new();
    let mut offset = 0;
    let mut p = 0;
    for g in &c.grids {
        let n = g.iter().product::<usize>();
        let img = ImagePatches {
            grid: *g,
            values: c.pixel_values[offset..offset + n * v.patch_len()].to_vec(),
            hash: [0; 32],
        };
        offset += n * v.patch_len();
        while c.tokens[p] != image_token {
            p += 1;
        }
        let merged = [g[0], g[1] / v.spatial_merge_size, g[2] / v.spatial_merge_size];
        out.push(PromptImage { start: p, grid: merged, embeds: Arc::new(m.encode_image(&img).unwrap()) });
        p += merged.iter().product::<usize>();
    }
    out
}

#[test]
fn prompts_with_images_match_transformers() {
    let m = model("tiny-a");
    let vocab = m.config.vocab_size;
    for (name, _) in CASES {
        let c = case(name);
        let images = prompt_images(&m, &c);
        let mut state = m.new_state().unwrap();
        let logits = m.prefill_with_images(&mut state, &c.tokens, &images, Logits::All).unwrap();
        let worst = compare(&format!("{name}: one prefill"), &logits, &c.logits, vocab);
        eprintln!("{name}: {} tokens, {} images, worst relative error {worst:.2e}", c.tokens.len(), images.len());
        // The delta after the prompt is what transformers' rope index implies.
        let t = c.tokens.len();
        let max = (0..3 * t).map(|i| c.positions[i]).max().unwrap();
        assert_eq!(state.rope_delta, max + 1 - t as i64, "{name}: rope delta");
    }
}

/// Pieces cut anywhere, through an image too, and prefill then decode after the last image.
#[test]
fn image_prompts_in_pieces_and_decode_match_transformers() {
    let m = model("tiny-a");
    let vocab = m.config.vocab_size;
    for (name, _) in CASES {
        let c = case(name);
        let images = prompt_images(&m, &c);
        let t = c.tokens.len();
        let mid = images[0].start + 5; // inside the first image
        let mut state = m.new_state().unwrap();
        let mut logits = Vec::new();
        for piece in [0..3, 3..mid, mid..t] {
            logits.extend(m.prefill_with_images(&mut state, &c.tokens[piece], &images, Logits::All).unwrap());
        }
        compare(&format!("{name}: prefill in pieces"), &logits, &c.logits, vocab);

        let last = images.last().unwrap();
        let prefilled = last.start + last.tokens() + 2;
        let mut state = m.new_state().unwrap();
        let mut logits = m.prefill_with_images(&mut state, &c.tokens[..prefilled], &images, Logits::All).unwrap();
        for &tok in &c.tokens[prefilled..] {
            logits.extend(m.decode(&mut state, tok).unwrap());
        }
        let worst = compare(&format!("{name}: prefill {prefilled} + decode"), &logits, &c.logits, vocab);
        eprintln!("{name}: prefill {prefilled} then decode, worst relative error {worst:.2e}");
    }
}

#[test]
fn placeholders_without_an_image_are_refused() {
    let m = model("tiny-a");
    let c = case("one");
    let mut images = prompt_images(&m, &c);
    images[0].start += 1; // the first placeholder is left unfilled
    let mut state = m.new_state().unwrap();
    let err = m.prefill_with_images(&mut state, &c.tokens, &images, Logits::Last).unwrap_err();
    assert!(format!("{err:#}").contains("placeholder"), "{err:#}");
}

#[test]
fn tiny_b_tower_is_refused_in_one_line() {
    let m = model("tiny-b");
    let v = m.config.vision.as_ref().unwrap();
    let img = ImagePatches { grid: [1, 2, 2], values: vec![0.0; 4 * v.patch_len()], hash: [0; 32] };
    let err = m.encode_image(&img).unwrap_err().to_string();
    assert!(err.contains("head dim of 6"), "{err}");
}

#[test]
fn smart_resize_follows_transformers() {
    // (h, w, factor, min, max) → transformers' smart_resize.
    assert_eq!(image::smart_resize(29, 45, 8, 256, 2304).unwrap(), (32, 48));
    assert_eq!(image::smart_resize(70, 100, 8, 256, 2304).unwrap(), (40, 56));
    assert_eq!(image::smart_resize(6, 10, 8, 256, 2304).unwrap(), (16, 24));
    // The release: factor 32, 65,536 to 16,777,216 pixels; a 1024×1024 image stays.
    assert_eq!(image::smart_resize(1024, 1024, 32, 65536, 16777216).unwrap(), (1024, 1024));
    assert!(image::smart_resize(1, 300, 8, 256, 2304).unwrap_err().to_string().contains("aspect ratio"));
}
