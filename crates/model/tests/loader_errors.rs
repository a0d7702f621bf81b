//! The checkpoint loader on the tiny fixtures: both layouts load with the right layer kinds and
//! per-expert views, and every kind of broken checkpoint fails with one line that names the file and
//! the tensor or value at fault (never a panic).
//!
//! Each broken case copies a fixture into a temp dir, breaks one thing, and calls `solo_model::load`.

mod common;

use common::*;
use safetensors::{Dtype, SafeTensors};
use solo_model::weights::Mixer;
use solo_model::{DType, LayerKind, Tensor};
use std::path::Path;
use tempfile::TempDir;

/// Cuts a file to its first `len` bytes.
fn truncate(path: &Path, len: u64) {
    std::fs::OpenOptions::new().write(true).open(path).unwrap().set_len(len).unwrap();
}

fn bf16_to_f32(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(2).map(|b| f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16)).collect()
}

// ---- what loads ---------------------------------------------------------------------------------

#[test]
fn both_fixtures_load_with_their_layer_kinds() {
    use LayerKind::{FullAttention as F, GatedDeltaNet as L};
    for (name, kinds, vocab, hidden, experts) in
        [("tiny-a", vec![L, L, L, F], 512, 64, 8), ("tiny-b", vec![L, F, L, L, F, L], 480, 48, 6)]
    {
        let (cfg, w) = load_ok(&fixture(name));
        assert_eq!(cfg.layer_types, kinds, "{name}");
        assert_eq!((cfg.vocab_size, cfg.hidden_size), (vocab, hidden), "{name}");
        assert_eq!(w.layers.len(), kinds.len(), "{name}");
        assert_eq!(w.embed_tokens.shape, [vocab, hidden], "{name}");
        assert_eq!(w.lm_head.shape, [vocab, hidden], "{name}");
        for (i, (layer, kind)) in w.layers.iter().zip(&kinds).enumerate() {
            let mixer_kind = match layer.mixer {
                Mixer::GatedDeltaNet(_) => L,
                Mixer::FullAttention(_) => F,
            };
            assert_eq!(mixer_kind, *kind, "{name} layer {i}");
            assert_eq!(layer.moe.experts.len(), experts, "{name} layer {i}");
            let inter = cfg.moe_intermediate_size;
            for e in &layer.moe.experts {
                assert_eq!(e.gate.shape, [inter, hidden]);
                assert_eq!(e.up.shape, [inter, hidden]);
                assert_eq!(e.down.shape, [hidden, inter]);
            }
        }
    }
}

#[test]
fn a_log_keeps_its_stored_dtype() {
    let a_log = |name: &str| {
        let (_, w) = load_ok(&fixture(name));
        match &w.layers[0].mixer {
            Mixer::GatedDeltaNet(g) => g.a_log.dtype,
            Mixer::FullAttention(_) => panic!("{name}: layer 0 is not GDN"),
        }
    };
    assert_eq!(a_log("tiny-a"), DType::F32);
    assert_eq!(a_log("tiny-b"), DType::BF16);
}

/// tiny-a's fused experts: expert e's gate is rows 0..I of gate_up_proj[e], up rows I..2I, down
/// down_proj[e], in every layer and for every expert.
#[test]
fn fused_experts_become_per_expert_views() {
    let dir = fixture("tiny-a");
    let (cfg, w) = load_ok(&dir);
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let (e_n, i_n, h) = (cfg.num_experts, cfg.moe_intermediate_size, cfg.hidden_size);
    for (l, layer) in w.layers.iter().enumerate() {
        let p = format!("model.language_model.layers.{l}.mlp.experts.");
        let gate_up = st.tensor(&format!("{p}gate_up_proj")).unwrap();
        let down = st.tensor(&format!("{p}down_proj")).unwrap();
        assert_eq!(gate_up.shape(), [e_n, 2 * i_n, h]);
        assert_eq!(down.shape(), [e_n, h, i_n]);
        let gate_up = bf16_to_f32(gate_up.data());
        let down = bf16_to_f32(down.data());
        for (e, ex) in layer.moe.experts.iter().enumerate() {
            let expert = &gate_up[e * 2 * i_n * h..(e + 1) * 2 * i_n * h];
            assert_eq!(ex.gate.to_f32(), expert[..i_n * h], "layer {l} expert {e} gate");
            assert_eq!(ex.up.to_f32(), expert[i_n * h..], "layer {l} expert {e} up");
            assert_eq!(ex.down.to_f32(), down[e * h * i_n..(e + 1) * h * i_n], "layer {l} expert {e} down");
        }
    }
    // The example from the brief, spelled out: expert 3's gate rows are rows 0..I of gate_up_proj[3].
    let gate_up = w.layers[0].moe.experts[3].gate.clone();
    let mut row = vec![0.0; h];
    gate_up.read_row_f32(i_n - 1, &mut row);
    let raw = bf16_to_f32(st.tensor("model.language_model.layers.0.mlp.experts.gate_up_proj").unwrap().data());
    let start = (3 * 2 * i_n + i_n - 1) * h;
    assert_eq!(row, raw[start..start + h]);
}

/// tiny-b stores each expert separately, across two shards: each view is that tensor.
#[test]
fn per_expert_layout_across_shards() {
    let dir = fixture("tiny-b");
    let (cfg, w) = load_ok(&dir);
    let mut raw = std::collections::BTreeMap::new();
    for shard in ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"] {
        for t in read_tensors(&dir.join(shard)) {
            raw.insert(t.name, bf16_to_f32(&t.data));
        }
    }
    for (l, layer) in w.layers.iter().enumerate() {
        assert_eq!(layer.moe.experts.len(), cfg.num_experts);
        for (e, ex) in layer.moe.experts.iter().enumerate() {
            let p = format!("model.language_model.layers.{l}.mlp.experts.{e}.");
            assert_eq!(ex.gate.to_f32(), raw[&format!("{p}gate_proj.weight")], "layer {l} expert {e} gate");
            assert_eq!(ex.up.to_f32(), raw[&format!("{p}up_proj.weight")], "layer {l} expert {e} up");
            assert_eq!(ex.down.to_f32(), raw[&format!("{p}down_proj.weight")], "layer {l} expert {e} down");
        }
    }
}

/// The fixtures carry a vision tower and an MTP head (as the release does): the head loads in
/// both expert layouts, the tower is skipped along with any new tensor under its prefix.
#[test]
fn mtp_head_loads_and_vision_tensors_are_skipped() {
    let a = read_tensors(&fixture("tiny-a").join("model.safetensors"));
    let b = read_tensors(&fixture("tiny-b").join("model-00002-of-00002.safetensors"));
    for (name, tensors) in [("tiny-a", &a), ("tiny-b", &b)] {
        assert!(tensors.iter().any(|t| t.name.starts_with("model.visual.")), "{name} has no vision tensors");
        assert!(tensors.iter().any(|t| t.name.starts_with("mtp.")), "{name} has no mtp tensors");
    }
    for name in ["tiny-a", "tiny-b"] {
        let (cfg, w) = load_ok(&fixture(name));
        let mtp = w.mtp.unwrap_or_else(|| panic!("{name}: no MTP head loaded"));
        assert_eq!(mtp.fc.shape, [cfg.hidden_size, 2 * cfg.hidden_size]);
        assert_eq!(mtp.layer.moe.experts.len(), cfg.num_experts);
        assert!(matches!(mtp.layer.mixer, Mixer::FullAttention(_)));
    }

    let tmp = copy_fixture("tiny-a");
    rewrite(&tmp.path().join("model.safetensors"), |ts| {
        ts.push(Owned {
            name: "model.visual.something_new.weight".into(),
            dtype: Dtype::BF16,
            shape: vec![4],
            data: vec![0; 8],
        });
    });
    load_ok(tmp.path());
}

/// An MTP tensor solo does not know (a second MTP layer) is named; a missing one too.
#[test]
fn mtp_head_tensors_are_checked() {
    let tmp = copy_fixture("tiny-a");
    rewrite(&tmp.path().join("model.safetensors"), |ts| {
        ts.push(Owned {
            name: "mtp.layers.1.input_layernorm.weight".into(),
            dtype: Dtype::BF16,
            shape: vec![4],
            data: vec![0; 8],
        });
    });
    let err = load_err(tmp.path());
    assert!(err.contains("unknown tensor") && err.contains("mtp.layers.1.input_layernorm.weight"), "{err}");

    let tmp = copy_fixture("tiny-a");
    rewrite(&tmp.path().join("model.safetensors"), |ts| ts.retain(|t| t.name != "mtp.norm.weight"));
    let err = load_err(tmp.path());
    assert!(err.contains("`mtp.norm.weight` is missing"), "{err}");
}

// ---- the directory and config.json --------------------------------------------------------------

#[test]
fn missing_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("no-such-model");
    let err = load_err(&dir);
    assert_names(&err, &[&dir.display().to_string(), "does not exist"]);
}

#[test]
fn missing_config_json() {
    let tmp = copy_fixture("tiny-a");
    std::fs::remove_file(tmp.path().join("config.json")).unwrap();
    let err = load_err(tmp.path());
    assert_names(&err, &["config.json", "cannot read"]);
}

#[test]
fn config_json_is_not_json() {
    let tmp = copy_fixture("tiny-a");
    std::fs::write(tmp.path().join("config.json"), "{\"model_type\": \"qwen3_5_moe\", oops").unwrap();
    let err = load_err(tmp.path());
    assert_names(&err, &["config.json", "not valid JSON"]);
}

#[test]
fn config_json_of_another_model() {
    let tmp = copy_fixture("tiny-a");
    let path = tmp.path().join("config.json");
    let mut cfg: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    cfg["model_type"] = "llama".into();
    std::fs::write(&path, cfg.to_string()).unwrap();
    let err = load_err(tmp.path());
    assert_names(&err, &["config.json", "llama"]);
}

#[test]
fn config_json_missing_a_key() {
    let tmp = copy_fixture("tiny-b");
    let path = tmp.path().join("config.json");
    let mut cfg: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    cfg["text_config"].as_object_mut().unwrap().remove("head_dim").unwrap();
    std::fs::write(&path, cfg.to_string()).unwrap();
    let err = load_err(tmp.path());
    assert_names(&err, &["config.json", "head_dim"]);
}

// ---- the safetensors files ----------------------------------------------------------------------

#[test]
fn missing_model_safetensors() {
    let tmp = copy_fixture("tiny-a");
    std::fs::remove_file(tmp.path().join("model.safetensors")).unwrap();
    let err = load_err(tmp.path());
    assert_names(&err, &["model.safetensors", "model.safetensors.index.json"]);
}

/// The tensor whose data a cut at `len` bytes leaves incomplete first (lowest end offset).
fn first_cut_tensor(path: &Path, len: usize) -> String {
    let bytes = std::fs::read(path).unwrap();
    let (header_len, meta) = SafeTensors::read_metadata(&bytes).unwrap();
    let data_len = len - 8 - header_len;
    meta.tensors()
        .into_iter()
        .filter(|(_, info)| info.data_offsets.1 > data_len)
        .min_by_key(|(_, info)| info.data_offsets.1)
        .unwrap()
        .0
}

#[test]
fn truncated_model_safetensors_names_file_and_tensor() {
    let tmp = copy_fixture("tiny-a");
    let path = tmp.path().join("model.safetensors");
    let len = std::fs::metadata(&path).unwrap().len() * 6 / 10;
    let tensor = first_cut_tensor(&path, len as usize);
    truncate(&path, len);
    let err = load_err(tmp.path());
    assert_names(&err, &["model.safetensors", &format!("`{tensor}`"), "truncated"]);
}

#[test]
fn truncated_shard_names_file_and_tensor() {
    let tmp = copy_fixture("tiny-b");
    let path = tmp.path().join("model-00002-of-00002.safetensors");
    let len = std::fs::metadata(&path).unwrap().len() * 6 / 10;
    let tensor = first_cut_tensor(&path, len as usize);
    truncate(&path, len);
    let err = load_err(tmp.path());
    assert_names(&err, &["model-00002-of-00002.safetensors", &format!("`{tensor}`"), "truncated"]);
}

#[test]
fn truncated_header() {
    let tmp = copy_fixture("tiny-a");
    let path = tmp.path().join("model.safetensors");
    truncate(&path, 10);
    let err = load_err(tmp.path());
    assert_names(&err, &["model.safetensors", "header", "truncated"]);
}

#[test]
fn empty_and_tiny_files() {
    for len in [0, 5] {
        let tmp = copy_fixture("tiny-a");
        truncate(&tmp.path().join("model.safetensors"), len);
        let err = load_err(tmp.path());
        assert_names(&err, &["model.safetensors", "truncated or empty"]);
    }
}

#[test]
fn not_a_safetensors_file() {
    let tmp = copy_fixture("tiny-a");
    std::fs::write(tmp.path().join("model.safetensors"), "this is a text file, not tensors at all\n").unwrap();
    let err = load_err(tmp.path());
    assert_names(&err, &["model.safetensors", "not a safetensors file"]);
}

#[test]
fn shard_named_by_index_is_absent() {
    let tmp = copy_fixture("tiny-b");
    std::fs::remove_file(tmp.path().join("model-00002-of-00002.safetensors")).unwrap();
    let err = load_err(tmp.path());
    assert_names(&err, &["model-00002-of-00002.safetensors", "model.safetensors.index.json"]);
}

#[test]
fn index_is_not_json() {
    let tmp = copy_fixture("tiny-b");
    std::fs::write(tmp.path().join("model.safetensors.index.json"), "{\"weight_map\": ").unwrap();
    let err = load_err(tmp.path());
    assert_names(&err, &["model.safetensors.index.json"]);
}

// ---- the tensors --------------------------------------------------------------------------------

#[test]
fn missing_tensor_is_named() {
    let gone = "model.language_model.layers.2.linear_attn.dt_bias";
    let tmp = copy_fixture("tiny-a");
    rewrite(&tmp.path().join("model.safetensors"), |ts| ts.retain(|t| t.name != gone));
    let err = load_err(tmp.path());
    assert_names(&err, &[&format!("`{gone}`"), "missing", "model.safetensors"]);
}

/// With only one of the two fused expert tensors present, the missing one is named (not a
/// per-expert name of the other layout).
#[test]
fn missing_fused_expert_tensor_is_named() {
    let gone = "model.language_model.layers.1.mlp.experts.gate_up_proj";
    let tmp = copy_fixture("tiny-a");
    rewrite(&tmp.path().join("model.safetensors"), |ts| ts.retain(|t| t.name != gone));
    let err = load_err(tmp.path());
    assert_names(&err, &[&format!("`{gone}`"), "missing"]);
}

#[test]
fn missing_tensor_in_a_shard() {
    let gone = "model.language_model.layers.4.self_attn.k_norm.weight";
    let index_path = |tmp: &TempDir| tmp.path().join("model.safetensors.index.json");
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("tiny-b").join("model.safetensors.index.json")).unwrap())
            .unwrap();
    let file = index["weight_map"][gone].as_str().unwrap().to_string();

    // Still listed by the index: the index names it and its file.
    let tmp = copy_fixture("tiny-b");
    rewrite(&tmp.path().join(&file), |ts| ts.retain(|t| t.name != gone));
    let err = load_err(tmp.path());
    assert_names(&err, &[&format!("`{gone}`"), &file, "missing"]);

    // Dropped from the index as well: the model asks for it.
    let mut index = index.clone();
    index["weight_map"].as_object_mut().unwrap().remove(gone);
    std::fs::write(index_path(&tmp), index.to_string()).unwrap();
    let err = load_err(tmp.path());
    assert_names(&err, &[&format!("`{gone}`"), "missing"]);
}

#[test]
fn wrong_shape_names_file_tensor_and_both_shapes() {
    let name = "model.language_model.layers.0.linear_attn.in_proj_z.weight"; // [96, 64] in tiny-a
    let tmp = copy_fixture("tiny-a");
    rewrite(&tmp.path().join("model.safetensors"), |ts| {
        let t = ts.iter_mut().find(|t| t.name == name).unwrap();
        assert_eq!(t.shape, [96, 64]);
        t.shape = vec![95, 64];
        t.data.truncate(95 * 64 * 2);
    });
    let err = load_err(tmp.path());
    assert_names(&err, &["model.safetensors", &format!("`{name}`"), "[95, 64]", "[96, 64]"]);
}

#[test]
fn wrong_shape_of_a_per_expert_tensor() {
    let name = "model.language_model.layers.3.mlp.experts.5.down_proj.weight"; // [48, 24] in tiny-b
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("tiny-b").join("model.safetensors.index.json")).unwrap())
            .unwrap();
    let file = index["weight_map"][name].as_str().unwrap().to_string();
    let tmp = copy_fixture("tiny-b");
    rewrite(&tmp.path().join(&file), |ts| {
        let t = ts.iter_mut().find(|t| t.name == name).unwrap();
        assert_eq!(t.shape, [48, 24]);
        t.shape = vec![24, 48]; // transposed: same size, wrong layout
    });
    let err = load_err(tmp.path());
    assert_names(&err, &[&file, &format!("`{name}`"), "[24, 48]", "[48, 24]"]);
}

#[test]
fn unknown_tensor_is_named() {
    let name = "model.language_model.layers.0.mystery.weight";
    let tmp = copy_fixture("tiny-a");
    rewrite(&tmp.path().join("model.safetensors"), |ts| {
        ts.push(Owned { name: name.into(), dtype: Dtype::BF16, shape: vec![64], data: vec![0; 128] });
    });
    let err = load_err(tmp.path());
    assert_names(&err, &[&format!("`{name}`"), "unknown", "model.safetensors"]);
}

#[test]
fn unreadable_dtype_is_named() {
    let name = "model.language_model.norm.weight"; // [64] BF16 in tiny-a
    let tmp = copy_fixture("tiny-a");
    rewrite(&tmp.path().join("model.safetensors"), |ts| {
        let t = ts.iter_mut().find(|t| t.name == name).unwrap();
        t.dtype = Dtype::I16;
    });
    let err = load_err(tmp.path());
    assert_names(&err, &["model.safetensors", &format!("`{name}`"), "I16"]);
}

/// A re-serialised fixture (what the broken cases start from) still loads and holds the same
/// values, so each broken case fails only because of its one change.
#[test]
fn rewritten_fixture_still_loads() {
    let tmp = copy_fixture("tiny-a");
    rewrite(&tmp.path().join("model.safetensors"), |_| {});
    let (_, ours) = load_ok(tmp.path());
    let (_, orig) = load_ok(&fixture("tiny-a"));
    let same = |a: &Tensor, b: &Tensor| a.shape == b.shape && a.to_f32() == b.to_f32();
    assert!(same(&ours.embed_tokens, &orig.embed_tokens));
    assert!(same(&ours.layers[3].moe.experts[7].down, &orig.layers[3].moe.experts[7].down));
}
