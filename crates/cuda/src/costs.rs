//! What single kernels and ops cost on this GPU (`solo bench --kernels`): each timed with CUDA
//! events on the model's stream, on the synthetic model's weights at the real shapes, next to the
//! bytes or FLOPs it moves where that says how close it runs to the hardware.

use crate::kernels::{widths::*, Launch};
use crate::model::CudaModel;
use crate::ops::attention::{attend, attention_mixer, KvCacheGpu, Rope};
use crate::ops::gdn::{conv_silu, decode_step, gated_norm, prep, scan, GdnConsts, GdnStateGpu};
use crate::ops::linear::{cast_cu, gemv, gemv_blocks, gemv_norm};
use crate::ops::lm_head::LmHeadScreen;
use crate::ops::moe::moe_block_path;
use crate::ops::sample::{sample, SamplingParamsGpu, SAMPLE_SCRATCH_BYTES};
use crate::ops::Scratch;
use crate::runtime::Gpu;
use crate::weights::{Matrix, MixerGpu};
use anyhow::{anyhow, bail, Result};
use cudarc::driver::sys::{CUevent_flags::CU_EVENT_DEFAULT, CUgraphInstantiate_flags, CUstreamCaptureMode};
use solo_model::sampler::{Sampler, SamplerConfig};
use solo_model::{Backend, Logits};
use std::time::Instant;

/// One measured cost: what, its mean µs per call, and what it moved.
#[derive(Clone, Debug)]
pub struct Cost {
    pub name: String,
    pub micros: f64,
    pub note: String,
}

/// Mean µs per call of `f` over `reps` back-to-back calls after one warm-up, timed with CUDA
/// events on the model's stream (launch gaps included; no graph).
pub fn time_us(gpu: &Gpu, reps: usize, f: &mut dyn FnMut() -> Result<()>) -> Result<f64> {
    f()?;
    gpu.sync()?;
    let ev = |gpu: &Gpu| gpu.stream.record_event(Some(CU_EVENT_DEFAULT)).map_err(|e| anyhow!("CUDA event: {e:?}"));
    let start = ev(gpu)?;
    for _ in 0..reps {
        f()?;
    }
    let end = ev(gpu)?;
    Ok(start.elapsed_ms(&end).map_err(|e| anyhow!("CUDA event: {e:?}"))? as f64 * 1e3 / reps as f64)
}

/// Mean µs per call of `f` inside a CUDA graph: `f(i)` captured for i in 0..calls in one graph,
/// replayed 5 times after one warm-up replay (no host launch pace, like the decode step).
pub fn graph_time_us(gpu: &Gpu, calls: usize, f: &mut dyn FnMut(usize) -> Result<()>) -> Result<f64> {
    let cu = |e| anyhow!("CUDA graph: {e:?}");
    gpu.sync()?;
    gpu.stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).map_err(cu)?;
    let captured: Result<()> = (0..calls).try_for_each(&mut *f);
    let graph = gpu.stream.end_capture(CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH);
    captured?;
    let graph = graph.map_err(cu)?.ok_or_else(|| anyhow!("CUDA graph: nothing captured"))?;
    graph.launch().map_err(cu)?;
    gpu.sync()?;
    let start = gpu.stream.record_event(Some(CU_EVENT_DEFAULT)).map_err(cu)?;
    for _ in 0..5 {
        graph.launch().map_err(cu)?;
    }
    let end = gpu.stream.record_event(Some(CU_EVENT_DEFAULT)).map_err(cu)?;
    Ok(start.elapsed_ms(&end).map_err(cu)? as f64 * 1e3 / (5 * calls) as f64)
}

/// Every cost, in the order of the table: empty kernels, decode GEMVs (weights hot in L2 and
/// cold), the lm_head, the MoE block per token count, attention per context, the GDN kernels,
/// the GPU sampler, and what a server request pays around its decode steps. `model` must have at
/// least one layer of each kind.
pub fn kernel_costs(model: &CudaModel) -> Result<Vec<Cost>> {
    let gpu = &model.gpu;
    let w = &model.weights;
    let mut costs = Vec::new();
    let mut add = |name: String, micros: f64, note: String| {
        eprintln!("  {name}: {micros:.2} µs {note}");
        costs.push(Cost { name, micros, note });
    };
    let tb = |bytes: f64, us: f64| format!("{:.2} TB/s", bytes / us / 1e6);

    // Launch floor: an empty kernel (n = 0) in a graph.
    let empty = |grid, block| move |_| cast_cu::cast_f32_to_bf16(gpu, Launch::new(grid, block, 0), 0, 0, 0);
    add("empty kernel, 1 block (graph)".into(), graph_time_us(gpu, 256, &mut empty((1, 1, 1), 32))?, String::new());
    let blocks = gemv_blocks(gpu);
    let us = graph_time_us(gpu, 256, &mut empty(blocks, 256))?;
    add(format!("empty kernel, {} blocks of 256 (graph)", blocks.0), us, String::new());

    // Decode GEMVs in a graph: the same matrix every call (hot in L2) against one per GDN layer
    // in turn (cold).
    let gdn: Vec<_> = w
        .layers
        .iter()
        .filter_map(|l| if let MixerGpu::GatedDeltaNet(g) = &l.mixer { Some(g) } else { None })
        .collect();
    let attn: Vec<_> = w
        .layers
        .iter()
        .filter_map(|l| if let MixerGpu::FullAttention(a) = &l.mixer { Some(a) } else { None })
        .collect();
    let (Some(g0), Some(a0)) = (gdn.first(), attn.first()) else {
        bail!("kernel costs need a model with a GDN and an attention layer (--layers 4 or more)")
    };
    let eps = model.config.rms_norm_eps;
    let scratch = Scratch::new(gpu, 4096)?;
    let h = scratch.ptr(5); // f32 [t ≤ 4096, 2048], zero or whatever a previous op left
    let norm = w.layers[0].input_norm;
    let x = gpu.alloc(4096 * 4096 * 2)?; // bf16 inputs
    let y = gpu.alloc(4096 * 12352 * 4)?;
    let cols_4096 = |i: usize| gdn[i % gdn.len()].out_proj;
    let rows_4096 = |i: usize| gdn[i % gdn.len()].in_proj_z;
    let rows_12352 = |i: usize| gdn[i % gdn.len()].in_proj;
    if g0.out_proj.fp8_scales.is_some() {
        eprintln!("  (FP8 weights: the GEMV rows time the FP8 kernels)");
    }
    for (label, m) in
        [("out_proj", &cols_4096 as &dyn Fn(usize) -> _), ("in_proj_z", &rows_4096), ("in_proj", &rows_12352)]
    {
        let call = |i: usize| {
            let m = m(i);
            if m.cols == 4096 {
                gemv(gpu, x.ptr(), &m, y.ptr(), true)
            } else {
                gemv_norm(gpu, h, &norm, eps, &m, y.ptr())
            }
        };
        let m0 = m(0);
        let bytes = matrix_bytes(&m0);
        let hot = graph_time_us(gpu, 64, &mut |_| call(0))?;
        let cold = graph_time_us(gpu, 64, &mut |i| call(i))?;
        let shape = format!("{}x{}", m0.rows, m0.cols);
        add(format!("decode GEMV {label} {shape}, hot (graph)"), hot, tb(bytes, hot));
        add(format!("decode GEMV {label} {shape}, {} matrices cold (graph)", gdn.len().min(64)), cold, tb(bytes, cold));
    }

    // The lm_head: the screen and its rescore (the greedy step's end) against the full bf16 GEMV.
    let out = gpu.alloc(64)?;
    if w.lm_head.is_bf16() {
        let screen = LmHeadScreen::new(gpu, &w.lm_head)?;
        let us = graph_time_us(gpu, 8, &mut |_| screen.argmax(gpu, h, &w.final_norm, eps, out.ptr()))?;
        add("lm_head screen + rescore (graph)".into(), us, tb((VOCAB * HIDDEN) as f64, us) + " of int8");
    }
    let us = graph_time_us(gpu, 8, &mut |_| gemv_norm(gpu, h, &w.final_norm, eps, &w.lm_head, y.ptr()))?;
    let form = if w.lm_head.is_bf16() { "bf16".to_string() } else { format!("{:?}", w.lm_head.format.unwrap()) };
    add(format!("lm_head full {form} GEMV (graph)"), us, tb(matrix_bytes(&w.lm_head), us));

    // The MoE block per path and token count.
    let moe = &w.layers[0].moe;
    for (t, grouped) in [(1usize, false), (4, false), (4, true), (64, true), (512, true), (4096, true)] {
        if !grouped && !moe.is_bf16() {
            continue; // FP8 and int4 experts have only the grouped path
        }
        let reps = if t >= 512 { 5 } else { 200 };
        let us = time_us(gpu, reps, &mut || moe_block_path(gpu, moe, x.ptr(), t, &scratch, None, y.ptr(), grouped))?;
        let path = if grouped { "grouped" } else { "gemv" };
        // Every (token, expert) pair reading its expert: 9 × 3 × 512 × 2048 bf16, and the router.
        let bytes = (t * (TOP_K + 1) * 3 * EXPERT_DIM * HIDDEN * 2 + EXPERTS * HIDDEN * 2) as f64;
        add(format!("moe_block t={t} ({path})"), us, format!("{:.1} µs/token, {}", us / t as f64, tb(bytes, us)));
    }

    // Attention at several contexts (the KV cache zeroed: the cost does not depend on its values).
    let max_seq = 131_072 + 4096;
    let cache = KvCacheGpu::new(gpu, max_seq)?;
    let position_bytes = (KV_HEADS * HEAD_DIM * 2) as f64;
    let (q, qg, gated) = (x.ptr(), y.ptr(), scratch.ptr(2));
    for ctx in [4096usize, 32_768, 131_072] {
        let pos = gpu.upload_i32(&[ctx as i32 - 1])?;
        let us = time_us(gpu, 200, &mut || attend(gpu, q, qg, 1, pos.ptr(), &cache, &scratch, gated))?;
        add(format!("decode attend at context {ctx}"), us, tb(ctx as f64 * 2.0 * position_bytes, us) + " of KV");
        let us = time_us(gpu, 200, &mut || {
            attention_mixer(gpu, a0, x.ptr(), 1, pos.ptr(), Rope::ROW, &cache, &scratch, None, y.ptr())
        })?;
        add(format!("decode attention mixer at context {ctx}"), us, String::new());
    }
    for (t, start) in [(4096usize, 0usize), (4096, 131_072 - 4096)] {
        let pos = gpu.upload_i32(&[start as i32])?;
        let us = time_us(gpu, 3, &mut || attend(gpu, q, qg, t, pos.ptr(), &cache, &scratch, gated))?;
        // Causal score + PV FLOPs: 4·d per (query head, visible key).
        let pairs: f64 = (0..t).map(|i| (start + i + 1) as f64).sum();
        let tflops = pairs * (ATTN_HEADS * HEAD_DIM * 4) as f64 / us / 1e6;
        add(format!("prefill attend T={t} at {start}"), us, format!("{tflops:.0} TFLOP/s"));
    }
    drop(cache);

    // The GDN kernels: the decode step, and the prefill kernels at long T.
    let c = GdnConsts::of(g0);
    let state = GdnStateGpu::new(gpu)?;
    let t_max = 4096;
    let value_dim = GDN_V_HEADS * GDN_HEAD_DIM;
    let mixed = gpu.alloc(t_max * GDN_CONV_DIM * 4)?;
    let small = gpu.alloc(t_max * value_dim * 4)?;
    let ab = gpu.alloc(t_max * GDN_V_HEADS * 4)?;
    let gates = gpu.alloc(t_max * crate::ops::gdn::GATES_STRIDE * 4)?;
    let o = gpu.alloc(t_max * value_dim * 4)?;
    let (s, conv, taps) = (state.recurrent.ptr(), state.conv.ptr(), g0.conv1d.ptr);
    let us =
        time_us(gpu, 2000, &mut || decode_step(gpu, &c, mixed.ptr(), small.ptr(), ab.ptr(), ab.ptr(), s, s, x.ptr()))?;
    let state_bytes = (GDN_V_HEADS * GDN_HEAD_DIM * GDN_HEAD_DIM * 4) as f64;
    add("gdn_decode_step".into(), us, tb(2.0 * state_bytes, us) + " of state read + write");
    let us = time_us(gpu, 2000, &mut || conv_silu(gpu, y.ptr(), conv, conv, taps, 1, mixed.ptr()))?;
    add("gdn_conv_silu T=1".into(), us, String::new());
    for t in [1024usize, 4096] {
        let reps = if t > 1024 { 3 } else { 20 };
        let us = time_us(gpu, reps, &mut || conv_silu(gpu, y.ptr(), conv, conv, taps, t, mixed.ptr()))?;
        add(format!("gdn_conv_silu T={t}"), us, String::new());
        let us = time_us(gpu, reps, &mut || prep(gpu, &c, mixed.ptr(), ab.ptr(), ab.ptr(), t, gates.ptr()))?;
        add(format!("gdn_prep T={t}"), us, String::new());
        let us = time_us(gpu, reps, &mut || scan(gpu, mixed.ptr(), gates.ptr(), s, t, o.ptr()))?;
        add(format!("gdn_prefill_scan T={t}"), us, format!("{:.1} ns/token", us * 1e3 / t as f64));
        let us = time_us(gpu, reps, &mut || gated_norm(gpu, &c, o.ptr(), small.ptr(), t, x.ptr()))?;
        add(format!("gdn_gated_norm T={t}"), us, String::new());
    }

    // The GPU sampler over the whole vocabulary (two kernels, launch gaps included).
    let params = SamplingParamsGpu::new(gpu)?;
    params.write(gpu, &SamplerConfig { temperature: 0.7, top_k: 20, top_p: 0.95, seed: 1 })?;
    let sample_scratch = gpu.alloc(SAMPLE_SCRATCH_BYTES)?;
    let us = time_us(gpu, 200, &mut || sample(gpu, y.ptr(), VOCAB, &params, sample_scratch.ptr(), out.ptr()))?;
    add(format!("GPU sampler over {VOCAB} logits"), us, "T 0.7, top-k 20, top-p 0.95".into());

    // What a server request pays around its decode steps (host clock, synchronised).
    let us_since = |t: Instant| t.elapsed().as_secs_f64() * 1e6;
    let t0 = Instant::now();
    let mut first = model.try_new_state()?;
    gpu.sync()?;
    add("server: a new state".into(), us_since(t0), format!("{}-token KV cache", model.max_seq));
    model.prefill(&mut first, &[1, 2, 3, 4], Logits::Last)?;
    let t0 = Instant::now();
    let mut copy = model.copy_state(&first)?;
    gpu.sync()?;
    add("server: a copy of a state (prefix-cache resume)".into(), us_since(t0), String::new());
    let mut sampler = Sampler::new(SamplerConfig { temperature: 1.0, top_k: 20, top_p: 0.95, seed: 1 });
    let t0 = Instant::now();
    let mut token = model.decode_pick(&mut copy, 5, &mut sampler)?;
    add("server: first decode_pick of a state (captures its graph)".into(), us_since(t0), String::new());
    let t0 = Instant::now();
    for _ in 0..8 {
        token = model.decode_pick(&mut copy, token, &mut sampler)?;
    }
    add("server: a later decode_pick".into(), us_since(t0) / 8.0, "mean of 8".into());
    let t0 = Instant::now();
    model.picked_logits()?;
    add("server: picked_logits (the logits to the host)".into(), us_since(t0), String::new());
    if model.can_decode_tokens(1) {
        // The multi-token step (speculative verify): its graph, then the logits to the host.
        let mut state = model.try_new_state()?;
        model.prefill(&mut state, &[1, 2, 3, 4], Logits::Last)?;
        let vocab = model.config.vocab_size;
        let logits = gpu.alloc(8 * vocab * 4)?;
        for t in [1usize, 2, 4, 8] {
            let tokens: Vec<u32> = (0..t as u32).map(|i| 100 + 7 * i).collect();
            model.decode_tokens(&state, &tokens)?; // captures its graph
            let t0 = Instant::now();
            for _ in 0..8 {
                model.decode_tokens(&state, &tokens)?;
            }
            add(format!("multi-token decode step, {t} tokens"), us_since(t0) / 8.0, "graph + logits download".into());
            let t0 = Instant::now();
            gpu.download_f32(logits.ptr(), t * vocab)?;
            add(format!("download of {t} × {vocab} logits"), us_since(t0), String::new());
        }
        let tokens: Vec<u32> = (0..4u32).map(|i| 100 + 7 * i).collect();
        for k in model.profile_decode_tokens(&state, &tokens)? {
            add(format!("  4 tokens: {}", k.kernel), k.micros as f64, format!("{} launches, back to back", k.launches));
        }
    }
    Ok(costs)
}

/// The bytes a GEMV over `m` reads: bf16, e4m3 or a GGUF format's rows.
fn matrix_bytes(m: &Matrix) -> f64 {
    (m.rows * m.row_bytes()) as f64
}
