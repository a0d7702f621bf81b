//! A GGUF file of this architecture with random weights, in the shape llama.cpp's converter and
//! `llama-quantize` give the release (tensor names, metadata, a Q4_K_M or Q8_0 type mix): for
//! speed runs of solo and llama.cpp on the same file where no real checkpoint is (the GPU
//! machine), and for tests that need whole layers of one type. The weights are random blocks with
//! sane scales; the tokenizer is placeholder tokens (`t0`, `t1`, …, the special ones named).

use super::types::GgmlType;
use super::ARCH;
use crate::config::{LayerKind, ModelConfig};
use anyhow::{ensure, Context, Result};
use half::f16;
use std::io::{BufWriter, Seek, Write};
use std::path::Path;

/// The type mixes `write` makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mix {
    /// llama.cpp's Q4_K_M (`llama-quant.cpp`): Q4_K matrices; Q6_K for the output matrix, the
    /// down projections (routed and shared) of the layers `use_more_bits` picks (20 of 40) and
    /// `attn_v` of the attention layers it picks (among the attention layers); Q5_K for the
    /// linear-attention `attn_qkv`; `ssm_alpha`/`ssm_beta`, the routers and conv1d unquantised.
    Q4KM,
    /// Every matrix Q8_0.
    Q8_0,
}

const ALIGN: usize = 32;

/// llama.cpp's `use_more_bits`: the first and last eighth of the layers, and every third between.
fn use_more_bits(i: usize, n: usize) -> bool {
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

/// One tensor: its GGUF name, its shape as solo writes shapes (`[rows, …, cols]`), its type.
struct Spec {
    name: String,
    shape: Vec<usize>,
    ty: GgmlType,
}

fn tensors(cfg: &ModelConfig, mix: Mix) -> Vec<Spec> {
    let (h, n) = (cfg.hidden_size, cfg.num_hidden_layers);
    let q = |t: GgmlType| if mix == Mix::Q8_0 { GgmlType::Q8_0 } else { t };
    let more = |i: usize, n: usize| if use_more_bits(i, n) { GgmlType::Q6K } else { GgmlType::Q4K };
    let attention_layers = cfg.layer_types.iter().filter(|k| **k == LayerKind::FullAttention).count();
    let (f32, q4) = (GgmlType::F32, GgmlType::Q4K);
    let mut out = Vec::new();
    let mut add = |name: String, shape: Vec<usize>, ty: GgmlType| out.push(Spec { name, shape, ty });
    add("token_embd.weight".into(), vec![cfg.vocab_size, h], q(q4));
    let mut attention_index = 0;
    for i in 0..n {
        let p = |s: &str| format!("blk.{i}.{s}");
        add(p("attn_norm.weight"), vec![h], f32);
        add(p("post_attention_norm.weight"), vec![h], f32);
        match cfg.layer_types[i] {
            LayerKind::GatedDeltaNet => {
                let (hk, hv, dk, dv) = (
                    cfg.linear_num_key_heads,
                    cfg.linear_num_value_heads,
                    cfg.linear_key_head_dim,
                    cfg.linear_value_head_dim,
                );
                let conv = 2 * hk * dk + hv * dv;
                add(p("attn_qkv.weight"), vec![conv, h], q(GgmlType::Q5K));
                add(p("attn_gate.weight"), vec![hv * dv, h], q(q4));
                add(p("ssm_beta.weight"), vec![hv, h], f32);
                add(p("ssm_alpha.weight"), vec![hv, h], f32);
                add(p("ssm_dt.bias"), vec![hv], f32);
                add(p("ssm_a"), vec![hv], f32);
                add(p("ssm_conv1d.weight"), vec![conv, cfg.linear_conv_kernel_dim], f32);
                add(p("ssm_norm.weight"), vec![dv], f32);
                add(p("ssm_out.weight"), vec![h, hv * dv], q(q4));
            }
            LayerKind::FullAttention => {
                let (heads, kv, d) = (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim);
                add(p("attn_q.weight"), vec![2 * heads * d, h], q(q4));
                add(p("attn_k.weight"), vec![kv * d, h], q(q4));
                add(p("attn_v.weight"), vec![kv * d, h], q(more(attention_index, attention_layers)));
                add(p("attn_output.weight"), vec![h, heads * d], q(q4));
                add(p("attn_q_norm.weight"), vec![d], f32);
                add(p("attn_k_norm.weight"), vec![d], f32);
                attention_index += 1;
            }
        }
        let (e, ei, si) = (cfg.num_experts, cfg.moe_intermediate_size, cfg.shared_expert_intermediate_size);
        add(p("ffn_gate_inp.weight"), vec![e, h], f32);
        add(p("ffn_gate_inp_shexp.weight"), vec![h], f32);
        add(p("ffn_gate_shexp.weight"), vec![si, h], q(q4));
        add(p("ffn_up_shexp.weight"), vec![si, h], q(q4));
        add(p("ffn_down_shexp.weight"), vec![h, si], q(more(i, n)));
        add(p("ffn_gate_exps.weight"), vec![e, ei, h], q(q4));
        add(p("ffn_up_exps.weight"), vec![e, ei, h], q(q4));
        add(p("ffn_down_exps.weight"), vec![e, h, ei], q(more(i, n)));
    }
    add("output_norm.weight".into(), vec![h], f32);
    add("output.weight".into(), vec![cfg.vocab_size, h], q(GgmlType::Q6K));
    out
}

/// Writes `cfg`'s model (any layer count; the widths as given) with random weights in `mix` to
/// `path`. Matrices are filled from a pool of random blocks (so a full-size file takes seconds);
/// norms are near 1 (stored as 1 + w), ssm_a negative.
pub fn write(path: &Path, cfg: &ModelConfig, mix: Mix) -> Result<()> {
    let specs = tensors(cfg, mix);
    for s in &specs {
        let cols = *s.shape.last().unwrap();
        ensure!(
            cols.is_multiple_of(s.ty.block_elems()),
            "{}: {cols} columns are not whole {} blocks",
            s.name,
            s.ty.name()
        );
    }
    let file = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = BufWriter::with_capacity(8 << 20, file);
    let kv = metadata(cfg, mix);
    w.write_all(b"GGUF")?;
    w.write_all(&3u32.to_le_bytes())?;
    w.write_all(&(specs.len() as u64).to_le_bytes())?;
    w.write_all(&(kv.len() as u64).to_le_bytes())?;
    for (key, value) in &kv {
        string(&mut w, key)?;
        value.write(&mut w)?;
    }
    let mut offset = 0usize;
    let sizes: Vec<usize> = specs.iter().map(|s| s.ty.bytes_for(s.shape.iter().product())).collect();
    for (s, size) in specs.iter().zip(&sizes) {
        string(&mut w, &s.name)?;
        w.write_all(&(s.shape.len() as u32).to_le_bytes())?;
        for d in s.shape.iter().rev() {
            w.write_all(&(*d as u64).to_le_bytes())?;
        }
        w.write_all(&s.ty.id().to_le_bytes())?;
        w.write_all(&(offset as u64).to_le_bytes())?;
        offset += size.div_ceil(ALIGN) * ALIGN;
    }
    pad(&mut w)?;
    let mut pools = std::collections::HashMap::new();
    for (s, &size) in specs.iter().zip(&sizes) {
        if s.ty == GgmlType::F32 {
            let n: usize = s.shape.iter().product();
            let values: Vec<f32> = (0..n).map(|i| small_value(&s.name, i)).collect();
            w.write_all(&values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())?;
        } else {
            let cols = *s.shape.last().unwrap();
            let pool = pools.entry((s.ty, cols)).or_insert_with(|| block_pool(s.ty, cols));
            let mut left = size;
            let mut at = s.name.len() * 977 % pool.len(); // where this tensor starts in the pool
            at -= at % s.ty.block_bytes();
            while left > 0 {
                let take = left.min(pool.len() - at);
                w.write_all(&pool[at..at + take])?;
                left -= take;
                at = 0;
            }
        }
        pad(&mut w)?;
    }
    w.flush()?;
    Ok(())
}

/// A vector's or small matrix's value: norms 1 + small (the converter's 1 + w), ssm_a negative,
/// the rest small.
fn small_value(name: &str, i: usize) -> f32 {
    let r = ((i.wrapping_mul(2654435761) >> 7) % 1000) as f32 / 1000.0 - 0.5; // [-0.5, 0.5)
    if name.ends_with("ssm_a") {
        -0.5 - r.abs()
    } else if name.contains("norm") {
        1.0 + 0.1 * r
    } else {
        0.05 * r
    }
}

/// 16 MiB of random blocks of `ty` for rows of `cols` columns, values about ±√(3 / cols).
fn block_pool(ty: GgmlType, cols: usize) -> Vec<u8> {
    let blocks = (16 << 20) / ty.block_bytes();
    let n = blocks * ty.block_elems();
    let scale = (3.0 / cols as f32).sqrt();
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ cols as u64;
    let values: Vec<f32> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect();
    ty.quantize(&values).expect("a type with a quantiser")
}

fn pad<W: Write + Seek>(w: &mut W) -> Result<()> {
    let at = w.stream_position()? as usize;
    w.write_all(&vec![0u8; at.div_ceil(ALIGN) * ALIGN - at])?;
    Ok(())
}

fn string(w: &mut impl Write, s: &str) -> Result<()> {
    w.write_all(&(s.len() as u64).to_le_bytes())?;
    w.write_all(s.as_bytes())?;
    Ok(())
}

/// A metadata value as `write` stores it.
enum Meta {
    U32(u32),
    F32(f32),
    Bool(bool),
    Str(String),
    Strs(Vec<String>),
    I32s(Vec<i32>),
}

impl Meta {
    fn write(&self, w: &mut impl Write) -> Result<()> {
        match self {
            Meta::U32(v) => {
                w.write_all(&4u32.to_le_bytes())?;
                w.write_all(&v.to_le_bytes())?;
            }
            Meta::F32(v) => {
                w.write_all(&6u32.to_le_bytes())?;
                w.write_all(&v.to_le_bytes())?;
            }
            Meta::Bool(v) => {
                w.write_all(&7u32.to_le_bytes())?;
                w.write_all(&[*v as u8])?;
            }
            Meta::Str(s) => {
                w.write_all(&8u32.to_le_bytes())?;
                string(w, s)?;
            }
            Meta::Strs(v) => {
                w.write_all(&9u32.to_le_bytes())?;
                w.write_all(&8u32.to_le_bytes())?;
                w.write_all(&(v.len() as u64).to_le_bytes())?;
                for s in v {
                    string(w, s)?;
                }
            }
            Meta::I32s(v) => {
                w.write_all(&9u32.to_le_bytes())?;
                w.write_all(&5u32.to_le_bytes())?;
                w.write_all(&(v.len() as u64).to_le_bytes())?;
                for x in v {
                    w.write_all(&x.to_le_bytes())?;
                }
            }
        }
        Ok(())
    }
}

/// The keys llama.cpp's converter writes for this architecture (as scripts/make_gguf_fixtures.py
/// writes them), and a placeholder tokenizer.
fn metadata(cfg: &ModelConfig, mix: Mix) -> Vec<(String, Meta)> {
    let a = |k: &str| format!("{ARCH}.{k}");
    let u = |v: usize| Meta::U32(v as u32);
    let rot = (cfg.head_dim as f64 * cfg.partial_rotary_factor) as usize;
    // every interval-th layer is full attention (the release: 4)
    let interval = cfg.layer_types.iter().position(|k| *k == LayerKind::FullAttention).map_or(4, |p| p + 1);
    let mut sections: Vec<i32> = cfg.mrope_section.iter().map(|&s| s as i32).collect();
    sections.resize(4, 0);
    let file_type = match mix {
        Mix::Q4KM => 15,
        Mix::Q8_0 => 7,
    };
    // placeholder tokens; the chat template's specials by name, where the release has them
    let specials = [(248044usize, "<|endoftext|>"), (248045, "<|im_start|>"), (248046, "<|im_end|>")];
    let mut tokens: Vec<String> = (0..cfg.vocab_size).map(|i| format!("t{i}")).collect();
    let mut types = vec![1i32; cfg.vocab_size];
    let (mut eos, mut pad) = (cfg.vocab_size - 1, cfg.vocab_size - 2);
    for (id, name) in specials {
        if id < cfg.vocab_size {
            tokens[id] = name.to_string();
            types[id] = 3;
            if name == "<|im_end|>" {
                eos = id;
            }
            if name == "<|endoftext|>" {
                pad = id;
            }
        }
    }
    vec![
        ("general.architecture".into(), Meta::Str(ARCH.into())),
        ("general.type".into(), Meta::Str("model".into())),
        ("general.name".into(), Meta::Str("solo random qwen35moe".into())),
        ("general.file_type".into(), u(file_type)),
        ("general.alignment".into(), u(ALIGN)),
        (a("context_length"), u(cfg.max_position_embeddings)),
        (a("block_count"), u(cfg.num_hidden_layers)),
        (a("embedding_length"), u(cfg.hidden_size)),
        (a("attention.head_count"), u(cfg.num_attention_heads)),
        (a("attention.head_count_kv"), u(cfg.num_key_value_heads)),
        (a("attention.key_length"), u(cfg.head_dim)),
        (a("attention.value_length"), u(cfg.head_dim)),
        (a("rope.freq_base"), Meta::F32(cfg.rope_theta as f32)),
        (a("attention.layer_norm_rms_epsilon"), Meta::F32(cfg.rms_norm_eps)),
        (a("expert_count"), u(cfg.num_experts)),
        (a("expert_used_count"), u(cfg.num_experts_per_tok)),
        (a("expert_feed_forward_length"), u(cfg.moe_intermediate_size)),
        (a("expert_shared_feed_forward_length"), u(cfg.shared_expert_intermediate_size)),
        (a("ssm.conv_kernel"), u(cfg.linear_conv_kernel_dim)),
        (a("ssm.state_size"), u(cfg.linear_key_head_dim)),
        (a("ssm.group_count"), u(cfg.linear_num_key_heads)),
        (a("ssm.time_step_rank"), u(cfg.linear_num_value_heads)),
        (a("ssm.inner_size"), u(cfg.linear_value_head_dim * cfg.linear_num_value_heads)),
        (a("full_attention_interval"), u(interval)),
        (a("rope.dimension_count"), u(rot)),
        (a("rope.dimension_sections"), Meta::I32s(sections)),
        ("tokenizer.ggml.model".into(), Meta::Str("gpt2".into())),
        ("tokenizer.ggml.pre".into(), Meta::Str("qwen35".into())),
        ("tokenizer.ggml.tokens".into(), Meta::Strs(tokens)),
        ("tokenizer.ggml.token_type".into(), Meta::I32s(types)),
        ("tokenizer.ggml.merges".into(), Meta::Strs(vec!["t 1".into()])),
        ("tokenizer.ggml.eos_token_id".into(), u(eos)),
        ("tokenizer.ggml.padding_token_id".into(), u(pad)),
        ("tokenizer.ggml.bos_token_id".into(), u(pad)),
        ("tokenizer.ggml.add_bos_token".into(), Meta::Bool(false)),
    ]
}

/// Quantisers for the types `write` uses (plain max-based rounding; what a kernel reads is the
/// same layout whatever searched the scales).
impl GgmlType {
    pub fn quantize(self, values: &[f32]) -> Option<Vec<u8>> {
        let n = self.block_elems();
        if !values.len().is_multiple_of(n) {
            return None;
        }
        let mut out = Vec::with_capacity(values.len() / n * self.block_bytes());
        for v in values.chunks_exact(n) {
            match self {
                GgmlType::Q4K => quantize_k_block(v, 4, &mut out),
                GgmlType::Q5K => quantize_k_block(v, 5, &mut out),
                GgmlType::Q6K => quantize_q6k_block(v, &mut out),
                GgmlType::Q8_0 => {
                    let d = f16::from_f32(v.iter().fold(0f32, |m, x| m.max(x.abs())) / 127.0);
                    let df = d.to_f32();
                    out.extend_from_slice(&d.to_le_bytes());
                    out.extend(v.iter().map(|x| {
                        if df == 0.0 {
                            0
                        } else {
                            (x / df).round().clamp(-127.0, 127.0) as i8 as u8
                        }
                    }));
                }
                GgmlType::F32 => out.extend(v.iter().flat_map(|x| x.to_le_bytes())),
                _ => return None,
            }
        }
        Some(out)
    }
}

/// One Q4_K (`bits` 4) or Q5_K (5) block: per 32 values a 6-bit scale and a 6-bit min
/// (w = d·sc·q − dmin·m); Q5_K's fifth bits in 32 bytes before the nibbles.
fn quantize_k_block(v: &[f32], bits: u32, out: &mut Vec<u8>) {
    let top = ((1u32 << bits) - 1) as f32;
    let (mut scale, mut min) = ([0f32; 8], [0f32; 8]);
    for j in 0..8 {
        let sub = &v[32 * j..32 * j + 32];
        let lo = sub.iter().fold(0f32, |m, &x| m.min(x));
        let hi = sub.iter().fold(lo, |m, &x| m.max(x));
        scale[j] = (hi - lo) / top;
        min[j] = -lo;
    }
    let d = f16::from_f32(scale.iter().fold(1e-8f32, |m, &x| m.max(x)) / 63.0);
    let dmin = f16::from_f32(min.iter().fold(1e-8f32, |m, &x| m.max(x)) / 63.0);
    let (df, dminf) = (d.to_f32().max(1e-12), dmin.to_f32().max(1e-12));
    let sc: Vec<u8> = scale.iter().map(|s| (s / df).round().clamp(0.0, 63.0) as u8).collect();
    let m: Vec<u8> = min.iter().map(|s| (s / dminf).round().clamp(0.0, 63.0) as u8).collect();
    out.extend_from_slice(&d.to_le_bytes());
    out.extend_from_slice(&dmin.to_le_bytes());
    for j in 0..4 {
        out.push(sc[j] | ((sc[j + 4] >> 4) << 6));
    }
    for j in 0..4 {
        out.push(m[j] | ((m[j + 4] >> 4) << 6));
    }
    for j in 0..4 {
        out.push((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
    }
    let q: Vec<u8> = (0..256)
        .map(|c| {
            let (s, o) = (df * sc[c / 32] as f32, dminf * m[c / 32] as f32);
            if s == 0.0 {
                0
            } else {
                ((v[c] + o) / s).round().clamp(0.0, top) as u8
            }
        })
        .collect();
    if bits == 5 {
        // bit s of qh[l] is the fifth bit of value l of sub-block s
        out.extend((0..32).map(|l| (0..8).fold(0u8, |h, s| h | (((q[32 * s + l] >> 4) & 1) << s))));
    }
    for pair in 0..4 {
        for l in 0..32 {
            out.push((q[64 * pair + l] & 15) | ((q[64 * pair + 32 + l] & 15) << 4));
        }
    }
}

/// One Q6_K block: per 16 values an i8 scale (w = d·sc·(q − 32)).
fn quantize_q6k_block(v: &[f32], out: &mut Vec<u8>) {
    let scale: Vec<f32> = v.chunks_exact(16).map(|s| s.iter().fold(0f32, |m, &x| m.max(x.abs())) / 31.0).collect();
    let d = f16::from_f32(scale.iter().fold(1e-8f32, |m, &x| m.max(x)) / 127.0);
    let df = d.to_f32().max(1e-12);
    let sc: Vec<i8> = scale.iter().map(|s| (s / df).round().clamp(-128.0, 127.0) as i8).collect();
    let q: Vec<u8> = (0..256)
        .map(|c| {
            let s = df * sc[c / 16] as f32;
            if s == 0.0 {
                32
            } else {
                ((v[c] / s).round() + 32.0).clamp(0.0, 63.0) as u8
            }
        })
        .collect();
    let (mut ql, mut qh) = ([0u8; 128], [0u8; 64]);
    for n in 0..2 {
        for l in 0..32 {
            let at = 128 * n + l;
            let (q1, q2, q3, q4) = (q[at], q[at + 32], q[at + 64], q[at + 96]);
            ql[64 * n + l] = (q1 & 15) | ((q3 & 15) << 4);
            ql[64 * n + l + 32] = (q2 & 15) | ((q4 & 15) << 4);
            qh[32 * n + l] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6);
        }
    }
    out.extend_from_slice(&ql);
    out.extend_from_slice(&qh);
    out.extend(sc.iter().map(|&s| s as u8));
    out.extend_from_slice(&d.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantised_blocks_dequantise_near_the_values() {
        let values: Vec<f32> =
            (0..4 * 256).map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0 + (i % 3) as f32 * 0.1).collect();
        let cases = [
            (GgmlType::Q4K, 0.09),
            (GgmlType::Q5K, 0.045),
            (GgmlType::Q6K, 0.02),
            (GgmlType::Q8_0, 0.005),
            (GgmlType::F32, 0.0),
        ];
        for (t, tol) in cases {
            let blocks = t.quantize(&values).unwrap();
            assert_eq!(blocks.len(), t.bytes_for(values.len()));
            let mut back = vec![0f32; values.len()];
            t.dequantize(&blocks, &mut back);
            let worst = values.iter().zip(&back).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(worst <= tol, "{t:?}: worst error {worst}");
        }
        assert!(GgmlType::Q3K.quantize(&values).is_none(), "no quantiser for Q3_K");
    }

    #[test]
    fn use_more_bits_is_llama_cpps() {
        let picked: Vec<usize> = (0..40).filter(|&i| use_more_bits(i, 40)).collect();
        // first 5, last 5, and every third from 7 (i - 5 ≡ 2 mod 3)
        assert_eq!(picked, [0, 1, 2, 3, 4, 7, 10, 13, 16, 19, 22, 25, 28, 31, 34, 35, 36, 37, 38, 39]);
    }
}
