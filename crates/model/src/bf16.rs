//! Any tensor's values as bf16 bytes: what a backend that reads bf16 uploads for a tensor stored
//! another way. A bf16 tensor is its own bytes; every other type (f16, f32, FP8 with its block
//! scales, int4 with its groups, a GGUF file's ggml blocks) is read to f32 exactly as the CPU
//! reference reads it (`Tensor::read_f32`) and rounded to the nearest bf16 (ties to even).
//!
//! The conversion goes a chunk of elements at a time on rayon's threads, into the output only: no
//! f32 copy of a whole tensor is made, so a stacked expert tensor or the embedding costs its bf16
//! bytes and a few MiB per thread.

use crate::tensor::{DType, Tensor};
use half::bf16;
use rayon::prelude::*;
use std::borrow::Cow;

/// Elements converted per piece of work (a multiple of every ggml block: 32 and 256).
const CHUNK: usize = 1 << 20;

/// Each tensor's values as little-endian bf16 bytes (borrowed when it is bf16 already),
/// converted on rayon's threads.
pub fn bf16_bytes<'a>(parts: &[&'a Tensor]) -> Vec<Cow<'a, [u8]>> {
    bf16_bytes_in(parts, CHUNK)
}

/// The bytes a bf16 upload of `t` takes (2 a element).
pub fn bf16_len(t: &Tensor) -> usize {
    2 * t.numel()
}

/// `bf16_bytes` in pieces of `chunk` elements.
fn bf16_bytes_in<'a>(parts: &[&'a Tensor], chunk: usize) -> Vec<Cow<'a, [u8]>> {
    let mut owned: Vec<Option<Vec<u8>>> =
        parts.iter().map(|t| (t.dtype != DType::BF16).then(|| vec![0u8; bf16_len(t)])).collect();
    // (tensor, first element, its bf16 bytes): disjoint pieces of the outputs
    let mut jobs: Vec<(&Tensor, usize, &mut [u8])> = Vec::new();
    for (t, out) in parts.iter().zip(owned.iter_mut()) {
        if let Some(out) = out {
            for (i, piece) in out.chunks_mut(2 * chunk).enumerate() {
                jobs.push((t, i * chunk, piece));
            }
        }
    }
    jobs.into_par_iter().for_each_init(Vec::new, |values: &mut Vec<f32>, (t, first, out)| {
        values.resize(out.len() / 2, 0.0);
        t.read_f32(first, values);
        for (o, v) in out.chunks_exact_mut(2).zip(values.iter()) {
            o.copy_from_slice(&bf16::from_f32(*v).to_le_bytes());
        }
    });
    parts
        .iter()
        .zip(owned)
        .map(|(t, out)| match out {
            Some(bytes) => Cow::Owned(bytes),
            None => Cow::Borrowed(t.bytes()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::GgmlType;

    /// Round-to-bf16 of the CPU reference's f32, element for element.
    fn reference(t: &Tensor) -> Vec<u8> {
        t.to_f32().iter().flat_map(|v| bf16::from_f32(*v).to_le_bytes()).collect()
    }

    #[test]
    fn pieces_and_threads_do_not_change_a_byte() {
        let values: Vec<f32> = (0..3 * 256 * 5).map(|i| ((i * 7919 % 2003) as f32 - 1000.0) / 37.0).collect();
        let f32_bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let f32_t = Tensor::from_bytes(DType::F32, vec![15, 256], &f32_bytes);
        // Q8_0: 32-element blocks of an f16 scale and 32 int8s
        let q8 = GgmlType::from_id(8).unwrap();
        let mut blocks = Vec::new();
        for b in 0..values.len() / 32 {
            blocks.extend_from_slice(&half::f16::from_f32(0.01 * (b % 7 + 1) as f32).to_le_bytes());
            blocks.extend((0..32).map(|i| ((b * 31 + i * 17) % 255) as u8));
        }
        let q8_t = Tensor::from_bytes(DType::Ggml(q8), vec![15, 256], &blocks);
        let bf16_t = Tensor::from_f32_as_bf16(vec![15, 256], &values);
        let fp8_t = Tensor::quantize_fp8(15, 256, &values);
        let int4_t = Tensor::quantize_int4(15, 256, &values, 32, false);
        let parts = [&f32_t, &q8_t, &bf16_t, &fp8_t, &int4_t];
        for (chunk, threads) in [(CHUNK, 1), (256, 1), (256, 3), (32 * 3, 4), (1 << 30, 2)] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let got = pool.install(|| bf16_bytes_in(&parts, chunk));
            for (t, g) in parts.iter().zip(&got) {
                assert_eq!(&g[..], &reference(t)[..], "{t:?} in pieces of {chunk} on {threads} threads");
            }
            assert!(matches!(got[2], Cow::Borrowed(_)), "bf16 is its own bytes");
        }
    }
}
