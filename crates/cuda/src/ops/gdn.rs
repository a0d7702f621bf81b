//! The Gated DeltaNet mixer on the GPU (the formulas: crates/cpu/src/gdn.rs): projections, causal conv + SiLU, gates,
//! q/k l2-norm, the delta rule with an fp32 state, gated RMSNorm, out_proj.
//!
//! Kernels (`gdn_conv.cu`, `gdn_delta.cu`; launch geometry in each kernel's comment):
//! - `gdn_conv_silu`: the conv over T tokens with the window state, SiLU, and the window update
//!   (prefill; the decode step folds the conv into its in-projection GEMV, `gemv_norm_conv_mma_bf16`).
//! - `gdn_decode_step` (T = 1): gates + l2norm + recurrence + gated norm in one kernel, 32 heads ×
//!   4 column groups (clusters of 4 blocks share the norm's Σo²); S is read and written once.
//! - prefill (any T): `gdn_prep` (l2norm in place, gates, k·q, and each token pair's k·k and k·q)
//!   → `gdn_prefill_scan` (the state in registers, serial over token pairs; 4 lanes per value
//!   column) → `gdn_gated_norm`.
//!
//! The CUDA backend runs only the real widths (see `weights::check_real_widths`), which the kernels
//! hard-code: 16 key heads, 32 value heads, head dim 128, conv kernel 4.

use crate::kernels::{kernel_file, widths, Launch};
use crate::ops::gemv_q;
use crate::ops::linear::{gemv_norm_conv, gemv_norm_mma, linear, project};
use crate::ops::lora::{self, InputSites, Out};
use crate::ops::Scratch;
use crate::runtime::{DevBuf, DevPtr, Gpu};
use crate::weights::{GdnGpu, Matrix, Vector};
use anyhow::{ensure, Result};

kernel_file! {
    /// `gdn_conv.cu`'s kernels.
    pub mod gdn_conv_cu = "gdn_conv.cu" {
        fn gdn_conv_silu(qkv: DevPtr, qkv_stride: i32, state_in: DevPtr, state_out: DevPtr, windows: DevPtr, taps: DevPtr, out: DevPtr, t: i32);
        fn gdn_conv_batch(qkv: DevPtr, qkv_stride: i32, states: DevPtr, taps: DevPtr, out: DevPtr);
    }
}
kernel_file! {
    /// `gdn_delta.cu`'s kernels.
    pub mod gdn_delta_cu = "gdn_delta.cu" {
        fn gdn_decode_step(mixed: DevPtr, z: DevPtr, b: DevPtr, a: DevPtr, a_log: DevPtr, dt_bias: DevPtr, norm_w: DevPtr, s_in: DevPtr, s_out: DevPtr, out: DevPtr, eps: f32, tokens: i32, zba_stride: i32, s_stride: i64, states: DevPtr);
        fn gdn_prep(mixed: DevPtr, b: DevPtr, a: DevPtr, a_log: DevPtr, dt_bias: DevPtr, gates: DevPtr, t: i32);
        fn gdn_prefill_scan(mixed: DevPtr, gates: DevPtr, s: DevPtr, o: DevPtr, t: i32);
        fn gdn_gated_norm(o: DevPtr, z: DevPtr, norm_w: DevPtr, out: DevPtr, rows: i32, eps: f32);
    }
}

/// Channels through the conv: [q 16×128 | k 16×128 | v 32×128].
pub const CONV_DIM: usize = widths::GDN_CONV_DIM;
/// Value heads × value head dim (the z width and the out_proj input).
pub const VALUE_DIM: usize = widths::GDN_V_HEADS * widths::GDN_HEAD_DIM;
pub const V_HEADS: usize = widths::GDN_V_HEADS;
pub const HEAD_DIM: usize = widths::GDN_HEAD_DIM;
/// Pre-conv rows the conv window keeps (kernel 4 − 1).
pub const CONV_HISTORY: usize = widths::GDN_KERNEL - 1;
/// rms_norm_eps of the real model, used by the gated norm.
pub const RMS_EPS: f32 = 1e-6;
/// Rows of the stacked bf16 in-projection: qkv 8192 | z 4096 | b 32 | a 32.
pub const PROJ_ROWS: usize = CONV_DIM + VALUE_DIM + 2 * V_HEADS;
/// Floats per token of the gates buffer: g[32] | beta[32] | kq[16] | kk[16] | kqn[16] (`gdn_delta.cu`).
pub const GATES_STRIDE: usize = 112;

/// Tokens per block row of `gdn_conv_silu` (CONV_TOKENS in the .cu; must be ≥ 3).
const CONV_TOKENS: usize = 16;

/// A GDN layer's sequence state on the GPU (f32).
pub struct GdnStateGpu {
    /// [3, 8192]: the last 3 pre-conv qkv rows, oldest first (zeros for a fresh sequence).
    pub conv: DevBuf,
    /// [32, 128, 128]: S[h][r = key dim][c = value dim].
    pub recurrent: DevBuf,
}

impl GdnStateGpu {
    pub const CONV_BYTES: usize = CONV_HISTORY * CONV_DIM * 4;
    pub const RECURRENT_BYTES: usize = V_HEADS * HEAD_DIM * HEAD_DIM * 4;

    /// A fresh (zero) state.
    pub fn new(gpu: &Gpu) -> Result<Self> {
        Ok(GdnStateGpu { conv: gpu.alloc(Self::CONV_BYTES)?, recurrent: gpu.alloc(Self::RECURRENT_BYTES)? })
    }

    /// Makes this state equal to `other` (snapshot restore), by device copies on the model's stream.
    pub fn copy_from(&self, gpu: &Gpu, other: &Self) -> Result<()> {
        gpu.copy(self.conv.ptr(), other.conv.ptr(), Self::CONV_BYTES)?;
        gpu.copy(self.recurrent.ptr(), other.recurrent.ptr(), Self::RECURRENT_BYTES)
    }

    /// Back to a fresh sequence.
    pub fn reset(&self, gpu: &Gpu) -> Result<()> {
        gpu.zero(self.conv.ptr(), Self::CONV_BYTES)?;
        gpu.zero(self.recurrent.ptr(), Self::RECURRENT_BYTES)
    }
}

/// The per-head constants the delta kernels read (f32 device vectors).
#[derive(Clone, Copy, Debug)]
pub struct GdnConsts {
    /// [32]
    pub a_log: DevPtr,
    /// [32]
    pub dt_bias: DevPtr,
    /// [128], the gated norm's plain weight
    pub norm: DevPtr,
}

impl GdnConsts {
    pub fn of(w: &GdnGpu) -> Self {
        GdnConsts { a_log: w.a_log.ptr, dt_bias: w.dt_bias.ptr, norm: w.norm.ptr }
    }
}

/// Where `gdn_mixer` keeps its intermediates for `t` tokens: scratch buffers 0, 1, 2 and 3.
/// - 0: qkv f32 [t, 8192] (in_proj_qkv output, pre-conv)
/// - 1: mixed f32 [t, 8192] (conv + SiLU; the prefill normalises q and k in place)
/// - 2: z f32 [t, 4096], then b f32 [t, 32], a f32 [t, 32], gates f32 [t, 112]
/// - 3: o f32 [t, 4096] (prefill's raw delta-rule output), then y bf16 [t, 4096] (out_proj input)
#[derive(Clone, Copy, Debug)]
pub struct GdnBuffers {
    pub qkv: DevPtr,
    pub mixed: DevPtr,
    pub z: DevPtr,
    pub b: DevPtr,
    pub a: DevPtr,
    pub gates: DevPtr,
    pub o: DevPtr,
    pub y: DevPtr,
}

impl GdnBuffers {
    pub fn new(scratch: &Scratch, t: usize) -> Result<Self> {
        ensure!(t >= 1 && t <= scratch.max_tokens, "gdn: {t} tokens, scratch holds {}", scratch.max_tokens);
        let f = |n: usize| (n * t * 4) as DevPtr;
        let (s2, s3) = (scratch.ptr(2), scratch.ptr(3));
        Ok(GdnBuffers {
            qkv: scratch.ptr(0),
            mixed: scratch.ptr(1),
            z: s2,
            b: s2 + f(VALUE_DIM),
            a: s2 + f(VALUE_DIM + V_HEADS),
            gates: s2 + f(VALUE_DIM + 2 * V_HEADS),
            o: s3,
            y: s3 + f(VALUE_DIM),
        })
    }
}

/// The mixer: x bf16 [t, 2048] (normalised input) → out f32 [t, 2048] (not added to the residual).
/// Advances `state` by t tokens. Uses scratch buffers 0–3 (see `GdnBuffers`); x and out must not
/// be in them. t == 1 runs the fused decode step: fixed launch shapes, no host sync, no allocation
/// (graph-capturable). t ≤ scratch.max_tokens. With an adapter (`lora`), its terms join the
/// projections' outputs (`ops::lora`).
#[allow(clippy::too_many_arguments)]
pub fn gdn_mixer(
    gpu: &Gpu,
    w: &GdnGpu,
    x: DevPtr,
    t: usize,
    state: &GdnStateGpu,
    scratch: &Scratch,
    lora: lora::Adapter,
    out: DevPtr,
) -> Result<()> {
    let buf = GdnBuffers::new(scratch, t)?;
    let consts = GdnConsts::of(w);
    project(gpu, x, &w.in_proj_qkv, t, buf.qkv)?;
    project(gpu, x, &w.in_proj_z, t, buf.z)?;
    project(gpu, x, &w.in_proj_b, t, buf.b)?;
    project(gpu, x, &w.in_proj_a, t, buf.a)?;
    let outs = [(buf.qkv, CONV_DIM), (buf.z, VALUE_DIM), (buf.b, V_HEADS), (buf.a, V_HEADS)];
    lora::add(gpu, lora, |l| &l.input, x, t, &outs.map(|(ptr, stride)| Out { ptr, stride }))?;
    let (conv, recurrent) = (state.conv.ptr(), state.recurrent.ptr());
    conv_silu(gpu, buf.qkv, conv, conv, w.conv1d.ptr, t, buf.mixed)?;
    if t == 1 {
        decode_step(gpu, &consts, buf.mixed, buf.z, buf.b, buf.a, recurrent, recurrent, buf.y)?;
    } else {
        prefill_delta(gpu, &consts, &buf, state.recurrent.ptr(), t)?;
    }
    linear(gpu, buf.y, &w.out_proj, t, out)?;
    lora::add(gpu, lora, |l| &l.output, buf.y, t, &[Out { ptr: out, stride: widths::HIDDEN }])
}

/// The decode step's GDN sub-layer for one token on the residual stream h (f32 [2048]), all but
/// out_proj: returns y (bf16 [4096], scratch buffer 3) with GDN(RMSNorm(h; norm)) = out_proj · y,
/// advancing `state` by one token. The input norm and the causal conv are folded into one GEMV
/// over the stacked input projections; out_proj and its residual add are the first phase of the
/// MoE kernel (`moe::moe_decode`). Fixed launch shapes, no host sync (graph-capturable). Scratch
/// buffers 0, 1, 3. `lora`: a one-entry device array of a LoRA adapter's in-projection site
/// (`ops::lora::Site::fused`; bf16), or 0.
#[allow(clippy::too_many_arguments)]
pub fn gdn_decode(
    gpu: &Gpu,
    w: &GdnGpu,
    h: DevPtr,
    norm: &Vector,
    eps: f32,
    state: &GdnStateGpu,
    scratch: &Scratch,
    lora: DevPtr,
) -> Result<DevPtr> {
    let buf = GdnBuffers::new(scratch, 1)?;
    // proj f32 [12352] (its qkv part not written: the conv consumes it)
    let StackedProj { qkv: proj, z, b, a } = StackedProj::at(scratch.ptr(0));
    let tail = ba_rows(w)?;
    let lora = InputSites::new(lora, scratch);
    gemv_norm_conv(gpu, h, norm, eps, &w.in_proj, &tail, proj, state.conv.ptr(), w.conv1d.ptr, buf.mixed, lora)?;
    let recurrent = state.recurrent.ptr();
    decode_step(gpu, &GdnConsts::of(w), buf.mixed, z, b, a, recurrent, recurrent, buf.y)?;
    Ok(buf.y)
}

/// The b | a rows as one bf16 matrix [64, 2048]: inside in_proj (bf16) or their own matrix (FP8
/// and GGUF as stored, where they stay bf16).
fn ba_rows(w: &GdnGpu) -> Result<Matrix> {
    ensure!(w.in_proj_a.ptr == w.in_proj_b.ptr + (V_HEADS * w.in_proj_b.cols * 2) as DevPtr, "GDN: a must follow b");
    Ok(Matrix::bf16(w.in_proj_b.ptr, 2 * V_HEADS, w.in_proj_b.cols))
}

/// Where the stacked in-projection's parts start in a token's row: [qkv 8192 | z 4096 | b 32 | a 32]
/// (also where a LoRA adapter's fused sites add their terms: `ops::lora`).
pub const PROJ_FIRSTS: [usize; 4] = [0, CONV_DIM, CONV_DIM + VALUE_DIM, CONV_DIM + VALUE_DIM + V_HEADS];

/// The stacked in-projection's output for one token (f32 [12352], `PROJ_FIRSTS`), rows
/// `PROJ_ROWS` apart for several: where its parts start.
struct StackedProj {
    qkv: DevPtr,
    z: DevPtr,
    b: DevPtr,
    a: DevPtr,
}

impl StackedProj {
    fn at(proj: DevPtr) -> Self {
        let [qkv, z, b, a] = PROJ_FIRSTS.map(|i| proj + (i * 4) as DevPtr);
        StackedProj { qkv, z, b, a }
    }
}

/// The stacked in-projection of t tokens' RMSNorm(h) (h f32 [t, 2048]) into scratch buffer 0,
/// f32 [t, 12352], each row read once for all of them (`gemv_norm_mma`, bf16); a GGUF
/// in-projection as stored (qkv | z, with b | a apart) a token at a time (`gemv_q`). `lora`: the
/// tokens' LoRA sites (bf16 only), or 0.
#[allow(clippy::too_many_arguments)]
fn stacked_projection(
    gpu: &Gpu,
    w: &GdnGpu,
    h: DevPtr,
    norm: &Vector,
    eps: f32,
    t: usize,
    scratch: &Scratch,
    lora: DevPtr,
) -> Result<StackedProj> {
    let proj = scratch.ptr(0);
    if w.in_proj.format.is_some() {
        ensure!(lora == 0, "GDN: a LoRA site on a quantised in-projection");
        let tail = ba_rows(w)?;
        for i in 0..t {
            let (h, y) = (h + (i * 2048 * 4) as DevPtr, proj + (i * PROJ_ROWS * 4) as DevPtr);
            gemv_q::gemv_norm_q(gpu, h, norm, eps, &w.in_proj, Some(&tail), y, None)?;
        }
        return Ok(StackedProj::at(proj));
    }
    ensure!(
        w.in_proj.rows == PROJ_ROWS && w.in_proj.is_bf16(),
        "the GDN steps for several tokens take the stacked bf16 in-projection ({PROJ_ROWS} rows), not {} rows{}",
        w.in_proj.rows,
        if w.in_proj.is_bf16() { "" } else { " of FP8" }
    );
    gemv_norm_mma(gpu, h, norm, eps, &w.in_proj, t, proj, PROJ_ROWS, InputSites::new(lora, scratch))?;
    Ok(StackedProj::at(proj))
}

/// A GDN layer's states after each token of a multi-token step (`gdn_decode_tokens`): conv
/// windows f32 [tokens, 3, 8192] and recurrent states f32 [tokens, 32, 128, 128].
pub struct GdnStatesAfter {
    pub tokens: usize,
    conv: DevBuf,
    recurrent: DevBuf,
}

impl GdnStatesAfter {
    pub fn new(gpu: &Gpu, tokens: usize) -> Result<Self> {
        Ok(GdnStatesAfter {
            tokens,
            conv: gpu.alloc(tokens * GdnStateGpu::CONV_BYTES)?,
            recurrent: gpu.alloc(tokens * GdnStateGpu::RECURRENT_BYTES)?,
        })
    }

    /// Makes `state` the state after token i (device copies on the model's stream).
    pub fn copy_into(&self, gpu: &Gpu, i: usize, state: &GdnStateGpu) -> Result<()> {
        ensure!(i < self.tokens, "state after token {i} of {}", self.tokens);
        gpu.copy(state.conv.ptr(), self.conv.ptr() + (i * GdnStateGpu::CONV_BYTES) as DevPtr, GdnStateGpu::CONV_BYTES)?;
        let recurrent = self.recurrent.ptr() + (i * GdnStateGpu::RECURRENT_BYTES) as DevPtr;
        gpu.copy(state.recurrent.ptr(), recurrent, GdnStateGpu::RECURRENT_BYTES)
    }
}

/// `gdn_decode` for t ≤ `after.tokens` consecutive tokens of one sequence (the multi-token decode
/// step; h f32 [t, 2048]), bf16 weights: returns y (bf16 [t, 4096], scratch buffer 3). The
/// stacked in-projection is read once for all t tokens (`gemv_norm_mma`), the conv and the
/// delta steps run over the t tokens in one launch each, and the state after each token goes to
/// `after`; `state` itself is not changed. Every token gets the bits `gdn_decode` would give it.
/// Scratch buffers 0, 1, 3. `lora`: a u64 [t] device array of the tokens' LoRA in-projection
/// sites (`LoraSite`), or 0.
#[allow(clippy::too_many_arguments)]
pub fn gdn_decode_tokens(
    gpu: &Gpu,
    w: &GdnGpu,
    h: DevPtr,
    norm: &Vector,
    eps: f32,
    t: usize,
    state: &GdnStateGpu,
    after: &GdnStatesAfter,
    scratch: &Scratch,
    lora: DevPtr,
) -> Result<DevPtr> {
    ensure!(t >= 1 && t <= after.tokens && t <= CONV_TOKENS, "GDN multi-token step of {t} tokens");
    let buf = GdnBuffers::new(scratch, t)?;
    let p = stacked_projection(gpu, w, h, norm, eps, t, scratch, lora)?;
    let last_window = after.conv.ptr() + ((t - 1) * GdnStateGpu::CONV_BYTES) as DevPtr;
    gdn_conv_cu::gdn_conv_silu(
        gpu,
        Launch::new(((CONV_DIM / 256) as u32, 1, 1), 256, 0),
        p.qkv,
        PROJ_ROWS as i32,
        state.conv.ptr(),
        last_window,
        after.conv.ptr(),
        w.conv1d.ptr,
        buf.mixed,
        t as i32,
    )?;
    let steps = DeltaSteps {
        tokens: t,
        zba_stride: PROJ_ROWS,
        state_stride: GdnStateGpu::RECURRENT_BYTES / 4,
        sequences: None,
    };
    delta_steps(
        gpu,
        &GdnConsts::of(w),
        buf.mixed,
        p.z,
        p.b,
        p.a,
        state.recurrent.ptr(),
        after.recurrent.ptr(),
        steps,
        buf.y,
    )?;
    Ok(buf.y)
}

/// `gdn_decode` for one token of each of n ≤ 8 sequences (the batched decode step; h f32
/// [n, 2048]), bf16 weights: returns y (bf16 [n, 4096], scratch buffer 3). The stacked
/// in-projection is read once for all n (`gemv_norm_mma`); the conv and the delta step take
/// every sequence's token in one launch each, updating its state in place. `windows` and
/// `recurrents`: u64 [n] device arrays of the sequences' `conv` and `recurrent` pointers; `lora`:
/// a u64 [n] device array of their LoRA adapters' in-projection sites (`LoraSite`, 0: none), or
/// 0. Each token gets the bits `gdn_decode` would give it. Scratch buffers 0, 1, 3.
#[allow(clippy::too_many_arguments)]
pub fn gdn_decode_batch(
    gpu: &Gpu,
    w: &GdnGpu,
    h: DevPtr,
    norm: &Vector,
    eps: f32,
    n: usize,
    windows: DevPtr,
    recurrents: DevPtr,
    scratch: &Scratch,
    lora: DevPtr,
) -> Result<DevPtr> {
    let buf = GdnBuffers::new(scratch, n)?;
    let p = stacked_projection(gpu, w, h, norm, eps, n, scratch, lora)?;
    gdn_conv_cu::gdn_conv_batch(
        gpu,
        Launch::new(((CONV_DIM / 256) as u32, n as u32, 1), 256, 0),
        p.qkv,
        PROJ_ROWS as i32,
        windows,
        w.conv1d.ptr,
        buf.mixed,
    )?;
    let steps = DeltaSteps { tokens: 1, zba_stride: PROJ_ROWS, state_stride: 0, sequences: Some((n, recurrents)) };
    delta_steps(gpu, &GdnConsts::of(w), buf.mixed, p.z, p.b, p.a, 0, 0, steps, buf.y)?;
    Ok(buf.y)
}

/// Everything after the conv for t ≥ 1 tokens: prep → scan → gated norm, reading `buf.mixed`
/// (modified: q, k normalised), `buf.z`, `buf.b`, `buf.a`; writing `buf.gates`, `buf.o`, `buf.y`.
pub fn prefill_delta(gpu: &Gpu, c: &GdnConsts, buf: &GdnBuffers, recurrent: DevPtr, t: usize) -> Result<()> {
    prep(gpu, c, buf.mixed, buf.b, buf.a, t, buf.gates)?;
    scan(gpu, buf.mixed, buf.gates, recurrent, t, buf.o)?;
    gated_norm(gpu, c, buf.o, buf.z, t, buf.y)
}

/// out f32 [t, 8192] = silu(causal_conv(qkv f32 [t, 8192])) with the window `state_in` f32
/// [3, 8192]; `state_out` (`state_in` itself, or another window) gets the last 3 pre-conv rows;
/// taps f32 [8192, 4].
pub fn conv_silu(
    gpu: &Gpu,
    qkv: DevPtr,
    state_in: DevPtr,
    state_out: DevPtr,
    taps: DevPtr,
    t: usize,
    out: DevPtr,
) -> Result<()> {
    gdn_conv_cu::gdn_conv_silu(
        gpu,
        Launch::new(((CONV_DIM / 256) as u32, t.div_ceil(CONV_TOKENS) as u32, 1), 256, 0),
        qkv,
        CONV_DIM as i32,
        state_in,
        state_out,
        0,
        taps,
        out,
        t as i32,
    )
}

/// One token after the conv: mixed f32 [8192], z f32 [4096], b, a f32 [32]; the state
/// `recurrent_in` f32 [32, 128, 128] → `recurrent_out` (the same buffer, or another);
/// y bf16 [4096] = gated_norm(o)·silu(z).
#[allow(clippy::too_many_arguments)]
pub fn decode_step(
    gpu: &Gpu,
    c: &GdnConsts,
    mixed: DevPtr,
    z: DevPtr,
    b: DevPtr,
    a: DevPtr,
    recurrent_in: DevPtr,
    recurrent_out: DevPtr,
    y: DevPtr,
) -> Result<()> {
    let one = DeltaSteps { tokens: 1, zba_stride: 0, state_stride: 0, sequences: None };
    delta_steps(gpu, c, mixed, z, b, a, recurrent_in, recurrent_out, one, y)
}

/// How many consecutive tokens `delta_steps` takes, how far apart one token's z, b, a are from
/// the next's (f32), and its states after each token (f32); or, with `sequences` (n, and a device
/// array of n state pointers), one token of each of n sequences, each state updated in place.
struct DeltaSteps {
    tokens: usize,
    zba_stride: usize,
    state_stride: usize,
    sequences: Option<(usize, DevPtr)>,
}

/// `decode_step` for `steps.tokens` consecutive tokens in one launch: mixed f32 [t, 8192], out
/// bf16 [t, 4096], the state after token i at `recurrent_out + i · state_stride`.
#[allow(clippy::too_many_arguments)]
fn delta_steps(
    gpu: &Gpu,
    c: &GdnConsts,
    mixed: DevPtr,
    z: DevPtr,
    b: DevPtr,
    a: DevPtr,
    recurrent_in: DevPtr,
    recurrent_out: DevPtr,
    steps: DeltaSteps,
    y: DevPtr,
) -> Result<()> {
    // 32 value heads × 4 column groups: clusters of 4 blocks of 128 (compile-time
    // `__cluster_dims__`), or in the portable form one block of 512 a head.
    let sequences = steps.sequences.map_or(1, |(n, _)| n as u32);
    let launch = if gpu.target.hopper {
        Launch::new(((V_HEADS * 4) as u32, sequences, 1), 128, 0).pdl(true)
    } else {
        Launch::new((V_HEADS as u32, sequences, 1), 512, 0)
    };
    gdn_delta_cu::gdn_decode_step(
        gpu,
        launch,
        mixed,
        z,
        b,
        a,
        c.a_log,
        c.dt_bias,
        c.norm,
        recurrent_in,
        recurrent_out,
        y,
        RMS_EPS,
        steps.tokens as i32,
        steps.zba_stride as i32,
        steps.state_stride as i64,
        steps.sequences.map_or(0, |(_, states)| states),
    )
}

/// Per token: q, k of `mixed` f32 [t, 8192] l2-normalised in place (q also × 1/√128); gates
/// f32 [t, 112] = g | beta | k·q | the pair products k_t·k_{t+1}, k_t·q_{t+1} (even t) from b, a
/// f32 [t, 32]. A block per token pair.
pub fn prep(gpu: &Gpu, c: &GdnConsts, mixed: DevPtr, b: DevPtr, a: DevPtr, t: usize, gates: DevPtr) -> Result<()> {
    let launch = Launch::new((t.div_ceil(2) as u32, 1, 1), 256, 0);
    gdn_delta_cu::gdn_prep(gpu, launch, mixed, b, a, c.a_log, c.dt_bias, gates, t as i32)
}

/// The delta rule over t tokens (after `prep`): updates `recurrent`, writes o f32 [t, 4096].
pub fn scan(gpu: &Gpu, mixed: DevPtr, gates: DevPtr, recurrent: DevPtr, t: usize, o: DevPtr) -> Result<()> {
    // 32 value heads × 4 groups of 32 columns; 4 lanes per column.
    gdn_delta_cu::gdn_prefill_scan(
        gpu,
        Launch::new(((V_HEADS * 4) as u32, 1, 1), 128, 0),
        mixed,
        gates,
        recurrent,
        o,
        t as i32,
    )
}

/// y bf16 [t, 4096] = per head, norm·(o·rsqrt(mean(o²) + eps))·silu(z), o and z f32 [t, 4096].
pub fn gated_norm(gpu: &Gpu, c: &GdnConsts, o: DevPtr, z: DevPtr, t: usize, y: DevPtr) -> Result<()> {
    let rows = t * V_HEADS;
    gdn_delta_cu::gdn_gated_norm(
        gpu,
        Launch::new((rows.div_ceil(8) as u32, 1, 1), 256, 0),
        o,
        z,
        c.norm,
        y,
        rows as i32,
        RMS_EPS,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testutil::*;
    use solo_cpu::gdn::{
        causal_conv_silu, delta_rule_chunked, delta_rule_recurrent, l2_normalize, DeltaRule, HeadInputs,
    };
    use solo_cpu::ops::{inv_rms, sigmoid, silu, softplus};

    const KEY_DIM: usize = 2048;
    const STATE: usize = V_HEADS * HEAD_DIM * HEAD_DIM;

    fn nan_f32(n: usize) -> DevBuf {
        gpu().upload_f32(&vec![f32::NAN; n]).unwrap()
    }

    fn nan_bf16(n: usize) -> DevBuf {
        gpu().upload(&bf16_bytes(&vec![f32::NAN; n])).unwrap()
    }

    /// Per-head constants with decays from very fast (e^g ≈ 0) to very slow (e^g ≈ 1 − 1e-4).
    struct Consts {
        a_log: Vec<f32>,
        dt_bias: Vec<f32>,
        norm: Vec<f32>,
    }

    fn consts(seed: u64) -> Consts {
        let a_log = (0..V_HEADS).map(|h| -4.0 + 7.0 * h as f32 / (V_HEADS - 1) as f32).collect();
        let dt_bias = random(seed, V_HEADS, 3.0).iter().map(|v| v - 1.5).collect();
        let norm = random(seed + 1, HEAD_DIM, 0.3).iter().map(|v| 1.0 + v).collect();
        Consts { a_log, dt_bias, norm }
    }

    /// Conv outputs as the mixer sees them: silu of values of order 1.
    fn mixed_rows(seed: u64, t: usize) -> Vec<f32> {
        random(seed, t * CONV_DIM, 2.5).iter().map(|&v| silu(v)).collect()
    }

    /// The CPU reference of everything after the conv (what `solo_cpu::gdn::gdn_forward` does
    /// between the conv and out_proj). Returns (o [t, 4096] raw, y [t, 4096] gated-normed).
    #[allow(clippy::too_many_arguments)]
    fn cpu_after_conv(
        c: &Consts,
        mixed: &[f32],
        z: &[f32],
        b: &[f32],
        a: &[f32],
        t: usize,
        s: &mut [f32],
        rule: DeltaRule,
    ) -> (Vec<f32>, Vec<f32>) {
        let rows = |offset: usize, h: usize| -> Vec<f32> {
            (0..t).flat_map(|i| mixed[i * CONV_DIM + offset + h * HEAD_DIM..][..HEAD_DIM].iter().copied()).collect()
        };
        let q: Vec<Vec<f32>> =
            (0..16).map(|h| l2_normalize(rows(0, h), HEAD_DIM, 1.0 / (HEAD_DIM as f32).sqrt())).collect();
        let k: Vec<Vec<f32>> = (0..16).map(|h| l2_normalize(rows(KEY_DIM, h), HEAD_DIM, 1.0)).collect();
        let mut o = vec![0.0f32; t * VALUE_DIM];
        for h in 0..V_HEADS {
            let v = rows(2 * KEY_DIM, h);
            let g: Vec<f32> = (0..t).map(|i| -c.a_log[h].exp() * softplus(a[i * V_HEADS + h] + c.dt_bias[h])).collect();
            let beta: Vec<f32> = (0..t).map(|i| sigmoid(b[i * V_HEADS + h])).collect();
            let x = HeadInputs { q: &q[h / 2], k: &k[h / 2], v: &v, g: &g, beta: &beta, dk: HEAD_DIM, dv: HEAD_DIM };
            let sh = &mut s[h * HEAD_DIM * HEAD_DIM..][..HEAD_DIM * HEAD_DIM];
            let oh = match rule {
                DeltaRule::Recurrent => delta_rule_recurrent(&x, sh),
                DeltaRule::Chunked => delta_rule_chunked(&x, sh),
            };
            for i in 0..t {
                o[i * VALUE_DIM + h * HEAD_DIM..][..HEAD_DIM].copy_from_slice(&oh[i * HEAD_DIM..][..HEAD_DIM]);
            }
        }
        let mut y = vec![0.0f32; t * VALUE_DIM];
        for (r, (src, dst)) in o.chunks(HEAD_DIM).zip(y.chunks_mut(HEAD_DIM)).enumerate() {
            let inv = inv_rms(src, RMS_EPS);
            for cc in 0..HEAD_DIM {
                dst[cc] = c.norm[cc] * (src[cc] * inv) * silu(z[r * HEAD_DIM + cc]);
            }
        }
        (o, y)
    }

    struct ConstsGpu {
        _bufs: Vec<DevBuf>,
        c: GdnConsts,
    }

    fn upload_consts(c: &Consts) -> ConstsGpu {
        let gpu = gpu();
        let bufs = vec![
            gpu.upload_f32(&c.a_log).unwrap(),
            gpu.upload_f32(&c.dt_bias).unwrap(),
            gpu.upload_f32(&c.norm).unwrap(),
        ];
        let c = GdnConsts { a_log: bufs[0].ptr(), dt_bias: bufs[1].ptr(), norm: bufs[2].ptr() };
        ConstsGpu { _bufs: bufs, c }
    }

    /// The conv over calls of 37, 1, 2 and 20 tokens (ragged token blocks, T < 3), carrying the
    /// window: outputs and the window match the CPU after every call.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn conv_silu_matches_cpu_across_calls() {
        let gpu = gpu();
        let taps = random(1, CONV_DIM * 4, 0.6);
        let mut window = random(2, CONV_HISTORY * CONV_DIM, 1.5);
        let state = gpu.upload_f32(&window).unwrap();
        let taps_gpu = gpu.upload_f32(&taps).unwrap();
        for (call, &t) in [37usize, 1, 2, 20].iter().enumerate() {
            let qkv = random(10 + call as u64, t * CONV_DIM, 1.5);
            let want = causal_conv_silu(&qkv, &mut window, &taps, CONV_DIM);
            let qkv_gpu = gpu.upload_f32(&qkv).unwrap();
            let out = nan_f32(t * CONV_DIM);
            conv_silu(gpu, qkv_gpu.ptr(), state.ptr(), state.ptr(), taps_gpu.ptr(), t, out.ptr()).unwrap();
            let got = gpu.download_f32(out.ptr(), t * CONV_DIM).unwrap();
            assert_close(&format!("conv call {call} (T={t}) output"), &got, &want, 1e-5);
            let got_state = gpu.download_f32(state.ptr(), CONV_HISTORY * CONV_DIM).unwrap();
            assert_eq!(got_state, window, "conv call {call} (T={t}): window is not the last 3 pre-conv rows");
        }
    }

    /// The fused decode step for 6 consecutive tokens (state carried on the GPU) against the
    /// CPU recurrence from a non-zero start state.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn decode_step_matches_recurrence() {
        let gpu = gpu();
        let c = consts(20);
        let cg = upload_consts(&c);
        let mut s = random(21, STATE, 0.5);
        let s_gpu = gpu.upload_f32(&s).unwrap();
        for step in 0..6u64 {
            let mixed = mixed_rows(100 + step, 1);
            let z = random(200 + step, VALUE_DIM, 3.0);
            let b = random(300 + step, V_HEADS, 3.0);
            let a = random(400 + step, V_HEADS, 3.0);
            let (_, want) = cpu_after_conv(&c, &mixed, &z, &b, &a, 1, &mut s, DeltaRule::Recurrent);

            let (m_gpu, z_gpu) = (gpu.upload_f32(&mixed).unwrap(), gpu.upload_f32(&z).unwrap());
            let (b_gpu, a_gpu) = (gpu.upload_f32(&b).unwrap(), gpu.upload_f32(&a).unwrap());
            let y = nan_bf16(VALUE_DIM);
            decode_step(
                gpu,
                &cg.c,
                m_gpu.ptr(),
                z_gpu.ptr(),
                b_gpu.ptr(),
                a_gpu.ptr(),
                s_gpu.ptr(),
                s_gpu.ptr(),
                y.ptr(),
            )
            .unwrap();
            let got = bf16_from_bytes(&gpu.download(y.ptr(), VALUE_DIM * 2).unwrap());
            assert_close(&format!("decode step {step}: gated-norm output (bf16)"), &got, &want, 4e-3);
            let got_s = gpu.download_f32(s_gpu.ptr(), STATE).unwrap();
            assert_close(&format!("decode step {step}: state"), &got_s, &s, 1e-5);
        }
    }

    /// prep → scan → gated norm for T = 1, 63, 64, 65, 200 from a non-zero state, against the
    /// CPU recurrence and the CPU chunked form.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn prefill_matches_recurrent_and_chunked() {
        let gpu = gpu();
        let c = consts(30);
        let cg = upload_consts(&c);
        for &t in &[1usize, 63, 64, 65, 200] {
            let seed = 1000 * t as u64;
            let mixed = mixed_rows(seed, t);
            let z = random(seed + 1, t * VALUE_DIM, 3.0);
            let b = random(seed + 2, t * V_HEADS, 3.0);
            let a = random(seed + 3, t * V_HEADS, 3.0);
            let s0 = random(seed + 4, STATE, 0.5);
            let (mut s_rec, mut s_chunk) = (s0.clone(), s0.clone());
            let (o_rec, y_rec) = cpu_after_conv(&c, &mixed, &z, &b, &a, t, &mut s_rec, DeltaRule::Recurrent);
            let (o_chunk, _) = cpu_after_conv(&c, &mixed, &z, &b, &a, t, &mut s_chunk, DeltaRule::Chunked);

            let m_gpu = gpu.upload_f32(&mixed).unwrap();
            let z_gpu = gpu.upload_f32(&z).unwrap();
            let (b_gpu, a_gpu) = (gpu.upload_f32(&b).unwrap(), gpu.upload_f32(&a).unwrap());
            let s_gpu = gpu.upload_f32(&s0).unwrap();
            let (gates, o, y) = (nan_f32(t * GATES_STRIDE), nan_f32(t * VALUE_DIM), nan_bf16(t * VALUE_DIM));
            let buf = GdnBuffers {
                qkv: 0,
                mixed: m_gpu.ptr(),
                z: z_gpu.ptr(),
                b: b_gpu.ptr(),
                a: a_gpu.ptr(),
                gates: gates.ptr(),
                o: o.ptr(),
                y: y.ptr(),
            };
            prefill_delta(gpu, &cg.c, &buf, s_gpu.ptr(), t).unwrap();
            let got_o = gpu.download_f32(o.ptr(), t * VALUE_DIM).unwrap();
            let got_y = bf16_from_bytes(&gpu.download(y.ptr(), t * VALUE_DIM * 2).unwrap());
            let got_s = gpu.download_f32(s_gpu.ptr(), STATE).unwrap();
            assert_close(&format!("prefill T={t}: o vs recurrent"), &got_o, &o_rec, 1e-4);
            assert_close(&format!("prefill T={t}: o vs chunked"), &got_o, &o_chunk, 1e-4);
            assert_close(&format!("prefill T={t}: state vs recurrent"), &got_s, &s_rec, 1e-4);
            assert_close(&format!("prefill T={t}: state vs chunked"), &got_s, &s_chunk, 1e-4);
            assert_close(&format!("prefill T={t}: gated-norm output (bf16)"), &got_y, &y_rec, 4e-3);
        }
    }

    /// The whole mixer against `solo_cpu::gdn::gdn_forward`: a 100-token prefill (chunked on the
    /// CPU), then 3 decode tokens (recurrent on the CPU), random weights of the real shapes.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn mixer_matches_cpu_forward() {
        use solo_model::{DType, Tensor};
        let gpu = gpu();
        let cfg = crate::synthetic::real_config(4);
        let hidden = 2048;
        let bf = |shape: Vec<usize>, v: Vec<f32>| Tensor::from_f32_as_bf16(shape, &v);
        let c = consts(40);
        let a_log_bytes: Vec<u8> = c.a_log.iter().flat_map(|v| v.to_le_bytes()).collect();
        let w = solo_model::weights::GdnWeights {
            in_proj_qkv: bf(vec![CONV_DIM, hidden], random(41, CONV_DIM * hidden, 0.035)),
            in_proj_z: bf(vec![VALUE_DIM, hidden], random(42, VALUE_DIM * hidden, 0.035)),
            in_proj_b: bf(vec![V_HEADS, hidden], random(43, V_HEADS * hidden, 0.035)),
            in_proj_a: bf(vec![V_HEADS, hidden], random(44, V_HEADS * hidden, 0.035)),
            conv1d: bf(vec![CONV_DIM, 1, 4], random(45, CONV_DIM * 4, 0.6)),
            a_log: Tensor::from_bytes(DType::F32, vec![V_HEADS], &a_log_bytes),
            dt_bias: bf(vec![V_HEADS], c.dt_bias.clone()),
            norm: bf(vec![HEAD_DIM], c.norm.clone()),
            out_proj: bf(vec![hidden, VALUE_DIM], random(46, hidden * VALUE_DIM, 0.035)),
        };
        let mut up = crate::weights::Uploader::new(gpu).unwrap();
        let wg = GdnGpu::upload(&mut up, &w, None).unwrap();
        let _weights = up.finish().unwrap();

        let (prefill, decode) = (100, 3);
        let x = round_bf16(&random(47, (prefill + decode) * hidden, 1.7));
        let mut cpu_state = solo_cpu::gdn::GdnState::new(&cfg);
        let state = GdnStateGpu::new(gpu).unwrap();
        let scratch = Scratch::new(gpu, prefill).unwrap();
        let check_state = |what: &str, cpu: &solo_cpu::gdn::GdnState| {
            let conv = gpu.download_f32(state.conv.ptr(), CONV_HISTORY * CONV_DIM).unwrap();
            let rec = gpu.download_f32(state.recurrent.ptr(), STATE).unwrap();
            assert_close(&format!("{what}: conv window"), &conv, &cpu.conv, 1e-5);
            assert_close(&format!("{what}: recurrent state"), &rec, &cpu.recurrent, 1e-4);
        };

        // Prefill.
        let want =
            solo_cpu::gdn::gdn_forward(&cfg, &w, None, &x[..prefill * hidden], &mut cpu_state, DeltaRule::Chunked);
        let x_gpu = gpu.upload(&bf16_bytes(&x[..prefill * hidden])).unwrap();
        let out = nan_f32(prefill * hidden);
        gdn_mixer(gpu, &wg, x_gpu.ptr(), prefill, &state, &scratch, None, out.ptr()).unwrap();
        let got = gpu.download_f32(out.ptr(), prefill * hidden).unwrap();
        assert_close("mixer prefill T=100: output", &got, &want, 1e-2);
        check_state("mixer prefill T=100", &cpu_state);

        // Decode, token by token, from the prefill's state.
        for i in 0..decode {
            let row = &x[(prefill + i) * hidden..][..hidden];
            let want = solo_cpu::gdn::gdn_forward(&cfg, &w, None, row, &mut cpu_state, DeltaRule::Recurrent);
            let x_gpu = gpu.upload(&bf16_bytes(row)).unwrap();
            let out = nan_f32(hidden);
            gdn_mixer(gpu, &wg, x_gpu.ptr(), 1, &state, &scratch, None, out.ptr()).unwrap();
            let got = gpu.download_f32(out.ptr(), hidden).unwrap();
            assert_close(&format!("mixer decode {i}: output"), &got, &want, 1e-2);
            check_state(&format!("mixer decode {i}"), &cpu_state);
        }

        // Snapshot restore: a copy equals the original.
        let copy = GdnStateGpu::new(gpu).unwrap();
        copy.copy_from(gpu, &state).unwrap();
        let before = gpu.download_f32(state.recurrent.ptr(), STATE).unwrap();
        let copied = gpu.download_f32(copy.recurrent.ptr(), STATE).unwrap();
        assert_eq!(before, copied, "copy_from: recurrent state differs");
        assert_eq!(
            gpu.download_f32(state.conv.ptr(), CONV_HISTORY * CONV_DIM).unwrap(),
            gpu.download_f32(copy.conv.ptr(), CONV_HISTORY * CONV_DIM).unwrap(),
            "copy_from: conv window differs"
        );
    }
}
