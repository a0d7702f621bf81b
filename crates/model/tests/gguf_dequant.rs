//! Every ggml type solo reads, dequantized bit for bit as the `gguf` package's numpy dequantizers
//! do (ggml's `dequantize_row_*`), on random blocks (fixtures/gguf/dequant.safetensors, written
//! by scripts/make_gguf_fixtures.py).

use safetensors::SafeTensors;
use solo_model::gguf::GgmlType;
use solo_model::{DType, Tensor};

const TYPES: &[(&str, u32)] = &[
    ("F32", 0),
    ("F16", 1),
    ("BF16", 30),
    ("Q4_0", 2),
    ("Q4_1", 3),
    ("Q5_0", 6),
    ("Q5_1", 7),
    ("Q8_0", 8),
    ("Q2_K", 10),
    ("Q3_K", 11),
    ("Q4_K", 12),
    ("Q5_K", 13),
    ("Q6_K", 14),
    ("IQ4_NL", 20),
    ("IQ4_XS", 23),
    ("MXFP4", 39),
];

fn cases() -> Vec<u8> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/gguf/dequant.safetensors");
    std::fs::read(path).unwrap_or_else(|e| panic!("missing fixture {path}: {e}"))
}

#[test]
fn every_type_dequantizes_bit_for_bit_as_ggml() {
    let bytes = cases();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    for &(name, id) in TYPES {
        let t = GgmlType::from_id(id).unwrap();
        assert_eq!(t.name(), name);
        let blocks = st.tensor(&format!("{name}.blocks")).unwrap().data().to_vec();
        let want: Vec<f32> = st
            .tensor(&format!("{name}.values"))
            .unwrap()
            .data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(blocks.len(), t.bytes_for(want.len()), "{name}: block size");
        let mut got = vec![f32::NAN; want.len()];
        t.dequantize(&blocks, &mut got);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g.to_bits(),
                w.to_bits(),
                "{name} element {i} (block {}): {g} vs numpy {w}",
                i / t.block_elems()
            );
        }
        // the same through a Tensor, read at an offset that is not a block boundary
        if t.block_elems() > 1 {
            let tensor = Tensor::from_bytes(DType::Ggml(t), vec![want.len()], &blocks);
            let (from, len) = (t.block_elems() / 2 + 3, t.block_elems() * 2);
            let mut part = vec![0.0; len];
            tensor.read_f32(from, &mut part);
            assert_eq!(part, want[from..from + len], "{name}: unaligned read");
        }
        eprintln!("{name}: {} values bit for bit", want.len());
    }
}

#[test]
fn unreadable_types_are_named() {
    assert_eq!(GgmlType::from_id(16).unwrap_err(), "type IQ2_XXS (ggml type 16)");
    assert_eq!(GgmlType::from_id(99).unwrap_err(), "unknown ggml type 99");
}
