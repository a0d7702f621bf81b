//! ggml's tensor types and their dequantization, exactly as ggml does it.
//!
//! Every quantized type stores rows as a run of blocks: 32 elements (Q4_0 … Q8_0, IQ4_NL,
//! MXFP4) or 256 (the k-quants and IQ4_XS), each block with its scale(s) first or last as the
//! C structs in ggml-common.h lay them out. The arithmetic below is ggml's `dequantize_row_*`,
//! in f32, in the same order of operations as the `gguf` Python package's numpy dequantizers
//! (products of scales first, no fused multiply-add), so the values match those bit for bit
//! (crates/model/tests/gguf_dequant.rs).

use half::f16;

/// A ggml tensor type as a GGUF file names it (`ggml_type` in ggml.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GgmlType {
    F32,
    F16,
    BF16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q2K,
    Q3K,
    Q4K,
    Q5K,
    Q6K,
    IQ4NL,
    IQ4XS,
    MXFP4,
}

/// Every type id ggml defines, with its name: the ones above are read, the rest are named in
/// the message that refuses them.
const TYPE_NAMES: &[(u32, &str)] = &[
    (0, "F32"),
    (1, "F16"),
    (2, "Q4_0"),
    (3, "Q4_1"),
    (6, "Q5_0"),
    (7, "Q5_1"),
    (8, "Q8_0"),
    (9, "Q8_1"),
    (10, "Q2_K"),
    (11, "Q3_K"),
    (12, "Q4_K"),
    (13, "Q5_K"),
    (14, "Q6_K"),
    (15, "Q8_K"),
    (16, "IQ2_XXS"),
    (17, "IQ2_XS"),
    (18, "IQ3_XXS"),
    (19, "IQ1_S"),
    (20, "IQ4_NL"),
    (21, "IQ3_S"),
    (22, "IQ2_S"),
    (23, "IQ4_XS"),
    (24, "I8"),
    (25, "I16"),
    (26, "I32"),
    (27, "I64"),
    (28, "F64"),
    (29, "IQ1_M"),
    (30, "BF16"),
    (34, "TQ1_0"),
    (35, "TQ2_0"),
    (39, "MXFP4"),
    (40, "NVFP4"),
    (41, "Q1_0"),
];

/// The types solo reads, for messages.
pub const READ_TYPES: &str =
    "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4";

/// Every type solo reads.
pub const ALL: [GgmlType; 16] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q2K,
    GgmlType::Q3K,
    GgmlType::Q4K,
    GgmlType::Q5K,
    GgmlType::Q6K,
    GgmlType::IQ4NL,
    GgmlType::IQ4XS,
    GgmlType::MXFP4,
];

/// 256: the super-block of the k-quants and IQ4_XS.
const QK_K: usize = 256;

impl GgmlType {
    /// The type with ggml id `id`, or the reason solo cannot read it.
    pub fn from_id(id: u32) -> Result<GgmlType, String> {
        if let Some(t) = ALL.iter().find(|t| t.id() == id) {
            return Ok(*t);
        }
        Err(match TYPE_NAMES.iter().find(|(i, _)| *i == id) {
            Some((_, name)) => format!("type {name} (ggml type {id})"),
            None => format!("unknown ggml type {id}"),
        })
    }

    /// ggml's id (what a GGUF tensor entry stores).
    pub fn id(self) -> u32 {
        match self {
            GgmlType::F32 => 0,
            GgmlType::F16 => 1,
            GgmlType::BF16 => 30,
            GgmlType::Q4_0 => 2,
            GgmlType::Q4_1 => 3,
            GgmlType::Q5_0 => 6,
            GgmlType::Q5_1 => 7,
            GgmlType::Q8_0 => 8,
            GgmlType::Q2K => 10,
            GgmlType::Q3K => 11,
            GgmlType::Q4K => 12,
            GgmlType::Q5K => 13,
            GgmlType::Q6K => 14,
            GgmlType::IQ4NL => 20,
            GgmlType::IQ4XS => 23,
            GgmlType::MXFP4 => 39,
        }
    }

    /// ggml's name (`Q4_K`, `IQ4_XS`, …).
    pub fn name(self) -> &'static str {
        match self {
            GgmlType::F32 => "F32",
            GgmlType::F16 => "F16",
            GgmlType::BF16 => "BF16",
            GgmlType::Q4_0 => "Q4_0",
            GgmlType::Q4_1 => "Q4_1",
            GgmlType::Q5_0 => "Q5_0",
            GgmlType::Q5_1 => "Q5_1",
            GgmlType::Q8_0 => "Q8_0",
            GgmlType::Q2K => "Q2_K",
            GgmlType::Q3K => "Q3_K",
            GgmlType::Q4K => "Q4_K",
            GgmlType::Q5K => "Q5_K",
            GgmlType::Q6K => "Q6_K",
            GgmlType::IQ4NL => "IQ4_NL",
            GgmlType::IQ4XS => "IQ4_XS",
            GgmlType::MXFP4 => "MXFP4",
        }
    }

    /// Elements per block (1 for the float types).
    pub fn block_elems(self) -> usize {
        match self {
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => 1,
            GgmlType::Q4_0
            | GgmlType::Q4_1
            | GgmlType::Q5_0
            | GgmlType::Q5_1
            | GgmlType::Q8_0
            | GgmlType::IQ4NL
            | GgmlType::MXFP4 => 32,
            GgmlType::Q2K | GgmlType::Q3K | GgmlType::Q4K | GgmlType::Q5K | GgmlType::Q6K | GgmlType::IQ4XS => QK_K,
        }
    }

    /// Bytes per block (ggml's `type_size`).
    pub fn block_bytes(self) -> usize {
        match self {
            GgmlType::F32 => 4,
            GgmlType::F16 | GgmlType::BF16 => 2,
            GgmlType::Q4_0 => 18,
            GgmlType::Q4_1 => 20,
            GgmlType::Q5_0 => 22,
            GgmlType::Q5_1 => 24,
            GgmlType::Q8_0 => 34,
            GgmlType::IQ4NL => 18,
            GgmlType::MXFP4 => 17,
            GgmlType::Q2K => 84,
            GgmlType::Q3K => 110,
            GgmlType::Q4K => 144,
            GgmlType::Q5K => 176,
            GgmlType::Q6K => 210,
            GgmlType::IQ4XS => 136,
        }
    }

    /// Bytes of `elems` elements (a whole number of blocks).
    pub fn bytes_for(self, elems: usize) -> usize {
        debug_assert_eq!(elems % self.block_elems(), 0, "{elems} elements of {}", self.name());
        elems / self.block_elems() * self.block_bytes()
    }

    /// Dequantizes whole blocks: `out.len()` is a multiple of `block_elems()` and `blocks`
    /// holds exactly those blocks.
    pub fn dequantize(self, blocks: &[u8], out: &mut [f32]) {
        let (n, bytes) = (self.block_elems(), self.block_bytes());
        debug_assert_eq!(blocks.len(), out.len() / n * bytes);
        let dequant_block: fn(&[u8], &mut [f32]) = match self {
            GgmlType::F32 => |b, y| y[0] = f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            GgmlType::F16 => |b, y| y[0] = f16_at(b, 0),
            GgmlType::BF16 => |b, y| y[0] = half::bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32(),
            GgmlType::Q4_0 => q4_0,
            GgmlType::Q4_1 => q4_1,
            GgmlType::Q5_0 => q5_0,
            GgmlType::Q5_1 => q5_1,
            GgmlType::Q8_0 => q8_0,
            GgmlType::IQ4NL => iq4_nl,
            GgmlType::MXFP4 => mxfp4,
            GgmlType::Q2K => q2_k,
            GgmlType::Q3K => q3_k,
            GgmlType::Q4K => q4_k,
            GgmlType::Q5K => q5_k,
            GgmlType::Q6K => q6_k,
            GgmlType::IQ4XS => iq4_xs,
        };
        for (b, y) in blocks.chunks_exact(bytes).zip(out.chunks_exact_mut(n)) {
            dequant_block(b, y);
        }
    }
}

fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

/// The 16 non-linear levels of IQ4_NL and IQ4_XS.
const KVALUES_IQ4NL: [i8; 16] = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];
/// e2m1 values, doubled (the scale below is halved to match).
const KVALUES_MXFP4: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// Low nibbles are elements 0..16 of a 32-block, high nibbles 16..32.
fn nibbles(qs: &[u8], j: usize) -> (usize, usize) {
    ((qs[j] & 0x0f) as usize, (qs[j] >> 4) as usize)
}

// block_q4_0: d (f16), qs[16]
fn q4_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    for j in 0..16 {
        let (lo, hi) = nibbles(&b[2..], j);
        y[j] = d * (lo as i32 - 8) as f32;
        y[j + 16] = d * (hi as i32 - 8) as f32;
    }
}

// block_q4_1: d, m (f16), qs[16]
fn q4_1(b: &[u8], y: &mut [f32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    for j in 0..16 {
        let (lo, hi) = nibbles(&b[4..], j);
        y[j] = d * lo as f32 + m;
        y[j + 16] = d * hi as f32 + m;
    }
}

/// The fifth bits of a Q5 block: bit j of `qh` belongs to element j.
fn fifth_bits(qh: &[u8], j: usize) -> (usize, usize) {
    let qh = u32::from_le_bytes([qh[0], qh[1], qh[2], qh[3]]);
    ((((qh >> j) & 1) << 4) as usize, (((qh >> (j + 16)) & 1) << 4) as usize)
}

// block_q5_0: d (f16), qh[4], qs[16]
fn q5_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    for j in 0..16 {
        let (lo, hi) = nibbles(&b[6..], j);
        let (h0, h1) = fifth_bits(&b[2..6], j);
        y[j] = d * ((lo | h0) as i32 - 16) as f32;
        y[j + 16] = d * ((hi | h1) as i32 - 16) as f32;
    }
}

// block_q5_1: d, m (f16), qh[4], qs[16]
fn q5_1(b: &[u8], y: &mut [f32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    for j in 0..16 {
        let (lo, hi) = nibbles(&b[8..], j);
        let (h0, h1) = fifth_bits(&b[4..8], j);
        y[j] = d * (lo | h0) as f32 + m;
        y[j + 16] = d * (hi | h1) as f32 + m;
    }
}

// block_q8_0: d (f16), qs[32] (i8)
fn q8_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    for j in 0..32 {
        y[j] = b[2 + j] as i8 as f32 * d;
    }
}

// block_iq4_nl: d (f16), qs[16]
fn iq4_nl(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    for j in 0..16 {
        let (lo, hi) = nibbles(&b[2..], j);
        y[j] = d * KVALUES_IQ4NL[lo] as f32;
        y[j + 16] = d * KVALUES_IQ4NL[hi] as f32;
    }
}

// block_mxfp4: e (e8m0), qs[16]
fn mxfp4(b: &[u8], y: &mut [f32]) {
    // ggml_e8m0_to_fp32_half: 2^(e - 128), with the two smallest exponents as subnormals
    let e = b[0] as u32;
    let d = f32::from_bits(if e < 2 { 0x0020_0000 << e } else { (e - 1) << 23 });
    for j in 0..16 {
        let (lo, hi) = nibbles(&b[1..], j);
        y[j] = d * KVALUES_MXFP4[lo] as f32;
        y[j + 16] = d * KVALUES_MXFP4[hi] as f32;
    }
}

// block_q2_K: scales[16] (4-bit scale | 4-bit min), qs[64], d, dmin (f16)
fn q2_k(b: &[u8], y: &mut [f32]) {
    let (scales, qs) = (&b[0..16], &b[16..80]);
    let (d, dmin) = (f16_at(b, 80), f16_at(b, 82));
    // sub-block s (16 elements): 128-half s / 8, shift 2·((s % 8) / 2), bytes 16·(s % 2)..
    for s in 0..16 {
        let dl = d * (scales[s] & 0xf) as f32;
        let ml = dmin * (scales[s] >> 4) as f32;
        let (half, shift, off) = (s / 8, 2 * ((s % 8) / 2), 16 * (s % 2));
        for l in 0..16 {
            let q = (qs[32 * half + off + l] >> shift) & 3;
            y[16 * s + l] = dl * q as f32 - ml;
        }
    }
}

// block_q3_K: hmask[32], qs[64], scales[12] (16 six-bit scales), d (f16)
fn q3_k(b: &[u8], y: &mut [f32]) {
    let (hmask, qs, sc) = (&b[0..32], &b[32..96], &b[96..108]);
    let d = f16_at(b, 108);
    for s in 0..16 {
        // low 4 bits from sc[s % 8] (nibble s / 8), high 2 bits from sc[8 + s % 4] (pair s / 4)
        let low = (sc[s % 8] >> (4 * (s / 8))) & 0x0f;
        let high = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
        let dl = d * ((low | (high << 4)) as i8 - 32) as f32;
        let (half, shift, off) = (s / 8, 2 * ((s % 8) / 2), 16 * (s % 2));
        let bit = (s % 8) / 2 + 4 * half; // the hmask bit of this sub-block
        for l in 0..16 {
            let q = ((qs[32 * half + off + l] >> shift) & 3) as i8;
            let sub = if hmask[off + l] >> bit & 1 == 1 { 0 } else { 4 };
            y[16 * s + l] = dl * (q - sub) as f32;
        }
    }
}

/// Scale and min of sub-block `j` of the 12 packed bytes of Q4_K / Q5_K (`get_scale_min_k4`).
fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        ((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
    }
}

// block_q4_K: d, dmin (f16), scales[12], qs[128]
fn q4_k(b: &[u8], y: &mut [f32]) {
    let (d, dmin, scales, qs) = (f16_at(b, 0), f16_at(b, 2), &b[4..16], &b[16..144]);
    for s in 0..8 {
        let (sc, m) = scale_min_k4(s, scales);
        let (dl, ml) = (d * sc as f32, dmin * m as f32);
        let (q, shift) = (&qs[32 * (s / 2)..], 4 * (s % 2));
        for l in 0..32 {
            y[32 * s + l] = dl * ((q[l] >> shift) & 0xf) as f32 - ml;
        }
    }
}

// block_q5_K: d, dmin (f16), scales[12], qh[32], qs[128]
fn q5_k(b: &[u8], y: &mut [f32]) {
    let (d, dmin, scales, qh, qs) = (f16_at(b, 0), f16_at(b, 2), &b[4..16], &b[16..48], &b[48..176]);
    for s in 0..8 {
        let (sc, m) = scale_min_k4(s, scales);
        let (dl, ml) = (d * sc as f32, dmin * m as f32);
        let (q, shift) = (&qs[32 * (s / 2)..], 4 * (s % 2));
        for l in 0..32 {
            let v = ((q[l] >> shift) & 0xf) | (((qh[l] >> s) & 1) << 4);
            y[32 * s + l] = dl * v as f32 - ml;
        }
    }
}

// block_q6_K: ql[128], qh[64], scales[16] (i8), d (f16)
fn q6_k(b: &[u8], y: &mut [f32]) {
    let (ql, qh, sc) = (&b[0..128], &b[128..192], &b[192..208]);
    let d = f16_at(b, 208);
    for half in 0..2 {
        let (ql, qh) = (&ql[64 * half..], &qh[32 * half..]);
        for l in 0..32 {
            let is = l / 16;
            let q = [
                (ql[l] & 0xf) | ((qh[l] & 3) << 4),
                (ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4),
                (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4),
                (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4),
            ];
            for (k, q) in q.into_iter().enumerate() {
                let scale = sc[8 * half + is + 2 * k] as i8;
                y[128 * half + 32 * k + l] = (d * scale as f32) * (q as i8 - 32) as f32;
            }
        }
    }
}

// block_iq4_xs: d (f16), scales_h (u16), scales_l[4], qs[128]
fn iq4_xs(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let scales_h = u16::from_le_bytes([b[2], b[3]]);
    let (scales_l, qs) = (&b[4..8], &b[8..136]);
    for ib in 0..8 {
        let ls = ((scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | ((((scales_h >> (2 * ib)) & 3) as u8) << 4);
        let dl = d * (ls as i8 - 32) as f32;
        for j in 0..16 {
            let (lo, hi) = nibbles(&qs[16 * ib..], j);
            y[32 * ib + j] = dl * KVALUES_IQ4NL[lo] as f32;
            y[32 * ib + j + 16] = dl * KVALUES_IQ4NL[hi] as f32;
        }
    }
}
