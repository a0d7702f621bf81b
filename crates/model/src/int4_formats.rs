//! The 4-bit checkpoint formats solo reads, each repacked at load into solo's one int4 layout
//! (`crate::int4`): every format's packing, zero-point convention and act-order permutation is
//! resolved here, once, so nothing past the loader knows which format a checkpoint was.
//!
//! Which modules are 4-bit is read from the tensors themselves (a module has either `X.weight` or
//! the format's packed tensors), so experts-only and all-linear recipes, `modules_to_not_convert`,
//! `ignore` and GPTQ's negative `dynamic` rules need no interpretation. Per module `X`
//! (`W = X.weight` is `[out, in]`, G = groups per row = in / group_size):
//!
//! - GPTQ (`quant_method: gptq`): `X.qweight` I32 `[in/8, out]`, eight input rows per word, nibble
//!   k = input row 8i + k; `X.qzeros` I32 `[G, out/8]`, nibble k = output 8o + k; `X.scales`
//!   `[G, out]`; optional `X.g_idx` I32 `[in]`, the group of each input column (act-order when it is
//!   not i / group_size). `checkpoint_format` `gptq` (v1, the default) stores z − 1, `gptq_v2` z.
//! - AWQ (`quant_method: awq`, `version: gemm`): `X.qweight` I32 `[in, out/8]` and `X.qzeros` I32
//!   `[G, out/8]`, eight outputs per word in the order 0 2 4 6 1 3 5 7 (output 8o + k sits in
//!   nibble [0, 4, 1, 5, 2, 6, 3, 7][k]); `X.scales` `[G, out]`; z as stored.
//! - compressed-tensors (`format: pack-quantized`, int 4-bit weights): `X.weight_packed` I32
//!   `[out, ceil(in/8)]`, nibble k = input 8i + k, stored as the signed value + 8; `X.weight_scale`
//!   `[out, G]`; `X.weight_zero_point` I32 `[ceil(out/8), G]` (asymmetric only; packed along the
//!   output, signed + 8, so the stored nibble is solo's z), else z = 8; `X.weight_shape` `[2]` =
//!   `[out, in]`; optional `X.weight_g_idx` as GPTQ's.
//!
//! In all three w = (q − z) · s with q and z the unsigned nibbles (GPTQ v1: z = stored + 1).

use crate::checkpoint::StoredTensor;
use crate::int4::{GroupQuant, SYMMETRIC_ZERO};
use crate::tensor::{DType, Tensor};
use anyhow::{bail, Result};
use serde_json::Value;
use std::collections::BTreeMap;

/// How a checkpoint packs its 4-bit matrices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Int4Format {
    /// `zero_plus_one`: GPTQ v1 (`checkpoint_format: gptq`) stores each zero point minus one.
    Gptq { zero_plus_one: bool },
    /// AWQ GEMM.
    Awq,
    /// compressed-tensors `pack-quantized`.
    CompressedTensors,
}

impl Int4Format {
    /// As messages name it.
    pub fn name(self) -> &'static str {
        match self {
            Int4Format::Gptq { .. } => "GPTQ",
            Int4Format::Awq => "AWQ",
            Int4Format::CompressedTensors => "compressed-tensors",
        }
    }
}

/// The 4-bit facts of `quantization_config`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Int4Scheme {
    pub format: Int4Format,
    /// Input columns per group; `None`: one group per row (`group_size` −1, strategy `channel`).
    pub group: Option<usize>,
}

/// AWQ's nibble for output 8o + k of a word (the inverse of its packing order 0 2 4 6 1 3 5 7).
const AWQ_NIBBLE: [usize; 8] = [0, 4, 1, 5, 2, 6, 3, 7];

/// Reads a `quantization_config` whose `quant_method` is `gptq`, `awq` or `compressed-tensors`;
/// anything of them solo does not read is refused in one line naming it and `supported`.
pub fn parse_config(method: &str, q: &Value, supported: &str) -> Result<Int4Scheme> {
    let int = |keys: &[&str]| keys.iter().find_map(|k| q.get(*k)).and_then(Value::as_i64);
    let text = |key: &str| q.get(key).and_then(Value::as_str);
    let here = format!("config.json's quantization_config ({method})");
    match method {
        "gptq" | "awq" => {
            let bits = int(&["bits", "w_bit"]);
            if bits != Some(4) {
                let bits = bits.map_or("no bits".to_string(), |b| format!("bits {b}"));
                bail!("{here} has {bits}; {supported}");
            }
            let group = match int(&["group_size", "q_group_size"]) {
                Some(-1) => None,
                Some(g) if g > 0 => Some(g as usize),
                other => bail!("{here} has group_size {other:?}; {supported}"),
            };
            let format = if method == "awq" {
                let version = text("version").unwrap_or("gemm").to_lowercase();
                if version != "gemm" {
                    bail!("{here} has version `{version}`; {supported}");
                }
                Int4Format::Awq
            } else {
                let zero_plus_one = match text("checkpoint_format").or(text("format")).unwrap_or("gptq") {
                    "gptq" => true,
                    "gptq_v2" => false,
                    other => bail!("{here} has checkpoint_format `{other}`; {supported}"),
                };
                // GPTQModel's per-module overrides: a negative rule only skips modules (their
                // tensors say so); a positive one may change the packing, which solo does not follow.
                for (rule, over) in q.get("dynamic").and_then(Value::as_object).into_iter().flatten() {
                    for key in ["bits", "group_size", "sym", "desc_act"] {
                        match over.get(key) {
                            Some(v) if !rule.starts_with("-:") && Some(v) != q.get(key) => {
                                bail!("{here} has a dynamic rule `{rule}` that sets {key} {v}; {supported}")
                            }
                            _ => {}
                        }
                    }
                }
                Int4Format::Gptq { zero_plus_one }
            };
            Ok(Int4Scheme { format, group })
        }
        "compressed-tensors" => {
            let format = text("format").unwrap_or("(none)");
            if format != "pack-quantized" {
                bail!("{here} has format `{format}`; {supported}");
            }
            let groups = q.get("config_groups").and_then(Value::as_object).filter(|g| !g.is_empty());
            let Some(groups) = groups else { bail!("{here} has no config_groups; {supported}") };
            let mut group = None;
            for (i, (name, scheme)) in groups.iter().enumerate() {
                let here = format!("{here} config group `{name}`");
                let get = |key: &str| scheme.get("weights").and_then(|w| w.get(key));
                let found = |key: &str| get(key).map_or("none".to_string(), Value::to_string);
                if let Some(f) = scheme.get("format").and_then(Value::as_str).filter(|f| *f != "pack-quantized") {
                    bail!("{here} has format `{f}`; {supported}");
                }
                if get("num_bits").and_then(Value::as_i64) != Some(4)
                    || get("type").and_then(Value::as_str) != Some("int")
                {
                    bail!("{here} has {} {}-bit weights; {supported}", found("type"), found("num_bits"));
                }
                if scheme.get("input_activations").is_some_and(|a| !a.is_null()) {
                    bail!("{here} quantises activations too (not W4A16); {supported}");
                }
                let this = match get("strategy").and_then(Value::as_str) {
                    Some("group") => match get("group_size").and_then(Value::as_u64) {
                        Some(g) if g > 0 => Some(g as usize),
                        _ => bail!("{here} has strategy group with group_size {}; {supported}", found("group_size")),
                    },
                    Some("channel") => None,
                    _ => bail!("{here} has strategy {}; {supported}", found("strategy")),
                };
                if i > 0 && this != group {
                    bail!(
                        "{here} has another group size than the first group; solo reads one group size per checkpoint"
                    );
                }
                group = this;
            }
            Ok(Int4Scheme { format: Int4Format::CompressedTensors, group })
        }
        other => bail!("config.json's quantization_config has quant_method `{other}`; {supported}"),
    }
}

/// The tensor names of a module stored 4-bit in any format solo reads (to tell a 4-bit module
/// from a missing one).
pub const PACKED_SUFFIXES: [&str; 2] = ["qweight", "weight_packed"];

/// Takes module `module`'s 4-bit tensors out of `left` and repacks them, when the checkpoint
/// stores it 4-bit in `scheme`'s format (`Ok(None)` when it has none of them). `shape` is
/// `[out, in]`, what `config.json` implies for `{module}.weight`.
pub(crate) fn take(
    left: &mut BTreeMap<String, StoredTensor>,
    module: &str,
    shape: &[usize],
    scheme: &Int4Scheme,
) -> Result<Option<Tensor>> {
    let packed = match scheme.format {
        Int4Format::CompressedTensors => "weight_packed",
        _ => "qweight",
    };
    if !left.contains_key(&format!("{module}.{packed}")) {
        return Ok(None);
    }
    let mut parts = Parts { left, module, file: String::new() };
    let &[out, inp] = shape else {
        let file = parts.left[&format!("{module}.{packed}")].file.clone();
        bail!("{file}: `{module}.{packed}` is 4-bit but `{module}.weight` is {}-D ({shape:?})", shape.len());
    };
    let group = scheme.group.unwrap_or(inp);
    let groups = inp / group;
    let (packed, zeros, scales, perm) = match scheme.format {
        Int4Format::Gptq { zero_plus_one } => {
            let qweight = parts.need("qweight", Some(DType::I32))?;
            parts.file = qweight.file.clone();
            parts.divides(inp, group, "group_size")?;
            parts.divides(inp, 8, "eight inputs per word of qweight")?;
            parts.divides(out, 8, "eight outputs per word of qzeros")?;
            check_shape(&qweight, &[inp / 8, out])?;
            let qzeros = parts.need("qzeros", Some(DType::I32))?;
            check_shape(&qzeros, &[groups, out / 8])?;
            let scales = parts.scales("scales", &[groups, out])?;
            let perm = parts.g_idx("g_idx", inp, groups)?.map(act_order);
            let qz = I32s(qzeros.t.bytes());
            let zeros = per_row(out, groups, |o, g| qz.nibble(g * (out / 8) + o / 8, o % 8) + zero_plus_one as u8);
            let qw = I32s(qweight.t.bytes());
            let packed = repack(out, inp, perm.as_deref(), |o, i8| qw.word(i8 * out + o));
            (packed, zeros, per_row(out, groups, |o, g| scales[g * out + o]), perm)
        }
        Int4Format::Awq => {
            let qweight = parts.need("qweight", Some(DType::I32))?;
            parts.file = qweight.file.clone();
            parts.divides(inp, group, "group_size")?;
            parts.divides(out, 8, "eight outputs per word of qweight and qzeros")?;
            parts.divides(inp, 8, "solo packs eight inputs per word")?;
            check_shape(&qweight, &[inp, out / 8])?;
            let qzeros = parts.need("qzeros", Some(DType::I32))?;
            check_shape(&qzeros, &[groups, out / 8])?;
            let scales = parts.scales("scales", &[groups, out])?;
            let qz = I32s(qzeros.t.bytes());
            let zeros = per_row(out, groups, |o, g| qz.nibble(g * (out / 8) + o / 8, AWQ_NIBBLE[o % 8]));
            let qw = I32s(qweight.t.bytes());
            // the 8 inputs of a word sit in 8 words of qweight, each output at its nibble
            let word = |o: usize, i8: usize| {
                let at = |k: usize| qw.nibble((8 * i8 + k) * (out / 8) + o / 8, AWQ_NIBBLE[o % 8]) as u32;
                (0..8).fold(0u32, |w, k| w | at(k) << (4 * k))
            };
            let packed = repack(out, inp, None, word);
            (packed, zeros, per_row(out, groups, |o, g| scales[g * out + o]), None)
        }
        Int4Format::CompressedTensors => {
            let packed = parts.need("weight_packed", Some(DType::I32))?;
            parts.file = packed.file.clone();
            let stored = parts.need("weight_shape", None)?;
            let dims = if matches!(stored.t.dtype, DType::I32 | DType::I64) { stored.t.to_f32() } else { vec![] };
            if dims != [out as f32, inp as f32] {
                bail!(
                    "{}: `{}` is {} {:?} holding {dims:?} but config.json implies [{out}, {inp}]",
                    stored.file,
                    stored.name,
                    stored.t.dtype.name(),
                    stored.t.shape
                );
            }
            parts.divides(inp, group, "group_size")?;
            parts.divides(inp, 8, "eight inputs per word of weight_packed")?;
            let words = inp / 8;
            check_shape(&packed, &[out, words])?;
            let scales = parts.scales("weight_scale", &[out, groups])?;
            let zeros = match parts.optional("weight_zero_point", Some(DType::I32))? {
                Some(zp) => {
                    check_shape(&zp, &[out.div_ceil(8), groups])?;
                    let zp = I32s(zp.t.bytes());
                    per_row(out, groups, |o, g| zp.nibble((o / 8) * groups + g, o % 8))
                }
                None => vec![SYMMETRIC_ZERO; out * groups], // symmetric: dropped below
            };
            let perm = parts.g_idx("weight_g_idx", inp, groups)?.map(act_order);
            if perm.is_none() {
                // its rows are solo's layout already: the file's bytes, viewed as nibbles
                let quant = GroupQuant { group, scales, zeros: Some(zeros), perm: None };
                let quant = checked(quant, out, inp, &parts.file, module)?;
                return Ok(Some(packed.t.into_int4(out, inp, quant)));
            }
            let w = I32s(packed.t.bytes());
            let packed = repack(out, inp, perm.as_deref(), |o, i8| w.word(o * words + i8));
            (packed, zeros, scales, perm)
        }
    };
    let quant = checked(GroupQuant { group, scales, zeros: Some(zeros), perm }, out, inp, &parts.file, module)?;
    Ok(Some(Tensor::from_int4(out, inp, &packed, quant)))
}

/// The module's `GroupQuant`, checked, with its zero points dropped when all are 8.
fn checked(mut quant: GroupQuant, out: usize, inp: usize, file: &str, module: &str) -> Result<GroupQuant> {
    if quant.zeros.as_ref().is_some_and(|z| z.iter().all(|&z| z == SYMMETRIC_ZERO)) {
        quant.zeros = None;
    }
    if let Err(e) = quant.check(out, inp) {
        bail!("{file}: `{module}` as int4: {e}");
    }
    Ok(quant)
}

/// Act-order's stored column order: the input columns sorted by group (stably), so that each group
/// is contiguous and stored column j is in group j / group.
fn act_order(g_idx: Vec<u32>) -> Vec<u32> {
    let mut perm: Vec<u32> = (0..g_idx.len() as u32).collect();
    perm.sort_by_key(|&i| g_idx[i as usize]);
    perm
}

/// The packed rows of solo's layout from `word(o, i8)`: the 32 bits of output o's input columns
/// 8·i8 .. 8·i8 + 8, column 8·i8 + k in nibble k (which, little-endian, is solo's byte order).
/// With act-order the stored columns follow `perm`, nibble by nibble. Large matrices are split by
/// rows over the cores (a full checkpoint repacks ~30,000 expert matrices at load).
fn repack(out: usize, inp: usize, perm: Option<&[u32]>, word: impl Fn(usize, usize) -> u32 + Sync) -> Vec<u8> {
    let row_bytes = inp / 2;
    let fill = |o: usize, row: &mut [u8]| match perm {
        None => {
            for (i8, bytes) in row.chunks_exact_mut(4).enumerate() {
                bytes.copy_from_slice(&word(o, i8).to_le_bytes());
            }
        }
        Some(p) => {
            let q = |j: usize| ((word(o, p[j] as usize / 8) >> (4 * (p[j] % 8))) & 0xf) as u8;
            for (b, byte) in row.iter_mut().enumerate() {
                *byte = q(2 * b) | q(2 * b + 1) << 4;
            }
        }
    };
    let mut packed = vec![0u8; out * row_bytes];
    let threads = if out * inp < 1 << 18 { 1 } else { std::thread::available_parallelism().map_or(1, |n| n.get()) };
    let rows_per_thread = out.div_ceil(threads).max(1);
    std::thread::scope(|s| {
        for (t, chunk) in packed.chunks_mut(rows_per_thread * row_bytes).enumerate() {
            let fill = &fill;
            s.spawn(move || {
                for (k, row) in chunk.chunks_exact_mut(row_bytes).enumerate() {
                    fill(t * rows_per_thread + k, row);
                }
            });
        }
    });
    packed
}

/// `[out, groups]` row-major from `f(o, g)`.
fn per_row<T>(out: usize, groups: usize, f: impl Fn(usize, usize) -> T) -> Vec<T> {
    (0..out * groups).map(|k| f(k / groups, k % groups)).collect()
}

/// Little-endian i32 words of a tensor's bytes, read as 8 nibbles each.
#[derive(Clone, Copy)]
struct I32s<'a>(&'a [u8]);

impl I32s<'_> {
    fn word(&self, i: usize) -> u32 {
        u32::from_le_bytes([self.0[4 * i], self.0[4 * i + 1], self.0[4 * i + 2], self.0[4 * i + 3]])
    }

    fn nibble(&self, word: usize, k: usize) -> u8 {
        (self.0[4 * word + k / 2] >> (4 * (k % 2))) & 0xf
    }
}

/// One stored tensor of a module and where it is, for messages.
struct Part {
    t: Tensor,
    name: String,
    file: String,
}

/// The 4-bit tensors of one module, taken by suffix, each fact checked with the file and tensor
/// named.
struct Parts<'a> {
    left: &'a mut BTreeMap<String, StoredTensor>,
    module: &'a str,
    /// The file of the packed weight, for messages about the module as a whole.
    file: String,
}

impl Parts<'_> {
    /// `{module}.{suffix}` if stored, of `dtype` if one is given.
    fn optional(&mut self, suffix: &str, dtype: Option<DType>) -> Result<Option<Part>> {
        let name = format!("{}.{suffix}", self.module);
        let Some(stored) = self.left.remove(&name) else { return Ok(None) };
        let t = stored.tensor.map_err(anyhow::Error::msg)?;
        match dtype {
            Some(d) if t.dtype != d => {
                bail!("{}: `{name}` is {}; solo reads it as {}", stored.file, t.dtype.name(), d.name())
            }
            _ => Ok(Some(Part { t, name, file: stored.file })),
        }
    }

    fn need(&mut self, suffix: &str, dtype: Option<DType>) -> Result<Part> {
        match self.optional(suffix, dtype)? {
            Some(p) => Ok(p),
            None => bail!("{}: `{m}` is stored 4-bit but `{m}.{suffix}` is missing", self.file, m = self.module),
        }
    }

    fn divides(&self, width: usize, by: usize, what: &str) -> Result<()> {
        if by == 0 || !width.is_multiple_of(by) {
            bail!("{}: `{}` has a width of {width}, not a multiple of {by} ({what})", self.file, self.module);
        }
        Ok(())
    }

    /// Float scales of `shape`, finite, as f32 (row-major as stored).
    fn scales(&mut self, suffix: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let p = self.need(suffix, None)?;
        if !matches!(p.t.dtype, DType::BF16 | DType::F16 | DType::F32) {
            bail!("{}: `{}` is {}; scales are BF16, F16 or F32", p.file, p.name, p.t.dtype.name());
        }
        check_shape(&p, shape)?;
        let values = p.t.to_f32();
        if let Some(bad) = values.iter().find(|v| !v.is_finite()) {
            bail!("{}: `{}` holds a scale of {bad}", p.file, p.name);
        }
        Ok(values)
    }

    /// The group of each input column, when stored and not the plain i / group: in range,
    /// `inp / groups` columns per group.
    fn g_idx(&mut self, suffix: &str, inp: usize, groups: usize) -> Result<Option<Vec<u32>>> {
        let Some(p) = self.optional(suffix, Some(DType::I32))? else { return Ok(None) };
        let (file, name) = (&p.file, &p.name);
        if p.t.shape != [inp] {
            bail!("{file}: `{name}` has shape {:?} but the module has {inp} input columns", p.t.shape);
        }
        let g: Vec<i32> = p.t.bytes().chunks_exact(4).map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        if let Some((i, v)) = g.iter().enumerate().find(|(_, &v)| v < 0 || v as usize >= groups) {
            bail!("{file}: `{name}`[{i}] is {v}, out of range for {groups} groups");
        }
        let size = inp / groups;
        let mut count = vec![0usize; groups];
        g.iter().for_each(|&v| count[v as usize] += 1);
        if let Some((k, n)) = count.iter().enumerate().find(|(_, &n)| n != size) {
            bail!("{file}: `{name}` puts {n} columns in group {k}; solo reads groups of exactly {size}");
        }
        let trivial = g.iter().enumerate().all(|(i, &v)| v as usize == i / size);
        Ok((!trivial).then(|| g.iter().map(|&v| v as u32).collect()))
    }
}

fn check_shape(p: &Part, want: &[usize]) -> Result<()> {
    if p.t.shape != want {
        bail!(
            "{}: `{}` has shape {:?} but the module's [out, in] and group size need {want:?}",
            p.file,
            p.name,
            p.t.shape
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::int4::quantize_rtn;

    /// `group_size` −1 (one group per row) in GPTQ's packing, written here from solo's own
    /// quantiser: the loader reads back the same matrix.
    #[test]
    fn gptq_with_one_group_per_row_reads_back() {
        let (out, inp) = (16, 40);
        let values: Vec<f32> = (0..out * inp).map(|i| (i * 7919 % 1000) as f32 / 500.0 - 1.0).collect();
        let (packed, quant) = quantize_rtn(out, inp, &values, inp, false);
        let want = Tensor::from_int4(out, inp, &packed, quant.clone()).to_f32();
        let q = |o: usize, i: usize| (packed[(o * inp + i) / 2] >> (4 * (i % 2))) & 0xf;
        let zeros = quant.zeros.as_ref().unwrap();
        // qweight [in/8, out]: nibble k of word (i8, o) is input 8·i8 + k; v2 zero points as stored
        let qweight: Vec<u8> = (0..inp / 8 * out)
            .flat_map(|w| {
                (0..8).fold(0u32, |acc, k| acc | (q(w % out, 8 * (w / out) + k) as u32) << (4 * k)).to_le_bytes()
            })
            .collect();
        let qzeros: Vec<u8> = (0..out / 8)
            .flat_map(|w| (0..8).fold(0u32, |acc, k| acc | (zeros[8 * w + k] as u32) << (4 * k)).to_le_bytes())
            .collect();
        let scales: Vec<u8> = quant.scales.iter().flat_map(|s| s.to_le_bytes()).collect();
        let stored = |dtype, shape: Vec<usize>, bytes: &[u8]| StoredTensor {
            file: "model.safetensors".into(),
            tensor: Ok(Tensor::from_bytes(dtype, shape, bytes)),
        };
        let mut left = BTreeMap::new();
        left.insert("m.qweight".to_string(), stored(DType::I32, vec![inp / 8, out], &qweight));
        left.insert("m.qzeros".to_string(), stored(DType::I32, vec![1, out / 8], &qzeros));
        left.insert("m.scales".to_string(), stored(DType::F32, vec![1, out], &scales));
        let scheme = Int4Scheme { format: Int4Format::Gptq { zero_plus_one: false }, group: None };
        let t = take(&mut left, "m", &[out, inp], &scheme).unwrap().unwrap();
        assert!(left.is_empty());
        assert_eq!(t.int4().unwrap().1.group, inp);
        assert_eq!(t.to_f32(), want);
    }
}
