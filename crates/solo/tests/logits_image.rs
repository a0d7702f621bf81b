//! `solo logits --image FILE`: the prompt's one `<|image_pad|>` per image expanded, the image
//! through tiny-a's preprocessing and vision tower, and the logits of every position of the
//! expanded prompt against transformers' (`tiny-a/image_reference.safetensors`, fp32, written by
//! scripts/make_image_fixtures.py): in one prefill, and as a prefill then decode steps. Bad input
//! is one `solo: error:` line.

mod common;

use common::{assert_one_line_error, root, solo_with, Output};
use safetensors::{Dtype, SafeTensors};

const MAX_REL_ERR: f32 = 1e-4;
/// `<|vision_start|>`, `<|image_pad|>`, `<|vision_end|>` in tiny-a's vocabulary.
const START: u32 = 389;
const PAD: u32 = 392;
const END: u32 = 390;

fn solo(args: &[&str]) -> Output {
    solo_with::<&str>(args, &[], &[])
}

/// A case of the image reference: the expanded prompt's tokens and HF's logits, one row a token.
fn reference(case: &str) -> (Vec<u32>, Vec<Vec<f32>>) {
    let bytes = std::fs::read(root().join("fixtures/tiny-a/image_reference.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let tokens = st.tensor(&format!("{case}.tokens")).unwrap();
    assert_eq!(tokens.dtype(), Dtype::I64);
    let tokens = tokens.data().chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap()) as u32).collect();
    (tokens, rows(&st, &format!("{case}.logits")))
}

fn rows(st: &SafeTensors, key: &str) -> Vec<Vec<f32>> {
    let t = st.tensor(key).unwrap();
    assert_eq!(t.dtype(), Dtype::F32);
    let vocab = t.shape()[1];
    let values: Vec<f32> = t.data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
    values.chunks(vocab).map(<[f32]>::to_vec).collect()
}

/// Each run of `<|image_pad|>` as one: the prompt as `solo logits --image` takes it.
fn collapse(tokens: &[u32]) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::new();
    for &t in tokens {
        if !(t == PAD && out.last() == Some(&PAD)) {
            out.push(t);
        }
    }
    out
}

fn join(tokens: &[u32]) -> String {
    tokens.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

fn argmax(v: &[f32]) -> usize {
    (0..v.len()).fold(0, |best, i| if v[i] > v[best] { i } else { best })
}

/// Every row within MAX_REL_ERR of HF's (relative to the row's largest logit), the same argmax.
fn assert_matches(what: &str, ours: &[Vec<f32>], hf: &[Vec<f32>]) {
    assert_eq!(ours.len(), hf.len(), "{what}: rows");
    for (pos, (a, b)) in ours.iter().zip(hf).enumerate() {
        assert_eq!(a.len(), b.len(), "{what}: row {pos} length");
        let scale = b.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let err = a.iter().zip(b).fold(0.0f32, |m, (x, y)| m.max((x - y).abs())) / scale;
        assert!(err <= MAX_REL_ERR, "{what}: row {pos} relative error {err:.3e}");
        assert_eq!(argmax(a), argmax(b), "{what}: row {pos} argmax");
    }
}

#[test]
fn logits_with_one_image_match_transformers() {
    let (expanded, hf) = reference("one");
    let tokens = collapse(&expanded);
    assert_eq!(tokens.iter().filter(|&&t| t == PAD).count(), 1);
    let args = ["logits", "--model", "fixtures/tiny-a", "--backend", "cpu", "--tokens", &join(&tokens)];
    let out = solo(&[&args[..], &["--image", "fixtures/images/wide.png"]].concat()).ok();
    let json: serde_json::Value = serde_json::from_str(&out.stdout).expect("solo logits did not print JSON");
    let ours: Vec<Vec<f32>> = json["logits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect())
        .collect();
    assert_matches("one image, one prefill", &ours, &hf);
    assert!(out.stderr.contains("solo: 1 image(s), 24 tokens"), "{}", out.stderr);

    // The same ids without the image are a different prompt: the test can tell.
    let text_only = solo(&args).ok();
    assert_ne!(text_only.stdout, out.stdout);
}

/// Two images of other shapes; `--prefill` counts the ids as given, stops after the last image,
/// and the rest are decode steps; written with --out.
#[test]
fn logits_with_two_images_prefill_then_decode_match_transformers() {
    let (expanded, hf) = reference("two");
    let tokens = collapse(&expanded);
    let last_pad = tokens.iter().rposition(|&t| t == PAD).unwrap();
    let prefill = (last_pad + 3).to_string();
    assert!(last_pad + 3 < tokens.len(), "decode steps remain");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("logits.safetensors");
    solo(&[
        "logits",
        "--model",
        "fixtures/tiny-a",
        "--backend",
        "cpu",
        "--tokens",
        &join(&tokens),
        "--prefill",
        &prefill,
        "--image",
        "fixtures/images/large.png",
        "--image",
        "fixtures/images/small.png",
        "--out",
        file.to_str().unwrap(),
    ])
    .ok();
    let bytes = std::fs::read(&file).unwrap();
    let ours = rows(&SafeTensors::deserialize(&bytes).unwrap(), "logits");
    assert_matches("two images, prefill then decode", &ours, &hf);
}

#[test]
fn logits_image_errors_are_one_line() {
    let (expanded, _) = reference("one");
    let tokens = collapse(&expanded);
    let pad = tokens.iter().position(|&t| t == PAD).unwrap();
    let unwrapped: Vec<u32> = tokens.iter().map(|&t| if t == START || t == END { 7 } else { t }).collect();
    let (ids, ids_unwrapped, before) = (join(&tokens), join(&unwrapped), pad.to_string());
    let wide = "fixtures/images/wide.png";
    let cases: [(Vec<&str>, &[&str]); 5] = [
        (vec!["--tokens", &ids, "--image", "fixtures/images/missing.png"], &["missing.png", "no such file"]),
        (vec!["--tokens", &ids, "--image", wide, "--image", wide], &["1 <|image_pad|>", "2 --image"]),
        (vec!["--tokens", &ids_unwrapped, "--image", wide], &["not between <|vision_start|>"]),
        (vec!["--tokens", &ids, "--prefill", &before, "--image", wide], &["--prefill", "not in the prefill"]),
        (vec!["--tokens", &ids, "--image", "fixtures/tiny-a/config.json"], &["config.json", "not a PNG"]),
    ];
    for (extra, names) in cases {
        let args = [&["logits", "--model", "fixtures/tiny-a", "--backend", "cpu"][..], &extra].concat();
        assert_one_line_error(&solo(&args), names);
    }
    // a checkpoint whose tower cannot run
    let tiny_b = ["logits", "--model", "fixtures/tiny-b", "--backend", "cpu", "--tokens", &ids, "--image", wide];
    assert_one_line_error(&solo(&tiny_b), &["head dim of 6"]);
}
