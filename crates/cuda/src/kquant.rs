//! GGUF's Q4_K, Q5_K and Q6_K expert matrices as the kernels read them (`common.cuh`, "4- to 6-bit
//! expert rows"), repacked at load from the file's blocks with no change of value and no change
//! of size (a Q6_K row of 512 columns gains 12 bytes of padding):
//!
//! - **Q4_K** (w = d·sc·q − dmin·m, q 0..15, a (sc, m) pair of 6 bits per 32 columns, d and dmin
//!   f16 per 256): a row is `cols / 2` bytes of q in the int4 word order (`int4.rs`: one LOP3
//!   makes two f16 weights), then each 256-column block's 16 bytes as ggml stores them: d, dmin
//!   and the 12 bytes of packed (sc, m). 144 bytes per 256 columns, as in the file.
//! - **Q5_K** (Q4_K with a fifth bit, q 0..31): the Q4_K row with, between the values and the
//!   blocks' 16 bytes, the fifth bits (a 32-bit word per 32 columns, placed as Q6_K's high bits
//!   are). 176 bytes per 256 columns, as in the file.
//! - **Q6_K** (w = d·sc·(q − 32), q 0..63, an i8 scale per 16 columns, d f16 per 256): a row is
//!   `cols / 2` bytes of q's low 4 bits in the int4 word order, then `cols / 4` bytes of the high
//!   2 bits (a 32-bit word per 16 columns, placed so that one shift and mask puts both weights of
//!   a low-bit pair above their low bits), then the i8 scales in column order (`cols / 16`), then
//!   the f16 d of each block (`cols / 128` bytes), padded to 16 bytes. 210 bytes per 256 columns.
//! - **Q8_0** (w = d·q, q an i8, d f16 per 32 columns): a row is `cols` bytes of q + 128, each
//!   4 columns' bytes in the order (c, c + 2, c + 1, c + 3) so that one mask of a 32-bit word
//!   makes the f16 pair of columns (c, c + 1) and a shift and mask that of (c + 2, c + 3), then the
//!   f16 d of every 32 columns. 34 bytes per 32 columns, as in the file.
//!
//! The column order of both formats is ggml's (the value of column c is the value ggml's
//! dequantisation writes at c), so `decode_row` equals `GgmlType::dequantize` bit for bit.

use anyhow::{ensure, Result};
use half::f16;
use solo_model::gguf::GgmlType;

/// The formats the expert kernels read from a GGUF file as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KQuant {
    Q4K,
    Q5K,
    Q6K,
    Q8_0,
}

const QK: usize = 256;

impl KQuant {
    /// The kernels' form of a ggml type, if they have one.
    pub fn of(t: GgmlType) -> Option<KQuant> {
        match t {
            GgmlType::Q4K => Some(KQuant::Q4K),
            GgmlType::Q5K => Some(KQuant::Q5K),
            GgmlType::Q6K => Some(KQuant::Q6K),
            GgmlType::Q8_0 => Some(KQuant::Q8_0),
            _ => None,
        }
    }

    pub fn ggml(self) -> GgmlType {
        match self {
            KQuant::Q4K => GgmlType::Q4K,
            KQuant::Q5K => GgmlType::Q5K,
            KQuant::Q6K => GgmlType::Q6K,
            KQuant::Q8_0 => GgmlType::Q8_0,
        }
    }

    /// Bytes of one row of `cols` columns (a multiple of 256) in the kernels' layout.
    pub const fn row_bytes(self, cols: usize) -> usize {
        match self {
            KQuant::Q4K => cols / 2 + cols / 16,
            KQuant::Q5K => cols / 2 + cols / 8 + cols / 16,
            KQuant::Q6K => (cols / 2 + cols / 4 + cols / 16 + cols / 128).div_ceil(16) * 16,
            KQuant::Q8_0 => cols + cols / 16,
        }
    }

    /// Appends the rows of a `[rows, cols]` matrix, `blocks` as the file stores it (rows of
    /// `cols / 256` ggml blocks), in the kernels' layout to `out`.
    pub fn repack_into(self, blocks: &[u8], rows: usize, cols: usize, out: &mut Vec<u8>) -> Result<()> {
        let t = self.ggml();
        ensure!(cols.is_multiple_of(QK), "{} rows of {cols} columns: not a multiple of {QK}", t.name());
        let (per_block, per_row) = (t.block_bytes(), cols / t.block_elems());
        ensure!(
            blocks.len() == rows * per_row * per_block,
            "{} matrix {rows}x{cols}: {} bytes, not {}",
            t.name(),
            blocks.len(),
            rows * per_row * per_block
        );
        out.reserve(rows * self.row_bytes(cols));
        let mut q = vec![0u8; cols]; // one row's values, in column order
        for row in blocks.chunks_exact(per_row * per_block) {
            let start = out.len();
            match self {
                KQuant::Q4K => q4k_row(row, &mut q, out),
                KQuant::Q5K => q5k_row(row, &mut q, out),
                KQuant::Q8_0 => q8_0_row(row, out),
                KQuant::Q6K => q6k_row(row, &mut q, out),
            }
            out.resize(start + self.row_bytes(cols), 0);
        }
        Ok(())
    }

    /// The one format that holds every one of `types` exactly, if any: a type alone, or Q5_K for
    /// Q4_K beside Q5_K (a Q4_K row is a Q5_K row whose fifth bits are 0: `widen_into`).
    pub fn common(types: &[GgmlType]) -> Option<KQuant> {
        let formats: Option<Vec<KQuant>> = types.iter().map(|&t| KQuant::of(t)).collect();
        let formats = formats?;
        let first = *formats.first()?;
        if formats.iter().all(|&f| f == first) {
            return Some(first);
        }
        formats.iter().all(|f| matches!(f, KQuant::Q4K | KQuant::Q5K)).then_some(KQuant::Q5K)
    }

    /// `repack_into` for a matrix stored as `self` going up as `to` (`common`'s choice): a Q4_K
    /// row gains a plane of zero fifth bits between its values and its blocks' 16 bytes.
    pub fn repack_as(self, to: KQuant, blocks: &[u8], rows: usize, cols: usize, out: &mut Vec<u8>) -> Result<()> {
        if self == to {
            return self.repack_into(blocks, rows, cols, out);
        }
        ensure!(self == KQuant::Q4K && to == KQuant::Q5K, "{:?} rows cannot go up as {:?}", self, to);
        let mut own = Vec::new();
        self.repack_into(blocks, rows, cols, &mut own)?;
        out.reserve(rows * to.row_bytes(cols));
        for row in own.chunks_exact(self.row_bytes(cols)) {
            out.extend_from_slice(&row[..cols / 2]);
            out.resize(out.len() + cols / 8, 0);
            out.extend_from_slice(&row[cols / 2..]);
        }
        Ok(())
    }

    /// Row `r` of `rows_bytes` (the kernels' layout) dequantised: the values the kernels compute
    /// with, in ggml's arithmetic (for tests).
    pub fn decode_row(self, rows_bytes: &[u8], cols: usize, r: usize) -> Vec<f32> {
        let row = &rows_bytes[r * self.row_bytes(cols)..(r + 1) * self.row_bytes(cols)];
        let half = |at: usize| f16::from_le_bytes([row[at], row[at + 1]]).to_f32();
        (0..cols)
            .map(|c| match self {
                KQuant::Q4K | KQuant::Q5K => {
                    let (high, header) = match self {
                        KQuant::Q4K => (0, cols / 2 + 16 * (c / QK)),
                        _ => {
                            let word = u32::from_le_bytes(row[cols / 2 + 4 * (c / 32)..][..4].try_into().unwrap());
                            (((word >> high_shift5(c % 32)) & 1) << 4, cols / 2 + cols / 8 + 16 * (c / QK))
                        }
                    };
                    let (sc, m) = scale_min(&row[header + 4..header + 16], (c % QK) / 32);
                    let (d1, m1) = (half(header) * sc as f32, half(header + 2) * m as f32);
                    d1 * (low_nibble(row, c) as u32 | high) as f32 - m1
                }
                KQuant::Q8_0 => {
                    let at = 4 * (c / 4) + [0, 2, 1, 3][c % 4];
                    let d = half(cols + 2 * (c / 32));
                    (row[at] ^ 0x80) as i8 as f32 * d
                }
                KQuant::Q6K => {
                    let high = u32::from_le_bytes(row[cols / 2 + 4 * (c / 16)..][..4].try_into().unwrap());
                    let q = low_nibble(row, c) as i32 | (((high >> high_shift(c % 16)) & 3) << 4) as i32;
                    let sc = row[cols / 2 + cols / 4 + c / 16] as i8 as f32;
                    let d = half(cols / 2 + cols / 4 + cols / 16 + 2 * (c / QK));
                    d * sc * (q - 32) as f32
                }
            })
            .collect()
    }
}

/// Nibble position (0..8, bits 4p..4p+3 of its word) of column c % 8: `int4.rs`'s order.
const fn position(c: usize) -> usize {
    if c.is_multiple_of(2) {
        c / 2
    } else {
        4 + c / 2
    }
}

/// The 4-bit value of column c in a row whose first `cols / 2` bytes are the int4 word order.
fn low_nibble(row: &[u8], c: usize) -> u8 {
    let word = u32::from_le_bytes(row[4 * (c / 8)..][..4].try_into().unwrap());
    ((word >> (4 * position(c % 8))) & 15) as u8
}

/// Where column c % 16's high 2 bits sit in its Q6_K high word: the low-bit pair (p, the nibble
/// position of c's even neighbour within its word, u the word of the two) at bits 2(4u + p) for
/// the even column and 16 more for the odd one, so `(high >> 2(4u + p)) & 0x00030003` lines up
/// with `(low >> 4p) & 0x000F000F`.
const fn high_shift(c: usize) -> usize {
    let (u, within) = (c / 8, c % 8);
    2 * (4 * u + within / 2) + 16 * (within % 2)
}

/// Where column c % 32's fifth bit sits in its Q5_K word: the low-bit pair (p, its position in
/// low word u of the four) at bit 4u + p for the even column and 16 more for the odd one.
const fn high_shift5(c: usize) -> usize {
    let (u, within) = (c / 8, c % 8);
    4 * u + within / 2 + 16 * (within % 2)
}

/// ggml's `get_scale_min_k4`: sub-block j's 6-bit scale and min from a Q4_K block's 12 bytes.
fn scale_min(q: &[u8], j: usize) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        ((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
    }
}

/// Appends the low 4 bits of a row's values `q` (column order) as int4 words: 8 columns a word,
/// in `position`'s order.
fn push_low_plane(q: &[u8], out: &mut Vec<u8>) {
    for chunk in q.chunks_exact(8) {
        let word = chunk.iter().enumerate().fold(0u32, |w, (c, &v)| w | ((v as u32 & 15) << (4 * position(c))));
        out.extend_from_slice(&word.to_le_bytes());
    }
}

/// One Q4_K row (its blocks) into the kernels' layout (`q`: room for the row's values).
fn q4k_row(blocks: &[u8], q: &mut [u8], out: &mut Vec<u8>) {
    for (b, block) in blocks.chunks_exact(144).enumerate() {
        // ggml: 32 bytes per 64 columns, low nibbles the first 32 columns, high nibbles the next
        for (pair, bytes) in block[16..].chunks_exact(32).enumerate() {
            for (l, &byte) in bytes.iter().enumerate() {
                q[b * QK + 64 * pair + l] = byte & 15;
                q[b * QK + 64 * pair + 32 + l] = byte >> 4;
            }
        }
    }
    push_low_plane(q, out);
    for block in blocks.chunks_exact(144) {
        out.extend_from_slice(&block[..16]);
    }
}

/// One Q5_K row (its blocks) into the kernels' layout (`q`: room for the row's values).
fn q5k_row(blocks: &[u8], q: &mut [u8], out: &mut Vec<u8>) {
    for (b, block) in blocks.chunks_exact(176).enumerate() {
        let (qh, qs) = (&block[16..48], &block[48..176]);
        // ggml: sub-block s takes nibble s % 2 of bytes 32 (s / 2) .., its fifth bit from bit s of qh
        for s in 0..8 {
            for l in 0..32 {
                let low = (qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 15;
                q[b * QK + 32 * s + l] = low | (((qh[l] >> s) & 1) << 4);
            }
        }
    }
    push_low_plane(q, out);
    for chunk in q.chunks_exact(32) {
        let high = chunk.iter().enumerate().fold(0u32, |w, (c, &v)| w | (((v >> 4) as u32 & 1) << high_shift5(c)));
        out.extend_from_slice(&high.to_le_bytes());
    }
    for block in blocks.chunks_exact(176) {
        out.extend_from_slice(&block[..16]);
    }
}

/// One Q8_0 row (its blocks) into the kernels' layout.
fn q8_0_row(blocks: &[u8], out: &mut Vec<u8>) {
    for block in blocks.chunks_exact(34) {
        for four in block[2..].chunks_exact(4) {
            out.extend([four[0], four[2], four[1], four[3]].map(|q| q ^ 0x80));
        }
    }
    for block in blocks.chunks_exact(34) {
        out.extend_from_slice(&block[..2]);
    }
}

/// One Q6_K row (its blocks) into the kernels' layout (`q`: room for the row's values).
fn q6k_row(blocks: &[u8], q: &mut [u8], out: &mut Vec<u8>) {
    for (b, block) in blocks.chunks_exact(210).enumerate() {
        let (ql, qh) = (&block[..128], &block[128..192]);
        // ggml's dequantize_row_q6_K: two halves of 128 columns, each from 64 bytes of ql and 32 of qh
        for n in 0..2 {
            let (ql, qh) = (&ql[64 * n..], &qh[32 * n..]);
            for l in 0..32 {
                let at = b * QK + 128 * n + l;
                q[at] = (ql[l] & 15) | ((qh[l] & 3) << 4);
                q[at + 32] = (ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4);
                q[at + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
                q[at + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
            }
        }
    }
    push_low_plane(q, out);
    for chunk in q.chunks_exact(16) {
        let high = chunk.iter().enumerate().fold(0u32, |w, (c, &v)| w | (((v >> 4) as u32) << high_shift(c)));
        out.extend_from_slice(&high.to_le_bytes());
    }
    // scale i of a block covers its columns 16i .. 16i + 16: column order already
    for block in blocks.chunks_exact(210) {
        out.extend_from_slice(&block[192..208]);
    }
    for block in blocks.chunks_exact(210) {
        out.extend_from_slice(&block[208..210]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random blocks of type `t` with sane f16 scales (the bits of a small positive value).
    fn random_blocks(t: GgmlType, n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut out = Vec::new();
        for _ in 0..n {
            let mut block: Vec<u8> = (0..t.block_bytes()).map(|_| next() as u8).collect();
            let small = |r: u64| f16::from_f32(0.001 + (r % 1000) as f32 * 1e-5).to_le_bytes();
            match t {
                GgmlType::Q4K | GgmlType::Q5K => {
                    block[..2].copy_from_slice(&small(next()));
                    block[2..4].copy_from_slice(&small(next()));
                }
                GgmlType::Q6K => block[208..].copy_from_slice(&small(next())),
                GgmlType::Q8_0 => block[..2].copy_from_slice(&small(next())),
                _ => unreachable!(),
            }
            out.extend(block);
        }
        out
    }

    #[test]
    fn repacked_rows_decode_to_ggmls_values_bit_for_bit() {
        for (k, rows, cols) in
            [(KQuant::Q4K, 3, 2048), (KQuant::Q4K, 4, 512), (KQuant::Q6K, 3, 2048), (KQuant::Q6K, 5, 512)]
        {
            let t = k.ggml();
            let blocks = random_blocks(t, rows * cols / t.block_elems(), 7 + cols as u64);
            let mut want = vec![0f32; rows * cols];
            t.dequantize(&blocks, &mut want);
            let mut packed = Vec::new();
            k.repack_into(&blocks, rows, cols, &mut packed).unwrap();
            assert_eq!(packed.len(), rows * k.row_bytes(cols));
            assert_eq!(packed.len() % 16, 0, "rows start 16-byte aligned");
            for r in 0..rows {
                let got = k.decode_row(&packed, cols, r);
                for c in 0..cols {
                    assert_eq!(got[c].to_bits(), want[r * cols + c].to_bits(), "{k:?} {cols} row {r} col {c}");
                }
            }
        }
    }

    /// A Q4_K matrix going up as Q5_K (beside Q5_K rows: a GGUF file's GDN qkv and z) decodes to
    /// its own values bit for bit; `common` picks one format only where it holds every part.
    #[test]
    fn q4k_rows_go_up_as_q5k_exactly() {
        let (rows, cols) = (3, 512);
        let blocks = random_blocks(GgmlType::Q4K, rows * cols / QK, 11);
        let mut want = vec![0f32; rows * cols];
        GgmlType::Q4K.dequantize(&blocks, &mut want);
        let mut wide = Vec::new();
        KQuant::Q4K.repack_as(KQuant::Q5K, &blocks, rows, cols, &mut wide).unwrap();
        assert_eq!(wide.len(), rows * KQuant::Q5K.row_bytes(cols));
        let got: Vec<f32> = (0..rows).flat_map(|r| KQuant::Q5K.decode_row(&wide, cols, r)).collect();
        assert!(got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "Q4_K as Q5_K changed a value");
        use GgmlType::*;
        assert_eq!(KQuant::common(&[Q5K, Q4K]), Some(KQuant::Q5K));
        assert_eq!(KQuant::common(&[Q4K, Q4K, Q4K]), Some(KQuant::Q4K));
        assert_eq!(KQuant::common(&[Q4K, Q4K, Q6K]), None, "no exact common format");
        assert_eq!(KQuant::common(&[Q8_0, Q8_0]), Some(KQuant::Q8_0));
        assert_eq!(KQuant::common(&[Q4K, Q4_0]), None, "a type with no kernel");
        assert!(KQuant::Q6K.repack_as(KQuant::Q5K, &[], 0, 256, &mut Vec::new()).is_err());
    }

    /// The kernels' arithmetic (common.cuh's `int4_pair`, `q6_pair`, `Q4KFormat::affine`,
    /// `Q6KFormat::affine`, `format_dot` over the fused block's lane pieces: 32 columns of a
    /// gate/up row, 16 of a down row) transcribed bit for bit, in f32, against the dequantised
    /// row's dot: the layout's offsets as the CUDA code reads them, checked without a GPU.
    fn kernel_dot(k: KQuant, row: &[u8], cols: usize, col: usize, n: usize, x: &[f32]) -> f32 {
        let word = |at: usize| u32::from_le_bytes(row[at..at + 4].try_into().unwrap());
        let half = |at: usize| f16::from_le_bytes([row[at], row[at + 1]]).to_f32();
        // the pair's two values as the f16 (1024 + v) − 1032 (4-bit) or − 1056 (6-bit) gives them
        let pair = |v: u32| ((v & 0xffff) as f32, (v >> 16) as f32);
        if k == KQuant::Q8_0 {
            // a word of 4 columns: mask → (c, c + 1), shift and mask → (c + 2, c + 3), each 128 + q
            let d = half(cols + 2 * (col / 32));
            let mut dot = 0f32;
            for i in 0..n / 4 {
                let w = word(col + 4 * i);
                for p in 0..2 {
                    let (lo, hi) = pair((w >> (8 * p)) & 0x00FF_00FF);
                    dot += (lo - 128.0) * x[4 * i + 2 * p] + (hi - 128.0) * x[4 * i + 2 * p + 1];
                }
            }
            return dot * d;
        }
        let words: Vec<u32> = (0..n / 8).map(|i| word(col / 2 + 4 * i)).collect();
        match k {
            KQuant::Q4K | KQuant::Q5K => {
                let five = k == KQuant::Q5K;
                let b = cols / 2 + if five { cols / 8 } else { 0 } + 16 * (col / 256);
                let (sc, m) = scale_min(&row[b + 4..b + 16], (col % 256) / 32);
                let (d, dmin) = (half(b), half(b + 2));
                let (s, shift, mm) = (d * sc as f32, if five { 16.0 } else { 8.0 }, dmin * m as f32);
                let high = if five { word(cols / 2 + 4 * (col / 32)) } else { 0 };
                let u0 = (col % 32) / 8;
                let mut dot = 0f32;
                let mut xsum = 0f32;
                for (i, &w) in words.iter().enumerate() {
                    for p in 0..4 {
                        let v = ((w >> (4 * p)) & 0x000F_000F) | (((high >> (4 * (u0 + i) + p)) & 0x0001_0001) << 4);
                        let (lo, hi) = pair(v);
                        dot += (lo - shift) * x[8 * i + 2 * p] + (hi - shift) * x[8 * i + 2 * p + 1];
                    }
                }
                for v in &x[..n] {
                    xsum += v;
                }
                dot * s + xsum * (shift * s - mm)
            }
            KQuant::Q8_0 => unreachable!("above"),
            KQuant::Q6K => {
                let mut acc = 0f32;
                for g in 0..n / 16 {
                    let c = col + 16 * g;
                    let high = word(cols / 2 + c / 4);
                    let sc = row[cols / 2 + cols / 4 + c / 16] as i8 as f32;
                    let d = half(cols / 2 + cols / 4 + cols / 16 + 2 * (c / 256));
                    let mut dot = 0f32;
                    for u in 0..2 {
                        let w = words[2 * g + u];
                        for p in 0..4 {
                            let v = ((w >> (4 * p)) & 0x000F_000F) | (((high >> (2 * (4 * u + p))) & 0x0003_0003) << 4);
                            let (lo, hi) = pair(v);
                            let at = 16 * g + 8 * u + 2 * p;
                            dot += (lo - 32.0) * x[at] + (hi - 32.0) * x[at + 1];
                        }
                    }
                    acc += dot * d * sc;
                }
                acc
            }
        }
    }

    #[test]
    fn the_kernels_lane_arithmetic_gives_the_rows_values() {
        for (k, cols) in [
            (KQuant::Q4K, 2048),
            (KQuant::Q4K, 512),
            (KQuant::Q5K, 2048),
            (KQuant::Q5K, 512),
            (KQuant::Q6K, 2048),
            (KQuant::Q6K, 512),
            (KQuant::Q8_0, 2048),
            (KQuant::Q8_0, 512),
        ] {
            let rows = 3;
            let blocks = random_blocks(k.ggml(), rows * cols / k.ggml().block_elems(), 11 + cols as u64);
            let mut packed = Vec::new();
            k.repack_into(&blocks, rows, cols, &mut packed).unwrap();
            let x: Vec<f32> = (0..cols).map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0).collect();
            // gate/up rows: lane pieces of 32 columns; down rows: of 16
            let n = if cols == 2048 { 32 } else { 16 };
            for r in 0..rows {
                let row = &packed[r * k.row_bytes(cols)..(r + 1) * k.row_bytes(cols)];
                let values = k.decode_row(&packed, cols, r);
                for col in (0..cols).step_by(n) {
                    let want: f32 = (col..col + n).map(|c| values[c] * x[c]).sum();
                    let got = kernel_dot(k, row, cols, col, n, &x[col..col + n]);
                    assert!(
                        (got - want).abs() <= 1e-4 * (1.0 + want.abs()),
                        "{k:?} {cols} row {r} col {col}: {got} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn sizes_are_the_files() {
        assert_eq!(KQuant::Q4K.row_bytes(2048), 2048 / QK * 144);
        assert_eq!(KQuant::Q5K.row_bytes(2048), 2048 / QK * 176);
        assert_eq!(KQuant::Q5K.row_bytes(512), 2 * 176);
        assert_eq!(KQuant::Q6K.row_bytes(2048), 2048 / QK * 210);
        assert_eq!(KQuant::Q8_0.row_bytes(2048), 2048 / 32 * 34);
        assert_eq!(KQuant::Q8_0.row_bytes(512), 512 / 32 * 34);
        assert_eq!(KQuant::Q4K.row_bytes(512), 2 * 144);
        assert_eq!(KQuant::Q6K.row_bytes(512), 2 * 210 + 12);
    }

    #[test]
    fn the_high_bits_line_up_with_the_low_pairs() {
        // the pair (word u, position p) holds columns 8u + 2p and 8u + 2p + 1
        for u in 0..2 {
            for p in 0..4 {
                assert_eq!(high_shift(8 * u + 2 * p), 2 * (4 * u + p));
                assert_eq!(high_shift(8 * u + 2 * p + 1), 2 * (4 * u + p) + 16);
                assert_eq!(position(2 * p), p);
                for w in 0..4 {
                    assert_eq!(high_shift5(8 * w + 2 * p), 4 * w + p);
                    assert_eq!(high_shift5(8 * w + 2 * p + 1), 4 * w + p + 16);
                }
                assert_eq!(position(2 * p + 1), 4 + p);
            }
        }
    }

    #[test]
    fn a_short_matrix_is_refused_in_one_line() {
        let e = KQuant::Q6K.repack_into(&[0u8; 100], 1, 256, &mut Vec::new()).unwrap_err().to_string();
        assert!(e.contains("Q6_K") && e.contains("100 bytes"), "{e}");
        let e = KQuant::Q4K.repack_into(&[0u8; 72], 1, 128, &mut Vec::new()).unwrap_err().to_string();
        assert!(e.contains("not a multiple of 256"), "{e}");
    }
}
