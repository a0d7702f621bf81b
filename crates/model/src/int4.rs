//! solo's one internal 4-bit layout. Every 4-bit format (GPTQ, AWQ, compressed-tensors; see
//! `int4_formats`) is repacked into it at load, so the backends read one layout:
//!
//! - a `Tensor` of dtype `I4` and logical shape `[rows = out_features, cols = in_features]`, whose
//!   bytes are packed nibbles, row-major, `rows · cols / 2` bytes: stored element (r, j) is in byte
//!   `(r · cols + j) / 2`, the LOW nibble for even j, the HIGH nibble for odd j; values 0..15;
//! - beside it a `GroupQuant`: one f32 scale (and zero point) per row and group of `group`
//!   consecutive stored columns, and an optional column permutation (GPTQ's act-order).
//!
//! The value of the weight is `W[r, perm[j]] = (q[r, j] − z[r, j / group]) · s[r, j / group]`,
//! computed in f32: the difference is a small integer, so the product is the only rounding.

/// Group scales, zero points and column order of an `I4` matrix `[rows, cols]`.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupQuant {
    /// Stored columns that share one scale and zero point; divides `cols` (= `cols` when the
    /// checkpoint has one group per row, `group_size` −1 or strategy `channel`).
    pub group: usize,
    /// `[rows, cols / group]`, row-major.
    pub scales: Vec<f32>,
    /// `[rows, cols / group]`, row-major, 0..=15, or 16 for GPTQ v1's stored 15 (its zero + 1
    /// convention); `None` means 8 everywhere (symmetric).
    pub zeros: Option<Vec<u8>>,
    /// `[cols]`: stored column j holds input column `perm[j]` (act-order, stored columns sorted by
    /// group so that each group is contiguous); `None` is the identity.
    pub perm: Option<Vec<u32>>,
}

/// The zero point of a symmetric matrix (`zeros: None`).
pub const SYMMETRIC_ZERO: u8 = 8;

impl GroupQuant {
    /// Groups in one row.
    pub fn groups(&self, cols: usize) -> usize {
        cols / self.group
    }

    /// Why these parts cannot describe a `[rows, cols]` matrix, if they cannot.
    pub fn check(&self, rows: usize, cols: usize) -> Result<(), String> {
        if self.group == 0 || !cols.is_multiple_of(self.group) {
            return Err(format!("group {} does not divide the {cols} columns", self.group));
        }
        if !cols.is_multiple_of(2) {
            return Err(format!("{cols} columns do not pack into whole bytes"));
        }
        let n = rows * self.groups(cols);
        if self.scales.len() != n {
            return Err(format!("{} scales for {n} groups", self.scales.len()));
        }
        if let Some(bad) = self.scales.iter().find(|s| !s.is_finite()) {
            return Err(format!("a scale of {bad}"));
        }
        if let Some(z) = &self.zeros {
            if z.len() != n {
                return Err(format!("{} zero points for {n} groups", z.len()));
            }
            if let Some(bad) = z.iter().find(|&&z| z > 16) {
                return Err(format!("a zero point of {bad}"));
            }
        }
        if let Some(p) = &self.perm {
            let mut seen = vec![false; cols];
            if p.len() != cols
                || p.iter().any(|&c| (c as usize) >= cols || std::mem::replace(&mut seen[c as usize], true))
            {
                return Err(format!("the column order is not a permutation of {cols} columns"));
            }
        }
        Ok(())
    }

    /// Stored row `r` (`packed`: its `cols / 2` bytes) dequantised into `out` in input-column order.
    pub fn dequant_row(&self, packed: &[u8], r: usize, out: &mut [f32]) {
        let cols = out.len();
        let groups = self.groups(cols);
        let scales = &self.scales[r * groups..(r + 1) * groups];
        let zeros = self.zeros.as_ref().map(|z| &z[r * groups..(r + 1) * groups]);
        for (g, (chunk, &s)) in packed.chunks_exact(self.group / 2).zip(scales).enumerate() {
            let z = zeros.map_or(SYMMETRIC_ZERO, |z| z[g]) as i32;
            for (k, &byte) in chunk.iter().enumerate() {
                let j = g * self.group + 2 * k;
                let (lo, hi) = (((byte & 0xf) as i32 - z) as f32 * s, ((byte >> 4) as i32 - z) as f32 * s);
                match &self.perm {
                    None => (out[j], out[j + 1]) = (lo, hi),
                    Some(p) => (out[p[j] as usize], out[p[j + 1] as usize]) = (lo, hi),
                }
            }
        }
    }

    /// The parts of rows `first .. first + count` (for a row view of the matrix).
    pub fn rows(&self, first: usize, count: usize, cols: usize) -> GroupQuant {
        let g = self.groups(cols);
        GroupQuant {
            group: self.group,
            scales: self.scales[first * g..(first + count) * g].to_vec(),
            zeros: self.zeros.as_ref().map(|z| z[first * g..(first + count) * g].to_vec()),
            perm: self.perm.clone(),
        }
    }

    /// Bytes a backend uploads beside the nibbles (f32 scales, u8 zeros, u32 column order).
    pub fn stored_bytes(&self) -> usize {
        4 * self.scales.len() + self.zeros.as_ref().map_or(0, Vec::len) + 4 * self.perm.as_ref().map_or(0, Vec::len)
    }
}

/// Packs one value 0..15 per element (`q`, row-major `[rows, cols]`) into nibbles, low first.
pub fn pack_nibbles(q: &[u8]) -> Vec<u8> {
    q.chunks_exact(2).map(|p| (p[0] & 0xf) | (p[1] << 4)).collect()
}

/// Round-to-nearest 4-bit quantisation of `values` (`[rows, cols]`, row-major) in groups of
/// `group` columns, as GPTQ's quantiser computes it without calibration: the range of each group
/// is widened to include 0; symmetric: s = 2·max|w| / 15, z = 8; asymmetric: s = (max − min) / 15,
/// z = round(−min / s); q = clamp(round(w / s) + z, 0, 15). For synthetic models, tools and tests.
pub fn quantize_rtn(rows: usize, cols: usize, values: &[f32], group: usize, symmetric: bool) -> (Vec<u8>, GroupQuant) {
    assert_eq!(values.len(), rows * cols, "values do not match [{rows}, {cols}]");
    assert!(group > 0 && cols.is_multiple_of(group) && cols.is_multiple_of(2), "group {group} and {cols} columns");
    let groups = cols / group;
    let mut q = vec![0u8; rows * cols];
    let mut scales = vec![0.0f32; rows * groups];
    let mut zeros = vec![SYMMETRIC_ZERO; rows * groups];
    for (i, chunk) in values.chunks_exact(group).enumerate() {
        let min = chunk.iter().fold(0.0f32, |m, &v| m.min(v));
        let max = chunk.iter().fold(0.0f32, |m, &v| m.max(v));
        let (s, z) = if symmetric {
            (2.0 * max.max(-min) / 15.0, SYMMETRIC_ZERO)
        } else {
            let s = (max - min) / 15.0;
            (s, if s > 0.0 { (-min / s).round().clamp(0.0, 15.0) as u8 } else { SYMMETRIC_ZERO })
        };
        let s = if s > 0.0 { s } else { 1.0 }; // an all-zero group: any scale gives q = z
        for (o, &v) in q[i * group..(i + 1) * group].iter_mut().zip(chunk) {
            *o = ((v / s).round() + z as f32).clamp(0.0, 15.0) as u8;
        }
        (scales[i], zeros[i]) = (s, z);
    }
    let zeros = (!symmetric).then_some(zeros);
    (pack_nibbles(&q), GroupQuant { group, scales, zeros, perm: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(rows: usize, cols: usize) -> Vec<f32> {
        (0..rows * cols).map(|i| ((i * 7919 % 1000) as f32 / 500.0 - 1.0) * (1 + i % 3) as f32).collect()
    }

    #[test]
    fn rtn_stays_within_half_a_step_both_ways() {
        let (rows, cols, group) = (6, 64, 16);
        let v = values(rows, cols);
        for symmetric in [true, false] {
            let (packed, gq) = quantize_rtn(rows, cols, &v, group, symmetric);
            gq.check(rows, cols).unwrap();
            assert_eq!(gq.zeros.is_none(), symmetric);
            let mut row = vec![0.0; cols];
            for r in 0..rows {
                gq.dequant_row(&packed[r * cols / 2..(r + 1) * cols / 2], r, &mut row);
                for (c, (&a, &b)) in v[r * cols..(r + 1) * cols].iter().zip(&row).enumerate() {
                    let s = gq.scales[r * (cols / group) + c / group];
                    assert!((a - b).abs() <= 0.5 * s * 1.0001, "({r}, {c}) sym {symmetric}: {a} became {b}");
                }
            }
        }
    }

    #[test]
    fn nibbles_are_low_first_and_perm_scatters() {
        // one row of 4 columns, group 2: q = [1, 2, 3, 4], scales [1, 10], zero 0
        let packed = pack_nibbles(&[1, 2, 3, 4]);
        assert_eq!(packed, [0x21, 0x43]);
        let mut gq = GroupQuant { group: 2, scales: vec![1.0, 10.0], zeros: Some(vec![0, 1]), perm: None };
        let mut out = [0.0; 4];
        gq.dequant_row(&packed, 0, &mut out);
        assert_eq!(out, [1.0, 2.0, 20.0, 30.0]);
        gq.perm = Some(vec![3, 1, 0, 2]);
        gq.check(1, 4).unwrap();
        gq.dequant_row(&packed, 0, &mut out);
        assert_eq!(out, [20.0, 2.0, 30.0, 1.0]);
        gq.perm = Some(vec![3, 1, 1, 2]);
        assert!(gq.check(1, 4).is_err());
    }
}
