//! The mixture-of-experts block on the GPU (the formulas: crates/cpu/src/moe.rs).
//!
//! Routing stays on the device: router logits (`linear`; the router matrix carries the shared
//! expert's gate as row 256) → `moe_route` (softmax, top-8, renormalise, shared-expert gate;
//! ids/weights `[T, 9]`, slot 8 = the shared expert, index 256).
//!
//! - Decode step (`moe_decode`): one persistent kernel, `moe_decode_block` (moe_decode.cu): the
//!   mixer's output projection (added to the residual stream), the post-attention RMSNorm, the
//!   router product, the routing, the 9 experts' gate/up rows (SwiGLU) and down rows (weighted
//!   sum over the slots, added to the residual stream), its phases meeting at grid barriers. Its
//!   grid is 2 blocks an SM on Hopper, one elsewhere (`fused_grid`). Its four-kernel form
//!   (`moe_decode_kernels`, the same bits; GPUs with fewer than 64 SMs, and the multi-token
//!   step's several tokens at once): `gemv_bf16` → `moe_route_decode` (norm,
//!   router, routing) → `moe_gate_up_gemv` → `moe_down_gemv`. Packed experts (int4, a GGUF
//!   file's k-quants) have their own instances, which also read the output projection and the
//!   shared expert in the experts' formats when the checkpoint stores them so
//!   (`out_proj_tokens_q` in the four-kernel form; `SharedExpert::rows`).
//! - Few tokens (`t <= GEMV_MAX_T`): the same two expert GEMVs after `moe_route`.
//! - Prefill: `moe_plan` + `moe_permute` group the (token, slot) pairs by expert (counting sort on
//!   the device), then the grouped tensor-core GEMMs `moe_gate_up_grouped` (SwiGLU fused, bf16
//!   activations) and `moe_down_grouped` (weighted f32 atomic scatter-add into `out`). Their grids
//!   are sized for the worst case; tiles past the device-side tile count exit at once. FP8
//!   experts: `moe_gate_up_grouped_fp8` / `moe_down_grouped_fp8` read the e4m3 weights and block
//!   scales as stored and widen them to bf16 in shared memory (w = q · s, `dequantize_fp8`'s
//!   rounding), so prefill reads half the bytes and needs no bf16 copy of the experts.

use crate::kernels::widths::{EXPERTS, EXPERT_DIM, HIDDEN, TOP_K};
use crate::kernels::{kernel_file, Launch};
use crate::kquant::KQuant;
use crate::ops::gemv_q;
use crate::ops::linear::{gemv_tokens_accumulate, linear};
use crate::ops::lora::{self, ExpertsInput, Out};
use crate::ops::{Scratch, SCRATCH_WIDTH};
use crate::runtime::{DevPtr, Gpu};
use crate::weights::{ExpertScales, Matrix, MoeGpu, Packed, RowFormat, Vector};
use anyhow::{ensure, Context, Result};

kernel_file! {
    /// `moe_router.cu`'s kernels.
    pub mod moe_router_cu = "moe_router.cu" {
        fn moe_route(logits: DevPtr, t: i32, ids: DevPtr, weights: DevPtr, counts: DevPtr);
        fn moe_route_decode(router: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, logits: DevPtr, x: DevPtr, ids: DevPtr, weights: DevPtr, ticket: DevPtr);
        fn moe_plan(counts: DevPtr, t: i32, offsets: DevPtr, cursor: DevPtr, tiles: DevPtr, total_tiles: DevPtr);
        fn moe_permute(ids: DevPtr, t: i32, offsets: DevPtr, cursor: DevPtr, perm: DevPtr);
    }
}
kernel_file! {
    /// `moe_decode.cu`'s kernels (helpers in `moe_decode.cuh`).
    pub mod moe_decode_cu = "moe_decode.cu" with "lora.cuh", "moe_decode.cuh" {
        fn moe_decode_block(w_o: DevPtr, y: DevPtr, router: DevPtr, gate_up: DevPtr, down: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, logits: DevPtr, act: DevPtr, arrivals: DevPtr, lora: DevPtr, ml: DevPtr);
        fn moe_decode_block_out_lora(w_o: DevPtr, y: DevPtr, router: DevPtr, gate_up: DevPtr, down: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, logits: DevPtr, act: DevPtr, arrivals: DevPtr, lora: DevPtr, ml: DevPtr);
        fn moe_decode_block_lora(w_o: DevPtr, y: DevPtr, router: DevPtr, gate_up: DevPtr, down: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, logits: DevPtr, act: DevPtr, arrivals: DevPtr, lora: DevPtr, ml: DevPtr);
        fn moe_decode_block_wide(w_o: DevPtr, y: DevPtr, router: DevPtr, gate_up: DevPtr, down: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, logits: DevPtr, act: DevPtr, arrivals: DevPtr, lora: DevPtr, ml: DevPtr);
        fn moe_decode_block_int4(w_o: DevPtr, y: DevPtr, router: DevPtr, gate_up: DevPtr, down: DevPtr, shared_gate_up: DevPtr, shared_down: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, logits: DevPtr, act: DevPtr, arrivals: DevPtr, w_o_rows: i32, y_tile_r: i32, shared_rows: i32);
        fn moe_decode_block_q4k_q4k(w_o: DevPtr, y: DevPtr, router: DevPtr, gate_up: DevPtr, down: DevPtr, shared_gate_up: DevPtr, shared_down: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, logits: DevPtr, act: DevPtr, arrivals: DevPtr, w_o_rows: i32, y_tile_r: i32, shared_rows: i32);
        fn moe_decode_block_q4k_q5k(w_o: DevPtr, y: DevPtr, router: DevPtr, gate_up: DevPtr, down: DevPtr, shared_gate_up: DevPtr, shared_down: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, logits: DevPtr, act: DevPtr, arrivals: DevPtr, w_o_rows: i32, y_tile_r: i32, shared_rows: i32);
        fn moe_decode_block_q4k_q6k(w_o: DevPtr, y: DevPtr, router: DevPtr, gate_up: DevPtr, down: DevPtr, shared_gate_up: DevPtr, shared_down: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, logits: DevPtr, act: DevPtr, arrivals: DevPtr, w_o_rows: i32, y_tile_r: i32, shared_rows: i32);
        fn moe_decode_block_q5k_q5k(w_o: DevPtr, y: DevPtr, router: DevPtr, gate_up: DevPtr, down: DevPtr, shared_gate_up: DevPtr, shared_down: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, logits: DevPtr, act: DevPtr, arrivals: DevPtr, w_o_rows: i32, y_tile_r: i32, shared_rows: i32);
        fn moe_decode_block_q5k_q6k(w_o: DevPtr, y: DevPtr, router: DevPtr, gate_up: DevPtr, down: DevPtr, shared_gate_up: DevPtr, shared_down: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, logits: DevPtr, act: DevPtr, arrivals: DevPtr, w_o_rows: i32, y_tile_r: i32, shared_rows: i32);
        fn moe_decode_block_q6k_q6k(w_o: DevPtr, y: DevPtr, router: DevPtr, gate_up: DevPtr, down: DevPtr, shared_gate_up: DevPtr, shared_down: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, logits: DevPtr, act: DevPtr, arrivals: DevPtr, w_o_rows: i32, y_tile_r: i32, shared_rows: i32);
        fn moe_decode_block_q8_0_q8_0(w_o: DevPtr, y: DevPtr, router: DevPtr, gate_up: DevPtr, down: DevPtr, shared_gate_up: DevPtr, shared_down: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, logits: DevPtr, act: DevPtr, arrivals: DevPtr, w_o_rows: i32, y_tile_r: i32, shared_rows: i32);
        fn moe_decode_block_int4_wide(w_o: DevPtr, y: DevPtr, router: DevPtr, gate_up: DevPtr, down: DevPtr, shared_gate_up: DevPtr, shared_down: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, logits: DevPtr, act: DevPtr, arrivals: DevPtr, w_o_rows: i32, y_tile_r: i32, shared_rows: i32);
        fn moe_decode_block_q4k_q4k_wide(w_o: DevPtr, y: DevPtr, router: DevPtr, gate_up: DevPtr, down: DevPtr, shared_gate_up: DevPtr, shared_down: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, logits: DevPtr, act: DevPtr, arrivals: DevPtr, w_o_rows: i32, y_tile_r: i32, shared_rows: i32);
        fn moe_decode_block_q4k_q5k_wide(w_o: DevPtr, y: DevPtr, router: DevPtr, gate_up: DevPtr, down: DevPtr, shared_gate_up: DevPtr, shared_down: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, logits: DevPtr, act: DevPtr, arrivals: DevPtr, w_o_rows: i32, y_tile_r: i32, shared_rows: i32);
        fn moe_decode_block_q4k_q6k_wide(w_o: DevPtr, y: DevPtr, router: DevPtr, gate_up: DevPtr, down: DevPtr, shared_gate_up: DevPtr, shared_down: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, logits: DevPtr, act: DevPtr, arrivals: DevPtr, w_o_rows: i32, y_tile_r: i32, shared_rows: i32);
        fn moe_decode_block_q5k_q5k_wide(w_o: DevPtr, y: DevPtr, router: DevPtr, gate_up: DevPtr, down: DevPtr, shared_gate_up: DevPtr, shared_down: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, logits: DevPtr, act: DevPtr, arrivals: DevPtr, w_o_rows: i32, y_tile_r: i32, shared_rows: i32);
        fn moe_decode_block_q5k_q6k_wide(w_o: DevPtr, y: DevPtr, router: DevPtr, gate_up: DevPtr, down: DevPtr, shared_gate_up: DevPtr, shared_down: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, logits: DevPtr, act: DevPtr, arrivals: DevPtr, w_o_rows: i32, y_tile_r: i32, shared_rows: i32);
        fn moe_decode_block_q6k_q6k_wide(w_o: DevPtr, y: DevPtr, router: DevPtr, gate_up: DevPtr, down: DevPtr, shared_gate_up: DevPtr, shared_down: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, logits: DevPtr, act: DevPtr, arrivals: DevPtr, w_o_rows: i32, y_tile_r: i32, shared_rows: i32);
        fn moe_decode_block_q8_0_q8_0_wide(w_o: DevPtr, y: DevPtr, router: DevPtr, gate_up: DevPtr, down: DevPtr, shared_gate_up: DevPtr, shared_down: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, logits: DevPtr, act: DevPtr, arrivals: DevPtr, w_o_rows: i32, y_tile_r: i32, shared_rows: i32);
        fn moe_decode_block_int4_wide16(w_o: DevPtr, y: DevPtr, router: DevPtr, gate_up: DevPtr, down: DevPtr, shared_gate_up: DevPtr, shared_down: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, logits: DevPtr, act: DevPtr, arrivals: DevPtr, w_o_rows: i32, y_tile_r: i32, shared_rows: i32);
    }
}
kernel_file! {
    /// `moe_decode_fp8.cu`'s kernel (helpers in `moe_decode.cuh`).
    pub mod moe_decode_fp8_cu = "moe_decode_fp8.cu" with "moe_decode.cuh" {
        fn moe_decode_block_fp8(w_o: DevPtr, w_o_scales: DevPtr, y: DevPtr, router: DevPtr, gate_up: DevPtr, gate_up_scales: DevPtr, down: DevPtr, down_scales: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, logits: DevPtr, act: DevPtr, arrivals: DevPtr);
    }
}

kernel_file! {
    /// `moe_gemv_q.cu`'s kernels (helpers in `moe_decode.cuh`).
    pub mod moe_gemv_q_cu = "moe_gemv_q.cu" with "lora.cuh", "moe_decode.cuh" {
        fn moe_gate_up_gemv_int4(x: DevPtr, gate_up: DevPtr, shared_gate_up: DevPtr, ids: DevPtr, delta: DevPtr, act: DevPtr, shared_rows: i32);
        fn moe_down_gemv_int4(act: DevPtr, down: DevPtr, shared_down: DevPtr, ids: DevPtr, weights: DevPtr, out: DevPtr, shared_rows: i32);
        fn moe_gate_up_gemv_q4k(x: DevPtr, gate_up: DevPtr, shared_gate_up: DevPtr, ids: DevPtr, delta: DevPtr, act: DevPtr, shared_rows: i32);
        fn moe_down_gemv_q4k(act: DevPtr, down: DevPtr, shared_down: DevPtr, ids: DevPtr, weights: DevPtr, out: DevPtr, shared_rows: i32);
        fn moe_gate_up_gemv_q5k(x: DevPtr, gate_up: DevPtr, shared_gate_up: DevPtr, ids: DevPtr, delta: DevPtr, act: DevPtr, shared_rows: i32);
        fn moe_down_gemv_q5k(act: DevPtr, down: DevPtr, shared_down: DevPtr, ids: DevPtr, weights: DevPtr, out: DevPtr, shared_rows: i32);
        fn moe_gate_up_gemv_q6k(x: DevPtr, gate_up: DevPtr, shared_gate_up: DevPtr, ids: DevPtr, delta: DevPtr, act: DevPtr, shared_rows: i32);
        fn moe_down_gemv_q6k(act: DevPtr, down: DevPtr, shared_down: DevPtr, ids: DevPtr, weights: DevPtr, out: DevPtr, shared_rows: i32);
        fn moe_gate_up_gemv_q8_0(x: DevPtr, gate_up: DevPtr, shared_gate_up: DevPtr, ids: DevPtr, delta: DevPtr, act: DevPtr, shared_rows: i32);
        fn moe_down_gemv_q8_0(act: DevPtr, down: DevPtr, shared_down: DevPtr, ids: DevPtr, weights: DevPtr, out: DevPtr, shared_rows: i32);
    }
}
kernel_file! {
    /// `moe_experts.cu`'s kernels.
    pub mod moe_experts_cu = "moe_experts.cu" with "lora.cuh" {
        fn moe_gate_up_gemv(x: DevPtr, gate_up: DevPtr, ids: DevPtr, delta: DevPtr, act: DevPtr);
        fn moe_down_gemv(act: DevPtr, down: DevPtr, ids: DevPtr, weights: DevPtr, out: DevPtr);
        fn moe_gate_up_grouped(x: DevPtr, gate_up: DevPtr, perm: DevPtr, tiles: DevPtr, total_tiles: DevPtr, delta: DevPtr, act: DevPtr);
        fn moe_gate_up_grouped_fp8(x: DevPtr, gate_up: DevPtr, scales: DevPtr, perm: DevPtr, tiles: DevPtr, total_tiles: DevPtr, delta: DevPtr, act: DevPtr);
        fn moe_gate_up_grouped_int4(x: DevPtr, gate_up: DevPtr, shared: DevPtr, perm: DevPtr, tiles: DevPtr, total_tiles: DevPtr, delta: DevPtr, act: DevPtr);
        fn moe_gate_up_grouped_q4k(x: DevPtr, gate_up: DevPtr, shared: DevPtr, perm: DevPtr, tiles: DevPtr, total_tiles: DevPtr, delta: DevPtr, act: DevPtr);
        fn moe_gate_up_grouped_q5k(x: DevPtr, gate_up: DevPtr, shared: DevPtr, perm: DevPtr, tiles: DevPtr, total_tiles: DevPtr, delta: DevPtr, act: DevPtr);
        fn moe_gate_up_grouped_q6k(x: DevPtr, gate_up: DevPtr, shared: DevPtr, perm: DevPtr, tiles: DevPtr, total_tiles: DevPtr, delta: DevPtr, act: DevPtr);
        fn moe_gate_up_grouped_q8_0(x: DevPtr, gate_up: DevPtr, shared: DevPtr, perm: DevPtr, tiles: DevPtr, total_tiles: DevPtr, delta: DevPtr, act: DevPtr);
        fn moe_down_grouped(act: DevPtr, down: DevPtr, perm: DevPtr, weights: DevPtr, tiles: DevPtr, total_tiles: DevPtr, out: DevPtr);
        fn moe_down_grouped_fp8(act: DevPtr, down: DevPtr, scales: DevPtr, perm: DevPtr, weights: DevPtr, tiles: DevPtr, total_tiles: DevPtr, out: DevPtr);
        fn moe_down_grouped_int4(act: DevPtr, down: DevPtr, shared: DevPtr, perm: DevPtr, weights: DevPtr, tiles: DevPtr, total_tiles: DevPtr, out: DevPtr);
        fn moe_down_grouped_q4k(act: DevPtr, down: DevPtr, shared: DevPtr, perm: DevPtr, weights: DevPtr, tiles: DevPtr, total_tiles: DevPtr, out: DevPtr);
        fn moe_down_grouped_q5k(act: DevPtr, down: DevPtr, shared: DevPtr, perm: DevPtr, weights: DevPtr, tiles: DevPtr, total_tiles: DevPtr, out: DevPtr);
        fn moe_down_grouped_q6k(act: DevPtr, down: DevPtr, shared: DevPtr, perm: DevPtr, weights: DevPtr, tiles: DevPtr, total_tiles: DevPtr, out: DevPtr);
        fn moe_down_grouped_q8_0(act: DevPtr, down: DevPtr, shared: DevPtr, perm: DevPtr, weights: DevPtr, tiles: DevPtr, total_tiles: DevPtr, out: DevPtr);
    }
}

/// Router rows: the experts, then the shared expert's gate.
const ROUTER_ROWS: usize = EXPERTS + 1;
/// Routed experts plus the shared one, per token.
pub(crate) const SLOTS: usize = TOP_K + 1;
/// Width of the mixers' outputs (GDN 32 × 128, attention 16 × 256): out_proj / o_proj's input.
const MIXER_OUT: usize = 4096;
/// Token counts up to this use the GEMV kernels (each token streams its 9 experts' weights).
pub const GEMV_MAX_T: usize = 4;
/// Warps per block of `moe_gate_up_gemv` (one intermediate row each).
const GATE_UP_WARPS: usize = 8;
/// `moe_down_gemv`: output columns per block, and warps per column (each takes 3 of the 9 slots).
const DOWN_COLUMNS: usize = 4;
const DOWN_GROUPS: usize = 3;
/// Shared memory of `moe_gate_up_gemv`: each warp's gate and up rows (bf16), then x (f32).
const GATE_UP_GEMV_SHARED: usize = GATE_UP_WARPS * 2 * HIDDEN * 2 + HIDDEN * 4;
/// Shared memory of `moe_decode_block` (`MoeDecodeShared`): 8 warps' 2-row rings and shared-expert
/// down rows (bf16), x and the activations (f32), the routing.
const MOE_DECODE_SHARED: usize =
    8 * 2 * HIDDEN * 2 + 8 * EXPERT_DIM * 2 + HIDDEN * 4 + SLOTS * EXPERT_DIM * 4 + 32 * 4 + SLOTS * 8;
/// Shared memory of `moe_decode_block_int4_wide16` (`MoeDecodeShared16`): 16 warps' 4 KB rings,
/// x and the activations (f32), the routing.
const MOE_DECODE_SHARED_16: usize = 16 * HIDDEN * 2 + HIDDEN * 4 + SLOTS * EXPERT_DIM * 4 + 32 * 4 + SLOTS * 8;
/// Rows per grouped-GEMM tile (`GEMM_BM` in the .cu files).
const TILE_ROWS: usize = 128;
/// Output columns per grouped-GEMM tile: gate/up's 128 B rows are 64 gate and 64 up rows;
/// down's are 128 output columns.
const GATE_UP_TILE_COLS: usize = 64;
const DOWN_TILE_COLS: usize = 128;
/// Threads of a grouped-GEMM block (8 warps, each 32 rows x 64 B rows).
const GEMM_THREADS: u32 = 256;
/// Shared memory of the grouped GEMMs: `stages` × (A 128 rows + B 128 rows) × 72 bf16; the FP8
/// forms: the stages of A, of B's bytes (128 × 64 e4m3) and one bf16 B tile (128 × 72). Three
/// stages with 227 KB of shared memory (≤ 113 KB: two blocks an SM), two in the forms for 99 KB
/// (`GEMM_STAGES` in moe_experts.cu).
const fn gemm_shared(stages: usize, fp8: bool) -> usize {
    if fp8 {
        stages * 128 * 72 * 2 + stages * 128 * 64 + 128 * 72 * 2
    } else {
        stages * (128 + 128) * 72 * 2
    }
}

fn gemm_stages(gpu: &Gpu) -> usize {
    if gpu.target.big_shared() {
        3
    } else {
        2
    }
}

/// Where the MoE block keeps its intermediates. Scratch buffer 0 (4-byte units): router logits
/// f32 `[t, 257]`, weights f32 `[t, 9]`, ids i32 `[t, 9]`, the decode step's normalised input
/// bf16 `[2048]`, then for prefill: counts / offsets / cursor i32 `[257]` each, the tile count,
/// tiles int4 `[max_tiles]`, perm i32 `[t·9]`.
/// Scratch buffer 1: activations (decode f32 `[t, 9, 512]`; prefill bf16 `[t·9, 512]`, permuted).
struct Layout {
    logits: DevPtr,
    weights: DevPtr,
    ids: DevPtr,
    x: DevPtr,
    counts: DevPtr,
    offsets: DevPtr,
    cursor: DevPtr,
    total_tiles: DevPtr,
    tiles: DevPtr,
    perm: DevPtr,
    act: DevPtr,
    max_tiles: usize,
}

impl Layout {
    fn new(scratch: &Scratch, t: usize) -> Result<Self> {
        ensure!(t >= 1 && t <= scratch.max_tokens, "MoE: {t} tokens but scratch holds {}", scratch.max_tokens);
        // Every expert adds at most one partial tile; the shared expert has all t rows.
        let max_tiles = (t * TOP_K).div_ceil(TILE_ROWS) + EXPERTS + t.div_ceil(TILE_ROWS);
        let base = scratch.ptr(0);
        let mut at = 0usize; // in 4-byte words
        let mut take = |words: usize| {
            let p = base + (at * 4) as u64;
            at += words.div_ceil(4) * 4; // keep 16-byte alignment for the int4 tiles
            p
        };
        let logits = take(t * ROUTER_ROWS);
        let weights = take(t * SLOTS);
        let ids = take(t * SLOTS);
        let x = take(t * HIDDEN / 2); // bf16 [t, 2048]: the decode forms' normalised input
        let counts = take(EXPERTS + 1);
        let offsets = take(EXPERTS + 1);
        let cursor = take(EXPERTS + 1);
        let total_tiles = take(1);
        let tiles = take(4 * max_tiles);
        let perm = take(t * SLOTS);
        ensure!(at <= scratch.max_tokens * SCRATCH_WIDTH, "MoE scratch layout overflows buffer 0");
        Ok(Layout {
            logits,
            weights,
            ids,
            x,
            counts,
            offsets,
            cursor,
            total_tiles,
            tiles,
            perm,
            act: scratch.ptr(1),
            max_tiles,
        })
    }
}

/// out (f32 `[t, 2048]`, overwritten, not added to the residual) = Σ routed w_e·expert_e(x) +
/// sigmoid(x·w_sg)·shared(x), for x bf16 `[t, 2048]` (normalised input). Scratch buffers 0 and 1.
/// FP8 and int4 experts take the grouped GEMMs at every `t` (the expert GEMVs read bf16).
/// With an adapter (`lora`), its router term goes into the router logits, an adapted shared
/// expert runs apart (`lora::shared_expert`), and the routed experts' terms go into the expert
/// kernels' gate/up sums and the output (`lora::ExpertsSite`; scratch buffer 2).
pub fn moe_block(
    gpu: &Gpu,
    w: &MoeGpu,
    x: DevPtr,
    t: usize,
    scratch: &Scratch,
    lora: lora::Adapter,
    out: DevPtr,
) -> Result<()> {
    moe_block_path(gpu, w, x, t, scratch, lora, out, t > GEMV_MAX_T || !w.is_bf16())
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn moe_block_path(
    gpu: &Gpu,
    w: &MoeGpu,
    x: DevPtr,
    t: usize,
    scratch: &Scratch,
    lora: lora::Adapter,
    out: DevPtr,
    grouped: bool,
) -> Result<()> {
    ensure!(grouped || w.fp8_scales.is_none(), "moe_block: the expert GEMVs read bf16 or int4 experts, not FP8");
    let l = Layout::new(scratch, t)?;
    route(gpu, w, x, t, &l, lora, grouped)?;
    // an adapter of the shared expert: it runs apart (`lora::shared_expert`)
    let shared_apart = match lora {
        Some((_, layer)) if layer.adapts_shared_expert() => {
            Some(w.shared_bf16().context("LoRA on the shared expert of FP8 experts (no bf16 copy of it)")?)
        }
        _ => None,
    };
    if shared_apart.is_some() {
        lora::take_shared_gate(gpu, l.weights, t, scratch)?;
    }
    // an adapter of the routed experts: its gate/up term (scratch buffer 2) goes into the expert
    // kernels' sums, its down term into out after them
    let experts = lora.and_then(|(g, layer)| layer.experts.as_ref().map(|e| (g.u(), e)));
    let delta = match experts {
        Some((u, e)) => e.gate_up_delta(gpu, x, l.ids, t, u, scratch.ptr(2))?,
        None => 0,
    };
    gpu.zero(out, t * HIDDEN * 4)?; // both expert paths add into `out`
    if grouped {
        group(gpu, t, &l)?;
        experts_grouped(gpu, w, x, &l, delta, out)?;
    } else {
        experts_gemv(gpu, w, x, t, &l, delta, out)?;
    }
    if let Some((u, e)) = experts {
        let act =
            if grouped { ExpertsInput::Permuted { act: l.act, perm: l.perm } } else { ExpertsInput::Pairs(l.act) };
        e.add_down(gpu, act, l.ids, l.weights, t, u, out)?;
    }
    match shared_apart {
        Some((gate_up, down)) => lora::shared_expert(gpu, lora, gate_up, down, x, t, scratch, out),
        None => Ok(()),
    }
}

/// The mixer's output projection, which the decode step's MoE kernel takes first: h += w · y,
/// w bf16 `[2048, 4096]` (out_proj / o_proj), y bf16 `[4096]` (the mixer's gated output).
pub struct MixerOut<'a> {
    pub w: &'a Matrix,
    pub y: DevPtr,
    /// A LoRA adapter's sites of w, one per token (a device array of `LoraSite` addresses:
    /// `ops::lora::Site::fused`, or the several-token steps' arrays), or 0. bf16 w and experts.
    pub lora: DevPtr,
}

impl<'a> MixerOut<'a> {
    /// The base model's output projection w · y.
    pub fn plain(w: &'a Matrix, y: DevPtr) -> Self {
        MixerOut { w, y, lora: 0 }
    }
}

/// The end of a decode step's layer for one token, on the residual stream h (f32 `[2048]`):
/// h += mixer.w · mixer.y, then h += MoE(RMSNorm(h; norm)), in one persistent kernel
/// (`moe_decode_block`) launched with PDL, so that its weight requests overlap the kernel before.
/// Fixed launch shapes, no host sync (graph-capturable). Scratch buffers 0 and 1, and the
/// scratch's grid barrier. Where `fused_grid` has no grid it runs the four-kernel form
/// (`moe_decode_kernels`; the same bits). `moe_lora`: a LoRA adapter of the MoE block (router,
/// shared expert, routed experts) as the fused kernel takes it (`lora::LayerLoraGpu::fused_arrays`;
/// bf16 weights and the fused kernel only: `moe_decode_block_lora`, its scratch in buffer 1 past
/// the activations), or 0.
#[allow(clippy::too_many_arguments)]
pub fn moe_decode(
    gpu: &Gpu,
    mixer: MixerOut,
    w: &MoeGpu,
    h: DevPtr,
    norm: &Vector,
    eps: f32,
    scratch: &Scratch,
    moe_lora: DevPtr,
) -> Result<()> {
    moe_decode_on(gpu, mixer, w, h, norm, eps, scratch, moe_lora, fused_grid(gpu), wide_warps())
}

/// Warps a block of the int4 experts' one-block-an-SM kernel: 16 (`moe_decode_block_int4_wide16`),
/// or 8 (`moe_decode_block_int4_wide`) with `SOLO_MOE_WIDE_WARPS=8`, for comparing the two.
fn wide_warps() -> u32 {
    static WARPS: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *WARPS.get_or_init(|| match std::env::var("SOLO_MOE_WIDE_WARPS").as_deref() {
        Ok("8") => 8,
        _ => 16,
    })
}

/// `moe_decode` with the fused kernels on a grid of `grid` blocks (every one resident; at least
/// 64; at least 257 for the adapter's kernel), or none: the four kernels (FP8 weights: always
/// their fused kernel, on the Hopper grid). A scratch
/// serves launches of one grid only (its barrier's count is kept a multiple of the grid).
/// `wide_warps`: 16 or 8, the warps a block of the int4 kernel for one block an SM (the other
/// kernels have 8).
#[allow(clippy::too_many_arguments)]
pub(crate) fn moe_decode_on(
    gpu: &Gpu,
    mixer: MixerOut,
    w: &MoeGpu,
    h: DevPtr,
    norm: &Vector,
    eps: f32,
    scratch: &Scratch,
    moe_lora: DevPtr,
    grid: Option<u32>,
    wide_warps: u32,
) -> Result<()> {
    ensure!(grid.is_none_or(|g| g >= 64), "moe_decode: a fused grid of fewer than 64 blocks");
    ensure!(
        (mixer.lora == 0 && moe_lora == 0) || (w.fp8_scales.is_none() && w.packed.is_none() && mixer.w.is_bf16()),
        "moe_decode: a LoRA site beside quantised weights"
    );
    ensure!(
        moe_lora == 0
            || (grid.is_some_and(|g| g >= ROUTER_ROWS as u32)
                && scratch.max_tokens * SCRATCH_WIDTH >= SLOTS * EXPERT_DIM + lora::FUSED_MOE_SCRATCH),
        "moe_decode: an adapter of the MoE block needs the fused kernel"
    );
    if let Some(scales) = w.fp8_scales {
        return moe_decode_fp8(gpu, mixer, w, scales, h, norm, eps, scratch);
    }
    let Some(grid) = grid else {
        return moe_decode_kernels(gpu, mixer, w, h, norm, eps, 1, scratch);
    };
    if let Some(packed) = w.packed {
        return moe_decode_packed(gpu, mixer, w, packed, h, norm, eps, grid, wide_warps, scratch);
    }
    if mixer.w.format.is_some() {
        // (bf16 experts beside an output projection as stored: the four kernels read both)
        return moe_decode_kernels(gpu, mixer, w, h, norm, eps, 1, scratch);
    }
    check_decode_shapes(&mixer, w, norm)?;
    let l = Layout::new(scratch, 1)?;
    // every block resident: the phases meet at grid barriers
    let launch = Launch::new((grid, 1, 1), 256, MOE_DECODE_SHARED as u32).pdl(true);
    // (one signature: the plain kernels take no MoE adapter and ignore `ml`; moe_decode_block
    // ignores `lora` too: an output site takes moe_decode_block_out_lora)
    let kernel = if moe_lora != 0 {
        moe_decode_cu::moe_decode_block_lora
    } else if grid >= ROUTER_ROWS as u32 && mixer.lora != 0 {
        moe_decode_cu::moe_decode_block_out_lora
    } else if grid >= ROUTER_ROWS as u32 {
        moe_decode_cu::moe_decode_block
    } else {
        moe_decode_cu::moe_decode_block_wide
    };
    kernel(
        gpu,
        launch,
        mixer.w.ptr,
        mixer.y,
        w.router.ptr,
        w.gate_up,
        w.down,
        h,
        norm.ptr,
        eps,
        l.logits,
        l.act,
        scratch.grid_barrier(),
        mixer.lora,
        moe_lora,
    )
}

/// Whether the fused decode kernels' Hopper grid (2 blocks of ~98 KB on every SM, ≥ 257 blocks:
/// a router row and 8 output columns a block) can be resident at once on this GPU. The FP8 kernel
/// and the MoE block's adapter want it.
pub(crate) fn fused_decode_fits(gpu: &Gpu) -> bool {
    2 * gpu.sms >= ROUTER_ROWS as u32 && gpu.target.big_shared()
}

/// The grid of the fused decode kernels (bf16 and 4- to 8-bit experts) on this GPU: the Hopper
/// grid; else one block an SM (`moe_decode_block_wide` and the 4- to 8-bit kernels' `_wide`
/// forms, int4's `_wide16` with 16 warps a block) where a block may hold their ~98 KB of shared
/// memory and there are at least 64 SMs
/// (512 warps: each shared expert pair a warp's first); else none (the four kernels).
pub(crate) fn fused_grid(gpu: &Gpu) -> Option<u32> {
    if fused_decode_fits(gpu) {
        Some(2 * gpu.sms)
    } else if gpu.sms >= 64 && MOE_DECODE_SHARED as u32 <= gpu.target.max_shared {
        Some(gpu.sms)
    } else {
        None
    }
}

/// `moe_decode` for FP8 weights (the mixer's output projection and the experts e4m3 with block
/// scales): `moe_decode_block_fp8`, the fused kernel's FP8 form (it has no four-kernel form).
#[allow(clippy::too_many_arguments)]
fn moe_decode_fp8(
    gpu: &Gpu,
    mixer: MixerOut,
    w: &MoeGpu,
    scales: ExpertScales,
    h: DevPtr,
    norm: &Vector,
    eps: f32,
    scratch: &Scratch,
) -> Result<()> {
    check_decode_shapes(&mixer, w, norm)?;
    ensure!(
        fused_decode_fits(gpu),
        "FP8 decode needs a GPU with at least 129 SMs and 227 KB of shared memory an SM (this one: {} SMs, {})",
        gpu.sms,
        gpu.target.describe()
    );
    let Some(w_o_scales) = mixer.w.fp8_scales else {
        anyhow::bail!("moe_decode: FP8 experts with a bf16 output projection")
    };
    let l = Layout::new(scratch, 1)?;
    moe_decode_fp8_cu::moe_decode_block_fp8(
        gpu,
        Launch::new((2 * gpu.sms, 1, 1), 256, MOE_DECODE_SHARED as u32).pdl(true),
        mixer.w.ptr,
        w_o_scales,
        mixer.y,
        w.router.ptr,
        w.gate_up,
        scales.gate_up,
        w.down,
        scales.down,
        h,
        norm.ptr,
        eps,
        l.logits,
        l.act,
        scratch.grid_barrier(),
    )
}

/// `moe_decode` for 4- to 8-bit routed experts (the router and shared expert bf16, the output
/// projection bf16 or in the experts' gate/up format): `moe_decode_block_int4`, or its instance
/// for a GGUF layer's (gate/up, down) formats.
#[allow(clippy::too_many_arguments)]
fn moe_decode_packed(
    gpu: &Gpu,
    mixer: MixerOut,
    w: &MoeGpu,
    packed: Packed,
    h: DevPtr,
    norm: &Vector,
    eps: f32,
    grid: u32,
    wide_warps: u32,
    scratch: &Scratch,
) -> Result<()> {
    check_decode_shapes(&mixer, w, norm)?;
    ensure!(mixer.w.fp8_scales.is_none(), "moe_decode: 4/6-bit experts with an FP8 output projection");
    use KQuant::{Q4K, Q5K, Q6K, Q8_0};
    use RowFormat::{Int4, K};
    // (the Hopper grid's kernel, and the one for one block an SM)
    type Kernel = fn(
        &Gpu,
        Launch,
        DevPtr,
        DevPtr,
        DevPtr,
        DevPtr,
        DevPtr,
        DevPtr,
        DevPtr,
        DevPtr,
        DevPtr,
        f32,
        DevPtr,
        DevPtr,
        DevPtr,
        i32,
        i32,
        i32,
    ) -> Result<()>;
    let (hopper, wide): (Kernel, Kernel) = match (packed.gate_up, packed.down) {
        (Int4, Int4) => (moe_decode_cu::moe_decode_block_int4, moe_decode_cu::moe_decode_block_int4_wide),
        (K(Q4K), K(Q4K)) => (moe_decode_cu::moe_decode_block_q4k_q4k, moe_decode_cu::moe_decode_block_q4k_q4k_wide),
        (K(Q4K), K(Q5K)) => (moe_decode_cu::moe_decode_block_q4k_q5k, moe_decode_cu::moe_decode_block_q4k_q5k_wide),
        (K(Q4K), K(Q6K)) => (moe_decode_cu::moe_decode_block_q4k_q6k, moe_decode_cu::moe_decode_block_q4k_q6k_wide),
        (K(Q5K), K(Q5K)) => (moe_decode_cu::moe_decode_block_q5k_q5k, moe_decode_cu::moe_decode_block_q5k_q5k_wide),
        (K(Q5K), K(Q6K)) => (moe_decode_cu::moe_decode_block_q5k_q6k, moe_decode_cu::moe_decode_block_q5k_q6k_wide),
        (K(Q6K), K(Q6K)) => (moe_decode_cu::moe_decode_block_q6k_q6k, moe_decode_cu::moe_decode_block_q6k_q6k_wide),
        (K(Q8_0), K(Q8_0)) => {
            (moe_decode_cu::moe_decode_block_q8_0_q8_0, moe_decode_cu::moe_decode_block_q8_0_q8_0_wide)
        }
        // a mix llama.cpp's quants do not make: the four-kernel form reads any pair
        _ => return moe_decode_kernels(gpu, mixer, w, h, norm, eps, 1, scratch),
    };
    let (kernel, threads, shared_bytes) = if grid >= ROUTER_ROWS as u32 {
        (hopper, 256, MOE_DECODE_SHARED)
    } else if packed.gate_up == Int4 && wide_warps == 16 {
        (moe_decode_cu::moe_decode_block_int4_wide16 as Kernel, 512, MOE_DECODE_SHARED_16)
    } else {
        (wide, 256, MOE_DECODE_SHARED)
    };
    // phase 0 reads W_o bf16 or in the gate/up rows' format; another one takes the four kernels
    let w_o_rows = match mixer.w.format {
        None => 0,
        Some(f) if f == packed.gate_up => 1,
        Some(_) => return moe_decode_kernels(gpu, mixer, w, h, norm, eps, 1, scratch),
    };
    let y_tile_r = gemv_q::y_tile_r(mixer.w)?;
    let l = Layout::new(scratch, 1)?;
    let shared = packed.shared;
    kernel(
        gpu,
        Launch::new((grid, 1, 1), threads, shared_bytes as u32).pdl(true),
        mixer.w.ptr,
        mixer.y,
        w.router.ptr,
        w.gate_up,
        w.down,
        shared.gate_up,
        shared.down,
        h,
        norm.ptr,
        eps,
        l.logits,
        l.act,
        scratch.grid_barrier(),
        w_o_rows,
        y_tile_r,
        shared.rows as i32,
    )
}

/// `moe_decode` as four kernels, for t ≤ 8 tokens at once (1: the decode step's form on GPUs
/// with fewer than 64 SMs; more: the multi-token decode step), weights bf16 or in a row format:
/// h[i] += mixer.w · y[i], then h[i] += MoE(RMSNorm(h[i])), for y bf16 `[t, 4096]` and h f32
/// `[t, 2048]`. The output projection (`gemv_bf16`'s tiles, or `out_proj_tokens_q`, accumulating
/// into h) and `moe_route_decode` (norm,
/// router, routing) read their matrices once for all the tokens, then the experts' GEMVs run
/// over every token's slots in one launch each (the shared expert's rows from L2 after the first
/// token). Every token gets the bits of its own fused `moe_decode`. Scratch buffers 0 and 1, and
/// the scratch's ticket counter. With LoRA sites (`mixer.lora`), each token's term of the output
/// projection is added after it, in two launches (`lora::add_per_token`, scratch buffer 4).
#[allow(clippy::too_many_arguments)]
pub fn moe_decode_kernels(
    gpu: &Gpu,
    mixer: MixerOut,
    w: &MoeGpu,
    h: DevPtr,
    norm: &Vector,
    eps: f32,
    t: usize,
    scratch: &Scratch,
) -> Result<()> {
    ensure!(
        w.fp8_scales.is_none(),
        "moe_decode_kernels: FP8 experts (this form reads bf16, int4, Q4_K, Q5_K, Q6_K and Q8_0)"
    );
    check_decode_shapes(&mixer, w, norm)?;
    gemv_tokens_accumulate(gpu, mixer.y, mixer.w, t, h)?;
    if mixer.lora != 0 {
        // its u in scratch buffer 4 (the mixers' outputs are in 2 and 3, the layout in 0 and 1)
        lora::add_per_token(gpu, mixer.lora, mixer.y, MIXER_OUT, t, scratch.ptr(4), h, HIDDEN, HIDDEN)?;
    }
    let l = Layout::new(scratch, t)?;
    moe_router_cu::moe_route_decode(
        gpu,
        Launch::new((ROUTER_ROWS.div_ceil(16) as u32, t as u32, 1), 256, 0), // 16 router rows a block, a block row a token
        w.router.ptr,
        h,
        norm.ptr,
        eps,
        l.logits,
        l.x,
        l.ids,
        l.weights,
        scratch.ticket(),
    )?;
    experts_gemv(gpu, w, l.x, t, &l, 0, h)
}

/// What both forms of `moe_decode` assume of their matrices (h is `[2048]`).
fn check_decode_shapes(mixer: &MixerOut, w: &MoeGpu, norm: &Vector) -> Result<()> {
    ensure!(
        w.router.rows == ROUTER_ROWS && norm.len == HIDDEN,
        "moe_decode: router {} rows, norm {}",
        w.router.rows,
        norm.len
    );
    ensure!(
        (mixer.w.rows, mixer.w.cols) == (HIDDEN, MIXER_OUT),
        "moe_decode: the mixer's output projection is {}×{}, expected {HIDDEN}×{MIXER_OUT}",
        mixer.w.rows,
        mixer.w.cols
    );
    Ok(())
}

/// Router logits, then ids/weights `[t, 9]`; with `count`, also the per-expert token counts.
fn route(gpu: &Gpu, w: &MoeGpu, x: DevPtr, t: usize, l: &Layout, lora: lora::Adapter, count: bool) -> Result<()> {
    ensure!(w.router.rows == ROUTER_ROWS, "MoE router has {} rows, expected {ROUTER_ROWS}", w.router.rows);
    linear(gpu, x, &w.router, t, l.logits)?;
    // the router's rows, then the shared expert's gate (row 256)
    let outs = [
        Out { ptr: l.logits, stride: ROUTER_ROWS },
        Out { ptr: l.logits + (EXPERTS * 4) as DevPtr, stride: ROUTER_ROWS },
    ];
    lora::add(gpu, lora, |l| &l.router, x, t, &outs)?;
    if count {
        gpu.zero(l.counts, (EXPERTS + 1) * 4)?;
    }
    moe_router_cu::moe_route(
        gpu,
        Launch::new(
            (t as u32, 1, 1),
            32, // one warp per token
            0,
        ),
        l.logits,
        t as i32,
        l.ids,
        l.weights,
        if count { l.counts } else { 0 },
    )
}

/// Groups the (token, slot) pairs by expert: offsets, tiles, perm.
fn group(gpu: &Gpu, t: usize, l: &Layout) -> Result<()> {
    moe_router_cu::moe_plan(
        gpu,
        Launch::new((1, 1, 1), 288, 0),
        l.counts,
        t as i32,
        l.offsets,
        l.cursor,
        l.tiles,
        l.total_tiles,
    )?;
    moe_router_cu::moe_permute(
        gpu,
        Launch::new(((t * SLOTS).div_ceil(256) as u32, 1, 1), 256, 0),
        l.ids,
        t as i32,
        l.offsets,
        l.cursor,
        l.perm,
    )
}

/// out (f32 `[t, 2048]`) += the experts of ids/weights for x (bf16 `[t, 2048]`); bf16 or 4- to
/// 8-bit (int4, Q4_K, Q5_K, Q6_K, Q8_0) routed experts. `delta`: a LoRA adapter's term of the
/// routed gate/up sums (f32 `[t, 8, 1024]`, `lora::ExpertsSite::gate_up_delta`), or 0.
fn experts_gemv(gpu: &Gpu, w: &MoeGpu, x: DevPtr, t: usize, l: &Layout, delta: DevPtr, out: DevPtr) -> Result<()> {
    if let Some(packed) = w.packed {
        let gate_up = match packed.gate_up {
            RowFormat::Int4 => moe_gemv_q_cu::moe_gate_up_gemv_int4,
            RowFormat::K(KQuant::Q4K) => moe_gemv_q_cu::moe_gate_up_gemv_q4k,
            RowFormat::K(KQuant::Q5K) => moe_gemv_q_cu::moe_gate_up_gemv_q5k,
            RowFormat::K(KQuant::Q6K) => moe_gemv_q_cu::moe_gate_up_gemv_q6k,
            RowFormat::K(KQuant::Q8_0) => moe_gemv_q_cu::moe_gate_up_gemv_q8_0,
        };
        let down = match packed.down {
            RowFormat::Int4 => moe_gemv_q_cu::moe_down_gemv_int4,
            RowFormat::K(KQuant::Q4K) => moe_gemv_q_cu::moe_down_gemv_q4k,
            RowFormat::K(KQuant::Q5K) => moe_gemv_q_cu::moe_down_gemv_q5k,
            RowFormat::K(KQuant::Q6K) => moe_gemv_q_cu::moe_down_gemv_q6k,
            RowFormat::K(KQuant::Q8_0) => moe_gemv_q_cu::moe_down_gemv_q8_0,
        };
        gate_up(
            gpu,
            Launch::new(
                ((EXPERT_DIM / GATE_UP_WARPS) as u32, SLOTS as u32, t as u32),
                (32 * GATE_UP_WARPS) as u32,
                GATE_UP_GEMV_SHARED as u32,
            ),
            x,
            w.gate_up,
            packed.shared.gate_up,
            l.ids,
            delta,
            l.act,
            packed.shared.rows as i32,
        )?;
        return down(
            gpu,
            Launch::new(((HIDDEN / 8) as u32, 1, t as u32), 256, 0),
            l.act,
            w.down,
            packed.shared.down,
            l.ids,
            l.weights,
            out,
            packed.shared.rows as i32,
        );
    }
    moe_experts_cu::moe_gate_up_gemv(
        gpu,
        Launch::new(
            ((EXPERT_DIM / GATE_UP_WARPS) as u32, SLOTS as u32, t as u32),
            (32 * GATE_UP_WARPS) as u32,
            GATE_UP_GEMV_SHARED as u32,
        ),
        x,
        w.gate_up,
        l.ids,
        delta,
        l.act,
    )?;
    moe_experts_cu::moe_down_gemv(
        gpu,
        Launch::new(((HIDDEN / DOWN_COLUMNS) as u32, 1, t as u32), (32 * DOWN_COLUMNS * DOWN_GROUPS) as u32, 0),
        l.act,
        w.down,
        l.ids,
        l.weights,
        out,
    )
}

/// As `experts_gemv`, through the grouped GEMMs (`group` first).
fn experts_grouped(gpu: &Gpu, w: &MoeGpu, x: DevPtr, l: &Layout, delta: DevPtr, out: DevPtr) -> Result<()> {
    let gate_up_grid = (l.max_tiles as u32, (EXPERT_DIM / GATE_UP_TILE_COLS) as u32, 1);
    let down_grid = (l.max_tiles as u32, (HIDDEN / DOWN_TILE_COLS) as u32, 1);
    let (tiles, total) = (l.tiles, l.total_tiles);
    let stages = gemm_stages(gpu);
    let (gemm_shared_bf16, gemm_shared_fp8) = (gemm_shared(stages, false) as u32, gemm_shared(stages, true) as u32);
    if let Some(s) = w.fp8_scales {
        let gate_up = Launch::new(gate_up_grid, GEMM_THREADS, gemm_shared_fp8);
        moe_experts_cu::moe_gate_up_grouped_fp8(
            gpu, gate_up, x, w.gate_up, s.gate_up, l.perm, tiles, total, delta, l.act,
        )?;
        let down = Launch::new(down_grid, GEMM_THREADS, gemm_shared_fp8);
        return moe_experts_cu::moe_down_grouped_fp8(
            gpu, down, l.act, w.down, s.down, l.perm, l.weights, tiles, total, out,
        );
    }
    if let Some(packed) = w.packed {
        // B stages in bf16 too: the shared expert's tiles
        let gate_up_kernel = match packed.gate_up {
            RowFormat::Int4 => moe_experts_cu::moe_gate_up_grouped_int4,
            RowFormat::K(KQuant::Q4K) => moe_experts_cu::moe_gate_up_grouped_q4k,
            RowFormat::K(KQuant::Q5K) => moe_experts_cu::moe_gate_up_grouped_q5k,
            RowFormat::K(KQuant::Q6K) => moe_experts_cu::moe_gate_up_grouped_q6k,
            RowFormat::K(KQuant::Q8_0) => moe_experts_cu::moe_gate_up_grouped_q8_0,
        };
        let down_kernel = match packed.down {
            RowFormat::Int4 => moe_experts_cu::moe_down_grouped_int4,
            RowFormat::K(KQuant::Q4K) => moe_experts_cu::moe_down_grouped_q4k,
            RowFormat::K(KQuant::Q5K) => moe_experts_cu::moe_down_grouped_q5k,
            RowFormat::K(KQuant::Q6K) => moe_experts_cu::moe_down_grouped_q6k,
            RowFormat::K(KQuant::Q8_0) => moe_experts_cu::moe_down_grouped_q8_0,
        };
        let gate_up = Launch::new(gate_up_grid, GEMM_THREADS, gemm_shared_bf16);
        gate_up_kernel(gpu, gate_up, x, w.gate_up, packed.shared.gate_up, l.perm, tiles, total, delta, l.act)?;
        let down = Launch::new(down_grid, GEMM_THREADS, gemm_shared_bf16);
        return down_kernel(gpu, down, l.act, w.down, packed.shared.down, l.perm, l.weights, tiles, total, out);
    }
    let gate_up = Launch::new(gate_up_grid, GEMM_THREADS, gemm_shared_bf16);
    moe_experts_cu::moe_gate_up_grouped(gpu, gate_up, x, w.gate_up, l.perm, tiles, total, delta, l.act)?;
    let down = Launch::new(down_grid, GEMM_THREADS, gemm_shared_bf16);
    moe_experts_cu::moe_down_grouped(gpu, down, l.act, w.down, l.perm, l.weights, tiles, total, out)
}

#[cfg(test)]
#[path = "moe_tests.rs"]
mod tests;
