//! The GGUF container (v2 and v3, little-endian): header, metadata, tensor table, and the
//! tensors as views into the memory-mapped file.
//!
//! Layout: magic `GGUF`, version u32, tensor count u64, metadata count u64; each metadata entry a
//! string key, a u32 value type and the value; each tensor a string name, u32 dims, u64 extents
//! (ggml order: the fastest-varying first), u32 ggml type, u64 offset into the data section, which
//! starts at the next multiple of `general.alignment` (32 by default) after the table. Every read
//! is bounds-checked, so a truncated or corrupt file is refused with the file named and what was
//! being read, never a panic.

use super::types::{GgmlType, READ_TYPES};
use crate::tensor::{DType, Tensor};
use anyhow::{bail, Context, Result};
use memmap2::Mmap;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    UInt(u64),
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    Array(Vec<Value>),
}

impl Value {
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::UInt(v) => Some(v),
            Value::Int(v) if v >= 0 => Some(v as u64),
            _ => None,
        }
    }
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::Float(v) => Some(v),
            Value::UInt(v) => Some(v as f64),
            Value::Int(v) => Some(v as f64),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// One tensor of the table.
pub struct TensorInfo {
    pub name: String,
    /// Row-major shape (the file's extents reversed): `[rows, …, cols]`.
    pub shape: Vec<usize>,
    /// The view, or why solo cannot read it (an unknown type), kept until someone asks.
    pub tensor: Result<Tensor, String>,
}

/// One GGUF file, parsed.
pub struct GgufFile {
    /// The file name, for messages.
    pub name: String,
    pub metadata: BTreeMap<String, Value>,
    pub tensors: Vec<TensorInfo>,
}

const MAGIC: &[u8; 4] = b"GGUF";

impl GgufFile {
    pub fn open(path: &Path) -> Result<GgufFile> {
        let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
        let file = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        // SAFETY: read-only map; a file changing under a running engine is outside our contract.
        let map = Arc::new(unsafe { Mmap::map(&file) }.with_context(|| format!("cannot map {}", path.display()))?);
        parse(map, &name).with_context(|| name.clone())
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.get(key)
    }

    pub fn architecture(&self) -> Option<&str> {
        self.get("general.architecture").and_then(Value::as_str)
    }
}

/// A cursor that names what it was reading when the bytes ran out.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize, what: &dyn Fn() -> String) -> Result<&[u8]> {
        match self.at.checked_add(n).filter(|&end| end <= self.bytes.len()) {
            Some(end) => {
                let out = &self.bytes[self.at..end];
                self.at = end;
                Ok(out)
            }
            None => bail!("the file ends at byte {} while reading {} (truncated file?)", self.bytes.len(), what()),
        }
    }
    fn u32(&mut self, what: &dyn Fn() -> String) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4, what)?.try_into().expect("4 bytes")))
    }
    fn u64(&mut self, what: &dyn Fn() -> String) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8, what)?.try_into().expect("8 bytes")))
    }
    fn string(&mut self, what: &dyn Fn() -> String) -> Result<String> {
        let len = self.u64(what)?;
        if len > self.bytes.len() as u64 {
            bail!("{} claims a string of {len} bytes, more than the whole file (corrupt file?)", what());
        }
        let raw = self.take(len as usize, what)?;
        // Token strings may hold invalid UTF-8 (llama.cpp keeps them as bytes); keep what we can.
        Ok(String::from_utf8_lossy(raw).into_owned())
    }

    fn value(&mut self, vtype: u32, what: &dyn Fn() -> String, depth: usize) -> Result<Value> {
        Ok(match vtype {
            0 => Value::UInt(self.take(1, what)?[0] as u64),
            1 => Value::Int(self.take(1, what)?[0] as i8 as i64),
            2 => Value::UInt(u16::from_le_bytes(self.take(2, what)?.try_into().expect("2")) as u64),
            3 => Value::Int(i16::from_le_bytes(self.take(2, what)?.try_into().expect("2")) as i64),
            4 => Value::UInt(self.u32(what)? as u64),
            5 => Value::Int(self.u32(what)? as i32 as i64),
            6 => Value::Float(f32::from_bits(self.u32(what)?) as f64),
            7 => Value::Bool(self.take(1, what)?[0] != 0),
            8 => Value::Str(self.string(what)?),
            9 if depth == 0 => {
                let item = self.u32(what)?;
                let len = self.u64(what)?;
                if len > self.bytes.len() as u64 {
                    bail!("{} claims an array of {len} items, more than the file's bytes (corrupt file?)", what());
                }
                (0..len).map(|_| self.value(item, what, depth + 1)).collect::<Result<Vec<_>>>().map(Value::Array)?
            }
            10 => Value::UInt(self.u64(what)?),
            11 => Value::Int(self.u64(what)? as i64),
            12 => Value::Float(f64::from_bits(self.u64(what)?)),
            other => bail!("{} has value type {other}, which GGUF does not define (corrupt file?)", what()),
        })
    }
}

fn parse(map: Arc<Mmap>, file: &str) -> Result<GgufFile> {
    let mut c = Cursor { bytes: &map[..], at: 0 };
    let magic = c.take(4, &|| "the magic".into())?;
    if magic != MAGIC {
        bail!("not a GGUF file (it starts with {:?}, a GGUF file with \"GGUF\")", String::from_utf8_lossy(magic));
    }
    let version = c.u32(&|| "the version".into())?;
    if !(2..=3).contains(&version) {
        let hint = if version.swap_bytes() <= 3 { ", a big-endian file" } else { "" };
        bail!("GGUF version {version}{hint}; solo reads little-endian GGUF v2 and v3");
    }
    let n_tensors = c.u64(&|| "the tensor count".into())?;
    let n_kv = c.u64(&|| "the metadata count".into())?;
    let mut metadata = BTreeMap::new();
    for i in 0..n_kv {
        let key = c.string(&|| format!("metadata entry {i}'s key"))?;
        let what = || format!("metadata `{key}`");
        let vtype = c.u32(&what)?;
        let value = c.value(vtype, &what, 0)?;
        metadata.insert(key, value);
    }
    let alignment = match metadata.get("general.alignment") {
        None => 32,
        Some(v) => match v.as_u64() {
            Some(a) if a > 0 && a.is_power_of_two() => a as usize,
            _ => bail!("general.alignment is {v:?}; GGUF needs a power of two"),
        },
    };
    let mut table = Vec::new();
    for i in 0..n_tensors {
        let name = c.string(&|| format!("tensor {i}'s name"))?;
        let what = || format!("tensor `{name}`'s entry");
        let n_dims = c.u32(&what)?;
        if n_dims == 0 || n_dims > 4 {
            bail!("tensor `{name}` has {n_dims} dimensions; GGUF tensors have 1 to 4");
        }
        let dims = (0..n_dims).map(|_| c.u64(&what).map(|d| d as usize)).collect::<Result<Vec<_>>>()?;
        let ggml_type = c.u32(&what)?;
        let offset = c.u64(&what)? as usize;
        table.push((name, dims, ggml_type, offset));
    }
    let data_start = c.at.div_ceil(alignment) * alignment;
    let mut tensors = Vec::new();
    for (name, dims, ggml_type, offset) in table {
        let shape: Vec<usize> = dims.iter().rev().copied().collect();
        let elems = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        let tensor = match GgmlType::from_id(ggml_type) {
            Err(what) => Err(format!("{file}: tensor `{name}` has {what}; solo reads {READ_TYPES}")),
            Ok(t) => {
                if dims[0] % t.block_elems() != 0 {
                    bail!(
                        "tensor `{name}` is {} with rows of {} elements, not whole blocks of {}",
                        t.name(),
                        dims[0],
                        t.block_elems()
                    );
                }
                let Some(len) = elems.map(|n| t.bytes_for(n)) else {
                    bail!("tensor `{name}` has extents {dims:?}, too large (corrupt file?)");
                };
                let end = data_start.checked_add(offset).and_then(|s| s.checked_add(len));
                match end {
                    Some(end) if end <= map.len() => {}
                    _ => bail!(
                        "tensor `{name}` ({} {shape:?}) ends at byte {} but the file holds only {} (truncated file?)",
                        t.name(),
                        data_start as u128 + offset as u128 + len as u128,
                        map.len()
                    ),
                }
                let dtype = match t {
                    GgmlType::F32 => DType::F32,
                    GgmlType::F16 => DType::F16,
                    GgmlType::BF16 => DType::BF16,
                    q => DType::Ggml(q),
                };
                Ok(Tensor::new(map.clone(), data_start + offset, len, dtype, shape.clone()))
            }
        };
        tensors.push(TensorInfo { name, shape, tensor });
    }
    Ok(GgufFile { name: file.to_string(), metadata, tensors })
}
