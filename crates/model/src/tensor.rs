//! A read-only view of one tensor inside a memory-mapped safetensors file.
//!
//! Views are cheap to clone (an `Arc` to the map plus a byte range), so expert slices of a fused
//! tensor and whole tensors look the same to the backends, and nothing is copied at load time.

use half::{bf16, f16};
use memmap2::Mmap;
use std::sync::Arc;

/// Element types a checkpoint may use for the tensors solo reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    BF16,
    F16,
    F32,
}

impl DType {
    pub fn size(self) -> usize {
        match self {
            DType::BF16 | DType::F16 => 2,
            DType::F32 => 4,
        }
    }
}

#[derive(Clone)]
pub struct Tensor {
    map: Arc<Mmap>,
    /// Byte range of the data inside `map`.
    start: usize,
    len: usize,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tensor({:?}, {:?})", self.dtype, self.shape)
    }
}

impl Tensor {
    /// The caller guarantees `start + len` lies inside the map and `len` matches shape × dtype.
    pub(crate) fn new(map: Arc<Mmap>, start: usize, len: usize, dtype: DType, shape: Vec<usize>) -> Self {
        debug_assert_eq!(len, shape.iter().product::<usize>() * dtype.size());
        Tensor { map, start, len, dtype, shape }
    }

    /// A tensor over bytes held in memory (random test weights, synthetic models), little-endian.
    pub fn from_bytes(dtype: DType, shape: Vec<usize>, bytes: &[u8]) -> Tensor {
        assert_eq!(bytes.len(), shape.iter().product::<usize>() * dtype.size(), "bytes do not match {shape:?}");
        let mut map = memmap2::MmapMut::map_anon(bytes.len().max(1)).expect("anonymous map");
        map[..bytes.len()].copy_from_slice(bytes);
        let map = Arc::new(map.make_read_only().expect("read-only map"));
        Tensor::new(map, 0, bytes.len(), dtype, shape)
    }

    /// A bf16 tensor holding `values` rounded to bf16.
    pub fn from_f32_as_bf16(shape: Vec<usize>, values: &[f32]) -> Tensor {
        let bytes: Vec<u8> = values.iter().flat_map(|v| bf16::from_f32(*v).to_le_bytes()).collect();
        Tensor::from_bytes(DType::BF16, shape, &bytes)
    }

    pub fn numel(&self) -> usize {
        self.shape.iter().product()
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
        let row_bytes = self.row_len() * self.dtype.size();
        let mut shape = self.shape.clone();
        shape[0] = count;
        Tensor::new(self.map.clone(), self.start + first * row_bytes, count * row_bytes, self.dtype, shape)
    }

    fn squeeze_first(mut self) -> Tensor {
        self.shape.remove(0);
        self
    }

    /// Converts elements `[offset, offset + out.len())` to f32.
    pub fn read_f32(&self, offset: usize, out: &mut [f32]) {
        let size = self.dtype.size();
        let bytes = &self.bytes()[offset * size..(offset + out.len()) * size];
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
        }
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
