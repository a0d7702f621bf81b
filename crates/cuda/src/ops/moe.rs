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
//!   four-kernel form (`moe_decode_kernels`, the same bits; GPUs with fewer than 129 SMs, and
//!   the multi-token step's several tokens at once): `gemv_bf16` → `moe_route_decode` (norm,
//!   router, routing) → `moe_gate_up_gemv` → `moe_down_gemv`.
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
use crate::ops::linear::{gemv_tokens_accumulate, linear};
use crate::ops::{Scratch, SCRATCH_WIDTH};
use crate::runtime::{DevPtr, Gpu};
use crate::weights::{ExpertScales, Matrix, MoeGpu, SharedExpert, Vector};
use anyhow::{ensure, Result};

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
    /// `moe_decode.cu`'s kernels.
    pub mod moe_decode_cu = "moe_decode.cu" {
        fn moe_decode_block(w_o: DevPtr, y: DevPtr, router: DevPtr, gate_up: DevPtr, down: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, logits: DevPtr, act: DevPtr, arrivals: DevPtr);
        fn moe_decode_block_int4(w_o: DevPtr, y: DevPtr, router: DevPtr, gate_up: DevPtr, down: DevPtr, shared_gate_up: DevPtr, shared_down: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, logits: DevPtr, act: DevPtr, arrivals: DevPtr);
        fn moe_gate_up_gemv_int4(x: DevPtr, gate_up: DevPtr, shared_gate_up: DevPtr, ids: DevPtr, act: DevPtr);
        fn moe_down_gemv_int4(act: DevPtr, down: DevPtr, shared_down: DevPtr, ids: DevPtr, weights: DevPtr, out: DevPtr);
        fn moe_decode_block_fp8(w_o: DevPtr, w_o_scales: DevPtr, y: DevPtr, router: DevPtr, gate_up: DevPtr, gate_up_scales: DevPtr, down: DevPtr, down_scales: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, logits: DevPtr, act: DevPtr, arrivals: DevPtr);
    }
}
kernel_file! {
    /// `moe_experts.cu`'s kernels.
    pub mod moe_experts_cu = "moe_experts.cu" {
        fn moe_gate_up_gemv(x: DevPtr, gate_up: DevPtr, ids: DevPtr, act: DevPtr);
        fn moe_down_gemv(act: DevPtr, down: DevPtr, ids: DevPtr, weights: DevPtr, out: DevPtr);
        fn moe_gate_up_grouped(x: DevPtr, gate_up: DevPtr, perm: DevPtr, tiles: DevPtr, total_tiles: DevPtr, act: DevPtr);
        fn moe_gate_up_grouped_fp8(x: DevPtr, gate_up: DevPtr, scales: DevPtr, perm: DevPtr, tiles: DevPtr, total_tiles: DevPtr, act: DevPtr);
        fn moe_gate_up_grouped_int4(x: DevPtr, gate_up: DevPtr, shared: DevPtr, perm: DevPtr, tiles: DevPtr, total_tiles: DevPtr, act: DevPtr);
        fn moe_down_grouped(act: DevPtr, down: DevPtr, perm: DevPtr, weights: DevPtr, tiles: DevPtr, total_tiles: DevPtr, out: DevPtr);
        fn moe_down_grouped_fp8(act: DevPtr, down: DevPtr, scales: DevPtr, perm: DevPtr, weights: DevPtr, tiles: DevPtr, total_tiles: DevPtr, out: DevPtr);
        fn moe_down_grouped_int4(act: DevPtr, down: DevPtr, shared: DevPtr, perm: DevPtr, weights: DevPtr, tiles: DevPtr, total_tiles: DevPtr, out: DevPtr);
    }
}

/// Router rows: the experts, then the shared expert's gate.
const ROUTER_ROWS: usize = EXPERTS + 1;
/// Routed experts plus the shared one, per token.
const SLOTS: usize = TOP_K + 1;
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
pub fn moe_block(gpu: &Gpu, w: &MoeGpu, x: DevPtr, t: usize, scratch: &Scratch, out: DevPtr) -> Result<()> {
    moe_block_path(gpu, w, x, t, scratch, out, t > GEMV_MAX_T || !w.is_bf16())
}

pub(crate) fn moe_block_path(
    gpu: &Gpu,
    w: &MoeGpu,
    x: DevPtr,
    t: usize,
    scratch: &Scratch,
    out: DevPtr,
    grouped: bool,
) -> Result<()> {
    ensure!(grouped || w.fp8_scales.is_none(), "moe_block: the expert GEMVs read bf16 or int4 experts, not FP8");
    let l = Layout::new(scratch, t)?;
    route(gpu, w, x, t, &l, grouped)?;
    gpu.zero(out, t * HIDDEN * 4)?; // both expert paths add into `out`
    if grouped {
        group(gpu, t, &l)?;
        experts_grouped(gpu, w, x, &l, out)
    } else {
        experts_gemv(gpu, w, x, t, &l, out)
    }
}

/// The mixer's output projection, which the decode step's MoE kernel takes first: h += w · y,
/// w bf16 `[2048, 4096]` (out_proj / o_proj), y bf16 `[4096]` (the mixer's gated output).
pub struct MixerOut<'a> {
    pub w: &'a Matrix,
    pub y: DevPtr,
}

/// The end of a decode step's layer for one token, on the residual stream h (f32 `[2048]`):
/// h += mixer.w · mixer.y, then h += MoE(RMSNorm(h; norm)), in one persistent kernel
/// (`moe_decode_block`) launched with PDL, so that its weight requests overlap the kernel before.
/// Fixed launch shapes, no host sync (graph-capturable). Scratch buffers 0 and 1, and the
/// scratch's grid barrier. On GPUs with fewer than 129 SMs it runs the four-kernel form
/// (`moe_decode_kernels`; the same bits).
pub fn moe_decode(
    gpu: &Gpu,
    mixer: MixerOut,
    w: &MoeGpu,
    h: DevPtr,
    norm: &Vector,
    eps: f32,
    scratch: &Scratch,
) -> Result<()> {
    if let Some(scales) = w.fp8_scales {
        return moe_decode_fp8(gpu, mixer, w, scales, h, norm, eps, scratch);
    }
    // the fused kernels want a block per router row, all resident (2 per SM): ≥ 129 SMs and
    // 2 × 98 KB of shared memory an SM (H100 SXM, H200)
    if !fused_decode_fits(gpu) {
        return moe_decode_kernels(gpu, mixer, w, h, norm, eps, 1, scratch);
    }
    if let Some(shared) = w.int4_shared {
        return moe_decode_int4(gpu, mixer, w, shared, h, norm, eps, scratch);
    }
    check_decode_shapes(&mixer, w, norm)?;
    let l = Layout::new(scratch, 1)?;
    // 2 blocks on every SM, all resident: the phases meet at grid barriers
    moe_decode_cu::moe_decode_block(
        gpu,
        Launch::new((2 * gpu.sms, 1, 1), 256, MOE_DECODE_SHARED as u32).pdl(true),
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
    )
}

/// Whether the fused decode kernels' grid (2 blocks of ~98 KB on every SM, ≥ 257 blocks) can be
/// resident at once on this GPU.
fn fused_decode_fits(gpu: &Gpu) -> bool {
    2 * gpu.sms >= ROUTER_ROWS as u32 && gpu.target.big_shared()
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
    moe_decode_cu::moe_decode_block_fp8(
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

/// `moe_decode` for int4 routed experts (the output projection, router and shared expert bf16):
/// `moe_decode_block_int4`, which has no four-kernel form.
#[allow(clippy::too_many_arguments)]
fn moe_decode_int4(
    gpu: &Gpu,
    mixer: MixerOut,
    w: &MoeGpu,
    shared: SharedExpert,
    h: DevPtr,
    norm: &Vector,
    eps: f32,
    scratch: &Scratch,
) -> Result<()> {
    check_decode_shapes(&mixer, w, norm)?;
    ensure!(mixer.w.fp8_scales.is_none(), "moe_decode: int4 experts with an FP8 output projection");
    let l = Layout::new(scratch, 1)?;
    moe_decode_cu::moe_decode_block_int4(
        gpu,
        Launch::new((2 * gpu.sms, 1, 1), 256, MOE_DECODE_SHARED as u32).pdl(true),
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
    )
}

/// `moe_decode` as four kernels, for t ≤ 8 tokens at once (1: the decode step's form on GPUs
/// with fewer than 129 SMs; more: the multi-token decode step), bf16 weights: h[i] += mixer.w ·
/// y[i], then h[i] += MoE(RMSNorm(h[i])), for y bf16 `[t, 4096]` and h f32 `[t, 2048]`. The
/// output projection (`gemv_bf16`'s tiles, accumulating into h) and `moe_route_decode` (norm,
/// router, routing) read their matrices once for all the tokens, then the experts' GEMVs run
/// over every token's slots in one launch each (the shared expert's rows from L2 after the first
/// token). Every token gets the bits of its own fused `moe_decode`. Scratch buffers 0 and 1, and
/// the scratch's ticket counter.
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
    ensure!(w.fp8_scales.is_none(), "moe_decode_kernels: FP8 experts (this form is bf16 or int4)");
    check_decode_shapes(&mixer, w, norm)?;
    gemv_tokens_accumulate(gpu, mixer.y, mixer.w, t, h)?;
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
    experts_gemv(gpu, w, l.x, t, &l, h)
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
fn route(gpu: &Gpu, w: &MoeGpu, x: DevPtr, t: usize, l: &Layout, count: bool) -> Result<()> {
    ensure!(w.router.rows == ROUTER_ROWS, "MoE router has {} rows, expected {ROUTER_ROWS}", w.router.rows);
    linear(gpu, x, &w.router, t, l.logits)?;
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

/// out (f32 `[t, 2048]`) += the experts of ids/weights for x (bf16 `[t, 2048]`); bf16 or int4
/// routed experts.
fn experts_gemv(gpu: &Gpu, w: &MoeGpu, x: DevPtr, t: usize, l: &Layout, out: DevPtr) -> Result<()> {
    if let Some(shared) = w.int4_shared {
        moe_decode_cu::moe_gate_up_gemv_int4(
            gpu,
            Launch::new(
                ((EXPERT_DIM / GATE_UP_WARPS) as u32, SLOTS as u32, t as u32),
                (32 * GATE_UP_WARPS) as u32,
                GATE_UP_GEMV_SHARED as u32,
            ),
            x,
            w.gate_up,
            shared.gate_up,
            l.ids,
            l.act,
        )?;
        return moe_decode_cu::moe_down_gemv_int4(
            gpu,
            Launch::new(((HIDDEN / 8) as u32, 1, t as u32), 256, 0),
            l.act,
            w.down,
            shared.down,
            l.ids,
            l.weights,
            out,
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

fn experts_grouped(gpu: &Gpu, w: &MoeGpu, x: DevPtr, l: &Layout, out: DevPtr) -> Result<()> {
    let gate_up_grid = (l.max_tiles as u32, (EXPERT_DIM / GATE_UP_TILE_COLS) as u32, 1);
    let down_grid = (l.max_tiles as u32, (HIDDEN / DOWN_TILE_COLS) as u32, 1);
    let (tiles, total) = (l.tiles, l.total_tiles);
    let stages = gemm_stages(gpu);
    let (gemm_shared_bf16, gemm_shared_fp8) = (gemm_shared(stages, false) as u32, gemm_shared(stages, true) as u32);
    if let Some(s) = w.fp8_scales {
        let gate_up = Launch::new(gate_up_grid, GEMM_THREADS, gemm_shared_fp8);
        moe_experts_cu::moe_gate_up_grouped_fp8(gpu, gate_up, x, w.gate_up, s.gate_up, l.perm, tiles, total, l.act)?;
        let down = Launch::new(down_grid, GEMM_THREADS, gemm_shared_fp8);
        return moe_experts_cu::moe_down_grouped_fp8(
            gpu, down, l.act, w.down, s.down, l.perm, l.weights, tiles, total, out,
        );
    }
    if let Some(shared) = w.int4_shared {
        // B stages in bf16 too: the shared expert's tiles
        let gate_up = Launch::new(gate_up_grid, GEMM_THREADS, gemm_shared_bf16);
        moe_experts_cu::moe_gate_up_grouped_int4(
            gpu,
            gate_up,
            x,
            w.gate_up,
            shared.gate_up,
            l.perm,
            tiles,
            total,
            l.act,
        )?;
        let down = Launch::new(down_grid, GEMM_THREADS, gemm_shared_bf16);
        return moe_experts_cu::moe_down_grouped_int4(
            gpu,
            down,
            l.act,
            w.down,
            shared.down,
            l.perm,
            l.weights,
            tiles,
            total,
            out,
        );
    }
    let gate_up = Launch::new(gate_up_grid, GEMM_THREADS, gemm_shared_bf16);
    moe_experts_cu::moe_gate_up_grouped(gpu, gate_up, x, w.gate_up, l.perm, tiles, total, l.act)?;
    let down = Launch::new(down_grid, GEMM_THREADS, gemm_shared_bf16);
    moe_experts_cu::moe_down_grouped(gpu, down, l.act, w.down, l.perm, l.weights, tiles, total, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testutil::*;
    use crate::weights::Uploader;
    use solo_cpu::moe::{moe_forward, route as cpu_route};
    use solo_cpu::ops::{matmul, sigmoid, softmax};
    use solo_model::weights::{ExpertWeights, MoeWeights};
    use solo_model::{ModelConfig, Tensor};
    use std::sync::OnceLock;

    struct Fixture {
        cfg: ModelConfig,
        cpu: MoeWeights,
        gpu: MoeGpu,
    }

    fn random_matrix(seed: u64, rows: usize, cols: usize) -> Tensor {
        Tensor::from_f32_as_bf16(vec![rows, cols], &random(seed, rows * cols, (3.0 / cols as f32).sqrt()))
    }

    fn random_expert(seed: u64) -> ExpertWeights {
        ExpertWeights {
            gate: random_matrix(seed, EXPERT_DIM, HIDDEN),
            up: random_matrix(seed + 1, EXPERT_DIM, HIDDEN),
            down: random_matrix(seed + 2, HIDDEN, EXPERT_DIM),
        }
    }

    /// One MoE layer of the real shapes with random weights (1.6 GB of bf16), built once.
    fn fixture() -> &'static Fixture {
        static F: OnceLock<Fixture> = OnceLock::new();
        F.get_or_init(|| {
            let threads = 16;
            let mut experts: Vec<Option<ExpertWeights>> = (0..EXPERTS).map(|_| None).collect();
            std::thread::scope(|s| {
                for (i, part) in experts.chunks_mut(EXPERTS.div_ceil(threads)).enumerate() {
                    s.spawn(move || {
                        for (j, slot) in part.iter_mut().enumerate() {
                            let e = i * EXPERTS.div_ceil(threads) + j;
                            *slot = Some(random_expert(1000 + 3 * e as u64));
                        }
                    });
                }
            });
            let cpu = MoeWeights {
                router: random_matrix(1, EXPERTS, HIDDEN),
                experts: experts.into_iter().map(|e| e.unwrap()).collect(),
                shared_expert: random_expert(2),
                shared_expert_gate: random_matrix(5, 1, HIDDEN),
            };
            let mut up = Uploader::new(gpu()).unwrap();
            let gpu_w = MoeGpu::upload(&mut up, &cpu).unwrap();
            // The test weights live as long as the process.
            std::mem::forget(up.finish().unwrap());
            Fixture { cfg: crate::synthetic::real_config(4), cpu, gpu: gpu_w }
        })
    }

    /// `fixture()`'s layer with its experts quantised to FP8 (the official block recipe).
    fn fixture_fp8() -> &'static Fixture {
        static F: OnceLock<Fixture> = OnceLock::new();
        F.get_or_init(|| {
            let bf = fixture();
            let q = |t: &Tensor| Tensor::quantize_fp8(t.shape[0], t.shape[1], &t.to_f32());
            let qe = |e: &ExpertWeights| ExpertWeights { gate: q(&e.gate), up: q(&e.up), down: q(&e.down) };
            let mut experts: Vec<Option<ExpertWeights>> = (0..EXPERTS).map(|_| None).collect();
            std::thread::scope(|s| {
                for (part, src) in experts.chunks_mut(16).zip(bf.cpu.experts.chunks(16)) {
                    s.spawn(move || part.iter_mut().zip(src).for_each(|(slot, e)| *slot = Some(qe(e))));
                }
            });
            let cpu = MoeWeights {
                router: bf.cpu.router.clone(),
                experts: experts.into_iter().map(|e| e.unwrap()).collect(),
                shared_expert: qe(&bf.cpu.shared_expert),
                shared_expert_gate: bf.cpu.shared_expert_gate.clone(),
            };
            let mut up = Uploader::new(gpu()).unwrap();
            let gpu_w = MoeGpu::upload(&mut up, &cpu).unwrap();
            assert!(gpu_w.fp8_scales.is_some() && gpu_w.router.fp8_scales.is_none());
            std::mem::forget(up.finish().unwrap());
            Fixture { cfg: crate::synthetic::real_config(4), cpu, gpu: gpu_w }
        })
    }

    fn input(seed: u64, t: usize) -> Vec<f32> {
        round_bf16(&random(seed, t * HIDDEN, 1.7))
    }

    /// Fills a whole scratch with 0xFF bytes (NaN as f32 and bf16; -1 as i32).
    fn poison_scratch(s: &Scratch) {
        let gpu = gpu();
        for b in &s.bufs {
            let nan = gpu.upload(&vec![0xFFu8; b.bytes]).unwrap();
            gpu.copy(b.ptr(), nan.ptr(), b.bytes).unwrap();
        }
        gpu.sync().unwrap();
    }

    /// Tokens whose 8th and 9th router probabilities (from the CPU's f32 logits) are so close that
    /// the GPU's differently-summed logits may legitimately pick the other expert.
    fn near_ties(cfg: &ModelConfig, w: &MoeWeights, x: &[f32]) -> Vec<bool> {
        matmul(x, &w.router)
            .chunks(cfg.num_experts)
            .map(|row| {
                let mut p = row.to_vec();
                softmax(&mut p);
                p.sort_by(|a, b| b.total_cmp(a));
                p[TOP_K - 1] - p[TOP_K] < 1e-5 * p[TOP_K - 1]
            })
            .collect()
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn route_and_grouping_match_cpu() {
        let gpu = gpu();
        let f = fixture();
        let t = 300;
        let x = input(7, t);
        let xb = gpu.upload(&bf16_bytes(&x)).unwrap();
        let scratch = Scratch::new(gpu, t).unwrap();
        poison_scratch(&scratch);
        let l = Layout::new(&scratch, t).unwrap();
        route(gpu, &f.gpu, xb.ptr(), t, &l, true).unwrap();
        group(gpu, t, &l).unwrap();

        // Routing from the GPU's own logits (256 experts' of each token's 257): exact ids, weights
        // to f32 rounding.
        let logits: Vec<f32> = gpu
            .download_f32(l.logits, t * ROUTER_ROWS)
            .unwrap()
            .chunks(ROUTER_ROWS)
            .flat_map(|r| r[..EXPERTS].to_vec())
            .collect();
        let ids = gpu.download_i32(l.ids, t * SLOTS).unwrap();
        let weights = gpu.download_f32(l.weights, t * SLOTS).unwrap();
        let want = cpu_route(&f.cfg, &logits);
        let gate = matmul(&x, &f.cpu.shared_expert_gate);
        for tok in 0..t {
            for k in 0..TOP_K {
                let (e, wt) = want[tok][k];
                assert_eq!(ids[tok * SLOTS + k], e as i32, "token {tok} slot {k}");
                let got = weights[tok * SLOTS + k];
                assert!((got - wt).abs() <= 1e-5, "token {tok} slot {k}: weight {got} vs {wt}");
            }
            assert_eq!(ids[tok * SLOTS + TOP_K], EXPERTS as i32);
            let (got, want_g) = (weights[tok * SLOTS + TOP_K], sigmoid(gate[tok]));
            assert!((got - want_g).abs() <= 1e-5, "token {tok}: shared gate {got} vs {want_g}");
        }

        // Grouping: counts, contiguous expert ranges, tiles, and a permutation of all pairs.
        let counts = gpu.download_i32(l.counts, EXPERTS).unwrap();
        let offsets = gpu.download_i32(l.offsets, EXPERTS + 1).unwrap();
        let perm = gpu.download_i32(l.perm, t * SLOTS).unwrap();
        let mut hist = vec![0i32; EXPERTS + 1];
        for (a, &e) in ids.iter().enumerate() {
            if a % SLOTS < TOP_K {
                hist[e as usize] += 1;
            }
        }
        assert_eq!(counts, hist[..EXPERTS]);
        hist[EXPERTS] = t as i32;
        let mut seen = vec![false; t * SLOTS];
        for e in 0..=EXPERTS {
            let end = if e == EXPERTS { (t * SLOTS) as i32 } else { offsets[e + 1] };
            assert_eq!(end - offsets[e], hist[e], "expert {e} range");
            for row in offsets[e]..end {
                let a = perm[row as usize] as usize;
                assert!(!seen[a], "pair {a} twice");
                seen[a] = true;
                assert_eq!(ids[a], e as i32, "row {row} is in expert {e}'s range");
            }
        }
        let total = gpu.download_i32(l.total_tiles, 1).unwrap()[0] as usize;
        let want_tiles: usize = hist.iter().map(|&c| (c as usize).div_ceil(TILE_ROWS)).sum();
        assert_eq!(total, want_tiles);
        assert!(total <= l.max_tiles);
        let tiles = gpu.download_i32(l.tiles, 4 * total).unwrap();
        let covered: i32 = tiles.chunks(4).map(|tl| tl[2] - tl[1]).sum();
        assert_eq!(covered, (t * SLOTS) as i32);
        for tl in tiles.chunks(4) {
            let e = tl[0] as usize;
            assert!(tl[1] >= offsets[e] && tl[2] <= offsets[e] + hist[e] && tl[2] - tl[1] <= TILE_ROWS as i32);
        }
    }

    /// moe_block's output through one path on weights `w` (a fixture's, or a form of them).
    fn run_block(w: &MoeGpu, t: usize, grouped: bool, x: &[f32]) -> Vec<f32> {
        let gpu = gpu();
        let xb = gpu.upload(&bf16_bytes(x)).unwrap();
        let out = gpu.upload_f32(&vec![f32::NAN; t * HIDDEN]).unwrap();
        let scratch = Scratch::new(gpu, t).unwrap();
        poison_scratch(&scratch);
        moe_block_path(gpu, w, xb.ptr(), t, &scratch, out.ptr(), grouped).unwrap();
        gpu.download_f32(out.ptr(), t * HIDDEN).unwrap()
    }

    /// `got` against the CPU reference `want` (tokens with a near-tie in the router are skipped:
    /// there either expert is a right answer).
    fn check_against_cpu(f: &Fixture, what: &str, got: &[f32], want: &[f32], x: &[f32], tol: f32) {
        let t = x.len() / HIDDEN;
        let ties = near_ties(&f.cfg, &f.cpu, x);
        let keep = |v: &[f32]| -> Vec<f32> {
            v.chunks(HIDDEN).zip(&ties).filter(|(_, tie)| !**tie).flat_map(|(r, _)| r.to_vec()).collect()
        };
        let skipped = ties.iter().filter(|&&b| b).count();
        assert!(skipped * 20 <= t.max(20), "{skipped} of {t} tokens have router near-ties");
        assert_close(&format!("{what} ({skipped} near-tie tokens skipped)"), &keep(got), &keep(want), tol);
    }

    /// moe_block through one path against the CPU reference.
    fn check_block(t: usize, grouped: bool, want: &[f32], x: &[f32], tol: f32) {
        let f = fixture();
        let got = run_block(&f.gpu, t, grouped, x);
        let path = if grouped { "grouped" } else { "gemv" };
        check_against_cpu(f, &format!("moe_block t={t} ({path})"), &got, want, x, tol);
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn moe_block_decode_matches_cpu() {
        let f = fixture();
        for (t, seed) in [(1usize, 11u64), (4, 12)] {
            let x = input(seed, t);
            let want = moe_forward(&f.cfg, &f.cpu, None, &x);
            // f32 activations: only summation order differs.
            check_block(t, false, &want, &x, 1e-4);
            // The grouped path at a tiny size (mostly empty tiles): bf16 activations.
            check_block(t, true, &want, &x, 1e-2);
        }
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn moe_block_prefill_matches_cpu() {
        let f = fixture();
        let t = 300;
        let x = input(13, t);
        let want = moe_forward(&f.cfg, &f.cpu, None, &x);
        check_block(t, true, &want, &x, 1e-2);
        check_block(t, false, &want, &x, 1e-4);
    }

    /// The FP8 grouped GEMMs (the experts read as e4m3 + block scales) against the bf16 grouped
    /// GEMMs on the dequantised experts — the same bf16 products, so only the order of the down
    /// GEMM's f32 atomic adds differs — and against the CPU on the FP8 weights. moe_block takes
    /// the grouped path for FP8 experts at every token count; the GEMV path refuses them.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn moe_block_fp8_prefill_matches_dequantized_and_cpu() {
        if !fp8_runs_here() {
            return;
        }
        let gpu = gpu();
        let f = fixture_fp8();
        // The experts as two FP8 matrices (their scales' layout is that of one matrix each).
        let s = f.gpu.fp8_scales.unwrap();
        let gate_up = Matrix {
            ptr: f.gpu.gate_up,
            rows: (EXPERTS + 1) * 2 * EXPERT_DIM,
            cols: HIDDEN,
            fp8_scales: Some(s.gate_up),
        };
        let down = Matrix { ptr: f.gpu.down, rows: (EXPERTS + 1) * HIDDEN, cols: EXPERT_DIM, fp8_scales: Some(s.down) };
        let gu = gpu.alloc(gate_up.rows * gate_up.cols * 2).unwrap();
        let dn = gpu.alloc(down.rows * down.cols * 2).unwrap();
        crate::ops::linear::dequantize(gpu, &gate_up, gu.ptr()).unwrap();
        crate::ops::linear::dequantize(gpu, &down, dn.ptr()).unwrap();
        let bf16 = MoeGpu { gate_up: gu.ptr(), down: dn.ptr(), fp8_scales: None, int4_shared: None, ..f.gpu.clone() };
        for (t, seed) in [(1usize, 31u64), (4, 32), (300, 33)] {
            let x = input(seed, t);
            let xb = gpu.upload(&bf16_bytes(&x)).unwrap();
            let out = gpu.alloc(t * HIDDEN * 4).unwrap();
            moe_block(gpu, &f.gpu, xb.ptr(), t, &Scratch::new(gpu, t).unwrap(), out.ptr()).unwrap();
            let got = gpu.download_f32(out.ptr(), t * HIDDEN).unwrap();
            let dequantized = run_block(&bf16, t, true, &x);
            assert_close(&format!("FP8 grouped vs dequantised bf16 grouped, t={t}"), &got, &dequantized, 1e-6);
            let want = moe_forward(&f.cfg, &f.cpu, None, &x);
            check_against_cpu(f, &format!("moe_block FP8 t={t} (grouped)"), &got, &want, &x, 1e-2);
        }
        let scratch = Scratch::new(gpu, 2).unwrap();
        let err = moe_block_path(gpu, &f.gpu, 0, 2, &scratch, 0, false).unwrap_err();
        assert!(err.to_string().contains("FP8"), "{err}");
    }

    /// The mixer's output projection the decode tests fold in: w bf16 [2048, 4096], y bf16
    /// [4096], on the GPU, and h + w·y on the CPU for a given h.
    struct MixerFixture {
        _w: crate::runtime::DevBuf, // the memory behind w_o
        w_o: Matrix,
        y: crate::runtime::DevBuf,
        w_f32: Vec<f32>,
        y_f32: Vec<f32>,
    }

    impl MixerFixture {
        fn new() -> Self {
            let gpu = gpu();
            let w_f32 = round_bf16(&random(23, HIDDEN * MIXER_OUT, (3.0 / MIXER_OUT as f32).sqrt()));
            let y_f32 = round_bf16(&random(24, MIXER_OUT, 1.0));
            let (w, y) = (gpu.upload(&bf16_bytes(&w_f32)).unwrap(), gpu.upload(&bf16_bytes(&y_f32)).unwrap());
            let w_o = Matrix::bf16(w.ptr(), HIDDEN, MIXER_OUT);
            MixerFixture { _w: w, w_o, y, w_f32, y_f32 }
        }

        fn out(&self) -> MixerOut<'_> {
            MixerOut { w: &self.w_o, y: self.y.ptr() }
        }

        fn added_to(&self, h: &[f32]) -> Vec<f32> {
            h.iter()
                .zip(self.w_f32.chunks(MIXER_OUT))
                .map(|(hv, row)| hv + row.iter().zip(&self.y_f32).map(|(a, b)| a * b).sum::<f32>())
                .collect()
        }
    }

    /// The end of a decode step's layer — out_proj added to h, then the MoE — fused (one
    /// persistent kernel) and as four kernels (the output projection's GEMV accumulating into h;
    /// input norm, router product and routing in one; the residual add in the down GEMV), against
    /// the CPU: h1 = h + W_o·y, h1 + MoE(RMSNorm(h1)), and against each other bit for bit. Three
    /// rounds: every launch must leave the ticket at zero and the barrier's count a multiple of
    /// the grid.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn moe_decode_matches_cpu() {
        let gpu = gpu();
        let f = fixture();
        let mixer = MixerFixture::new();
        let h = random(21, HIDDEN, 2.0);
        let h1 = mixer.added_to(&h);
        let norm_w = random(22, HIDDEN, 0.3);
        let x = round_bf16(&solo_cpu::ops::rms_norm_one_plus(&h1, &norm_w, 1e-6));
        assert!(!near_ties(&f.cfg, &f.cpu, &x)[0], "router near-tie: choose another seed");
        let mut want = h1.clone();
        solo_cpu::ops::add_in_place(&mut want, &moe_forward(&f.cfg, &f.cpu, None, &x));
        let nb = gpu.upload_f32(&norm_w.iter().map(|v| 1.0 + v).collect::<Vec<_>>()).unwrap();
        let norm = Vector { ptr: nb.ptr(), len: HIDDEN };
        let scratch = Scratch::new(gpu, 1).unwrap();
        poison_scratch(&scratch);
        for round in 0..3 {
            let hb = gpu.upload_f32(&h).unwrap();
            moe_decode(gpu, mixer.out(), &f.gpu, hb.ptr(), &norm, 1e-6, &scratch).unwrap();
            let fused = gpu.download_f32(hb.ptr(), HIDDEN).unwrap();
            assert_close(&format!("moe_decode, launch {round}"), &fused, &want, 1e-4);
            let hb = gpu.upload_f32(&h).unwrap();
            moe_decode_kernels(gpu, mixer.out(), &f.gpu, hb.ptr(), &norm, 1e-6, 1, &scratch).unwrap();
            let kernels = gpu.download_f32(hb.ptr(), HIDDEN).unwrap();
            assert_close(&format!("moe_decode_kernels, launch {round}"), &kernels, &want, 1e-4);
            let same = fused.iter().zip(&kernels).filter(|(a, b)| a.to_bits() == b.to_bits()).count();
            assert_eq!(
                same,
                HIDDEN,
                "launch {round}: the fused kernel and the four kernels differ in {} of {HIDDEN} bits",
                HIDDEN - same
            );
        }
    }

    /// The four-kernel form for t tokens (their own h and y rows) gives
    /// each token the bits `moe_decode` gives it alone; twice, so the ticket is left at zero.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn moe_decode_kernels_for_tokens_equal_one_token_launches() {
        let gpu = gpu();
        let f = fixture();
        let mixer = MixerFixture::new();
        let norm_w = random(22, HIDDEN, 0.3);
        let nb = gpu.upload_f32(&norm_w.iter().map(|v| 1.0 + v).collect::<Vec<_>>()).unwrap();
        let norm = Vector { ptr: nb.ptr(), len: HIDDEN };
        let scratch = Scratch::new(gpu, 8).unwrap();
        for t in [1usize, 3, 8] {
            let h = random(30 + t as u64, t * HIDDEN, 2.0);
            let y = round_bf16(&random(40 + t as u64, t * MIXER_OUT, 1.0));
            let yb = gpu.upload(&bf16_bytes(&y)).unwrap();
            let mut alone = Vec::new();
            for i in 0..t {
                let hb = gpu.upload_f32(&h[i * HIDDEN..][..HIDDEN]).unwrap();
                let out = MixerOut { w: &mixer.w_o, y: yb.ptr() + (i * MIXER_OUT * 2) as u64 };
                moe_decode(gpu, out, &f.gpu, hb.ptr(), &norm, 1e-6, &scratch).unwrap();
                alone.extend(gpu.download_f32(hb.ptr(), HIDDEN).unwrap());
            }
            for round in 0..2 {
                let hb = gpu.upload_f32(&h).unwrap();
                let out = MixerOut { w: &mixer.w_o, y: yb.ptr() };
                moe_decode_kernels(gpu, out, &f.gpu, hb.ptr(), &norm, 1e-6, t, &scratch).unwrap();
                let got = gpu.download_f32(hb.ptr(), t * HIDDEN).unwrap();
                for i in 0..t {
                    let (g, a) = (&got[i * HIDDEN..][..HIDDEN], &alone[i * HIDDEN..][..HIDDEN]);
                    let differ = g.iter().zip(a).filter(|(x, y)| x.to_bits() != y.to_bits()).count();
                    assert_eq!(differ, 0, "{t} tokens, round {round}, token {i}: {differ} of {HIDDEN} values differ");
                }
            }
        }
    }

    /// The FP8 form of the decode step's MoE kernel (W_o and the experts e4m3 with block scales,
    /// the router bf16) against the CPU over the dequantised weights, over three launches.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn moe_decode_fp8_matches_cpu() {
        if !fp8_runs_here() {
            return;
        }
        let gpu = gpu();
        let f = fixture_fp8();
        let w_o =
            Tensor::quantize_fp8(HIDDEN, MIXER_OUT, &random(23, HIDDEN * MIXER_OUT, (3.0 / MIXER_OUT as f32).sqrt()));
        let y = round_bf16(&random(24, MIXER_OUT, 1.0));
        let mut up = Uploader::new(gpu).unwrap();
        let w_o_gpu = up.matrix(&w_o).unwrap();
        let _bufs = up.finish().unwrap();
        let yb = gpu.upload(&bf16_bytes(&y)).unwrap();
        let mixer = MixerOut { w: &w_o_gpu, y: yb.ptr() };
        let h = random(21, HIDDEN, 2.0);
        let mut h1 = h.clone();
        solo_cpu::ops::add_in_place(&mut h1, &solo_cpu::ops::matmul(&y, &w_o));
        let norm_w = random(22, HIDDEN, 0.3);
        let x = round_bf16(&solo_cpu::ops::rms_norm_one_plus(&h1, &norm_w, 1e-6));
        assert!(!near_ties(&f.cfg, &f.cpu, &x)[0], "router near-tie: choose another seed");
        let mut want = h1.clone();
        solo_cpu::ops::add_in_place(&mut want, &moe_forward(&f.cfg, &f.cpu, None, &x));
        let nb = gpu.upload_f32(&norm_w.iter().map(|v| 1.0 + v).collect::<Vec<_>>()).unwrap();
        let norm = Vector { ptr: nb.ptr(), len: HIDDEN };
        let scratch = Scratch::new(gpu, 1).unwrap();
        poison_scratch(&scratch);
        for round in 0..3 {
            let hb = gpu.upload_f32(&h).unwrap();
            moe_decode(gpu, MixerOut { ..mixer }, &f.gpu, hb.ptr(), &norm, 1e-6, &scratch).unwrap();
            let got = gpu.download_f32(hb.ptr(), HIDDEN).unwrap();
            assert_close(&format!("moe_decode FP8, launch {round}"), &got, &want, FP8_TOL);
        }
    }

    /// `fixture()`'s layer with its routed experts rounded to int4 (groups of 128, f16 scales; the
    /// GPTQ-Int4 release's shape), the router and the shared expert bf16 as they were. Every
    /// third expert gets zero points 6..=10 and 16 (asymmetric formats, GPTQ v1's +1), so both
    /// forms of the group word are exercised. Uploaded through `MoeGpu::upload`, as a checkpoint's.
    fn fixture_int4() -> &'static Fixture {
        static F: OnceLock<Fixture> = OnceLock::new();
        F.get_or_init(|| {
            use crate::int4::{quantize_symmetric, GROUP};
            use solo_model::int4::GroupQuant;
            let bf = fixture();
            let q = |t: &Tensor, e: usize| {
                let (rows, cols) = (t.shape[0], t.shape[1]);
                let (packed, scales, _) = quantize_symmetric(&t.to_f32(), rows, cols);
                let zeros = e
                    .is_multiple_of(3)
                    .then(|| (0..scales.len()).map(|i| if i % 7 == 0 { 16 } else { 6 + (i % 5) as u8 }).collect());
                Tensor::from_int4(rows, cols, &packed, GroupQuant { group: GROUP, scales, zeros, perm: None })
            };
            let qe = |(i, e): (usize, &ExpertWeights)| ExpertWeights {
                gate: q(&e.gate, i),
                up: q(&e.up, i),
                down: q(&e.down, i),
            };
            let mut experts: Vec<Option<ExpertWeights>> = (0..EXPERTS).map(|_| None).collect();
            std::thread::scope(|s| {
                for (c, (part, src)) in experts.chunks_mut(16).zip(bf.cpu.experts.chunks(16)).enumerate() {
                    s.spawn(move || {
                        part.iter_mut()
                            .zip(src.iter().enumerate())
                            .for_each(|(slot, (j, e))| *slot = Some(qe((16 * c + j, e))))
                    });
                }
            });
            let cpu = MoeWeights {
                router: bf.cpu.router.clone(),
                experts: experts.into_iter().map(|e| e.unwrap()).collect(),
                shared_expert: ExpertWeights {
                    gate: bf.cpu.shared_expert.gate.clone(),
                    up: bf.cpu.shared_expert.up.clone(),
                    down: bf.cpu.shared_expert.down.clone(),
                },
                shared_expert_gate: bf.cpu.shared_expert_gate.clone(),
            };
            let mut up = Uploader::new(gpu()).unwrap();
            let gpu_w = MoeGpu::upload(&mut up, &cpu).unwrap();
            assert!(gpu_w.int4_shared.is_some() && gpu_w.fp8_scales.is_none());
            std::mem::forget(up.finish().unwrap());
            Fixture { cfg: bf.cfg.clone(), cpu, gpu: gpu_w }
        })
    }

    /// The int4 grouped GEMMs (prefill, and every token count: int4 experts have no GEMV path)
    /// against the CPU on the dequantised experts.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn moe_block_int4_matches_cpu() {
        let gpu = gpu();
        let f = fixture_int4();
        for (t, seed) in [(1usize, 41u64), (4, 42), (300, 43)] {
            let x = input(seed, t);
            let xb = gpu.upload(&bf16_bytes(&x)).unwrap();
            let out = gpu.alloc(t * HIDDEN * 4).unwrap();
            moe_block(gpu, &f.gpu, xb.ptr(), t, &Scratch::new(gpu, t).unwrap(), out.ptr()).unwrap();
            let got = gpu.download_f32(out.ptr(), t * HIDDEN).unwrap();
            let want = moe_forward(&f.cfg, &f.cpu, None, &x);
            check_against_cpu(f, &format!("moe_block int4 t={t} (grouped)"), &got, &want, &x, 1e-2);
        }
        let err = moe_block_path(gpu, &f.gpu, 0, 2, &Scratch::new(gpu, 2).unwrap(), 0, false).unwrap_err();
        assert!(err.to_string().contains("bf16 experts"), "{err}");
    }

    /// The int4 form of the decode step's MoE kernel (W_o, router and shared expert bf16) against
    /// the CPU over the dequantised experts, over three launches.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn moe_decode_int4_matches_cpu() {
        let gpu = gpu();
        let f = fixture_int4();
        let mixer = MixerFixture::new();
        let h = random(21, HIDDEN, 2.0);
        let h1 = mixer.added_to(&h);
        let norm_w = random(22, HIDDEN, 0.3);
        let x = round_bf16(&solo_cpu::ops::rms_norm_one_plus(&h1, &norm_w, 1e-6));
        assert!(!near_ties(&f.cfg, &f.cpu, &x)[0], "router near-tie: choose another seed");
        let mut want = h1.clone();
        solo_cpu::ops::add_in_place(&mut want, &moe_forward(&f.cfg, &f.cpu, None, &x));
        let nb = gpu.upload_f32(&norm_w.iter().map(|v| 1.0 + v).collect::<Vec<_>>()).unwrap();
        let norm = Vector { ptr: nb.ptr(), len: HIDDEN };
        let scratch = Scratch::new(gpu, 1).unwrap();
        poison_scratch(&scratch);
        for round in 0..3 {
            let hb = gpu.upload_f32(&h).unwrap();
            moe_decode(gpu, mixer.out(), &f.gpu, hb.ptr(), &norm, 1e-6, &scratch).unwrap();
            let got = gpu.download_f32(hb.ptr(), HIDDEN).unwrap();
            assert_close(&format!("moe_decode int4, launch {round}"), &got, &want, FP8_TOL);
        }
    }

    #[test]
    fn layout_fits_scratch_words() {
        for t in [1usize, 2, 5, 64, 300, 4096] {
            let max_tiles = (t * TOP_K).div_ceil(TILE_ROWS) + EXPERTS + t.div_ceil(TILE_ROWS);
            let words = t * (EXPERTS + 3 * SLOTS) + 3 * 260 + 4 + 4 * max_tiles + 12;
            assert!(words <= t * SCRATCH_WIDTH, "t={t}");
            // Prefill activations: bf16 [t·9, 512] in 4-byte words.
            assert!(t * SLOTS * EXPERT_DIM / 2 <= t * SCRATCH_WIDTH);
        }
    }

    // The grouped GEMMs' shared memory fits an H200 block (227 KiB with the opt-in).
    const _: () = assert!(gemm_shared(3, false) <= 113 * 1024 && gemm_shared(3, true) <= 113 * 1024);
    const _: () = assert!(gemm_shared(2, false) <= 99 * 1024 && gemm_shared(2, true) <= 99 * 1024);
}
