//! `weights.rs`'s tests.

use super::*;
use crate::as_stored::bf16_bytes_of;

/// A GGUF file's ggml tensors go up as round-to-bf16 of the CPU reference's values, through
/// every path the model's upload takes (a matrix, stacked matrices, a layer's experts with the
/// shared one appended, the bf16-only stacks). The fixture's widths are tiny, which the
/// uploader does not mind (only `ModelGpu::upload` wants the real ones).
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gguf_tensors_go_up_as_bf16_of_the_cpu_reference() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/gguf/wide-mix.gguf");
    let (_, w) = solo_model::load(std::path::Path::new(path)).unwrap();
    assert!(!w.ggml_types().is_empty());
    let rounded = |parts: &[&Tensor]| -> Vec<u8> {
        parts.iter().flat_map(|t| t.to_f32()).flat_map(|v| half::bf16::from_f32(v).to_le_bytes()).collect()
    };
    let gpu = Gpu::new().unwrap();
    let mut up = Uploader::new(&gpu).unwrap();
    let mut want: Vec<(DevPtr, Vec<u8>)> = Vec::new();
    // what goes up as stored: each part's rows in the common format (a Q4_K part as Q5_K beside
    // Q5_K ones), the values unchanged
    let stored = |parts: &[&Tensor], k: KQuant| -> Vec<u8> {
        let mut out = Vec::new();
        for p in parts {
            let DType::Ggml(g) = p.dtype else { panic!("{p:?} is not a ggml type") };
            KQuant::of(g).unwrap().repack_as(k, p.bytes(), p.shape[0], p.row_len(), &mut out).unwrap();
            let rows = out.len() / k.row_bytes(p.row_len());
            let back: Vec<f32> = (rows - p.shape[0]..rows).flat_map(|r| k.decode_row(&out, p.row_len(), r)).collect();
            assert_eq!(back, p.to_f32(), "{p:?} as {k:?}");
        }
        out
    };
    let mut kept = 0;
    let mut stack = |up: &mut Uploader, want: &mut Vec<(DevPtr, Vec<u8>)>, parts: &[&Tensor]| match up
        .stacked_as_stored(parts)
        .unwrap()
    {
        Some((m, _)) => {
            let Some(RowFormat::K(k)) = m.format else { panic!("{:?}: not a GGUF format", m.format) };
            want.push((m.ptr, stored(parts, k)));
            kept += 1;
        }
        None => {
            let (m, _) = up.stacked(parts).unwrap();
            want.push((m.ptr, rounded(parts)));
        }
    };
    stack(&mut up, &mut want, &[&w.embed_tokens]);
    for layer in &w.layers {
        match &layer.mixer {
            Mixer::GatedDeltaNet(g) => {
                if up.stacked_as_stored(&[&g.in_proj_qkv, &g.in_proj_z]).unwrap().is_some() {
                    stack(&mut up, &mut want, &[&g.in_proj_qkv, &g.in_proj_z]);
                    stack(&mut up, &mut want, &[&g.in_proj_b, &g.in_proj_a]);
                } else {
                    stack(&mut up, &mut want, &[&g.in_proj_qkv, &g.in_proj_z, &g.in_proj_b, &g.in_proj_a]);
                }
            }
            Mixer::FullAttention(a) => stack(&mut up, &mut want, &[&a.q_proj, &a.k_proj, &a.v_proj]),
        }
        let m = &layer.moe;
        let e = up.experts(&m.experts, &m.shared_expert).unwrap();
        assert!(e.fp8_scales.is_none());
        if let Some(p) = e.packed {
            // Q4_K/Q5_K/Q6_K routed experts go up as their rows (kquant.rs), the shared one bf16
            let (mut gate_up, mut down) = (Vec::new(), Vec::new());
            for x in &m.experts {
                packed_rows(&x.gate, p.gate_up, &mut gate_up).unwrap();
                packed_rows(&x.up, p.gate_up, &mut gate_up).unwrap();
                packed_rows(&x.down, p.down, &mut down).unwrap();
            }
            want.push((e.gate_up, gate_up));
            want.push((e.down, down));
            want.push((p.shared.gate_up, rounded(&[&m.shared_expert.gate, &m.shared_expert.up])));
            want.push((p.shared.down, rounded(&[&m.shared_expert.down])));
            continue;
        }
        let all: Vec<&ExpertWeights> = m.experts.iter().chain(std::iter::once(&m.shared_expert)).collect();
        let gate_up: Vec<&Tensor> = all.iter().flat_map(|e| [&e.gate, &e.up]).collect();
        let down: Vec<&Tensor> = all.iter().map(|e| &e.down).collect();
        want.push((e.gate_up, rounded(&gate_up)));
        want.push((e.down, rounded(&down)));
    }
    let _buffers = up.finish().unwrap();
    let ggml = |t: &Tensor| matches!(t.dtype, DType::Ggml(_));
    assert!(w.layers.iter().flat_map(|l| l.tensors()).any(ggml), "the fixture has ggml matrices");
    for (i, (ptr, bytes)) in want.iter().enumerate() {
        assert!(gpu.download(*ptr, bytes.len()).unwrap() == *bytes, "upload {i} differs from round-to-bf16");
    }
    eprintln!(
        "{} GGUF uploads equal the CPU reference's values (bf16, or the k-quant rows; {kept} mixer stacks as stored)",
        want.len()
    );
}

/// Every Q4_K, Q5_K and Q6_K expert matrix of llama.cpp's own fixture files repacks into rows that
/// hold the CPU reference's values bit for bit. Those tiny files have no layer the kernels
/// take whole (their 32-column down matrices cannot be k-quants), so they go up as bf16 and
/// `repacked_bytes` counts them so; a layer built of Q4_K gate/up and Q6_K down is taken, and
/// counted at its rows.
#[test]
fn gguf_q4k_q6k_experts_repack_to_the_cpu_references_values() {
    let mut checked = 0;
    for file in ["wide-q4_k_m.gguf", "wide-mix.gguf"] {
        let path = format!("{}/../../fixtures/gguf/{file}", env!("CARGO_MANIFEST_DIR"));
        let (_, w) = solo_model::load(std::path::Path::new(&path)).unwrap();
        for layer in &w.layers {
            assert_eq!(kquant_formats(&layer.moe.experts), None, "{file}: a layer mixes other types");
            for t in layer.moe.experts.iter().flat_map(|e| [&e.gate, &e.up, &e.down]) {
                let DType::Ggml(g) = t.dtype else { continue };
                let Some(k) = KQuant::of(g) else { continue };
                let (rows, cols) = (t.shape[0], t.row_len());
                if !cols.is_multiple_of(256) {
                    continue; // (a 32-column Q8_0 down matrix: not a width the kernels have)
                }
                let mut out = Vec::new();
                packed_rows(t, RowFormat::K(k), &mut out).unwrap();
                let want = t.to_f32();
                for r in 0..rows {
                    let got = k.decode_row(&out, cols, r);
                    let same = got.iter().zip(&want[r * cols..]).all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "{file}: {k:?} {t:?} row {r} differs from the CPU reference");
                }
                checked += 1;
            }
        }
        // no layer's experts are taken; the stacks a kernel reads as stored count at their rows (a
        // Q6_K v beside Q4_K q and k apart)
        let mut stacks: Vec<Vec<&Tensor>> = vec![vec![&w.embed_tokens], vec![&w.lm_head]];
        let mut apart = 0;
        for layer in &w.layers {
            match &layer.mixer {
                Mixer::GatedDeltaNet(g) => stacks.push(vec![&g.in_proj_qkv, &g.in_proj_z]),
                Mixer::FullAttention(a) if v_apart_formats(a).is_some() => {
                    apart += 1;
                    stacks.extend([vec![&a.q_proj, &a.k_proj], vec![&a.v_proj]]);
                }
                Mixer::FullAttention(a) => stacks.push(vec![&a.q_proj, &a.k_proj, &a.v_proj]),
            }
        }
        eprintln!("{file}: {apart} attention layers with v apart");
        let mut saved = 0;
        for parts in &stacks {
            if let Some(k) = as_stored_format(parts) {
                saved += parts.iter().map(|t| 2 * t.numel() - t.shape[0] * k.row_bytes(t.row_len())).sum::<usize>();
            }
        }
        eprintln!("{file}: {saved} bytes saved by keeping k-quant stacks as stored");
        assert_eq!(repacked_bytes(&w), bf16_bytes_of(&w) - saved, "{file}");
    }
    assert!(checked >= 8, "only {checked} Q4_K/Q5_K/Q6_K matrices in the fixtures");

    // a Q4_K_M-shaped layer: every gate/up Q4_K, every down Q6_K
    let matrix = |k: KQuant, rows: usize, cols: usize, seed: usize| {
        let v: Vec<f32> = (0..rows * cols).map(|i| (((i + seed) * 7919) % 1000) as f32 / 1000.0 - 0.5).collect();
        Tensor::from_bytes(DType::Ggml(k.ggml()), vec![rows, cols], &k.ggml().quantize(&v).unwrap())
    };
    let experts: Vec<ExpertWeights> = (0..3)
        .map(|i| ExpertWeights {
            gate: matrix(KQuant::Q4K, 4, 512, i),
            up: matrix(KQuant::Q4K, 4, 512, i + 1),
            down: matrix(KQuant::Q6K, 512, 256, i + 2),
        })
        .collect();
    assert_eq!(kquant_formats(&experts), Some((KQuant::Q4K, KQuant::Q6K)));
    let mut mixed = experts;
    mixed[1].up = matrix(KQuant::Q6K, 4, 512, 9);
    assert_eq!(kquant_formats(&mixed), None, "gate and up of one type throughout");
}

/// A small model of k-quant-friendly widths (every matrix width a multiple of 256), for
/// files written by `gguf::random`.
pub(crate) fn small_kquant_config() -> ModelConfig {
    let json = serde_json::json!({
        "model_type": "qwen3_5_moe_text",
        "hidden_size": 256, "num_hidden_layers": 2, "vocab_size": 1024,
        "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 256,
        "linear_num_key_heads": 2, "linear_num_value_heads": 2,
        "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
        "num_experts": 4, "num_experts_per_tok": 2,
        "moe_intermediate_size": 256, "shared_expert_intermediate_size": 256,
        "full_attention_interval": 2, "max_position_embeddings": 4096, "rms_norm_eps": 1e-6,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1.0e7, "partial_rotary_factor": 0.25,
            "mrope_section": [11, 11, 10]},
        "eos_token_id": 1000
    });
    ModelConfig::from_json(&json.to_string()).unwrap()
}

/// `gguf::random` writes a file solo reads back with the config it was given, every layer's
/// routed experts Q4_K (gate, up) and Q4_K or Q6_K (down, as `use_more_bits` picks), which
/// the CUDA backend keeps as stored and whose rows hold the CPU reference's values.
#[test]
fn a_random_q4_k_m_file_reads_back_and_its_experts_stay_packed() {
    let cfg = small_kquant_config();
    let path = std::env::temp_dir().join(format!("solo-random-{}.gguf", std::process::id()));
    solo_model::gguf::random::write(&path, &cfg, solo_model::gguf::random::Mix::Q4KM).unwrap();
    let (back, w) = solo_model::load(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        (back.hidden_size, back.num_hidden_layers, back.vocab_size, back.num_experts, back.moe_intermediate_size),
        (256, 2, 1024, 4, 256)
    );
    assert_eq!(back.layer_types, cfg.layer_types);
    for (i, layer) in w.layers.iter().enumerate() {
        let (gate_up, down) = kquant_formats(&layer.moe.experts).expect("whole layers of k-quant experts");
        assert_eq!(gate_up, KQuant::Q4K);
        // llama.cpp's use_more_bits, of 2 layers, picks the last
        assert_eq!(down, [KQuant::Q4K, KQuant::Q6K][i], "layer {i}");
        let t = &layer.moe.experts[1].down;
        let mut out = Vec::new();
        packed_rows(t, RowFormat::K(down), &mut out).unwrap();
        let want = t.to_f32();
        assert_eq!(down.decode_row(&out, t.row_len(), 3), want[3 * t.row_len()..4 * t.row_len()]);
        // the output projection is Q4_K as the gate/up experts: it goes up as stored
        let w_o = match &layer.mixer {
            Mixer::GatedDeltaNet(g) => &g.out_proj,
            Mixer::FullAttention(a) => &a.o_proj,
        };
        let experts = packed_formats(&layer.moe.experts).map(|(gate_up, _)| gate_up);
        assert_eq!((experts, as_stored_format(&[w_o])), (Some(RowFormat::K(KQuant::Q4K)), experts), "layer {i}");
    }
    assert!(repacked_bytes(&w) < bf16_bytes_of(&w));
}

#[test]
fn progress_shows_a_rate_only_once_it_means_something() {
    let early = progress_line(2_000_000_000, 10_000_000_000, 0.01);
    assert_eq!(early, "loading weights: 2.0 of 10.0 GB", "no rate from 10 ms of staging");
    let later = progress_line(5_000_000_000, 10_000_000_000, 2.0);
    assert_eq!(later, "loading weights: 5.0 of 10.0 GB, 2.50 GB/s, 2 s left");
    let past = progress_line(11_000_000_000, 10_000_000_000, 1.0);
    assert!(past.ends_with("0 s left"), "{past}");
}

/// Which stacks go up as stored: int4 in groups of 128 without act-order (an all-linear int4
/// recipe's projections), a GGUF stack with an exact common format; anything else in bf16.
#[test]
fn stacks_go_up_as_stored_only_in_a_format_the_kernels_read() {
    use crate::int4::{quantize_symmetric, GROUP};
    use solo_model::int4::GroupQuant;
    let (rows, cols) = (4, 256);
    let v: Vec<f32> = (0..rows * cols).map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5).collect();
    let int4 = |group: usize, perm: Option<Vec<u32>>| {
        let (packed, scales, _) = quantize_symmetric(&v, rows, cols);
        let scales = if group == GROUP { scales } else { scales.iter().flat_map(|&s| [s, s]).collect() };
        Tensor::from_int4(rows, cols, &packed, GroupQuant { group, scales, zeros: None, perm })
    };
    let ggml = |k: KQuant| Tensor::from_bytes(DType::Ggml(k.ggml()), vec![rows, cols], &k.ggml().quantize(&v).unwrap());
    let bf16 = Tensor::from_f32_as_bf16(vec![rows, cols], &v);
    let (a, b) = (int4(GROUP, None), int4(GROUP, None));
    assert_eq!(as_stored_format(&[&a, &b]), Some(RowFormat::Int4));
    assert_eq!(as_stored_format(&[&a, &bf16]), None, "int4 beside bf16");
    assert_eq!(as_stored_format(&[&int4(64, None)]), None, "groups of 64");
    assert_eq!(as_stored_format(&[&int4(GROUP, Some((0..cols as u32).rev().collect()))]), None, "act-order");
    let (q4, q5, q6) = (ggml(KQuant::Q4K), ggml(KQuant::Q5K), ggml(KQuant::Q6K));
    assert_eq!(as_stored_format(&[&q5, &q4]), Some(RowFormat::K(KQuant::Q5K)));
    assert_eq!(as_stored_format(&[&q4, &q6]), None, "Q4_K beside Q6_K");
    assert_eq!(as_stored_format(&[&q4, &a]), None, "Q4_K beside int4");
}

/// An attention layer's q/k/v go up as one stack when they share a format; q|k in Q4_K or Q5_K
/// beside a Q6_K v (llama.cpp's Q4_K_M and Q5_K_M in half the layers) go up as the stack and v
/// apart, as stored, and `repacked_bytes` counts them at their rows; any other mix is bf16.
#[test]
fn q_and_k_beside_a_q6k_v_go_up_with_v_apart() {
    let matrix = |k: KQuant, rows: usize, seed: usize| {
        let v: Vec<f32> = (0..rows * 256).map(|i| (((i + seed) * 7919) % 1000) as f32 / 1000.0 - 0.5).collect();
        Tensor::from_bytes(DType::Ggml(k.ggml()), vec![rows, 256], &k.ggml().quantize(&v).unwrap())
    };
    let layer = |q: KQuant, v: KQuant| AttentionWeights {
        q_proj: matrix(q, 8, 1),
        k_proj: matrix(q, 4, 2),
        v_proj: matrix(v, 4, 3),
        o_proj: matrix(q, 256, 4),
        q_norm: Tensor::from_f32_as_bf16(vec![4], &[0.0; 4]),
        k_norm: Tensor::from_f32_as_bf16(vec![4], &[0.0; 4]),
    };
    use KQuant::{Q4K, Q5K, Q6K, Q8_0};
    let (k, q6) = (RowFormat::K, RowFormat::K(Q6K));
    assert_eq!(v_apart_formats(&layer(Q4K, Q6K)), Some((k(Q4K), q6)));
    assert_eq!(v_apart_formats(&layer(Q5K, Q6K)), Some((k(Q5K), q6)));
    assert_eq!(v_apart_formats(&layer(Q4K, Q5K)), None, "a Q4_K row is a Q5_K row: one stack");
    assert_eq!(v_apart_formats(&layer(Q4K, Q4K)), None);
    assert_eq!(v_apart_formats(&layer(Q8_0, Q6K)), None, "no kernel reads Q6_K after Q8_0");
}
