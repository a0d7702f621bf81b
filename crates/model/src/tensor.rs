//! A read-only view of one tensor inside a memory-mapped safetensors file.
//!
//! Views are cheap to clone (an `Arc` to the map plus a byte range), so expert slices of a fused
//! tensor and whole tensors look the same to the backends, and nothing is copied at load time.
//!
//! An FP8 weight (`F8_E4M3`, the official block format) carries its block scales: the value of
//! element (r, c) is `q[r, c] · s[r / 128, c / 128]`, and every read below returns that product in
//! f32, so a reader of any precision sees the same real-valued matrix. A 4-bit weight (`I4`, solo's
//! one int4 layout, `crate::int4`) carries its `GroupQuant` the same way.
//!
//! A ggml-quantized weight from a GGUF file (`DType::Ggml`) keeps its blocks as stored; every
//! read dequantizes them as ggml does (`gguf::GgmlType::dequantize`). Its rows are whole blocks.

use crate::gguf::GgmlType;
use crate::int4::GroupQuant;
use half::{bf16, f16};
use memmap2::Mmap;
use std::sync::Arc;

/// Element types a checkpoint may use for the tensors solo reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    BF16,
    F16,
    F32,
    /// FP8 e4m3 (1 sign, 4 exponent bits with bias 7, 3 mantissa bits; no infinities, S.1111.111
    /// is NaN): only as a block-scaled matrix (`BlockScales`).
    F8E4M3,
    /// Packed 4-bit values, two per byte: only as a group-quantised matrix (`GroupQuant`).
    I4,
    /// Integers of a checkpoint's packed 4-bit formats (GPTQ's `qweight`, `g_idx`, ...): read by
    /// the loader, never by a backend.
    I32,
    I64,
    /// A ggml block-quantized type from a GGUF file (never F32/F16/BF16: those are the above).
    Ggml(GgmlType),
}

impl DType {
    /// Bytes of `elems` elements (for a block type, a whole number of blocks; `I4` packs two a byte).
    pub fn bytes_for(self, elems: usize) -> usize {
        match self {
            DType::F8E4M3 => elems,
            DType::BF16 | DType::F16 => 2 * elems,
            DType::F32 | DType::I32 => 4 * elems,
            DType::I64 => 8 * elems,
            DType::I4 => elems.div_ceil(2),
            DType::Ggml(t) => t.bytes_for(elems),
        }
    }

    /// Bytes per element of a plain (one-element-per-block, whole-byte) type.
    pub fn size(self) -> usize {
        assert!(self.block_elems() == 1 && self != DType::I4, "{} has no per-element size", self.name());
        self.bytes_for(1)
    }

    /// Elements per block: 1, or the ggml block (32 or 256) that reads must start on.
    pub fn block_elems(self) -> usize {
        match self {
            DType::Ggml(t) => t.block_elems(),
            _ => 1,
        }
    }

    /// The safetensors name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            DType::BF16 => "BF16",
            DType::F16 => "F16",
            DType::F32 => "F32",
            DType::F8E4M3 => "F8_E4M3",
            DType::I4 => "I4",
            DType::I32 => "I32",
            DType::I64 => "I64",
            DType::Ggml(t) => t.name(),
        }
    }
}

/// Rows and columns of a weight block that shares one scale (`weight_block_size` [128, 128]).
pub const FP8_BLOCK: usize = 128;

/// The block scales of an FP8 matrix `[rows, cols]`: `scales` is `[ceil(rows/128), ceil(cols/128)]`
/// (the checkpoint's `weight_scale_inv`, a multiplier despite its name). `first_row` is where a
/// row view (`Tensor::rows`) starts inside the matrix the scales were made for.
#[derive(Clone, Debug)]
pub struct BlockScales {
    /// The scales as f32, row-major `[ceil(rows/128), ceil(cols/128)]`.
    pub values: Arc<Vec<f32>>,
    /// Columns of `values` (= ceil(cols / 128)).
    pub block_cols: usize,
    pub first_row: usize,
}

impl BlockScales {
    /// The scale of element (r, c) of the view.
    pub fn at(&self, r: usize, c: usize) -> f32 {
        self.values[(self.first_row + r) / FP8_BLOCK * self.block_cols + c / FP8_BLOCK]
    }
}

/// f32 → the nearest e4m3 (ties to the even code), saturating at ±448: torch's
/// `to(float8_e4m3fn)` for finite values.
pub fn f32_to_f8e4m3(v: f32) -> u8 {
    let sign = if v.is_sign_negative() { 0x80 } else { 0 };
    let a = v.abs().min(448.0);
    // codes 0x00..=0x7e are the non-negative finite values in increasing order
    let table = &F8E4M3_TABLE[..0x7f];
    let hi = table.partition_point(|&t| t < a).min(0x7e);
    let code = if hi == 0 {
        0
    } else {
        let (lo_d, hi_d) = (a - table[hi - 1], table[hi] - a);
        if lo_d < hi_d || (lo_d == hi_d && (hi - 1) % 2 == 0) {
            hi - 1
        } else {
            hi
        }
    };
    sign | code as u8
}

/// e4m3 → f32, exactly (every e4m3 value is an f32).
pub fn f8e4m3_to_f32(bits: u8) -> f32 {
    F8E4M3_TABLE[bits as usize]
}

static F8E4M3_TABLE: std::sync::LazyLock<[f32; 256]> = std::sync::LazyLock::new(|| {
    let mut t = [0.0f32; 256];
    for (bits, v) in t.iter_mut().enumerate() {
        let sign = if bits & 0x80 != 0 { -1.0 } else { 1.0 };
        let (e, m) = ((bits >> 3) & 0xf, bits & 0x7);
        *v = if e == 0xf && m == 0x7 {
            f32::NAN
        } else if e == 0 {
            sign * (m as f32 / 8.0) * 2f32.powi(-6) // subnormal
        } else {
            sign * (1.0 + m as f32 / 8.0) * 2f32.powi(e as i32 - 7)
        };
    }
    t
});

#[derive(Clone)]
pub struct Tensor {
    map: Arc<Mmap>,
    /// Byte range of the data inside `map`.
    start: usize,
    len: usize,
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// Present exactly when `dtype` is `F8E4M3` (a 2-D matrix).
    pub scales: Option<BlockScales>,
    /// Present exactly when `dtype` is `I4` (a 2-D matrix).
    pub group_quant: Option<Arc<GroupQuant>>,
    /// Present when a matrix's columns are stored in the GGUF converter's tiled value-head order
    /// and its blocks span two heads, so that moving them would change the values (a GDN out_proj
    /// in Q4_K, say): reads give the release's order.
    pub tiled_heads: Option<TiledHeads>,
}

/// Columns in `key_heads · r` groups of `width` (one a GDN value head), stored in the GGUF
/// converter's tiled order: the group of value head h in the release's order (grouped by key
/// head, r value heads each) is stored group `stored(h)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TiledHeads {
    pub width: usize,
    pub key_heads: usize,
    pub r: usize,
}

impl TiledHeads {
    /// The stored group of the release's value head h.
    pub fn stored(&self, h: usize) -> usize {
        (h % self.r) * self.key_heads + h / self.r
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tensor({:?}, {:?})", self.dtype, self.shape)
    }
}

impl Tensor {
    /// The caller guarantees `start + len` lies inside the map and `len` matches shape × dtype.
    pub(crate) fn new(map: Arc<Mmap>, start: usize, len: usize, dtype: DType, shape: Vec<usize>) -> Self {
        debug_assert_eq!(len, dtype.bytes_for(shape.iter().product::<usize>()));
        Tensor { map, start, len, dtype, shape, scales: None, group_quant: None, tiled_heads: None }
    }

    /// This FP8 matrix with its block scales (`scales`: `[ceil(rows/128), ceil(cols/128)]` as f32,
    /// row-major). The caller has checked the shapes (the loader names the tensor when they differ).
    pub fn with_block_scales(mut self, scales: Vec<f32>) -> Tensor {
        assert!(self.dtype == DType::F8E4M3 && self.shape.len() == 2, "block scales on a {:?} tensor", self);
        let block_cols = self.shape[1].div_ceil(FP8_BLOCK);
        assert_eq!(scales.len(), self.shape[0].div_ceil(FP8_BLOCK) * block_cols, "block scales of {:?}", self.shape);
        self.scales = Some(BlockScales { values: Arc::new(scales), block_cols, first_row: 0 });
        self
    }

    /// A tensor over bytes held in memory (random test weights, synthetic models), little-endian.
    pub fn from_bytes(dtype: DType, shape: Vec<usize>, bytes: &[u8]) -> Tensor {
        assert_eq!(bytes.len(), dtype.bytes_for(shape.iter().product::<usize>()), "bytes do not match {shape:?}");
        let mut map = memmap2::MmapMut::map_anon(bytes.len().max(1)).expect("anonymous map");
        map[..bytes.len()].copy_from_slice(bytes);
        let map = Arc::new(map.make_read_only().expect("read-only map"));
        Tensor::new(map, 0, bytes.len(), dtype, shape)
    }

    /// The FP8 matrix the official recipe makes of `values` ([rows, cols] row-major): per 128×128
    /// block s = amax / 448 (as f32), q = e4m3(w / s). For tests and tools; the loader reads
    /// checkpoints that were quantised this way.
    pub fn quantize_fp8(rows: usize, cols: usize, values: &[f32]) -> Tensor {
        assert_eq!(values.len(), rows * cols);
        let (br, bc) = (rows.div_ceil(FP8_BLOCK), cols.div_ceil(FP8_BLOCK));
        let mut scales = vec![0.0f32; br * bc];
        for (i, v) in values.iter().enumerate() {
            let b = (i / cols) / FP8_BLOCK * bc + (i % cols) / FP8_BLOCK;
            scales[b] = scales[b].max(v.abs());
        }
        scales.iter_mut().for_each(|s| *s = s.max(1e-12) / 448.0);
        let q: Vec<u8> = values
            .iter()
            .enumerate()
            .map(|(i, v)| f32_to_f8e4m3(v / scales[(i / cols) / FP8_BLOCK * bc + (i % cols) / FP8_BLOCK]))
            .collect();
        Tensor::from_bytes(DType::F8E4M3, vec![rows, cols], &q).with_block_scales(scales)
    }

    /// The `I4` matrix `[rows, cols]` of `packed` nibbles (solo's int4 layout, `crate::int4`) and
    /// its group scales; panics when the parts do not fit (the loader checks and names them first).
    pub fn from_int4(rows: usize, cols: usize, packed: &[u8], quant: GroupQuant) -> Tensor {
        quant.check(rows, cols).unwrap_or_else(|e| panic!("int4 [{rows}, {cols}]: {e}"));
        Tensor::from_bytes(DType::I4, vec![rows, cols], packed).with_group_quant(quant)
    }

    /// This `I4` view (nibbles already in solo's layout) with its group scales.
    fn with_group_quant(mut self, quant: GroupQuant) -> Tensor {
        assert!(self.dtype == DType::I4 && self.shape.len() == 2, "group scales on a {:?} tensor", self);
        self.group_quant = Some(Arc::new(quant));
        self
    }

    /// These bytes (a checkpoint's packed words whose nibbles are already solo's int4 layout) as
    /// the `I4` matrix `[rows, cols]`, without a copy.
    pub(crate) fn into_int4(self, rows: usize, cols: usize, quant: GroupQuant) -> Tensor {
        assert_eq!(self.len, rows * cols / 2, "{self:?} as int4 [{rows}, {cols}]");
        quant.check(rows, cols).unwrap_or_else(|e| panic!("int4 [{rows}, {cols}]: {e}"));
        Tensor::new(self.map, self.start, self.len, DType::I4, vec![rows, cols]).with_group_quant(quant)
    }

    /// `values` (`[rows, cols]`, row-major) quantised round-to-nearest to int4 in groups of `group`
    /// columns (`crate::int4::quantize_rtn`). For synthetic models, tools and tests.
    pub fn quantize_int4(rows: usize, cols: usize, values: &[f32], group: usize, symmetric: bool) -> Tensor {
        let (packed, quant) = crate::int4::quantize_rtn(rows, cols, values, group, symmetric);
        Tensor::from_int4(rows, cols, &packed, quant)
    }

    /// An `I4` matrix's packed nibbles (row-major, low nibble first) and its group scales: what a
    /// backend uploads. `None` for every other dtype.
    pub fn int4(&self) -> Option<(&[u8], &GroupQuant)> {
        self.group_quant.as_deref().map(|q| (self.bytes(), q))
    }

    /// A bf16 tensor holding `values` rounded to bf16.
    pub fn from_f32_as_bf16(shape: Vec<usize>, values: &[f32]) -> Tensor {
        let bytes: Vec<u8> = values.iter().flat_map(|v| bf16::from_f32(*v).to_le_bytes()).collect();
        Tensor::from_bytes(DType::BF16, shape, &bytes)
    }

    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Bytes a backend uploads for this tensor: its data and, for FP8, its block scales (f32); for
    /// int4, its group scales, zeros and column order.
    pub fn stored_bytes(&self) -> usize {
        self.len
            + self.scales.as_ref().map_or(0, |s| 4 * s.values.len())
            + self.group_quant.as_ref().map_or(0, |q| q.stored_bytes())
    }

    /// The raw little-endian bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.map[self.start..self.start + self.len]
    }

    /// Size of one row: the product of every dim but the first.
    pub fn row_len(&self) -> usize {
        self.shape[1..].iter().product()
    }

    /// Slice `index` along dim 0, e.g. one expert of a fused `[E, 2I, H]` tensor.
    pub fn index(&self, index: usize) -> Tensor {
        assert!(index < self.shape[0], "index {index} out of {:?}", self.shape);
        self.rows(index, 1).squeeze_first()
    }

    /// Rows `first .. first + count` along dim 0 (shape keeps its rank).
    pub fn rows(&self, first: usize, count: usize) -> Tensor {
        assert!(first + count <= self.shape[0], "rows {first}+{count} out of {:?}", self.shape);
        let row_bytes = self.dtype.bytes_for(self.row_len());
        let mut shape = self.shape.clone();
        shape[0] = count;
        let mut view =
            Tensor::new(self.map.clone(), self.start + first * row_bytes, count * row_bytes, self.dtype, shape);
        view.scales = self.scales.clone().map(|s| BlockScales { first_row: s.first_row + first, ..s });
        view.group_quant = self.group_quant.as_ref().map(|q| Arc::new(q.rows(first, count, self.row_len())));
        view.tiled_heads = self.tiled_heads;
        view
    }

    fn squeeze_first(mut self) -> Tensor {
        assert!(
            self.scales.is_none() && self.group_quant.is_none() && self.tiled_heads.is_none(),
            "a quantised or tiled matrix has no dim to index"
        );
        self.shape.remove(0);
        self
    }

    /// This matrix with its columns read as stored in `tiled` order (the caller has checked that
    /// its width is `tiled`'s groups).
    pub fn with_tiled_heads(mut self, tiled: TiledHeads) -> Tensor {
        assert_eq!(self.shape.len(), 2, "tiled heads on {:?}", self);
        assert_eq!(self.shape[1], tiled.width * tiled.key_heads * tiled.r, "tiled heads {tiled:?} on {:?}", self);
        self.tiled_heads = Some(tiled);
        self
    }

    /// Converts elements `[offset, offset + out.len())` to f32.
    pub fn read_f32(&self, offset: usize, out: &mut [f32]) {
        if let Some(tiled) = self.tiled_heads {
            return self.read_tiled(tiled, offset, out);
        }
        if self.dtype == DType::I4 {
            return self.read_int4(offset, out);
        }
        if let DType::Ggml(t) = self.dtype {
            return self.read_blocks_f32(t, offset, out);
        }
        let bytes = &self.bytes()[self.dtype.bytes_for(offset)..self.dtype.bytes_for(offset + out.len())];
        match self.dtype {
            DType::BF16 => {
                for (o, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                    *o = bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32();
                }
            }
            DType::F16 => {
                for (o, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                    *o = f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32();
                }
            }
            DType::F32 => {
                for (o, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                    *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                }
            }
            // w = q · s of its block
            DType::F8E4M3 => {
                let scales = self.scales.as_ref().expect("an F8_E4M3 tensor is read only with its block scales");
                let cols = self.row_len();
                for (i, (o, &q)) in out.iter_mut().zip(bytes).enumerate() {
                    let at = offset + i;
                    *o = f8e4m3_to_f32(q) * scales.at(at / cols, at % cols);
                }
            }
            // the checkpoint's integers (for the loader's own reads of g_idx and shapes)
            DType::I32 => {
                for (o, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                    *o = i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f32;
                }
            }
            DType::I64 => {
                for (o, b) in out.iter_mut().zip(bytes.chunks_exact(8)) {
                    *o = i64::from_le_bytes(b.try_into().expect("8 bytes")) as f32;
                }
            }
            DType::I4 => unreachable!("read_int4"),
            DType::Ggml(_) => unreachable!("read above"),
        }
    }

    /// `read_f32` of an `I4` matrix: whole stored rows are dequantised (a row's column order may
    /// be permuted), then the asked-for part copied out.
    fn read_int4(&self, offset: usize, out: &mut [f32]) {
        let quant = self.group_quant.as_ref().expect("an I4 tensor is read only with its group scales");
        let cols = self.row_len();
        let mut row = Vec::new();
        let (mut at, mut done) = (offset, 0);
        while done < out.len() {
            let (r, c) = (at / cols, at % cols);
            let n = (cols - c).min(out.len() - done);
            let packed = &self.bytes()[r * cols / 2..(r + 1) * cols / 2];
            if n == cols {
                quant.dequant_row(packed, r, &mut out[done..done + n]);
            } else {
                row.resize(cols, 0.0);
                quant.dequant_row(packed, r, &mut row);
                out[done..done + n].copy_from_slice(&row[c..c + n]);
            }
            (at, done) = (at + n, done + n);
        }
    }

    /// `read_f32` of a matrix stored in tiled value-head order: each stored row read whole, its
    /// groups put back in the release's order, then the asked-for part copied out.
    fn read_tiled(&self, tiled: TiledHeads, offset: usize, out: &mut [f32]) {
        let cols = self.row_len();
        let untiled = Tensor { tiled_heads: None, ..self.clone() };
        let mut stored = vec![0.0; cols];
        let (mut at, mut done) = (offset, 0);
        while done < out.len() {
            let (r, c) = (at / cols, at % cols);
            let n = (cols - c).min(out.len() - done);
            untiled.read_f32(r * cols, &mut stored);
            for (i, o) in out[done..done + n].iter_mut().enumerate() {
                let col = c + i;
                *o = stored[tiled.stored(col / tiled.width) * tiled.width + col % tiled.width];
            }
            (at, done) = (at + n, done + n);
        }
    }

    /// `read_f32` of a ggml block type: the blocks covering the range, dequantized.
    fn read_blocks_f32(&self, t: GgmlType, offset: usize, out: &mut [f32]) {
        let n = t.block_elems();
        let (first, end) = (offset / n * n, (offset + out.len()).div_ceil(n) * n);
        let blocks = &self.bytes()[t.bytes_for(first)..t.bytes_for(end)];
        if first == offset && end == offset + out.len() {
            return t.dequantize(blocks, out);
        }
        let mut all = vec![0.0; end - first];
        t.dequantize(blocks, &mut all);
        out.copy_from_slice(&all[offset - first..offset - first + out.len()]);
    }

    /// Row `r` (along dim 0) as f32, into `out` (length `row_len()`).
    pub fn read_row_f32(&self, r: usize, out: &mut [f32]) {
        debug_assert_eq!(out.len(), self.row_len());
        self.read_f32(r * self.row_len(), out);
    }

    /// The whole tensor as f32.
    pub fn to_f32(&self) -> Vec<f32> {
        let mut out = vec![0.0; self.numel()];
        self.read_f32(0, &mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e4m3_round_trips_and_rounds_to_nearest() {
        for code in 0..=0xffu8 {
            let v = f8e4m3_to_f32(code);
            if v.is_finite() && !(v == 0.0 && code == 0x80) {
                assert_eq!(f32_to_f8e4m3(v), code, "code {code:#x} ({v})");
            }
        }
        assert_eq!(f8e4m3_to_f32(f32_to_f8e4m3(1.06)), 1.0); // 1.0 and 1.125 are neighbours
        assert_eq!(f8e4m3_to_f32(f32_to_f8e4m3(1.07)), 1.125);
        assert_eq!(f8e4m3_to_f32(f32_to_f8e4m3(1e6)), 448.0);
        assert_eq!(f8e4m3_to_f32(f32_to_f8e4m3(-1e6)), -448.0);
    }

    #[test]
    fn quantize_fp8_stays_within_half_a_step() {
        let (rows, cols) = (200, 300);
        let values: Vec<f32> =
            (0..rows * cols).map(|i| ((i * 7919 % 1000) as f32 / 500.0 - 1.0) * (1 + i % 3) as f32).collect();
        let t = Tensor::quantize_fp8(rows, cols, &values);
        let back = t.to_f32();
        for (i, (a, b)) in values.iter().zip(&back).enumerate() {
            let s = t.scales.as_ref().unwrap().at(i / cols, i % cols);
            assert!((a - b).abs() <= a.abs() / 16.0 + 2f32.powi(-10) * s, "element {i}: {a} became {b}");
        }
    }
}
