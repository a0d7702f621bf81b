//! What a bf16 backend (the CUDA one) uploads for a GGUF file's tensors: `solo_model::bf16`
//! gives each tensor's values as bf16 bytes, which must be round-to-bf16 of ggml's own
//! dequantization element for element: for every type on gguf-py's values
//! (fixtures/gguf/dequant.safetensors), and for every tensor of the fixture models as the loader
//! hands them over (stacked experts split, norms and permuted rows already undone).

use half::bf16;
use safetensors::SafeTensors;
use solo_model::gguf::GgmlType;
use solo_model::{DType, Tensor};
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/gguf")).join(name)
}

fn rounded(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| bf16::from_f32(*v).to_le_bytes()).collect()
}

#[test]
fn every_type_becomes_bf16_of_ggmls_values() {
    let bytes = std::fs::read(fixture("dequant.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let mut seen = 0;
    for (name, _) in st.tensors() {
        let Some(ty) = name.strip_suffix(".blocks") else { continue };
        let blocks = st.tensor(&name).unwrap().data().to_vec();
        let want: Vec<f32> = st
            .tensor(&format!("{ty}.values"))
            .unwrap()
            .data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let dtype = match ty {
            "F32" => DType::F32,
            "F16" => DType::F16,
            "BF16" => DType::BF16,
            _ => DType::Ggml((0..64).filter_map(|id| GgmlType::from_id(id).ok()).find(|t| t.name() == ty).unwrap()),
        };
        let t = Tensor::from_bytes(dtype, vec![want.len()], &blocks);
        let got = solo_model::bf16::bf16_bytes(&[&t]);
        let want = rounded(&want);
        assert_eq!(got[0].len(), want.len(), "{ty}");
        for (i, (g, w)) in got[0].chunks_exact(2).zip(want.chunks_exact(2)).enumerate() {
            assert_eq!(g, w, "{ty} element {i}");
        }
        seen += 1;
    }
    assert!(seen >= 16, "only {seen} types in the fixture");
}

#[test]
fn every_tensor_of_the_fixture_models_becomes_bf16_of_the_cpu_reference() {
    for file in ["wide-mix.gguf", "wide-q4_k_m.gguf", "wide-q8_0.gguf", "small-bf16.gguf", "small-f32.gguf"] {
        let (_, w) = solo_model::load(&fixture(file)).unwrap();
        let mut tensors = vec![&w.embed_tokens, &w.final_norm, &w.lm_head];
        tensors.extend(w.layers.iter().flat_map(|l| l.tensors()));
        tensors.extend(w.mtp.iter().flat_map(|m| m.tensors()));
        let got = solo_model::bf16::bf16_bytes(&tensors);
        for (t, g) in tensors.iter().zip(&got) {
            assert_eq!(&g[..], &rounded(&t.to_f32())[..], "{file}: {t:?}");
        }
        let types = w.ggml_types();
        eprintln!("{file}: {} tensors, ggml types {types:?}", tensors.len());
        match file {
            "wide-mix.gguf" => {
                for t in ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS", "IQ4_NL", "MXFP4", "Q4_0", "Q8_0"] {
                    assert!(types.iter().any(|(n, _)| *n == t), "{t} missing from {types:?}");
                }
            }
            "wide-q4_k_m.gguf" => assert!(types.iter().any(|(n, _)| *n == "Q4_K"), "{types:?}"),
            "wide-q8_0.gguf" => assert_eq!(types.first().map(|r| r.0), Some("Q8_0")),
            _ => assert!(types.is_empty(), "{file}: {types:?}"),
        }
    }
}
