//! The whole model's GPU tests: the decode step against the forward, snapshots, released
//! states, the screened lm_head, the 4- and 8-bit forms.

use super::*;
use crate::weights::{MixerGpu, RowFormat};

fn argmax(v: &[f32]) -> u32 {
    v.iter().enumerate().fold((0, f32::NEG_INFINITY), |b, (i, &x)| if x > b.1 { (i, x) } else { b }).0 as u32
}

/// The decode step (one graph; norms and residual adds folded into the projections, the
/// router fused, PDL) computes what the unfused forward pass computes for one token: the same
/// logits and the same greedy tokens, on a 4-layer model of the real widths.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn fused_decode_step_matches_unfused_forward() {
    let model = crate::synthetic::random_model(4, 256, solo_model::Precision::Bf16).unwrap();
    let prompt: Vec<u32> = (0..40u32).map(|i| i * 7919 % 200_000).collect();
    let mut fused = model.try_new_state().unwrap();
    let first = argmax(&model.prefill(&mut fused, &prompt, Logits::Last).unwrap());
    let mut unfused = model.copy_state(&fused).unwrap();
    let (mut a, mut b) = (first, first);
    let mut worst = 0f32;
    for step in 0..12 {
        let la = model.decode(&mut fused, a).unwrap(); // the graph
        let lb = model.prefill(&mut unfused, &[b], Logits::Last).unwrap(); // forward(t = 1)
        let scale = lb.iter().fold(0f32, |m, v| m.max(v.abs()));
        let diff = la.iter().zip(&lb).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
        worst = worst.max(diff / scale);
        (a, b) = (argmax(&la), argmax(&lb));
        assert_eq!(a, b, "step {step}: greedy tokens differ (max logit difference {diff}, scale {scale})");
    }
    eprintln!("fused vs unfused decode: worst max|Δlogit| / max|logit| = {worst:e}");
    assert!(worst <= 1e-5, "logits differ by {worst:e} of their scale");
}

/// The prefix cache's snapshots are compact (KV caches of their positions, rounded up to
/// 256), and a sequence resumed from one decodes exactly as the original goes on; the compact
/// copy itself refuses tokens past what it holds.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn compact_snapshots_resume_exactly() {
    let model = crate::synthetic::random_model(4, 8192, solo_model::Precision::Bf16).unwrap();
    let prompt: Vec<u32> = (0..300u32).map(|i| i * 7919 % 200_000).collect();
    let mut state = model.try_new_state().unwrap();
    let first = argmax(&model.prefill(&mut state, &prompt, Logits::Last).unwrap());
    let mut snap = model.snapshot(&state).unwrap();
    assert_eq!(snap.capacity, 512);
    let caches = state.layers.iter().filter(|l| matches!(l, LayerStateGpu::FullAttention(_))).count()
        + usize::from(state.mtp.is_some());
    let saved = caches * (KvCacheGpu::bytes_for(8192) - KvCacheGpu::bytes_for(512));
    assert_eq!(model.state_bytes(&snap), model.state_bytes(&state) - saved, "the snapshot is not compact");
    let mut resumed = model.resume(&snap).unwrap();
    assert_eq!((resumed.capacity, resumed.position), (8192, 300));
    let (mut a, mut b) = (first, first);
    for step in 0..8 {
        let (la, lb) = (model.decode(&mut state, a).unwrap(), model.decode(&mut resumed, b).unwrap());
        assert_eq!(la, lb, "step {step}: the resumed sequence differs");
        (a, b) = (argmax(&la), argmax(&lb));
    }
    let long: Vec<u32> = vec![7; 300];
    let err = model.prefill(&mut snap, &long, Logits::Last).unwrap_err().to_string();
    assert!(err.contains("compact copy"), "{err}");
}

/// A released sequence comes back whole from `new_state` (same buffers, so its graphs) and
/// emptied: decode steps on it give a fresh sequence's logits bit for bit; a sequence resumed
/// into a released one decodes as a resumed fresh copy. (Decode steps only: the prefill's
/// MoE adds its experts with float atomics, so two prefills may differ in the last bits.)
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn released_states_come_back_empty() {
    let model = crate::synthetic::random_model(4, 1024, solo_model::Precision::Bf16).unwrap();
    let tokens: Vec<u32> = (0..6).map(|i| 1000 + 77 * i).collect();
    let run =
        |state: &mut CudaState| -> Vec<Vec<f32>> { tokens.iter().map(|&t| model.decode(state, t).unwrap()).collect() };
    let first: Vec<u32> = (0..200).map(|i| i * 13 % 9000).collect();
    let mut used = model.new_state().unwrap();
    model.prefill(&mut used, &first, Logits::Last).unwrap();
    run(&mut used);
    let id = used.id;
    model.release_state(used);
    let mut reused = model.new_state().unwrap();
    assert_eq!((reused.id, reused.position), (id, 0), "not the released state, emptied");
    let mut fresh = model.try_new_state().unwrap();
    assert!(run(&mut reused) == run(&mut fresh), "a reused state decodes differently from a fresh one");

    let snap = model.snapshot(&fresh).unwrap();
    model.release_state(reused);
    let mut into_spare = model.resume(&snap).unwrap();
    assert_eq!(into_spare.id, id, "resume did not take the released state");
    let mut copied = model.copy_state(&snap).unwrap();
    assert_eq!(into_spare.position, copied.position);
    assert!(run(&mut into_spare) == run(&mut copied), "a resume into a released state decodes differently");
}

/// Greedy decoding with the screened lm_head (`decode_greedy`) chooses the tokens that the
/// full lm_head's logits do (`decode` and their argmax on the host), step by step, on a
/// 4-layer model of the real widths; and with the screen off, the same again.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn screened_greedy_decode_matches_full_logits() {
    let mut model = crate::synthetic::random_model(4, 256, solo_model::Precision::Bf16).unwrap();
    let prompt: Vec<u32> = (0..24u32).map(|i| i * 7919 % 200_000).collect();
    let mut full = model.try_new_state().unwrap();
    let first = argmax(&model.prefill(&mut full, &prompt, Logits::Last).unwrap());
    let mut screened = model.copy_state(&full).unwrap();
    let mut off = model.copy_state(&full).unwrap();
    let mut want = vec![first];
    for _ in 0..16 {
        let last = *want.last().unwrap();
        want.push(argmax(&model.decode(&mut full, last).unwrap()));
    }
    let mut got = vec![first];
    got.push(model.decode_greedy(&mut screened, Some(first), 1).unwrap());
    for _ in 1..16 {
        got.push(model.decode_greedy(&mut screened, None, 1).unwrap());
        eprintln!("screened step: {} candidates", model.last_screen_candidates().unwrap());
    }
    assert_eq!(got, want, "screened greedy tokens differ from the full logits' argmax");
    model.screened_lm_head = false;
    let last = model.decode_greedy(&mut off, Some(first), 16).unwrap();
    assert_eq!(last, want[16], "greedy decode with the full lm_head ends elsewhere");
}

/// FP8 weights: the decode step (FP8 kernels reading e4m3 and block scales) against the
/// forward pass for one token (each layer dequantised to bf16 — exactly, the synthetic scales
/// being powers of two — then the bf16 kernels), on a 4-layer model of the real widths. The
/// FP8 dots multiply in f16 (~5e-4 a piece), which flips the odd near-tied expert of a random
/// router, so the bound (0.1 of the largest logit) is one of wiring — a matrix, scale or row
/// read in the wrong place moves the logits by their own size — not of arithmetic: each FP8
/// kernel is checked against the CPU at 1e-3 in its own test.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn fp8_decode_step_matches_dequantized_forward() {
    if !crate::ops::testutil::fp8_runs_here() {
        return;
    }
    let model = crate::synthetic::random_model(4, 256, solo_model::Precision::Fp8Block128).unwrap();
    assert_eq!(model.weights.precision, solo_model::Precision::Fp8Block128);
    decode_step_matches_one_token_prefill(&model, "FP8");
}

/// The whole decode step with int4 routed experts (synthetic, the GPTQ-Int4 release's shape:
/// `moe_decode_block_int4`) against the one-token prefill on the same weights (the int4 grouped
/// GEMMs, which widen the int4 rows to bf16 tiles): two paths through different kernels, on a
/// 4-layer model of the real widths. As for FP8, the bound is one of wiring (each int4 kernel
/// is checked against the CPU at 1e-3 and 1e-2 in its own test).
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn int4_decode_step_matches_one_token_prefill() {
    let precision = solo_model::Precision::Int4 { group: crate::int4::GROUP };
    let model = crate::synthetic::random_model(4, 256, precision).unwrap();
    assert_eq!(model.weights.precision, precision);
    decode_step_matches_one_token_prefill(&model, "int4");
    // the all-linear recipe: the mixers' projections int4 too, W_o read by the MoE kernel's
    // phase 0 in the experts' format
    let model = crate::synthetic::random_model_as(4, 256, crate::synthetic::Synthetic::Int4AllLinear).unwrap();
    let MixerGpu::GatedDeltaNet(g) = &model.weights.layers[0].mixer else { panic!("layer 0 is a GDN layer") };
    assert!(g.in_proj.format == Some(RowFormat::Int4) && g.out_proj.format == Some(RowFormat::Int4));
    decode_step_matches_one_token_prefill(&model, "int4, all linear");
}

/// The same for a GGUF Q4_K_M file's shape (synthetic): the decode step reads the experts,
/// the in-projections (`gemv_q.cu`), the output projections (the MoE kernel's phase 0; the
/// GDN's in tiled value-head order), the embedding and the lm_head as stored; the one-token
/// prefill multiplies the mixers' dequantised bf16 copy (out_proj's columns put back in
/// order) and the lm_head a token at a time. Per case, two measures: the decode step against
/// the one-token prefill, and against the decode step of the model's bf16 twin
/// (`GgufQ4KMDequantised`: the same weights dequantised, the bf16 kernels).
///
/// The as-stored dots multiply in f16 (each projection within ~2e-3 of its bf16 copy:
/// `gguf_attention_projections_match_their_dequantised_copy`), and behind an attention layer
/// that is enough to flip a near-tied expert of the random routers: the logits then move by a
/// step of ~0.1, up to 0.2 measured (H100, bench/RESULTS.md), whichever projection differs. So
/// with attention layers the bound is 0.3, and the test shows it can see a wiring fault: the
/// same model with its first layer's output projection read in the wrong column order (the
/// GDN's tiled value-head order dropped, or put on attention's o_proj) must land past it.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gguf_q4_k_m_decode_step_matches_one_token_prefill() {
    // a GDN layer (its MoE block's down rows Q6_K), two (the second's Q4_K), an attention layer
    // (its Q6_K v apart), two (the second's v in the q|k|v stack), the real pattern's 4
    use crate::synthetic::Synthetic::{GgufQ4KM, GgufQ4KMDequantised as Twin};
    use solo_model::LayerKind::{FullAttention as A, GatedDeltaNet as G};
    let cases: [&[solo_model::LayerKind]; 5] = [&[G], &[G, G], &[A], &[A, A], &[G, G, G, A]];
    let mut failures = Vec::new();
    for &kinds in &cases {
        let what = format!("{kinds:?}");
        let bound = if kinds.contains(&A) { 0.3 } else { 0.1 };
        let model = gguf_q4km_model(kinds, GgufQ4KM);
        assert!(model.weights.lm_head.format.is_some() && !model.screened_lm_head);
        let own = decode_step_difference(&model, &format!("GGUF Q4_K_M, {what}"));
        let twin = gguf_q4km_model(kinds, Twin);
        let cross = decode_steps_between(&model, &twin);
        drop(model);
        let mut miswired = gguf_q4km_model(kinds, GgufQ4KM);
        let out = match &mut miswired.weights.layers[0].mixer {
            MixerGpu::GatedDeltaNet(g) => &mut g.out_proj,
            MixerGpu::FullAttention(a) => &mut a.o_proj,
        };
        out.tiled_heads = match out.tiled_heads {
            Some(_) => None,
            None => Some(solo_model::tensor::TiledHeads { width: 128, key_heads: 16, r: 2 }),
        };
        let wrong = decode_steps_between(&miswired, &twin);
        eprintln!(
            "{what}: decode vs prefill {own:.2e}, vs the twin's decode {cross:.2e}; miswired vs the twin's {wrong:.2e} (bound {bound})"
        );
        if !(own < bound && cross < bound && wrong > bound) {
            failures.push(format!("{what}: {own:.2e}, {cross:.2e}, miswired {wrong:.2e} (bound {bound})"));
        }
    }
    assert!(failures.is_empty(), "GGUF Q4_K_M decode step (vs prefill, vs the twin, miswired): {failures:?}");
}

/// The synthetic Q4_K_M model (or its twin) with these layers (real widths, contexts up to 256).
fn gguf_q4km_model(kinds: &[solo_model::LayerKind], form: crate::synthetic::Synthetic) -> CudaModel {
    let mut cfg = crate::synthetic::real_config(kinds.len());
    cfg.layer_types = kinds.to_vec();
    crate::synthetic::random_model_of(cfg, 256, form).unwrap()
}

/// The worst max|Δlogit| / max|logit| between two models' decode steps over 8 tokens after the
/// same prompt (the tokens `b`'s argmax).
fn decode_steps_between(a: &CudaModel, b: &CudaModel) -> f32 {
    let prompt: Vec<u32> = (0..40u32).map(|i| i * 7919 % 200_000).collect();
    let (mut sa, mut sb) = (a.try_new_state().unwrap(), b.try_new_state().unwrap());
    a.prefill(&mut sa, &prompt, Logits::Last).unwrap();
    let mut token = argmax(&b.prefill(&mut sb, &prompt, Logits::Last).unwrap());
    let mut worst = 0f32;
    for _ in 0..8 {
        let (la, lb) = (a.decode(&mut sa, token).unwrap(), b.decode(&mut sb, token).unwrap());
        let scale = lb.iter().fold(0f32, |m, v| m.max(v.abs()));
        worst = worst.max(la.iter().zip(&lb).fold(0f32, |m, (x, y)| m.max((x - y).abs())) / scale);
        token = argmax(&lb);
    }
    worst
}

/// Prefills a prompt, then for 8 tokens compares the decode step (the graph) with a one-token
/// prefill from a copy of the state: worst max|Δlogit| / max|logit| < 0.1 (a bound of wiring).
fn decode_step_matches_one_token_prefill(model: &CudaModel, what: &str) {
    let worst = decode_step_difference(model, what);
    assert!(worst < 0.1, "{what} decode step differs from the one-token prefill by {worst:.2e}");
}

/// `decode_step_matches_one_token_prefill`'s measure: the worst max|Δlogit| / max|logit|.
fn decode_step_difference(model: &CudaModel, what: &str) -> f32 {
    let prompt: Vec<u32> = (0..40u32).map(|i| i * 7919 % 200_000).collect();
    let mut fused = model.try_new_state().unwrap();
    let first = argmax(&model.prefill(&mut fused, &prompt, Logits::Last).unwrap());
    let mut unfused = model.copy_state(&fused).unwrap();
    let mut token = first;
    let mut worst = 0f32;
    for step in 0..8 {
        let la = model.decode(&mut fused, token).unwrap(); // the graph
        let lb = model.prefill(&mut unfused, &[token], Logits::Last).unwrap(); // the forward pass
        let scale = lb.iter().fold(0f32, |m, v| m.max(v.abs()));
        let diff = la.iter().zip(&lb).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
        assert!(la.iter().all(|v| v.is_finite()), "{what}, step {step}: non-finite logits");
        worst = worst.max(diff / scale);
        token = argmax(&lb);
    }
    eprintln!("{what} decode step vs one-token prefill: worst max|Δlogit| / max|logit| = {worst:.2e}");
    worst
}

/// A GGUF Q4_K_M attention layer's projections as the decode step reads them (as stored: q|k
/// with v apart as the GEMV's tail, o_proj in phase 0's order) against prefill's dequantised bf16
/// copy of the same matrices.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gguf_attention_projections_match_their_dequantised_copy() {
    use crate::ops::testutil::{bf16_bytes, random, rel_err};
    // [A, A]: the first layer's v apart, the second's in the q|k|v stack
    let model = gguf_q4km_model(&[solo_model::LayerKind::FullAttention; 2], crate::synthetic::Synthetic::GgufQ4KM);
    let gpu = &model.gpu;
    let mut failures = Vec::new();
    for (i, layer) in model.weights.layers.iter().enumerate() {
        let buf = gpu.alloc(layer.dequantized_bytes()).unwrap();
        let deq = layer.dequantized(gpu, &buf).unwrap();
        let (MixerGpu::FullAttention(a), MixerGpu::FullAttention(d)) = (&layer.mixer, &deq.mixer) else { panic!() };
        let proj = d.qkv_proj.rows;
        let h = gpu.upload_f32(&random(70 + i as u64, 2048, 1.0)).unwrap();
        let (y1, y2) = (gpu.alloc(proj * 4).unwrap(), gpu.alloc(proj * 4).unwrap());
        let tail = a.v_apart().then_some(&a.v_proj);
        crate::ops::gemv_q::gemv_norm_q(gpu, h.ptr(), &layer.input_norm, 1e-6, &a.qkv_proj, tail, y1.ptr(), None)
            .unwrap();
        crate::ops::linear::gemv_norm_mma(
            gpu,
            h.ptr(),
            &layer.input_norm,
            1e-6,
            &d.qkv_proj,
            1,
            y2.ptr(),
            proj,
            crate::ops::lora::InputSites::NONE,
        )
        .unwrap();
        let (p1, p2) = (gpu.download_f32(y1.ptr(), proj).unwrap(), gpu.download_f32(y2.ptr(), proj).unwrap());
        for (part, r) in [("q", 0..8192), ("k", 8192..8704), ("v", 8704..9216)] {
            let e = rel_err(&p1[r.clone()], &p2[r]);
            eprintln!("layer {i} (v apart: {}): {part} {e:.2e}", a.v_apart());
            if e > 1e-2 {
                failures.push(format!("layer {i} {part}: {e:.2e}"));
            }
        }
        let y = gpu.upload(&bf16_bytes(&random(80 + i as u64, 4096, 1.0))).unwrap();
        let (o1, o2) = (gpu.upload_f32(&[0.0; 2048]).unwrap(), gpu.alloc(2048 * 4).unwrap());
        crate::ops::gemv_q::out_proj_tokens_q(gpu, y.ptr(), &a.o_proj, 1, o1.ptr()).unwrap();
        crate::ops::linear::gemm(gpu, y.ptr(), &d.o_proj, 1, o2.ptr()).unwrap();
        let e = rel_err(&gpu.download_f32(o1.ptr(), 2048).unwrap(), &gpu.download_f32(o2.ptr(), 2048).unwrap());
        eprintln!("layer {i}: o_proj {e:.2e}");
        if e > 1e-2 {
            failures.push(format!("layer {i} o_proj: {e:.2e}"));
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
}
