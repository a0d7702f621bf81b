//! GGUF files as files: the fixture's config and weights, a split that loads as one, and every
//! kind of bad file refused in one line that names the file and what is wrong.
//!
//! Bad files are made from fixtures/gguf/small-f32.gguf: bytes patched in place, or the file
//! rewritten by a small GGUF writer below (for splits and tensors past the end).

use solo_model::gguf::{GgmlType, GgufFile, GgufModel, Value};
use solo_model::{DType, LayerKind};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/gguf")).join(name)
}

fn load_err(path: &Path) -> String {
    match solo_model::load(path) {
        Ok(_) => panic!("{} loaded", path.display()),
        Err(e) => format!("{e:#}"),
    }
}

/// One line, naming `file` and saying each of `words`.
fn assert_line(msg: &str, file: &str, words: &[&str]) {
    assert!(!msg.contains('\n'), "more than one line: {msg}");
    assert!(msg.contains(file), "does not name {file}: {msg}");
    for w in words {
        assert!(msg.contains(w), "does not say `{w}`: {msg}");
    }
    eprintln!("{msg}");
}

/// The bytes of the fixture with `find` replaced by `with` (same length) at its first occurrence.
fn patched(find: &[u8], with: &[u8]) -> Vec<u8> {
    let mut bytes = std::fs::read(fixture("small-f32.gguf")).unwrap();
    let at = bytes.windows(find.len()).position(|w| w == find).expect("pattern in the fixture");
    bytes[at..at + with.len()].copy_from_slice(with);
    bytes
}

/// Offset of tensor `name`'s type field in the fixture's tensor table.
fn type_field(bytes: &[u8], name: &str) -> usize {
    let mut key = (name.len() as u64).to_le_bytes().to_vec();
    key.extend_from_slice(name.as_bytes());
    let at = bytes.windows(key.len()).position(|w| w == key.as_slice()).expect("tensor in the table") + key.len();
    let dims = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    at + 4 + 8 * dims
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn the_fixture_reads_as_the_release_would() {
    let (cfg, w) = solo_model::load(&fixture("small-f32.gguf")).unwrap();
    assert_eq!((cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size), (64, 4, 512));
    assert_eq!(
        cfg.layer_types,
        [LayerKind::GatedDeltaNet, LayerKind::GatedDeltaNet, LayerKind::GatedDeltaNet, LayerKind::FullAttention]
    );
    assert_eq!((cfg.linear_num_key_heads, cfg.linear_num_value_heads, cfg.linear_value_head_dim), (2, 4, 16));
    assert_eq!((cfg.num_experts, cfg.num_experts_per_tok, cfg.moe_intermediate_size), (8, 2, 32));
    assert_eq!(cfg.rotary_dim(), 8);
    assert!(w.mtp.is_some(), "the MTP block (blk.4.*) is read");
    // the file's eos is <|im_end|> (id 382 of the tiny tokenizer)
    assert_eq!(cfg.eos_token_ids, [382]);
    let types = GgufModel::open(&fixture("wide-mix.gguf")).unwrap().describe();
    for t in [
        "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS", "IQ4_NL", "MXFP4", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0",
        "F16", "BF16", "F32",
    ] {
        assert!(types.contains(&format!("{t} ")), "{t} missing from the load line: {types}");
    }
    eprintln!("{types}");
}

#[test]
fn wrong_magic() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "m.gguf", &patched(b"GGUF", b"GGML"));
    assert_line(&load_err(&path), "m.gguf", &["not a GGUF file", "GGML"]);
}

#[test]
fn truncated_in_the_data_and_in_the_header() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(fixture("small-f32.gguf")).unwrap();
    let path = write(dir.path(), "t.gguf", &bytes[..bytes.len() * 2 / 3]);
    assert_line(&load_err(&path), "t.gguf", &["tensor `", "truncated file?"]);
    let path = write(dir.path(), "h.gguf", &bytes[..2000]);
    assert_line(&load_err(&path), "h.gguf", &["the file ends at byte 2000 while reading", "truncated file?"]);
}

#[test]
fn unknown_and_unsupported_types() {
    let dir = tempfile::tempdir().unwrap();
    for (id, words) in
        [(16u32, ["IQ2_XXS", "blk.0.attn_qkv.weight"]), (99, ["unknown ggml type 99", "blk.0.attn_qkv.weight"])]
    {
        let mut bytes = std::fs::read(fixture("small-f32.gguf")).unwrap();
        let at = type_field(&bytes, "blk.0.attn_qkv.weight");
        bytes[at..at + 4].copy_from_slice(&id.to_le_bytes());
        let path = write(dir.path(), &format!("type{id}.gguf"), &bytes);
        let msg = load_err(&path);
        assert_line(&msg, &format!("type{id}.gguf"), &words);
        assert!(msg.contains("solo reads F32, F16, BF16"), "{msg}");
    }
}

#[test]
fn tensor_out_of_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let src = GgufFile::open(&fixture("small-f32.gguf")).unwrap();
    let mut tensors = tensors_of(&src);
    tensors.last_mut().unwrap().offset_extra = 1 << 20; // points 1 MiB past where its data is
    let path = dir.path().join("o.gguf");
    write_gguf(&path, &src.metadata.iter().map(|(k, v)| (k.clone(), v.clone())).collect::<Vec<_>>(), &tensors);
    let last = &tensors.last().unwrap().name;
    assert_line(&load_err(&path), "o.gguf", &[&format!("tensor `{last}`"), "ends at byte", "truncated file?"]);
}

#[test]
fn other_architectures_and_the_vision_projector() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "next.gguf", &patched(b"qwen35moe", b"qwen3next"));
    assert_line(&load_err(&path), "next.gguf", &["architecture `qwen3next`", "solo runs only `qwen35moe`"]);
    let path = write(dir.path(), "mmproj-F16.gguf", &std::fs::read(fixture("small-f32.gguf")).unwrap());
    assert_line(&load_err(&path), "mmproj-F16.gguf", &["vision projector", "does not read images yet"]);
}

/// A two-part split (`-00001-of-00002.gguf`) reads as the whole file, from either part's name;
/// a missing part is named.
#[test]
fn a_split_loads_as_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let src = GgufFile::open(&fixture("small-bf16.gguf")).unwrap();
    let tensors = tensors_of(&src);
    let half = tensors.len() / 2;
    let split_kv = |no: u64| -> Vec<(String, Value)> {
        vec![
            ("split.no".into(), Value::UInt(no)),
            ("split.count".into(), Value::UInt(2)),
            ("split.tensors.count".into(), Value::UInt(tensors.len() as u64)),
        ]
    };
    let mut first: Vec<(String, Value)> = src.metadata.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    first.extend(split_kv(0));
    let mut second = vec![("general.architecture".to_string(), Value::Str("qwen35moe".into()))];
    second.extend(split_kv(1));
    let p1 = dir.path().join("tiny-00001-of-00002.gguf");
    write_gguf(&p1, &first, &tensors[..half]);
    write_gguf(&dir.path().join("tiny-00002-of-00002.gguf"), &second, &tensors[half..]);

    let (cfg0, w0) = solo_model::load(&fixture("small-bf16.gguf")).unwrap();
    for name in ["tiny-00001-of-00002.gguf", "tiny-00002-of-00002.gguf"] {
        let (cfg, w) = solo_model::load(&dir.path().join(name)).unwrap();
        assert_eq!(cfg, cfg0);
        assert_eq!(w.bytes(), w0.bytes());
        for (a, b) in w.layers.iter().zip(&w0.layers) {
            for (x, y) in a.tensors().iter().zip(b.tensors()) {
                assert_eq!(x.to_f32(), y.to_f32());
            }
        }
        assert_eq!(w.lm_head.to_f32(), w0.lm_head.to_f32());
    }
    assert!(GgufModel::open(&p1).unwrap().describe().contains("in 2 parts"));
    std::fs::remove_file(dir.path().join("tiny-00002-of-00002.gguf")).unwrap();
    assert_line(
        &load_err(&p1),
        "tiny-00001-of-00002.gguf",
        &["2-part split", "tiny-00002-of-00002.gguf", "is missing"],
    );
}

// ---- a minimal GGUF writer (v3, alignment 32) for the files above ----

struct Out {
    name: String,
    dims: Vec<u64>,
    ggml_type: u32,
    data: Vec<u8>,
    /// added to the tensor's offset, to point it elsewhere
    offset_extra: u64,
}

fn tensors_of(f: &GgufFile) -> Vec<Out> {
    f.tensors
        .iter()
        .map(|t| {
            let tensor = t.tensor.as_ref().unwrap();
            let ggml_type = match tensor.dtype {
                DType::F32 => 0,
                DType::F16 => 1,
                DType::BF16 => 30,
                DType::Ggml(g) => g.id(),
                DType::F8E4M3 | DType::I4 | DType::I32 | DType::I64 => unreachable!(),
            };
            let _ = GgmlType::from_id(ggml_type).unwrap();
            Out {
                name: t.name.clone(),
                dims: t.shape.iter().rev().map(|&d| d as u64).collect(),
                ggml_type,
                data: tensor.bytes().to_vec(),
                offset_extra: 0,
            }
        })
        .collect()
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, v: &Value, with_type: bool) {
    let (vtype, body): (u32, Vec<u8>) = match v {
        Value::UInt(x) => (10, x.to_le_bytes().to_vec()),
        Value::Int(x) => (11, x.to_le_bytes().to_vec()),
        Value::Float(x) => (12, x.to_le_bytes().to_vec()),
        Value::Bool(x) => (7, vec![*x as u8]),
        Value::Str(s) => {
            let mut b = Vec::new();
            put_str(&mut b, s);
            (8, b)
        }
        Value::Array(items) => {
            let mut b = Vec::new();
            let item_type = match items.first() {
                Some(Value::Str(_)) => 8u32,
                Some(Value::Int(_)) => 11,
                Some(Value::Float(_)) => 12,
                Some(Value::Bool(_)) => 7,
                _ => 10,
            };
            b.extend(item_type.to_le_bytes());
            b.extend((items.len() as u64).to_le_bytes());
            for item in items {
                put_value(&mut b, item, false);
            }
            (9, b)
        }
    };
    if with_type {
        out.extend(vtype.to_le_bytes());
    }
    out.extend(body);
}

fn write_gguf(path: &Path, kv: &[(String, Value)], tensors: &[Out]) {
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend((tensors.len() as u64).to_le_bytes());
    out.extend((kv.len() as u64).to_le_bytes());
    for (k, v) in kv {
        put_str(&mut out, k);
        put_value(&mut out, v, true);
    }
    let mut offset = 0u64;
    for t in tensors {
        put_str(&mut out, &t.name);
        out.extend((t.dims.len() as u32).to_le_bytes());
        t.dims.iter().for_each(|d| out.extend(d.to_le_bytes()));
        out.extend(t.ggml_type.to_le_bytes());
        out.extend((offset + t.offset_extra).to_le_bytes());
        offset += (t.data.len() as u64).div_ceil(32) * 32;
    }
    out.resize(out.len().div_ceil(32) * 32, 0);
    for t in tensors {
        out.extend(&t.data);
        out.resize(out.len().div_ceil(32) * 32, 0);
    }
    std::fs::write(path, out).unwrap();
}
