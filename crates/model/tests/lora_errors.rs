//! PEFT LoRA adapters (`solo_model::lora`): the fixtures' adapters load with every module in
//! place, and each kind of bad adapter is refused with one line per problem that names the
//! tensor or the `adapter_config.json` key at fault.
//!
//! Each broken case copies `fixtures/lora/tiny-a` (attention, GDN, shared expert and both fused
//! expert tensors, rank 4) into a temp dir and breaks one thing.

mod common;

use common::*;
use safetensors::Dtype;
use serde_json::{json, Value};
use solo_model::lora::{LoraAdapter, Target};
use solo_model::ModelConfig;
use std::path::Path;
use tempfile::TempDir;

const ADAPTER: &str = "adapter_model.safetensors";
const PREFIX: &str = "base_model.model.model.language_model.layers.";

fn config(name: &str) -> ModelConfig {
    ModelConfig::from_dir(&fixture(name)).unwrap()
}

fn adapter_copy() -> TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for file in ["adapter_config.json", ADAPTER] {
        std::fs::copy(fixture("lora/tiny-a").join(file), tmp.path().join(file)).unwrap();
    }
    tmp
}

fn edit_config(dir: &Path, edit: impl FnOnce(&mut Value)) {
    let path = dir.join("adapter_config.json");
    let mut json: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut json);
    std::fs::write(path, json.to_string()).unwrap();
}

/// The error's lines; each must name all of its `parts`, and there must be as many lines as parts lists.
fn refused(dir: &Path, lines: &[&[&str]]) {
    let err = match LoraAdapter::load(dir, &config("tiny-a")) {
        Ok(_) => panic!("the adapter loaded but should not have"),
        Err(e) => format!("{e:#}"),
    };
    let got: Vec<&str> = err.lines().collect();
    assert_eq!(got.len(), lines.len(), "expected {} problem line(s):\n{err}", lines.len());
    for (line, parts) in got.iter().zip(lines) {
        assert_names(line, parts);
    }
}

fn rename(dir: &Path, from: &str, to: &str) {
    rewrite(&dir.join(ADAPTER), |t| t.iter_mut().filter(|t| t.name == from).for_each(|t| t.name = to.into()));
}

fn f32_tensor(name: &str, shape: &[usize], value: f32) -> Owned {
    let data = (0..shape.iter().product::<usize>()).flat_map(|_| value.to_le_bytes()).collect();
    Owned { name: name.into(), dtype: Dtype::F32, shape: shape.to_vec(), data }
}

// ---- what loads ---------------------------------------------------------------------------------

#[test]
fn fixture_adapters_load_with_every_module() {
    let a = LoraAdapter::load(&fixture("lora/tiny-a"), &config("tiny-a")).unwrap();
    assert_eq!(a.rank, 4);
    // Three GDN layers (5 projections, the shared expert's 3 and its gate, 2 expert tensors) and
    // one attention layer (4 projections + 4 + 2).
    assert_eq!(a.matrices, 3 * 11 + 10);
    let gdn = &a.layers[0];
    assert!(gdn.get(Target::InProjQkv).is_some() && gdn.get(Target::QProj).is_none());
    let attn = &a.layers[3];
    assert_eq!(attn.get(Target::QProj).unwrap().b.shape, [256, 4]);
    assert_eq!(attn.experts.len(), 8);
    let e = &attn.experts[5];
    assert_eq!(e.gate_up.as_ref().unwrap().a.shape, [4, 64]); // [r, H]
    assert_eq!(e.gate_up.as_ref().unwrap().b.shape, [64, 4]); // [2I, r]
    assert_eq!(e.down.as_ref().unwrap().a.shape, [4, 32]); // [r, I]
    assert_eq!(e.down.as_ref().unwrap().b.shape, [64, 4]); // [H, r]
    assert_eq!(attn.get(Target::QProj).unwrap().scale, 2.0); // alpha 8 / r 4

    // tiny-b: all-linear (vision tower adapters skipped), gate_up_proj only, rsLoRA.
    let b = LoraAdapter::load(&fixture("lora/tiny-b"), &config("tiny-b")).unwrap();
    assert_eq!(b.rank, 8);
    let layer = &b.layers[1];
    assert!(layer.experts.iter().all(|e| e.gate_up.is_some() && e.down.is_none()));
    assert!((layer.get(Target::OProj).unwrap().scale - 16.0 / 8f32.sqrt()).abs() < 1e-6);
    assert_ne!(a.id, b.id);
}

/// Expert e's B columns are PEFT's k·E + e: one expert's pair is checked against the stacked file.
#[test]
fn expert_pairs_are_peft_slices() {
    let a = LoraAdapter::load(&fixture("lora/tiny-a"), &config("tiny-a")).unwrap();
    let tensors = read_tensors(&fixture("lora/tiny-a").join(ADAPTER));
    let get = |n: &str| tensors.iter().find(|t| t.name == format!("{PREFIX}2.mlp.experts.{n}")).unwrap();
    let bf16 = |t: &Owned| -> Vec<f32> {
        t.data.chunks_exact(2).map(|b| f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16)).collect()
    };
    // `experts.lora_*` is down_proj (the second targeted tensor), `base_layer.lora_*` gate_up_proj.
    let (stacked_a, stacked_b) = (bf16(get("lora_A.weight")), bf16(get("lora_B.weight")));
    let (experts, r, inter, h) = (8, 4, 32, 64);
    let e = 3;
    let down = a.layers[2].experts[e].down.as_ref().unwrap();
    assert_eq!(down.a.to_f32(), stacked_a[e * r * inter..(e + 1) * r * inter]);
    let b = down.b.to_f32();
    for o in 0..h {
        for k in 0..r {
            assert_eq!(b[o * r + k], stacked_b[o * r * experts + k * experts + e], "B[{o}, {k}]");
        }
    }
}

// ---- the config ---------------------------------------------------------------------------------

#[test]
fn variants_and_unswappable_modules_are_refused_by_key() {
    let cases: [(&str, Value, &[&str]); 7] = [
        ("use_dora", json!(true), &["adapter_config.json", "use_dora", "DoRA"]),
        ("bias", json!("all"), &["bias is \"all\"", "\"none\""]),
        ("modules_to_save", json!(["lm_head"]), &["modules_to_save", "lm_head"]),
        ("peft_type", json!("IA3"), &["peft_type", "IA3", "LORA"]),
        ("alpha_pattern", json!({"q_proj": 32}), &["alpha_pattern"]),
        ("r", json!(512), &["r is 512", "256"]),
        ("layer_replication", json!([[0, 2]]), &["layer_replication"]),
    ];
    for (key, value, parts) in cases {
        let dir = adapter_copy();
        edit_config(dir.path(), |c| c[key] = value);
        refused(dir.path(), &[parts]);
    }
}

#[test]
fn missing_files_are_named() {
    let dir = adapter_copy();
    std::fs::rename(dir.path().join(ADAPTER), dir.path().join("adapter_model.bin")).unwrap();
    refused(dir.path(), &[&["adapter_model.bin", "adapter_model.safetensors", "safe_serialization"]]);
    let empty = tempfile::tempdir().unwrap();
    refused(empty.path(), &[&["no adapter_config.json", "PEFT"]]);
}

// ---- the tensors ------------------------------------------------------------------------------

#[test]
fn a_wrong_shape_names_the_tensor() {
    let dir = adapter_copy();
    let b = format!("{PREFIX}3.self_attn.q_proj.lora_B.weight");
    rewrite(&dir.path().join(ADAPTER), |t| {
        t.retain(|t| t.name != b);
        t.push(f32_tensor(&b, &[255, 4], 0.0));
    });
    refused(dir.path(), &[&[&b, "[255, 4]", "[256, 4]"]]);
}

#[test]
fn a_rank_past_the_limit_or_the_config_names_the_tensor() {
    let dir = adapter_copy();
    let (a, b) =
        (format!("{PREFIX}3.self_attn.k_proj.lora_A.weight"), format!("{PREFIX}3.self_attn.k_proj.lora_B.weight"));
    rewrite(&dir.path().join(ADAPTER), |t| {
        t.retain(|t| t.name != a && t.name != b);
        t.push(f32_tensor(&a, &[300, 64], 0.01));
        t.push(f32_tensor(&b, &[64, 300], 0.01));
    });
    refused(dir.path(), &[&[&a, "rank 300", "256"]]);
    edit_config(dir.path(), |c| c["rank_pattern"] = json!({"k_proj": 300}));
    refused(dir.path(), &[&[&a, "rank 300", "256"]]);

    let dir = adapter_copy();
    edit_config(dir.path(), |c| c["r"] = json!(8));
    let lines = LoraAdapter::load(dir.path(), &config("tiny-a")).unwrap_err().to_string();
    assert_eq!(lines.lines().count(), 20 + 1, "20 lines shown, then how many more: {lines}");
    assert_names(lines.lines().next().unwrap(), &["rank 4", "r = 8"]);
}

#[test]
fn unknown_and_misplaced_modules_name_the_tensor() {
    let dir = adapter_copy();
    let z = format!("{PREFIX}0.linear_attn.in_proj_z.lora_A.weight");
    let q = format!("{PREFIX}0.self_attn.q_proj.lora_A.weight");
    rename(dir.path(), &z, &q);
    let z_b = format!("{PREFIX}0.linear_attn.in_proj_z.lora_B.weight");
    refused(dir.path(), &[&[&q, "layer 0", "GatedDeltaNet"], &[&z_b, "no lora_A"]]);

    for (name, why) in [
        (format!("{PREFIX}9.self_attn.q_proj.lora_A.weight"), "layer 9"),
        ("base_model.model.lm_head.lora_A.weight".to_string(), "lm_head"),
        (format!("{PREFIX}3.self_attn.q_proj.lora_magnitude_vector"), "DoRA"),
        (format!("{PREFIX}3.self_attn.q_norm.lora_A.weight"), "self_attn.q_norm"),
        (format!("{PREFIX}3.mlp.experts.0.gate_proj.lora_A.weight"), "fused"),
    ] {
        let dir = adapter_copy();
        rewrite(&dir.path().join(ADAPTER), |t| t.push(f32_tensor(&name, &[4, 64], 0.0)));
        refused(dir.path(), &[&[&name, why]]);
    }
}

#[test]
fn bad_values_and_dtypes_name_the_tensor() {
    let dir = adapter_copy();
    let a = format!("{PREFIX}1.linear_attn.out_proj.lora_A.weight");
    rewrite(&dir.path().join(ADAPTER), |t| {
        t.retain(|t| t.name != a);
        t.push(f32_tensor(&a, &[4, 96], f32::NAN));
    });
    refused(dir.path(), &[&[&a, "NaN"]]);

    let dir = adapter_copy();
    rewrite(&dir.path().join(ADAPTER), |t| {
        let t = t.iter_mut().find(|t| t.name == a).unwrap();
        t.dtype = Dtype::I16; // same size as the stored BF16
    });
    refused(dir.path(), &[&[&a, "I16"]]);
}

#[test]
fn experts_need_target_parameters() {
    let dir = adapter_copy();
    edit_config(dir.path(), |c| c["target_parameters"] = json!(["mlp.experts.down_proj"]));
    // down_proj alone is `experts.lora_*`; the nested `base_layer` pair has nothing to adapt.
    let lines: Vec<String> = (0..4).map(|i| format!("{PREFIX}{i}.mlp.experts.base_layer.lora_A.weight")).collect();
    let parts: Vec<[&str; 2]> = lines.iter().map(|l| [l.as_str(), "target_parameters"]).collect();
    let expected: Vec<&[&str]> = parts.iter().map(|p| &p[..]).collect();
    refused(dir.path(), &expected);
}
