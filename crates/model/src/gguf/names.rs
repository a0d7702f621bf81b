//! llama.cpp's `qwen35moe` tensor names and layouts, mapped back to the release's.
//!
//! What convert_hf_to_gguf.py does to each tensor of this architecture (Qwen3_5MoeTextModel:
//! Qwen3NextModel's transforms, _LinearAttentionVReorderBase's head order, _Qwen35MtpMixin's MTP
//! names), and its inverse here:
//! - `*norm.weight` except the GDN's gated `linear_attn.norm`: stored as 1 + w -> w = stored - 1.
//! - `linear_attn.A_log` -> `ssm_a` = -exp(A_log) -> A_log = ln(-ssm_a).
//! - `linear_attn.dt_bias` -> `ssm_dt.bias`; `conv1d.weight` [C, 1, K] squeezed to [C, K].
//! - the GDN's value heads: the release groups them by key head (v-head h reads k-head h / r,
//!   r = Hv / Hk); the converter tiles them (GGUF head j·Hk + k is release head k·r + j) in the V
//!   rows of in_proj_qkv, the rows of in_proj_z / in_proj_a / in_proj_b, A_log, dt_bias, the V
//!   channels of conv1d and the columns of out_proj. Rows are moved as stored bytes (quantized
//!   rows stay quantized); out_proj's columns move in whole value heads, as stored bytes when the
//!   type's block fits in a head, else they stay where they are and the tensor reads them in the
//!   release's order (`TiledHeads`).
//! - experts: `ffn_{gate,up,down}_exps` [E, …] (or a fused `ffn_gate_up_exps` [E, 2I, H]).
//! - MTP: block L (= the main layer count) holds the head's decoder layer; `nextn.eh_proj` is
//!   `mtp.fc`, `nextn.enorm` / `hnorm` / `shared_head_norm` its three norms.

use crate::config::ModelConfig;
use crate::tensor::{DType, Tensor, TiledHeads};
use anyhow::{bail, Result};

type Named = Vec<(String, Result<Tensor, String>)>;

/// The release name(s) and tensor(s) that GGUF tensor `name` stands for. Names this map does not
/// know pass through unchanged, so that the loader reports them as unknown.
pub fn to_release(name: &str, tensor: Result<Tensor, String>, cfg: &ModelConfig, file: &str) -> Result<Named> {
    let one = |n: String, t: Result<Tensor, String>| Ok(vec![(n, t)]);
    let top = |n: &str| format!("model.{n}");
    match name {
        "token_embd.weight" => return one(top("embed_tokens.weight"), tensor),
        "output.weight" => return one("lm_head.weight".into(), tensor),
        "output_norm.weight" => return one(top("norm.weight"), tensor.and_then(|t| minus_one(&t, name, file))),
        _ => {}
    }
    let Some((layer, rest)) = name.strip_prefix("blk.").and_then(|s| s.split_once('.')) else {
        return one(name.into(), tensor);
    };
    let Ok(layer) = layer.parse::<usize>() else { return one(name.into(), tensor) };
    let mtp = layer == cfg.num_hidden_layers;
    let p = if mtp { "mtp.layers.0.".to_string() } else { format!("model.layers.{layer}.") };
    let (hk, hv, dv) = (cfg.linear_num_key_heads, cfg.linear_num_value_heads, cfg.linear_value_head_dim);
    let key_dim = cfg.gdn_key_dim();
    // GGUF value head of release value head h (identity when Hk = Hv)
    let tiled = TiledHeads { width: dv, key_heads: hk, r: hv / hk.max(1) };
    let v_perm: Vec<usize> = (0..hv).map(|h| tiled.stored(h)).collect();
    let t = |f: &dyn Fn(Tensor) -> Result<Tensor, String>| tensor.clone().and_then(f);
    let out = match rest {
        "attn_norm.weight" => (format!("{p}input_layernorm.weight"), t(&|x| minus_one(&x, name, file))),
        "post_attention_norm.weight" => {
            (format!("{p}post_attention_layernorm.weight"), t(&|x| minus_one(&x, name, file)))
        }
        "attn_q.weight" => (format!("{p}self_attn.q_proj.weight"), tensor),
        "attn_k.weight" => (format!("{p}self_attn.k_proj.weight"), tensor),
        "attn_v.weight" => (format!("{p}self_attn.v_proj.weight"), tensor),
        "attn_output.weight" => (format!("{p}self_attn.o_proj.weight"), tensor),
        "attn_q_norm.weight" => (format!("{p}self_attn.q_norm.weight"), t(&|x| minus_one(&x, name, file))),
        "attn_k_norm.weight" => (format!("{p}self_attn.k_norm.weight"), t(&|x| minus_one(&x, name, file))),
        "attn_qkv.weight" => {
            let perm = grouped_rows(&v_perm, dv, 2 * key_dim);
            (format!("{p}linear_attn.in_proj_qkv.weight"), t(&|x| permute_rows(&x, &perm)))
        }
        "attn_gate.weight" => {
            let perm = grouped_rows(&v_perm, dv, 0);
            (format!("{p}linear_attn.in_proj_z.weight"), t(&|x| permute_rows(&x, &perm)))
        }
        "ssm_beta.weight" => (format!("{p}linear_attn.in_proj_b.weight"), t(&|x| permute_rows(&x, &v_perm))),
        "ssm_alpha.weight" => (format!("{p}linear_attn.in_proj_a.weight"), t(&|x| permute_rows(&x, &v_perm))),
        "ssm_dt.bias" => (format!("{p}linear_attn.dt_bias"), t(&|x| permute_rows(&x, &v_perm))),
        "ssm_a" => (format!("{p}linear_attn.A_log"), t(&|x| a_log(&permute_rows(&x, &v_perm)?, name, file))),
        "ssm_conv1d.weight" => {
            let perm = grouped_rows(&v_perm, dv, 2 * key_dim);
            let conv = |x: Tensor| {
                let x = permute_rows(&x, &perm)?;
                let (c, k) = (x.shape[0], x.row_len());
                Ok(Tensor::from_bytes(x.dtype, vec![c, 1, k], x.bytes()))
            };
            (format!("{p}linear_attn.conv1d.weight"), t(&conv))
        }
        "ssm_norm.weight" => (format!("{p}linear_attn.norm.weight"), tensor),
        "ssm_out.weight" => (format!("{p}linear_attn.out_proj.weight"), t(&|x| untile_columns(x, tiled))),
        "ffn_gate_inp.weight" => (format!("{p}mlp.gate.weight"), tensor),
        "ffn_gate_inp_shexp.weight" => {
            let row = |x: Tensor| Ok(Tensor::from_bytes(x.dtype, vec![1, x.numel()], x.bytes()));
            (format!("{p}mlp.shared_expert_gate.weight"), t(&row))
        }
        "ffn_gate_shexp.weight" => (format!("{p}mlp.shared_expert.gate_proj.weight"), tensor),
        "ffn_up_shexp.weight" => (format!("{p}mlp.shared_expert.up_proj.weight"), tensor),
        "ffn_down_shexp.weight" => (format!("{p}mlp.shared_expert.down_proj.weight"), tensor),
        "ffn_gate_up_exps.weight" => (format!("{p}mlp.experts.gate_up_proj"), tensor),
        "ffn_gate_exps.weight" | "ffn_up_exps.weight" | "ffn_down_exps.weight" => {
            let proj = &rest[4..rest.len() - "_exps.weight".len()]; // gate, up, down
            return Ok((0..cfg.num_experts)
                .map(|x| {
                    let expert = tensor.clone().and_then(|t| {
                        if t.shape.len() != 3 || t.shape[0] != cfg.num_experts {
                            return Err(format!(
                                "{file}: tensor `{name}` has shape {:?}, not [{}, …]",
                                t.shape, cfg.num_experts
                            ));
                        }
                        Ok(t.index(x))
                    });
                    (format!("{p}mlp.experts.{x}.{proj}_proj.weight"), expert)
                })
                .collect());
        }
        "nextn.eh_proj.weight" if mtp => ("mtp.fc.weight".into(), tensor),
        "nextn.enorm.weight" if mtp => ("mtp.pre_fc_norm_embedding.weight".into(), t(&|x| minus_one(&x, name, file))),
        "nextn.hnorm.weight" if mtp => ("mtp.pre_fc_norm_hidden.weight".into(), t(&|x| minus_one(&x, name, file))),
        "nextn.shared_head_norm.weight" if mtp => ("mtp.norm.weight".into(), t(&|x| minus_one(&x, name, file))),
        // the head shares the main embedding and lm_head (mtp_use_dedicated_embeddings: false);
        // a file carrying copies of them loses nothing when they are left out
        "nextn.embed_tokens.weight" | "nextn.shared_head_head.weight" if mtp => return Ok(Vec::new()),
        _ => (name.to_string(), tensor),
    };
    if layer > cfg.num_hidden_layers {
        bail!(
            "{file}: tensor `{name}` is in block {layer}, past the {} layers and the MTP block",
            cfg.num_hidden_layers
        );
    }
    Ok(vec![out])
}

/// Rows of `value heads × dv` (after `offset` leading rows that stay): release row order.
fn grouped_rows(v_perm: &[usize], dv: usize, offset: usize) -> Vec<usize> {
    (0..offset).chain(v_perm.iter().flat_map(|&g| (0..dv).map(move |i| offset + g * dv + i))).collect()
}

/// The tensor whose row i is row `perm[i]` of `t` (bytes as stored); a permutation of fewer rows
/// than `t` has (a shape mismatch) leaves it to the loader's shape check.
fn permute_rows(t: &Tensor, perm: &[usize]) -> Result<Tensor, String> {
    if t.shape[0] != perm.len() || perm.iter().enumerate().all(|(i, &p)| i == p) {
        return Ok(t.clone());
    }
    let row = t.dtype.bytes_for(t.row_len());
    let bytes: Vec<u8> = perm.iter().flat_map(|&r| &t.bytes()[r * row..(r + 1) * row]).copied().collect();
    Ok(Tensor::from_bytes(t.dtype, t.shape.clone(), &bytes))
}

/// A matrix [rows, key_heads · r · width] whose column groups of `width` (value heads) are in the
/// converter's tiled order, in the release's order: the groups' bytes moved where the type's
/// blocks fit inside a group (exact), else the tensor kept as stored and read through
/// `TiledHeads` (moving the values would re-quantise them; the CUDA backend reads such a matrix
/// as stored and takes its input in the tiled order).
fn untile_columns(t: Tensor, tiled: TiledHeads) -> Result<Tensor, String> {
    let TiledHeads { width, key_heads, r } = tiled;
    if t.shape.len() != 2 || t.shape[1] != key_heads * r * width || r == 1 {
        return Ok(t); // a shape mismatch is left to the loader's shape check
    }
    if !width.is_multiple_of(t.dtype.block_elems()) {
        return Ok(t.with_tiled_heads(tiled));
    }
    let (rows, cols) = (t.shape[0], t.shape[1]);
    let group = t.dtype.bytes_for(width);
    let row = t.dtype.bytes_for(cols);
    let mut bytes = Vec::with_capacity(rows * row);
    for r in 0..rows {
        for h in 0..key_heads * tiled.r {
            let g = tiled.stored(h);
            bytes.extend_from_slice(&t.bytes()[r * row + g * group..r * row + (g + 1) * group]);
        }
    }
    Ok(Tensor::from_bytes(t.dtype, t.shape.clone(), &bytes))
}

/// w = stored - 1, as F32 (exact for stored in [0.5, 2], where the converter's 1 + w lands).
fn minus_one(t: &Tensor, name: &str, file: &str) -> Result<Tensor, String> {
    map_f32(t, name, file, |v| Ok(v - 1.0))
}

/// A_log = ln(-ssm_a): the converter stored -exp(A_log), which is negative.
fn a_log(t: &Tensor, name: &str, file: &str) -> Result<Tensor, String> {
    map_f32(
        t,
        name,
        file,
        |a| if a < 0.0 { Ok((-a).ln()) } else { Err(format!("holds {a}, but ssm_a = -exp(A_log) < 0")) },
    )
}

fn map_f32(t: &Tensor, name: &str, file: &str, f: impl Fn(f32) -> Result<f32, String>) -> Result<Tensor, String> {
    let values = t.to_f32().into_iter().map(&f).collect::<Result<Vec<f32>, String>>();
    let values = values.map_err(|why| format!("{file}: tensor `{name}` {why}"))?;
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    Ok(Tensor::from_bytes(DType::F32, t.shape.clone(), &bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::GgmlType;

    /// out_proj's value heads come back in the release's order either way: as moved bytes (F32,
    /// Q8_0: blocks inside a head) or read through `TiledHeads` (Q4_K: blocks across heads), the
    /// latter reading what the dequantised, moved matrix holds.
    #[test]
    fn out_proj_columns_untile_as_bytes_or_as_reads() {
        let (rows, hk, r, width) = (3, 2, 2, 128);
        let cols = hk * r * width;
        let values: Vec<f32> = (0..rows * cols).map(|i| ((i * 7919 % 1013) as f32 / 506.0 - 1.0) * 0.1).collect();
        let stored = |t: GgmlType| {
            Tensor::from_bytes(DType::Ggml(t), vec![rows, cols], &t.quantize(&values).expect("quantisable"))
        };
        // the release's column c is stored column tiled.stored(c / width) · width + c % width
        let tiled = TiledHeads { width, key_heads: hk, r };
        let release = |stored: &[f32]| -> Vec<f32> {
            (0..rows * cols)
                .map(|i| {
                    let (row, c) = (i / cols, i % cols);
                    stored[row * cols + tiled.stored(c / width) * width + c % width]
                })
                .collect()
        };
        for t in [GgmlType::F32, GgmlType::Q8_0, GgmlType::Q4K, GgmlType::Q6K] {
            let file = stored(t);
            let got = untile_columns(file.clone(), tiled).unwrap();
            assert_eq!(got.tiled_heads.is_some(), t.block_elems() > width, "{t:?}");
            let want = release(&file.to_f32());
            assert_eq!(got.to_f32(), want, "{t:?}");
            // part of a row, across a row's end, and one row as a view
            let mut part = vec![0.0; cols + 5];
            got.read_f32(cols - 100, &mut part);
            assert_eq!(part, want[cols - 100..2 * cols - 95], "{t:?}");
            assert_eq!(got.rows(1, 1).to_f32(), want[cols..2 * cols], "{t:?}");
        }
        // grouped equals tiled when a key head has one value head
        let one = stored(GgmlType::Q4K);
        assert!(untile_columns(one, TiledHeads { width, key_heads: 4, r: 1 }).unwrap().tiled_heads.is_none());
    }
}
