//! 4-bit checkpoints (scripts/make_int4_fixtures.py): what loads as int4 and what stays 16-bit, the
//! repacked layout's facts, and that each kind of broken or unsupported 4-bit checkpoint fails
//! with one line naming the file and tensor, or what was found and what solo reads.
//! (Their values against transformers: crates/cpu/tests/int4_parity.rs.)

mod common;

use common::*;
use safetensors::Dtype;
use solo_model::weights::Mixer;
use solo_model::{DType, Precision, Tensor};

const L0: &str = "model.language_model.layers.0.";

fn expert(layer: usize, e: usize, proj: &str) -> String {
    format!("model.language_model.layers.{layer}.mlp.experts.{e}.{proj}")
}

fn i32s(data: &[u8]) -> Vec<i32> {
    data.chunks_exact(4).map(|b| i32::from_le_bytes(b.try_into().unwrap())).collect()
}

fn i32_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The load error of a copy of `fixture` whose tensor `name` was changed by `f`.
fn err_after_edit(fixture: &str, name: &str, f: impl FnOnce(&mut Owned)) -> String {
    let tmp = copy_fixture(fixture);
    rewrite(&tmp.path().join("model.safetensors"), |ts| f(ts.iter_mut().find(|t| t.name == name).unwrap()));
    load_err(tmp.path())
}

// ---- what loads ---------------------------------------------------------------------------------

#[test]
fn each_format_loads_its_recipe_as_int4_and_keeps_the_rest_16_bit() {
    // (fixture, group, symmetric, act-order, all-linear recipe)
    for (name, group, sym, act_order, all) in [
        ("tiny-a-gptq", 16, true, false, false),
        ("tiny-b-gptq-actorder", 8, false, true, true),
        ("tiny-a-awq", 16, false, false, true),
        ("tiny-b-ct", 8, true, false, false),
    ] {
        let (cfg, w) = load_ok(&fixture(name));
        assert_eq!((cfg.precision, w.precision), (Precision::Int4 { group }, Precision::Int4 { group }), "{name}");
        let l0 = &w.layers[0];
        let down = &l0.moe.experts[1].down;
        assert_eq!(down.dtype, DType::I4, "{name}");
        let (packed, q) = down.int4().unwrap();
        assert_eq!(packed.len(), down.numel() / 2, "{name}");
        assert_eq!((q.group, q.zeros.is_none(), q.perm.is_some()), (group, sym, act_order), "{name}");
        assert_eq!(q.scales.len(), down.shape[0] * down.shape[1] / group, "{name}");
        let Mixer::GatedDeltaNet(g) = &l0.mixer else { panic!("layer 0 is GDN") };
        let int4_if_all = if all { DType::I4 } else { DType::BF16 };
        for t in [&g.in_proj_qkv, &g.in_proj_z, &g.out_proj, &l0.moe.shared_expert.up] {
            assert_eq!(t.dtype, int4_if_all, "{name}");
        }
        for t in [&g.in_proj_a, &g.in_proj_b, &g.conv1d, &l0.moe.router, &l0.moe.shared_expert_gate, &w.lm_head] {
            assert_ne!(t.dtype, DType::I4, "{name}");
            assert!(t.int4().is_none(), "{name}");
        }
        assert_eq!(w.mtp.as_ref().unwrap().layer.moe.experts[0].gate.dtype, DType::BF16, "{name}");
        assert_eq!(Precision::Int4 { group }.name(), format!("int4-g{group}").as_str());
    }
}

/// Partial reads, row reads and row views of an int4 matrix (act-order: permuted columns) agree
/// with the whole matrix read at once.
#[test]
fn int4_reads_and_row_views_agree() {
    let (_, w) = load_ok(&fixture("tiny-b-gptq-actorder"));
    let t = &w.layers[2].moe.experts[4].gate; // [24, 48], 6 groups of 8, permuted
    let all = t.to_f32();
    let cols = t.shape[1];
    let mut part = vec![0.0; 70];
    t.read_f32(cols + 13, &mut part);
    assert_eq!(part, all[cols + 13..cols + 83]);
    let view = t.rows(5, 7);
    assert_eq!(view.int4().unwrap().0.len(), 7 * cols / 2);
    assert_eq!(view.to_f32(), all[5 * cols..12 * cols]);
    assert!(all.iter().filter(|v| **v != 0.0).count() > all.len() / 2);
    assert!(t.stored_bytes() > t.numel() / 2);
}

/// GPTQ v1 stores z − 1 in four bits, so a zero point of 0 is stored as 15 and means 16 to every
/// v1 reader; the act-order fixture has such groups (its HF reference uses 16 too).
#[test]
fn gptq_v1_stored_15_is_a_zero_point_of_16() {
    let (_, w) = load_ok(&fixture("tiny-b-gptq-actorder"));
    let sixteens: usize = w
        .layers
        .iter()
        .flat_map(|l| l.moe.experts.iter().flat_map(|e| [&e.gate, &e.up, &e.down]))
        .map(|t| t.int4().unwrap().1.zeros.as_ref().unwrap().iter().filter(|&&z| z == 16).count())
        .sum();
    assert!(sixteens > 0);
}

/// gptq_v2 stores the zero points themselves; v1 stores them minus one. The same matrices written
/// both ways read the same.
#[test]
fn gptq_v2_zero_points_are_read_as_stored() {
    let tmp = copy_fixture("tiny-a-gptq");
    edit_quantization(tmp.path(), |q| q["checkpoint_format"] = "gptq_v2".into());
    rewrite(&tmp.path().join("model.safetensors"), |ts| {
        for t in ts.iter_mut().filter(|t| t.name.ends_with(".qzeros")) {
            // symmetric: every nibble is 7 in v1 (8 − 1), 8 in v2
            assert!(i32s(&t.data).iter().all(|&w| w as u32 == 0x7777_7777), "{}", t.name);
            t.data = i32_bytes(&vec![0x8888_8888u32 as i32; t.data.len() / 4]);
        }
    });
    let (_, v2) = load_ok(tmp.path());
    let (_, v1) = load_ok(&fixture("tiny-a-gptq"));
    let (a, b) = (&v1.layers[3].moe.experts[6].up, &v2.layers[3].moe.experts[6].up);
    assert_eq!(a.to_f32(), b.to_f32());
    assert!(b.int4().unwrap().1.zeros.is_none(), "all zero points 8: symmetric");
}

#[test]
fn quantize_int4_builds_the_same_layout() {
    let (rows, cols) = (16, 64);
    let values: Vec<f32> = (0..rows * cols).map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0).collect();
    for sym in [true, false] {
        let t = Tensor::quantize_int4(rows, cols, &values, 32, sym);
        assert_eq!((t.dtype, t.shape.clone()), (DType::I4, vec![rows, cols]));
        let back = t.to_f32();
        let (_, q) = t.int4().unwrap();
        for (i, (a, b)) in values.iter().zip(&back).enumerate() {
            let s = q.scales[(i / cols) * 2 + (i % cols) / 32];
            assert!((a - b).abs() <= 0.5 * s * 1.0001, "element {i} (symmetric {sym}): {a} became {b}");
        }
    }
}

// ---- malformed 4-bit checkpoints: one line naming the file and tensor -------------------------------

#[test]
fn missing_scales_name_the_module_and_the_part() {
    let tmp = copy_fixture("tiny-a-gptq");
    let name = expert(0, 0, "gate_proj");
    rewrite(&tmp.path().join("model.safetensors"), |ts| ts.retain(|t| t.name != format!("{name}.scales")));
    let err = load_err(tmp.path());
    assert_names(&err, &["model.safetensors", &format!("`{name}.scales` is missing")]);
}

#[test]
fn packed_weight_of_the_wrong_shape_names_both_shapes() {
    let name = expert(1, 2, "down_proj.qzeros"); // [2, 8]: 2 groups of 16 of 32 inputs, 64 outputs
    let err = err_after_edit("tiny-a-awq", &name, |t| t.shape = vec![8, 2]);
    assert_names(&err, &["model.safetensors", &format!("`{name}`"), "[8, 2]", "[2, 8]"]);
}

#[test]
fn group_not_dividing_the_width_is_named() {
    let tmp = copy_fixture("tiny-a-gptq");
    edit_quantization(tmp.path(), |q| q["group_size"] = 24.into());
    let err = load_err(tmp.path());
    assert_names(&err, &["model.safetensors", "mlp.experts.0.gate_proj`", "64", "multiple of 24"]);
}

#[test]
fn g_idx_out_of_range_is_named() {
    let name = expert(0, 3, "up_proj.g_idx"); // 48 inputs in 6 groups
    let err = err_after_edit("tiny-b-gptq-actorder", &name, |t| t.data[12..16].copy_from_slice(&6i32.to_le_bytes()));
    assert_names(&err, &["model.safetensors", &format!("`{name}`[3] is 6"), "out of range for 6 groups"]);
}

#[test]
fn g_idx_with_uneven_groups_is_named() {
    let name = expert(0, 3, "up_proj.g_idx");
    let err = err_after_edit("tiny-b-gptq-actorder", &name, |t| {
        let mut g = i32s(&t.data);
        g[0] = (g[0] + 1) % 6; // one column moves to the next group
        t.data = i32_bytes(&g);
    });
    assert_names(&err, &["model.safetensors", &format!("`{name}`"), "columns in group", "exactly 8"]);
}

#[test]
fn non_finite_int4_scale_is_named() {
    let name = expert(2, 1, "down_proj.weight_scale");
    let err = err_after_edit("tiny-b-ct", &name, |t| t.data[0..2].copy_from_slice(&half::bf16::NAN.to_le_bytes()));
    assert_names(&err, &["model.safetensors", &format!("`{name}`"), "NaN"]);
}

#[test]
fn packed_weight_of_another_dtype_is_named() {
    let name = expert(0, 0, "gate_proj.weight_packed");
    let err = err_after_edit("tiny-b-ct", &name, |t| t.dtype = Dtype::F32);
    assert_names(&err, &["model.safetensors", &format!("`{name}` is F32"), "I32"]);
}

#[test]
fn compressed_tensors_weight_shape_must_match_the_config() {
    let name = expert(0, 0, "down_proj.weight_shape"); // [48, 24] becomes [24, 24]
    let err = err_after_edit("tiny-b-ct", &name, |t| t.data[0..8].copy_from_slice(&24i64.to_le_bytes()));
    assert_names(&err, &["model.safetensors", &format!("`{name}`"), "[24.0, 24.0]", "[48, 24]"]);
}

#[test]
fn packed_tensors_without_a_4_bit_config_are_named() {
    let tmp = copy_fixture("tiny-a-awq");
    edit_quantization(tmp.path(), |q| *q = serde_json::Value::Null);
    let err = load_err(tmp.path());
    assert_names(&err, &["model.safetensors", ".qweight`", "no GPTQ, AWQ or compressed-tensors"]);
}

/// The router stays 16-bit in every recipe solo reads; a 4-bit one is named, not guessed at.
#[test]
fn int4_where_solo_reads_16_bit_is_named() {
    let tmp = copy_fixture("tiny-a-gptq");
    rewrite(&tmp.path().join("model.safetensors"), |ts| {
        ts.retain(|t| t.name != format!("{L0}mlp.gate.weight"));
        let parts: Vec<Owned> = ts
            .iter()
            .filter(|t| t.name.starts_with(&expert(0, 0, "gate_proj.")))
            .map(|t| Owned {
                name: t.name.replace("experts.0.gate_proj", "gate"),
                dtype: t.dtype,
                shape: t.shape.clone(),
                data: t.data.clone(),
            })
            .collect();
        ts.extend(parts);
    });
    let err = load_err(tmp.path());
    assert_names(
        &err,
        &["model.safetensors", &format!("`{L0}mlp.gate` is stored 4-bit"), "solo reads 4-bit weights only"],
    );
}

// ---- unsupported 4-bit formats: what was found and what solo reads ---------------------------------

#[test]
fn unsupported_4_bit_formats_name_what_was_found() {
    let ct = |edit: fn(&mut serde_json::Value)| {
        let mut q: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(fixture("tiny-b-ct").join("config.json")).unwrap()).unwrap();
        edit(&mut q["quantization_config"]);
        q["quantization_config"].clone()
    };
    let gptq = |extra: serde_json::Value| {
        let mut q = serde_json::json!({"quant_method": "gptq", "bits": 4, "group_size": 16, "sym": true});
        q.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        q
    };
    let cases = [
        (gptq(serde_json::json!({"bits": 3})), "bits 3"),
        (gptq(serde_json::json!({"bits": 8})), "bits 8"),
        (gptq(serde_json::json!({"checkpoint_format": "marlin"})), "checkpoint_format `marlin`"),
        (gptq(serde_json::json!({"dynamic": {"+:.*down_proj.*": {"bits": 8}}})), "sets bits 8"),
        (serde_json::json!({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemv"}), "`gemv`"),
        (serde_json::json!({"quant_method": "exl2", "bits": 4.0}), "`exl2`"),
        (serde_json::json!({"quant_method": "exl3", "bits": 4.0}), "`exl3`"),
        (serde_json::json!({"quant_method": "hqq", "nbits": 4}), "`hqq`"),
        (serde_json::json!({"quant_method": "bitsandbytes", "load_in_4bit": true}), "`bitsandbytes`"),
        (ct(|q| q["format"] = "nvfp4-pack-quantized".into()), "`nvfp4-pack-quantized`"),
        (ct(|q| q["config_groups"]["group_0"]["weights"]["num_bits"] = 8.into()), "8-bit"),
        (ct(|q| q["config_groups"]["group_0"]["input_activations"] = serde_json::json!({"num_bits": 8})), "not W4A16"),
    ];
    for (q, found) in cases {
        let tmp = copy_fixture("tiny-a-gptq");
        set_quantization(tmp.path(), q);
        let err = load_err(tmp.path());
        assert_names(&err, &["config.json", found, "solo reads", "GPTQ", "AWQ", "compressed-tensors"]);
    }
    // MLX's 4-bit `quantization` (no quantization_config)
    let tmp = copy_fixture("tiny-a");
    let path = tmp.path().join("config.json");
    let mut cfg: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    cfg["quantization"] = serde_json::json!({"group_size": 64, "bits": 4});
    std::fs::write(&path, cfg.to_string()).unwrap();
    assert_names(&load_err(tmp.path()), &["config.json", "MLX", "4-bit", "solo reads"]);
}
