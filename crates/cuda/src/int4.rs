//! The int4 layout the kernels read (`common.cuh`, "int4 weights"), and the repack into it.
//!
//! Every 4-bit format (GPTQ, AWQ, compressed-tensors) reaches the CUDA backend as solo-model's one
//! int4 form: values q (0..15) row-major `[rows, cols]`, two a byte (low nibble the even column),
//! with a scale and a zero point per `group` columns: w = (q − z) · s. Here each row becomes
//! `row_bytes(cols)` bytes:
//! - `cols / 2` bytes of values: 32-bit word w holds columns 8w .. 8w + 7, placed so that
//!   `(word >> 4s) & 0x000F000F` is the pair of columns (8w + 2s, 8w + 2s + 1): one LOP3 makes two
//!   f16 weights;
//! - then a 32-bit word per group of 128 columns: the f16 scale in bits 0–15, z (0..=16) in bits 16–23.
//!
//! The scales travel inside the row, so a row streams as one piece and lands with its scales.

use anyhow::{bail, ensure, Result};
use half::f16;

/// Columns per scale in the kernels' layout.
pub const GROUP: usize = 128;

/// Bytes of one row of `cols` columns.
pub const fn row_bytes(cols: usize) -> usize {
    cols / 2 + cols / GROUP * 4
}

/// Nibble position (0..8, bits 4p..4p+3 of its word) of column c % 8.
const fn position(c: usize) -> usize {
    if c.is_multiple_of(2) {
        c / 2
    } else {
        4 + c / 2
    }
}

/// One int4 matrix as solo-model holds it: `q` packed two a byte (low nibble = even column),
/// `scales` and `zeros` per (row, group) (`zeros` None: 8, symmetric; 16 occurs: GPTQ v1's stored
/// 15 plus its +1).
pub struct Int4Matrix<'a> {
    pub rows: usize,
    pub cols: usize,
    pub group: usize,
    pub q: &'a [u8],
    pub scales: &'a [f32],
    pub zeros: Option<&'a [u8]>,
}

/// Appends `m`'s rows in the kernels' layout to `out`. Refuses what the kernels do not take: a
/// group other than 128, a width not a multiple of 128, a scale f16 cannot hold exactly.
pub fn repack_into(m: &Int4Matrix, out: &mut Vec<u8>) -> Result<()> {
    let (rows, cols) = (m.rows, m.cols);
    ensure!(
        m.group == GROUP && cols.is_multiple_of(GROUP),
        "the CUDA backend takes int4 weights in groups of {GROUP} columns, not {} ({rows}x{cols})",
        m.group
    );
    let groups = cols / GROUP;
    ensure!(m.q.len() == rows * cols / 2, "int4 values: {} bytes for {rows}x{cols}", m.q.len());
    ensure!(m.scales.len() == rows * groups, "int4 scales: {} for {rows}x{cols} in groups of {GROUP}", m.scales.len());
    if let Some(z) = m.zeros {
        ensure!(
            z.len() == rows * groups && z.iter().all(|&z| z <= 16),
            "int4 zero points: {} values, or one past 16 (GPTQ v1's stored 15 is 16)",
            z.len()
        );
    }
    out.reserve(rows * row_bytes(cols));
    for r in 0..rows {
        let src = &m.q[r * cols / 2..(r + 1) * cols / 2];
        for w in 0..cols / 8 {
            let mut word = 0u32;
            for c in 0..8 {
                let k = 8 * w + c;
                let q = (src[k / 2] >> (4 * (k % 2))) & 15;
                word |= (q as u32) << (4 * position(c));
            }
            out.extend_from_slice(&word.to_le_bytes());
        }
        for g in 0..groups {
            let s = m.scales[r * groups + g];
            let h = f16::from_f32(s);
            if h.to_f32() != s {
                bail!(
                    "int4 scale {s} (row {r}, group {g}) is not exactly an f16; the CUDA backend keeps scales as f16"
                );
            }
            let z = m.zeros.map_or(8, |z| z[r * groups + g]) as u32;
            out.extend_from_slice(&(h.to_bits() as u32 | z << 16).to_le_bytes());
        }
    }
    Ok(())
}

/// Row `r`'s values as the kernels see them: w = (q − z) · s, f32 (for tests).
pub fn decode_row(rows_bytes: &[u8], cols: usize, r: usize) -> Vec<f32> {
    let row = &rows_bytes[r * row_bytes(cols)..(r + 1) * row_bytes(cols)];
    let word = |i: usize| u32::from_le_bytes(row[4 * i..4 * i + 4].try_into().unwrap());
    (0..cols)
        .map(|k| {
            let q = (word(k / 8) >> (4 * position(k % 8))) & 15;
            let g = word(cols / 8 + k / GROUP);
            let s = f16::from_bits(g as u16).to_f32();
            (q as f32 - ((g >> 16) & 0xff) as f32) * s
        })
        .collect()
}

/// Rounds `values` ([rows, cols] row-major) to int4, symmetric (z = 8), a scale per 128 columns
/// (an f16 with |w| ≤ 8 s): (packed q, scales, the dequantised values). For tests and the
/// synthetic model's checks.
pub fn quantize_symmetric(values: &[f32], rows: usize, cols: usize) -> (Vec<u8>, Vec<f32>, Vec<f32>) {
    let groups = cols / GROUP;
    let mut q = vec![0u8; rows * cols / 2];
    let mut scales = Vec::with_capacity(rows * groups);
    let mut dequantised = vec![0f32; rows * cols];
    for r in 0..rows {
        for g in 0..groups {
            let range = r * cols + g * GROUP..r * cols + (g + 1) * GROUP;
            let amax = values[range.clone()].iter().fold(0f32, |m, v| m.max(v.abs()));
            let s = f16::from_f32((amax / 7.5).max(1e-6)).to_f32();
            scales.push(s);
            for k in range {
                let v = ((values[k] / s).round() + 8.0).clamp(0.0, 15.0) as u8;
                q[k / 2] |= v << (4 * (k % 2));
                dequantised[k] = (v as f32 - 8.0) * s;
            }
        }
    }
    (q, scales, dequantised)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random(seed: u64, n: usize) -> Vec<f32> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect()
    }

    #[test]
    fn repacked_rows_decode_to_the_dequantised_values() {
        let (rows, cols) = (5, 384);
        let (q, scales, want) = quantize_symmetric(&random(1, rows * cols), rows, cols);
        let m = Int4Matrix { rows, cols, group: 128, q: &q, scales: &scales, zeros: None };
        let mut out = Vec::new();
        repack_into(&m, &mut out).unwrap();
        assert_eq!(out.len(), rows * row_bytes(cols));
        for r in 0..rows {
            assert_eq!(decode_row(&out, cols, r), want[r * cols..(r + 1) * cols]);
        }
        // zero points other than 8 travel too
        let zeros: Vec<u8> = (0..rows * 3).map(|i| (i % 17) as u8).collect();
        let m = Int4Matrix { zeros: Some(&zeros), ..m };
        out.clear();
        repack_into(&m, &mut out).unwrap();
        let row = decode_row(&out, cols, 2);
        let z = zeros[2 * 3 + 1] as f32;
        let k = 128 + 7;
        let qv = (q[(2 * cols + k) / 2] >> (4 * (k % 2))) & 15;
        assert_eq!(row[k], (qv as f32 - z) * scales[2 * 3 + 1]);
    }

    #[test]
    fn the_kernels_limits_are_refused_in_one_line() {
        let (q, scales, _) = quantize_symmetric(&random(2, 256), 1, 256);
        let m = Int4Matrix { rows: 1, cols: 256, group: 64, q: &q, scales: &scales, zeros: None };
        let e = repack_into(&m, &mut Vec::new()).unwrap_err().to_string();
        assert!(e.contains("groups of 128") && e.contains("not 64"), "{e}");
        let odd = [1.0f32 / 3.0, 0.5];
        let m = Int4Matrix { rows: 1, cols: 256, group: 128, q: &q, scales: &odd, zeros: None };
        let e = repack_into(&m, &mut Vec::new()).unwrap_err().to_string();
        assert!(e.contains("not exactly an f16"), "{e}");
    }
}
