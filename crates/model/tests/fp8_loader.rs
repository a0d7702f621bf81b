//! The FP8 checkpoint format on the tiny-fp8 fixture (scripts/make_fp8_fixture.py): what loads,
//! that every read dequantises exactly (w = q · s of its 128×128 block), and that each kind of
//! broken FP8 checkpoint fails with one line naming the file and tensor or the format found.

mod common;

use common::*;
use safetensors::Dtype;
use solo_model::tensor::f8e4m3_to_f32;
use solo_model::weights::Mixer;
use solo_model::{DType, Precision};

const QKV: &str = "model.language_model.layers.0.linear_attn.in_proj_qkv.weight";

fn set_quantization(dir: &std::path::Path, value: serde_json::Value) {
    let path = dir.join("config.json");
    let mut cfg: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    cfg["quantization_config"] = value;
    std::fs::write(&path, cfg.to_string()).unwrap();
}

#[test]
fn fp8_fixture_loads_as_fp8_with_bf16_where_the_format_keeps_it() {
    let (cfg, w) = load_ok(&fixture("tiny-fp8"));
    assert_eq!(cfg.precision, Precision::Fp8Block128);
    assert_eq!(w.precision, Precision::Fp8Block128);
    assert_eq!(w.embed_tokens.dtype, DType::BF16);
    assert_eq!(w.lm_head.dtype, DType::BF16);
    let l0 = &w.layers[0];
    assert_eq!(l0.moe.router.dtype, DType::BF16);
    assert_eq!(l0.moe.shared_expert_gate.dtype, DType::BF16);
    assert_eq!(l0.moe.experts[0].gate.dtype, DType::F8E4M3);
    assert_eq!(l0.moe.shared_expert.down.dtype, DType::F8E4M3);
    let Mixer::GatedDeltaNet(g) = &l0.mixer else { panic!("layer 0 is GDN") };
    assert_eq!(g.in_proj_qkv.dtype, DType::F8E4M3);
    assert_eq!(g.in_proj_a.dtype, DType::BF16);
    assert_eq!(g.conv1d.dtype, DType::BF16);
    // the bf16 fixtures stay bf16
    assert_eq!(load_ok(&fixture("tiny-a")).1.precision, Precision::Bf16);
}

/// Every element reads as q · s with the scale of its own block, the ragged last block included
/// (in_proj_qkv is [288, 160]: blocks of 128, 128, 32 rows and 128, 32 columns).
#[test]
fn fp8_reads_dequantise_by_block() {
    let (_, w) = load_ok(&fixture("tiny-fp8"));
    let Mixer::GatedDeltaNet(g) = &w.layers[0].mixer else { panic!("layer 0 is GDN") };
    let t = &g.in_proj_qkv;
    assert_eq!(t.shape, vec![288, 160]);
    let raw = read_tensors(&fixture("tiny-fp8").join("model.safetensors"));
    let q = &raw.iter().find(|o| o.name == QKV).unwrap().data;
    let s = raw.iter().find(|o| o.name == format!("{QKV}_scale_inv")).unwrap();
    assert_eq!((s.dtype, s.shape.clone()), (Dtype::F32, vec![3, 2]));
    let scales: Vec<f32> = s.data.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
    let values = t.to_f32();
    for (r, c) in [(0, 0), (127, 127), (128, 127), (130, 128), (287, 159), (200, 5)] {
        let want = f8e4m3_to_f32(q[r * 160 + c]) * scales[(r / 128) * 2 + c / 128];
        assert_eq!(values[r * 160 + c], want, "element ({r}, {c})");
    }
    // a row view keeps its place in the blocks
    let view = t.rows(130, 10);
    let mut row = vec![0.0; 160];
    view.read_row_f32(2, &mut row);
    assert_eq!(row, values[132 * 160..133 * 160]);
    // and some weights are not zero: the fixture is not degenerate
    assert!(values.iter().filter(|v| **v != 0.0).count() > values.len() / 2);
}

#[test]
fn e4m3_decodes_every_kind_of_value() {
    assert_eq!(f8e4m3_to_f32(0x00), 0.0);
    assert_eq!(f8e4m3_to_f32(0x38), 1.0); // e = 7, m = 0
    assert_eq!(f8e4m3_to_f32(0xb8), -1.0);
    assert_eq!(f8e4m3_to_f32(0x7e), 448.0); // the largest finite
    assert_eq!(f8e4m3_to_f32(0x01), 2f32.powi(-9)); // the smallest subnormal
    assert_eq!(f8e4m3_to_f32(0x0f), 1.875 * 2f32.powi(-6)); // e = 1, m = 7
    assert_eq!(f8e4m3_to_f32(0x07), 0.875 * 2f32.powi(-6)); // subnormal, m = 7
    assert!(f8e4m3_to_f32(0x7f).is_nan());
}

#[test]
fn missing_scale_names_the_weight_and_its_scale() {
    let tmp = copy_fixture("tiny-fp8");
    rewrite(&tmp.path().join("model.safetensors"), |ts| ts.retain(|t| t.name != format!("{QKV}_scale_inv")));
    let err = load_err(tmp.path());
    assert_names(&err, &["model.safetensors", QKV, &format!("`{QKV}_scale_inv`"), "missing"]);
}

#[test]
fn scale_of_the_wrong_shape_names_both_shapes() {
    let tmp = copy_fixture("tiny-fp8");
    rewrite(&tmp.path().join("model.safetensors"), |ts| {
        let s = ts.iter_mut().find(|t| t.name == format!("{QKV}_scale_inv")).unwrap();
        s.shape = vec![2, 3]; // same bytes, transposed shape
    });
    let err = load_err(tmp.path());
    assert_names(&err, &["model.safetensors", &format!("{QKV}_scale_inv"), "[2, 3]", "[3, 2]"]);
}

#[test]
fn fp8_tensor_without_quantization_config_is_refused() {
    let tmp = copy_fixture("tiny-fp8");
    let path = tmp.path().join("config.json");
    let mut cfg: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    cfg.as_object_mut().unwrap().remove("quantization_config");
    std::fs::write(&path, cfg.to_string()).unwrap();
    let err = load_err(tmp.path());
    assert_names(&err, &["model.safetensors", "F8_E4M3", "quantization_config"]);
}

#[test]
fn unsupported_quant_method_names_what_was_found_and_what_solo_reads() {
    let tmp = copy_fixture("tiny-fp8");
    set_quantization(tmp.path(), serde_json::json!({"quant_method": "gptq", "bits": 3, "group_size": 128}));
    let err = load_err(tmp.path());
    assert_names(&err, &["config.json", "gptq", "bits 3", "solo reads", "fp8"]);

    set_quantization(
        tmp.path(),
        serde_json::json!({"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [1, 128]}),
    );
    let err = load_err(tmp.path());
    assert_names(&err, &["config.json", "weight_block_size [1,128]", "solo reads"]);
}

#[test]
fn e5m2_tensor_names_its_dtype_and_what_solo_reads() {
    let tmp = copy_fixture("tiny-fp8");
    rewrite(&tmp.path().join("model.safetensors"), |ts| {
        ts.iter_mut().find(|t| t.name == QKV).unwrap().dtype = Dtype::F8_E5M2;
    });
    let err = load_err(tmp.path());
    assert_names(&err, &["model.safetensors", QKV, "F8_E5M2", "F8_E4M3"]);
}

#[test]
fn non_finite_scale_is_refused() {
    let tmp = copy_fixture("tiny-fp8");
    rewrite(&tmp.path().join("model.safetensors"), |ts| {
        let s = ts.iter_mut().find(|t| t.name == format!("{QKV}_scale_inv")).unwrap();
        s.data[0..4].copy_from_slice(&f32::NAN.to_le_bytes());
    });
    let err = load_err(tmp.path());
    assert_names(&err, &[&format!("{QKV}_scale_inv"), "NaN"]);
}
