//! The safetensors files of a Hugging Face checkpoint directory, memory-mapped.
//!
//! Accepts a single `model.safetensors` or shards listed by `model.safetensors.index.json`.
//! Only headers are parsed here; tensor data stays in the page cache until a backend reads it.

use crate::tensor::{DType, Tensor};
use anyhow::{bail, Context, Result};
use memmap2::Mmap;
use safetensors::{Dtype as StDtype, SafeTensors};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One tensor of the checkpoint and the file it came from (for error messages).
#[derive(Clone, Debug)]
pub struct StoredTensor {
    pub file: String,
    pub tensor: Result<Tensor, String>,
}

/// Every tensor of every safetensors file of a checkpoint, by name.
///
/// A tensor whose dtype solo cannot read (say, F8_E5M2 or a packed int4) is kept with the
/// reason as its `Err`, so the error surfaces only if a backend actually asks for it.
pub struct Checkpoint {
    pub dir: PathBuf,
    pub tensors: BTreeMap<String, StoredTensor>,
}

impl Checkpoint {
    pub fn open(dir: &Path) -> Result<Self> {
        if !dir.is_dir() {
            bail!("model directory {} does not exist", dir.display());
        }
        let index_path = dir.join("model.safetensors.index.json");
        let files: Vec<String> = if index_path.exists() {
            shard_files(&index_path)?
        } else if dir.join("model.safetensors").exists() {
            vec!["model.safetensors".to_string()]
        } else {
            bail!("{}: no model.safetensors and no model.safetensors.index.json", dir.display());
        };
        let mut tensors = BTreeMap::new();
        for file in &files {
            if !dir.join(file).exists() && index_path.exists() {
                bail!("{file}: named by model.safetensors.index.json but not in {}", dir.display());
            }
            for (name, tensor) in read_file(&dir.join(file), file)? {
                if let Some(prev) = tensors.insert(name.clone(), StoredTensor { file: file.clone(), tensor }) {
                    bail!("tensor `{name}` appears in both {} and {file}", prev.file);
                }
            }
        }
        if index_path.exists() {
            check_index_matches(&index_path, &tensors)?;
        }
        Ok(Checkpoint { dir: dir.to_path_buf(), tensors })
    }
}

/// The distinct shard files named by an index, in order of first appearance.
fn shard_files(index_path: &Path) -> Result<Vec<String>> {
    let map = read_weight_map(index_path)?;
    let mut seen = BTreeSet::new();
    let mut files = Vec::new();
    for file in map.values() {
        if seen.insert(file.clone()) {
            files.push(file.clone());
        }
    }
    if files.is_empty() {
        bail!("{}: weight_map is empty", index_path.display());
    }
    Ok(files)
}

fn read_weight_map(index_path: &Path) -> Result<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(index_path).with_context(|| format!("cannot read {}", index_path.display()))?;
    #[derive(serde::Deserialize)]
    struct Index {
        weight_map: BTreeMap<String, String>,
    }
    let index: Index =
        serde_json::from_str(&text).with_context(|| format!("{}: not a safetensors index", index_path.display()))?;
    Ok(index.weight_map)
}

/// Every tensor the index names must be in the file it names.
fn check_index_matches(index_path: &Path, tensors: &BTreeMap<String, StoredTensor>) -> Result<()> {
    for (name, file) in read_weight_map(index_path)? {
        match tensors.get(&name) {
            Some(t) if t.file == file => {}
            Some(t) => bail!("{}: tensor `{name}` is listed in {file} but stored in {}", index_path.display(), t.file),
            None => bail!("{file}: tensor `{name}` is listed in the index but missing from the file"),
        }
    }
    Ok(())
}

type FileTensors = Vec<(String, Result<Tensor, String>)>;

/// Maps one safetensors file and returns views of its tensors, checking that each lies inside it.
pub(crate) fn read_file(path: &Path, name: &str) -> Result<FileTensors> {
    let file = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    // SAFETY: the map is read-only; a checkpoint changing under a running engine is outside our contract.
    let map = unsafe { Mmap::map(&file) }.with_context(|| format!("cannot map {}", path.display()))?;
    let map = Arc::new(map);
    let (header_len, metadata) = SafeTensors::read_metadata(&map[..]).map_err(|e| why_unreadable(&map, name, e))?;
    let data_start = 8 + header_len;
    let data_len = map.len() - data_start;
    let mut out = Vec::new();
    for (tensor_name, info) in metadata.tensors() {
        let (begin, end) = info.data_offsets;
        if end > data_len {
            bail!(
                "{name}: tensor `{tensor_name}` ends at byte {end} of the data but the file holds only {data_len} (truncated file?)"
            );
        }
        let tensor = match info.dtype {
            StDtype::BF16 => Ok(DType::BF16),
            StDtype::F16 => Ok(DType::F16),
            StDtype::F32 => Ok(DType::F32),
            StDtype::F8_E4M3 => Ok(DType::F8E4M3),
            StDtype::I32 => Ok(DType::I32),
            StDtype::I64 => Ok(DType::I64),
            other => Err(format!(
                "{name}: tensor `{tensor_name}` has dtype {other:?}; solo reads BF16, F16, F32, F8_E4M3 (with 128×128 block scales) and I32/I64 (packed int4 and its indices)"
            )),
        }
        .map(|dtype| Tensor::new(map.clone(), data_start + begin, end - begin, dtype, info.shape.clone()));
        out.push((tensor_name, tensor));
    }
    Ok(out)
}

/// Why `read_metadata` refused a file, in the user's terms. safetensors reports a truncated file
/// only as "incomplete metadata"; this names the first tensor whose data is cut off instead.
fn why_unreadable(bytes: &[u8], name: &str, err: safetensors::SafeTensorError) -> anyhow::Error {
    let Some(prefix) = bytes.get(..8) else {
        return anyhow::anyhow!(
            "{name}: the file holds {} bytes, too few for a safetensors header (truncated or empty file?)",
            bytes.len()
        );
    };
    let header_len = u64::from_le_bytes(prefix.try_into().expect("8 bytes"));
    let after_prefix = (bytes.len() - 8) as u64;
    // safetensors' own cap on the header (100 MB): a larger length means it is not safetensors at all.
    if header_len > 100_000_000 {
        return anyhow::anyhow!(
            "{name}: not a safetensors file (its first 8 bytes give a header length of {header_len})"
        );
    }
    if header_len > after_prefix {
        return anyhow::anyhow!(
            "{name}: the safetensors header is {header_len} bytes but the file holds only {after_prefix} after the length prefix (truncated file?)"
        );
    }
    let data_len = after_prefix - header_len;
    let header: Option<BTreeMap<String, serde_json::Value>> =
        serde_json::from_slice(&bytes[8..8 + header_len as usize]).ok();
    let mut cut: Vec<(u64, &str)> = header
        .iter()
        .flatten()
        .filter_map(|(tensor, info)| {
            let end = info.get("data_offsets")?.get(1)?.as_u64()?;
            (end > data_len).then_some((end, tensor.as_str()))
        })
        .collect();
    cut.sort();
    match cut.first() {
        Some(&(end, tensor)) => {
            let more = match cut.len() - 1 {
                0 => String::new(),
                n => format!("; {n} more tensor(s) after it are cut off too"),
            };
            anyhow::anyhow!(
                "{name}: tensor `{tensor}` ends at byte {end} of the data but the file holds only {data_len} (truncated file?{more})"
            )
        }
        None => anyhow::anyhow!("{name}: not a valid safetensors file ({err})"),
    }
}
