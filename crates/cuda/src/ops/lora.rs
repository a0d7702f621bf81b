//! LoRA adapters on the GPU (the formula and its reference: crates/cpu/src/lora.rs): an adapted
//! matrix W gives
//!
//! ```text
//! y = W x + s · B (A x)          A: [r, in], B: [out, r]
//! ```
//!
//! the low-rank term added to the product's output, never merged into W, so one copy of the
//! weights (of any format) serves every adapter and the base model.
//!
//! The adapted matrices that read the same input form a **site**: a layer's input projections
//! (GDN in_proj_qkv | z | b | a; attention q | k | v), its output projection (out_proj / o_proj),
//! its router (the 256 router rows and the shared expert's gate, one matrix here), the shared
//! expert's gate_proj | up_proj, and its down_proj. A site
//! stacks its matrices' A into one [Σr, in] matrix, so its term takes two launches whatever it
//! adapts: u = A x (`lora_shrink` for one token, cuBLAS for more), then for each matrix
//! y += s · B u (`lora_expand`, into that matrix's output).
//!
//! Where it runs:
//! - The layer-by-layer forward (`CudaModel::forward`: prefill) adds each site's term as above.
//! - The decode steps take it inside the kernels they already launch (`fused`): the input
//!   projections' GEMVs (`gemv_norm_mma_bf16`, `gemv_norm_conv_mma_bf16`) and the MoE kernel's
//!   phase 0 (the output projection, `moe_decode_block_out_lora`) get a `LoraSite` (lora.cuh)
//!   per token; the grid computes u = A x once (a row of A a warp, into lora.cuh's `LoraOnce`:
//!   `InputSites`, and the MoE kernel's past its barrier count), its blocks meet, and each adds
//!   s · B[r] · u to each row r it writes. (Every block computing u itself read all of A from L2:
//!   34 MB a site a layer, ~6 µs each on the H100.) The batched
//!   step's sequences each bring their own adapter or none (a device array of sites per layer,
//!   `multi_token.rs`), and speculative decoding's verify step repeats its sequence's; their
//!   four-kernel MoE form adds the output projection's term in two launches (`add_per_token`),
//!   with the fused kernel's sums, so every row keeps the bits of its own decode step. That takes
//!   bf16 weights, Σr ≤ 64 an input site (rank 16 on all four GDN in-projections) and ≤ 32 an
//!   output site.
//! - An adapter of the MoE block (the router, the shared expert, the routed experts) goes into
//!   the one-token step's MoE kernel as well (`moe_decode_block_lora`, `LoraMoe`, on GPUs with the
//!   fused MoE kernel; Σr ≤ 32 a site, rank ≤ 32 an expert tensor): the router's term into each
//!   block's logit and the shared expert's into its pairs (each block computes its u), the routed
//!   experts' after the routing (below), at two more grid barriers. The several-token steps take
//!   none: such an adapter's sequences decode alone (`LoraGpu::several_tokens`). Adapters past
//!   those limits decode through the layer-by-layer forward (one token, captured as a graph).
//! - In the forward, an adapter of the shared expert runs it apart (`shared_expert`): the expert
//!   kernels see its routing weight 0, and its products, activation and gated sum run as launches
//!   of their own, each product with its term.
//! - The routed experts' adapters (PEFT's `target_parameters` on `mlp.experts`, `ExpertsSite`):
//!   per tensor every expert's A and B stacked; after the routing, u = A_e x for each token's 8
//!   routed experts, the gate/up term s · B_e u goes into the expert sums before the activation,
//!   the down term Σ_slot w · s · B_e (A_e act) into the output; in the forward as four launches
//!   (the gate/up term is every expert kernel's `delta`), on any expert format.

use crate::kernels::{kernel_file, Launch};
// where each input site's outputs start in the fused step's stacked projection
use crate::kernels::widths::{EXPERTS, EXPERT_DIM, HIDDEN, TOP_K};
use crate::ops::attention::PROJ_FIRSTS as ATTENTION_FIRSTS;
use crate::ops::gdn::PROJ_FIRSTS as GDN_FIRSTS;
use crate::ops::linear::gemm;
use crate::ops::moe::SLOTS;
use crate::runtime::{DevBuf, DevPtr, Gpu};
use crate::weights::Matrix;
use anyhow::{ensure, Result};
use solo_model::lora::{ExpertLora, LayerLora, LoraAdapter, LoraPair, Target};
use std::sync::atomic::{AtomicU64, Ordering};

kernel_file! {
    /// `lora.cu`'s kernels.
    pub mod lora_cu = "lora.cu" with "lora.cuh" {
        fn lora_shrink(x: DevPtr, a: DevPtr, u: DevPtr, rows: i32, in_dim: i32);
        fn lora_expand(u: DevPtr, u_stride: i32, b: DevPtr, rank: i32, scale: f32, y: DevPtr, y_stride: i32, rows: i32, tokens: i32);
        fn lora_shrink_sites(x: DevPtr, in_dim: i32, sites: DevPtr, u: DevPtr);
        fn lora_expand_sites(u: DevPtr, sites: DevPtr, y: DevPtr, y_stride: i32, rows: i32);
        fn lora_take_gate(weights: DevPtr, gates: DevPtr, tokens: i32);
        fn lora_swiglu(gu: DevPtr, act: DevPtr, tokens: i32);
        fn lora_add_gated(out: DevPtr, d: DevPtr, gates: DevPtr, tokens: i32);
        fn lora_experts_shrink(x: DevPtr, mode: i32, perm: DevPtr, ids: DevPtr, a: DevPtr, rank: i32, in_dim: i32, u: DevPtr);
        fn lora_experts_gate_up(u: DevPtr, ids: DevPtr, b: DevPtr, rank: i32, scale: f32, delta: DevPtr);
        fn lora_experts_down(u: DevPtr, ids: DevPtr, weights: DevPtr, b: DevPtr, rank: i32, scale: f32, out: DevPtr);
    }
}

/// Tokens `lora_expand` takes a block (`LORA_TOKENS` in lora.cu).
const EXPAND_TOKENS: usize = 8;
/// Most of u a fused kernel keeps per token (`LORA_FUSED_RANKS` in lora.cuh): an input site's
/// Σr; an output site's is at most `FUSED_OUTPUT_RANKS` (the MoE kernel keeps u in its 32-float
/// reduction buffer).
pub const FUSED_RANKS: usize = 64;
const FUSED_OUTPUT_RANKS: usize = 32;
/// f32 of scratch `moe_decode_block_lora` takes (its `lx`, moe_decode.cu's LX_ layout: the
/// routed pairs' gate and up sums; u_gu and u_down, 8 × 32 each; u_sd, the router's u and the
/// shared gate|up site's u, 32 each; the shared pairs' gate and up sums).
pub const FUSED_MOE_SCRATCH: usize = 2 * TOP_K * EXPERT_DIM + (2 * TOP_K + 3) * FUSED_OUTPUT_RANKS + 2 * EXPERT_DIM;
/// Parts a `LoraSite` holds (`LORA_PARTS`).
const FUSED_PARTS: usize = 4;

/// The tokens' input sites as the in-projection GEMVs take them (`gemv_norm_mma`,
/// `gemv_norm_conv`): a device array of `LoraSite` addresses, a token's 0 for none (`sites`; 0: no
/// adapter at all), and the `LoraOnce` where the grid computes their u once (lora.cuh;
/// `Scratch::lora_once`).
#[derive(Clone, Copy, Debug, Default)]
pub struct InputSites {
    pub sites: DevPtr,
    pub once: DevPtr,
}

impl InputSites {
    pub const NONE: InputSites = InputSites { sites: 0, once: 0 };

    pub fn new(sites: DevPtr, scratch: &crate::ops::Scratch) -> Self {
        InputSites { sites, once: if sites == 0 { 0 } else { scratch.lora_once() } }
    }
}

/// Where a site's term goes: f32 rows `stride` apart, the matrix's outputs from `ptr` on.
#[derive(Clone, Copy, Debug)]
pub struct Out {
    pub ptr: DevPtr,
    pub stride: usize,
}

/// One adapted matrix of a site.
struct Part {
    /// bf16 [rows, rank]
    b: DevBuf,
    rows: usize,
    rank: usize,
    scale: f32,
    /// Its A's first row in the site's stacked A (its entries of u).
    u_col: usize,
    /// Which of the site's outputs it adds into (the index of its target in the site's list).
    output: usize,
}

/// The adapted matrices that read one input.
pub struct Site {
    /// bf16 [Σr, in]: the parts' A, stacked.
    a: DevBuf,
    rank_sum: usize,
    in_dim: usize,
    parts: Vec<Part>,
    /// Its `LoraSite` (lora.cuh) for the fused decode kernels, where they take it, and a
    /// one-entry array of its address (what the one-token kernels are given: a site per token).
    fused: Option<(DevBuf, DevBuf)>,
}

impl Site {
    /// The site of `targets` (in the order of the outputs `apply` will be given) in `lora`, or
    /// `None` when the adapter adapts none of them. `fused`: for a site the decode kernels can
    /// take, where each output starts in their stacked output and the most Σr they keep; its
    /// fused form is made when Σr is within that.
    fn upload(
        gpu: &Gpu,
        lora: &LayerLora,
        targets: &[Target],
        fused: Option<(&[usize], usize)>,
    ) -> Result<Option<Site>> {
        let pairs: Vec<(usize, &LoraPair)> =
            targets.iter().enumerate().filter_map(|(i, t)| lora.get(*t).map(|p| (i, p))).collect();
        let Some(mut site) = Site::of_pairs(gpu, &pairs)? else { return Ok(None) };
        if let Some((firsts, most)) = fused {
            if site.rank_sum <= most && site.parts.len() <= FUSED_PARTS {
                site.make_fused(gpu, firsts)?;
            }
        }
        Ok(Some(site))
    }

    /// Uploads its fused form (`fused`), its outputs starting at `firsts` in the stacked output.
    fn make_fused(&mut self, gpu: &Gpu, firsts: &[usize]) -> Result<()> {
        let device = gpu.upload(&self.device(firsts))?;
        let one = gpu.upload(&device.ptr().to_le_bytes())?;
        self.fused = Some((device, one));
        Ok(())
    }

    /// The bytes of its `LoraSite`: A, Σr, the part count, then per part (first, rows, rank,
    /// u_col, scale, pad, B), 32 bytes each, `FUSED_PARTS` of them.
    fn device(&self, firsts: &[usize]) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + 32 * FUSED_PARTS);
        out.extend(self.a.ptr().to_le_bytes());
        out.extend((self.rank_sum as i32).to_le_bytes());
        out.extend((self.parts.len() as i32).to_le_bytes());
        for i in 0..FUSED_PARTS {
            let (first, rows, rank, u_col, scale, b) = match self.parts.get(i) {
                Some(p) => (firsts[p.output], p.rows, p.rank, p.u_col, p.scale, p.b.ptr()),
                None => (0, 0, 0, 0, 0.0, 0),
            };
            for v in [first, rows, rank, u_col] {
                out.extend((v as i32).to_le_bytes());
            }
            out.extend(scale.to_le_bytes());
            out.extend(0i32.to_le_bytes());
            out.extend(b.to_le_bytes());
        }
        out
    }

    /// A one-entry device array of its `LoraSite`, for the one-token decode kernels (0 when it
    /// has no fused form).
    pub fn fused(&self) -> DevPtr {
        self.fused.as_ref().map_or(0, |(_, one)| one.ptr())
    }

    /// Its `LoraSite`, for the several-token steps' per-token arrays (0 when it has none).
    pub fn fused_site(&self) -> DevPtr {
        self.fused.as_ref().map_or(0, |(device, _)| device.ptr())
    }

    /// The site of `(output, pair)`s, all of one input width.
    pub fn of_pairs(gpu: &Gpu, pairs: &[(usize, &LoraPair)]) -> Result<Option<Site>> {
        let Some((_, first)) = pairs.first() else { return Ok(None) };
        let in_dim = first.a.shape[1];
        ensure!(in_dim % 256 == 0, "LoRA: an input width of {in_dim} (the GPU kernels take multiples of 256)");
        let (mut a, mut parts, mut u_col) = (Vec::new(), Vec::new(), 0);
        for &(output, p) in pairs {
            let rank = p.rank();
            ensure!(p.a.shape[1] == in_dim, "LoRA: one site's A matrices differ in width");
            ensure!(rank <= solo_model::lora::MAX_RANK, "LoRA: rank {rank} (at most {})", solo_model::lora::MAX_RANK);
            let bytes = solo_model::bf16::bf16_bytes(&[&p.a, &p.b]);
            a.extend_from_slice(&bytes[0]);
            let rows = p.b.shape[0];
            parts.push(Part { b: gpu.upload(&bytes[1])?, rows, rank, scale: p.scale, u_col, output });
            u_col += rank;
        }
        Ok(Some(Site { a: gpu.upload(&a)?, rank_sum: u_col, in_dim, parts, fused: None }))
    }

    /// Adds the site's term for `t` tokens of x (bf16 [t, in]) into `outputs` (indexed as the
    /// site's targets), with `u` (f32 [t, Σr]) as scratch.
    pub fn apply(&self, gpu: &Gpu, x: DevPtr, t: usize, u: DevPtr, outputs: &[Out]) -> Result<()> {
        if t == 1 {
            let blocks = self.rank_sum.div_ceil(8) as u32;
            let launch = Launch::new((blocks, 1, 1), 256, 0);
            lora_cu::lora_shrink(gpu, launch, x, self.a.ptr(), u, self.rank_sum as i32, self.in_dim as i32)?;
        } else {
            gemm(gpu, x, &Matrix::bf16(self.a.ptr(), self.rank_sum, self.in_dim), t, u)?;
        }
        for p in &self.parts {
            let out = outputs[p.output];
            let grid = (p.rows.div_ceil(256) as u32, t.div_ceil(EXPAND_TOKENS) as u32, 1);
            lora_cu::lora_expand(
                gpu,
                Launch::new(grid, 256, 0),
                u + (p.u_col * 4) as DevPtr,
                self.rank_sum as i32,
                p.b.ptr(),
                p.rank as i32,
                p.scale,
                out.ptr,
                out.stride as i32,
                p.rows as i32,
                t as i32,
            )?;
        }
        Ok(())
    }
}

/// The several-token steps' output-projection term: y[t] (f32 rows `y_stride` apart, `rows` of
/// them) += token t's site's term for x[t] (bf16 [t, in]); `sites`: a device array of t
/// `LoraSite` addresses (0: none); `u`: f32 [t, FUSED_RANKS] of scratch.
#[allow(clippy::too_many_arguments)]
pub fn add_per_token(
    gpu: &Gpu,
    sites: DevPtr,
    x: DevPtr,
    in_dim: usize,
    t: usize,
    u: DevPtr,
    y: DevPtr,
    y_stride: usize,
    rows: usize,
) -> Result<()> {
    let shrink = Launch::new(((FUSED_RANKS / 8) as u32, t as u32, 1), 256, 0);
    lora_cu::lora_shrink_sites(gpu, shrink, x, in_dim as i32, sites, u)?;
    let expand = Launch::new((rows.div_ceil(256) as u32, t as u32, 1), 256, 0);
    lora_cu::lora_expand_sites(gpu, expand, u, sites, y, y_stride as i32, rows as i32)
}

/// The shared expert apart, for an adapter of it (the layer-by-layer forward; `moe::moe_block`):
/// out (f32 [t, 2048], the routed experts' sum) += g · down(silu(gate x) · up x), each product
/// with its adapter's term, g the shared expert's gate taken out of the routing weights (f32
/// [t, 9], slot 8 set to 0 before the expert kernels run, so they skip it). `gate_up` bf16
/// [1024, 2048] (gate rows, then up rows), `down` bf16 [2048, 512]. Scratch buffers 2 (gate|up
/// f32 [t, 1024], then the activations bf16 [t, 512]), 3 (the down product f32 [t, 2048]) and 4
/// (the gates). Call `take_shared_gate` after the routing and this after the experts.
#[allow(clippy::too_many_arguments)]
pub fn shared_expert(
    gpu: &Gpu,
    adapter: Adapter,
    gate_up: DevPtr,
    down: DevPtr,
    x: DevPtr,
    t: usize,
    scratch: &crate::ops::Scratch,
    out: DevPtr,
) -> Result<()> {
    let (gu, d, gates) = (scratch.ptr(2), scratch.ptr(3), scratch.ptr(4));
    let act = gu + (t * 2 * EXPERT_DIM * 4) as DevPtr;
    let (gate_up, down) = (Matrix::bf16(gate_up, 2 * EXPERT_DIM, HIDDEN), Matrix::bf16(down, HIDDEN, EXPERT_DIM));
    if t == 1 {
        crate::ops::linear::gemv(gpu, x, &gate_up, gu, false)?;
    } else {
        gemm(gpu, x, &gate_up, t, gu)?;
    }
    let halves =
        [Out { ptr: gu, stride: 2 * EXPERT_DIM }, Out { ptr: gu + (EXPERT_DIM * 4) as DevPtr, stride: 2 * EXPERT_DIM }];
    add(gpu, adapter, |l| &l.shared, x, t, &halves)?;
    let n = t * EXPERT_DIM;
    lora_cu::lora_swiglu(gpu, Launch::new((n.div_ceil(256) as u32, 1, 1), 256, 0), gu, act, t as i32)?;
    if t == 1 {
        // (512 wide: the plain GEMVs take 2048 or 4096) a warp a row
        let launch = Launch::new((HIDDEN.div_ceil(8) as u32, 1, 1), 256, 0);
        lora_cu::lora_shrink(gpu, launch, act, down.ptr, d, HIDDEN as i32, EXPERT_DIM as i32)?;
    } else {
        gemm(gpu, act, &down, t, d)?;
    }
    add(gpu, adapter, |l| &l.shared_down, act, t, &[Out { ptr: d, stride: HIDDEN }])?;
    let n = t * HIDDEN;
    lora_cu::lora_add_gated(gpu, Launch::new((n.div_ceil(256) as u32, 1, 1), 256, 0), out, d, gates, t as i32)
}

/// Takes the shared expert's gate out of the routing weights (f32 [t, 9]) into scratch buffer 4,
/// leaving 0 in its slot (`shared_expert`).
pub fn take_shared_gate(gpu: &Gpu, weights: DevPtr, t: usize, scratch: &crate::ops::Scratch) -> Result<()> {
    let launch = Launch::new((t.div_ceil(256) as u32, 1, 1), 256, 0);
    lora_cu::lora_take_gate(gpu, launch, weights, scratch.ptr(4), t as i32)
}

/// One fused expert tensor's adapter: every routed expert's A and B, stacked.
struct ExpertsPart {
    /// bf16 [256·rank, in]: expert e's A from row e·rank on.
    a: DevBuf,
    /// bf16 [256, out, rank]
    b: DevBuf,
    rank: usize,
    in_dim: usize,
    scale: f32,
}

impl ExpertsPart {
    /// The part of the tensor `pick` chooses, when the adapter adapts it: the experts it leaves
    /// out (none, as PEFT saves the fused tensors) get zeros.
    fn upload(gpu: &Gpu, experts: &[ExpertLora], pick: fn(&ExpertLora) -> &Option<LoraPair>) -> Result<Option<Self>> {
        let Some(first) = experts.iter().find_map(|e| pick(e).as_ref()) else { return Ok(None) };
        ensure!(experts.len() == EXPERTS, "LoRA: {} routed experts' adapters (the model has {EXPERTS})", experts.len());
        let (rank, scale, in_dim, out) = (first.rank(), first.scale, first.a.shape[1], first.b.shape[0]);
        ensure!(in_dim % 256 == 0, "LoRA: an expert input width of {in_dim} (the GPU kernels take multiples of 256)");
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for e in experts {
            match pick(e) {
                Some(p) => {
                    ensure!(
                        p.rank() == rank && p.scale == scale && p.a.shape[1] == in_dim && p.b.shape[0] == out,
                        "LoRA: the routed experts of one tensor differ in rank, scale or shape"
                    );
                    let bytes = solo_model::bf16::bf16_bytes(&[&p.a, &p.b]);
                    a.extend_from_slice(&bytes[0]);
                    b.extend_from_slice(&bytes[1]);
                }
                None => {
                    a.resize(a.len() + rank * in_dim * 2, 0);
                    b.resize(b.len() + out * rank * 2, 0);
                }
            }
        }
        Ok(Some(ExpertsPart { a: gpu.upload(&a)?, b: gpu.upload(&b)?, rank, in_dim, scale }))
    }

    /// u (f32 [t, 8, rank]) = A_e x for every routed pair of ids (i32 [t, 9]); x as `input`.
    fn shrink(&self, gpu: &Gpu, input: ExpertsInput, ids: DevPtr, t: usize, u: DevPtr) -> Result<()> {
        let (x, mode, perm) = match input {
            ExpertsInput::Tokens(x) => (x, 0, 0),
            ExpertsInput::Pairs(x) => (x, 1, 0),
            ExpertsInput::Permuted { act, perm } => (act, 2, perm),
        };
        let launch = Launch::new(((t * SLOTS) as u32, self.rank.div_ceil(8) as u32, 1), 256, 0);
        lora_cu::lora_experts_shrink(
            gpu,
            launch,
            x,
            mode,
            perm,
            ids,
            self.a.ptr(),
            self.rank as i32,
            self.in_dim as i32,
            u,
        )
    }
}

/// What the routed experts' adapter reads: the tokens' input (bf16 [t, 2048]), or the
/// activations as the expert GEMVs (f32 [t, 9, 512]) or the grouped GEMMs (bf16 [t·9, 512], row
/// q holding pair perm[q]) leave them.
#[derive(Clone, Copy)]
pub enum ExpertsInput {
    Tokens(DevPtr),
    Pairs(DevPtr),
    Permuted { act: DevPtr, perm: DevPtr },
}

/// A layer's routed experts' adapter (PEFT's `target_parameters` on `mlp.experts`), in the
/// layer-by-layer forward: the gate/up term goes into the expert kernels' sums before the
/// activation (`gate_up_delta`), the down term into the output after them (`add_down`).
pub struct ExpertsSite {
    gate_up: Option<ExpertsPart>,
    down: Option<ExpertsPart>,
}

impl ExpertsSite {
    fn upload(gpu: &Gpu, lora: &LayerLora) -> Result<Option<Self>> {
        let gate_up = ExpertsPart::upload(gpu, &lora.experts, |e| &e.gate_up)?;
        let down = ExpertsPart::upload(gpu, &lora.experts, |e| &e.down)?;
        Ok((gate_up.is_some() || down.is_some()).then_some(ExpertsSite { gate_up, down }))
    }

    /// The most of u it takes a token.
    fn u_width(&self) -> usize {
        TOP_K * self.gate_up.iter().chain(&self.down).map(|p| p.rank).max().unwrap_or(0)
    }

    /// The gate/up term for x (bf16 [t, 2048]) routed as ids (i32 [t, 9]) into `delta` (f32
    /// [t, 8, 1024]), u (f32 [t, 8, rank]) as scratch; what the expert kernels take as their
    /// `delta` (0 when gate_up_proj is not adapted).
    pub fn gate_up_delta(
        &self,
        gpu: &Gpu,
        x: DevPtr,
        ids: DevPtr,
        t: usize,
        u: DevPtr,
        delta: DevPtr,
    ) -> Result<DevPtr> {
        let Some(p) = &self.gate_up else { return Ok(0) };
        p.shrink(gpu, ExpertsInput::Tokens(x), ids, t, u)?;
        let launch = Launch::new(((t * TOP_K) as u32, (2 * EXPERT_DIM / 256) as u32, 1), 256, 0);
        lora_cu::lora_experts_gate_up(gpu, launch, u, ids, p.b.ptr(), p.rank as i32, p.scale, delta)?;
        Ok(delta)
    }

    /// out (f32 [t, 2048]) += Σ_slot weights · s · B_e (A_e act) over the routed slots (ids,
    /// weights [t, 9]), the activations as `act` holds them; u as scratch.
    #[allow(clippy::too_many_arguments)]
    pub fn add_down(
        &self,
        gpu: &Gpu,
        act: ExpertsInput,
        ids: DevPtr,
        weights: DevPtr,
        t: usize,
        u: DevPtr,
        out: DevPtr,
    ) -> Result<()> {
        let Some(p) = &self.down else { return Ok(()) };
        p.shrink(gpu, act, ids, t, u)?;
        let launch = Launch::new((t as u32, (HIDDEN / 256) as u32, 1), 256, 0);
        lora_cu::lora_experts_down(gpu, launch, u, ids, weights, p.b.ptr(), p.rank as i32, p.scale, out)
    }
}

/// A layer's sites.
#[derive(Default)]
pub struct LayerLoraGpu {
    /// GDN: in_proj_qkv, in_proj_z, in_proj_b, in_proj_a; attention: q_proj, k_proj, v_proj.
    pub input: Option<Site>,
    /// out_proj / o_proj.
    pub output: Option<Site>,
    /// The router's 256 rows, then the shared expert's gate.
    pub router: Option<Site>,
    /// The shared expert's gate_proj and up_proj (one input), and its down_proj.
    pub shared: Option<Site>,
    pub shared_down: Option<Site>,
    /// The routed experts'.
    pub experts: Option<ExpertsSite>,
    /// Its `LoraMoe` (lora.cuh): the router, shared expert and routed experts' adapters as the
    /// one-token MoE kernel takes them (`moe_decode_block_lora`), when it adapts any and each
    /// fits (Σr ≤ 32 a site, rank ≤ 32 an expert tensor).
    moe: Option<DevBuf>,
}

impl LayerLoraGpu {
    /// Whether it adapts the shared expert (which then runs apart: `shared_expert`).
    pub fn adapts_shared_expert(&self) -> bool {
        self.shared.is_some() || self.shared_down.is_some()
    }

    /// Its input and output sites and its MoE block's adapter as the one-token decode kernels
    /// take them (`Site::fused`, `LoraMoe`; 0 where it has none).
    pub fn fused_arrays(&self) -> (DevPtr, DevPtr, DevPtr) {
        let of = |s: &Option<Site>| s.as_ref().map_or(0, Site::fused);
        (of(&self.input), of(&self.output), self.moe.as_ref().map_or(0, DevBuf::ptr))
    }

    /// Whether it adapts the MoE block (the router, the shared expert or the routed experts),
    /// which the several-token steps' kernels do not take.
    pub fn adapts_moe(&self) -> bool {
        self.router.is_some() || self.adapts_shared_expert() || self.experts.is_some()
    }

    /// The bytes of its `LoraMoe`, when it adapts the MoE block and the kernel takes each part.
    fn moe_device(&self) -> Option<Vec<u8>> {
        let fits = |s: &Option<Site>| s.as_ref().is_none_or(|s| s.fused.is_some());
        let experts_fit = self.experts.as_ref().is_none_or(|e| e.u_width() <= TOP_K * FUSED_OUTPUT_RANKS);
        if !self.adapts_moe() || !fits(&self.router) || !fits(&self.shared) || !fits(&self.shared_down) || !experts_fit
        {
            return None;
        }
        let site = |s: &Option<Site>| s.as_ref().map_or(0, Site::fused_site);
        let (sd_a, sd_b, sd_rank, sd_scale) = self
            .shared_down
            .as_ref()
            .map_or((0, 0, 0, 0.0), |s| (s.a.ptr(), s.parts[0].b.ptr(), s.rank_sum, s.parts[0].scale));
        let part = |p: Option<&ExpertsPart>| p.map_or((0, 0, 0, 0.0), |p| (p.a.ptr(), p.b.ptr(), p.rank, p.scale));
        let (gu, d) = match &self.experts {
            Some(e) => (part(e.gate_up.as_ref()), part(e.down.as_ref())),
            None => (part(None), part(None)),
        };
        let mut out = Vec::with_capacity(96);
        for ptr in [site(&self.router), site(&self.shared), sd_a, sd_b, gu.0, gu.1, d.0, d.1] {
            out.extend(ptr.to_le_bytes());
        }
        for rank in [sd_rank, gu.2, d.2, 0] {
            out.extend((rank as i32).to_le_bytes());
        }
        for scale in [sd_scale, gu.3, d.3, 0.0] {
            out.extend(scale.to_le_bytes());
        }
        Some(out)
    }

    /// Its input and output `LoraSite`s, for the several-token steps' arrays (`Site::fused_site`).
    pub fn fused_sites(&self) -> (DevPtr, DevPtr) {
        let of = |s: &Option<Site>| s.as_ref().map_or(0, Site::fused_site);
        (of(&self.input), of(&self.output))
    }
}

/// The input projections' targets of a GDN layer and of an attention layer, in their outputs' order.
const GDN_INPUT: [Target; 4] = [Target::InProjQkv, Target::InProjZ, Target::InProjB, Target::InProjA];
const ATTENTION_INPUT: [Target; 3] = [Target::QProj, Target::KProj, Target::VProj];
const ROUTER: [Target; 2] = [Target::Router, Target::SharedExpertGate];
const SHARED: [Target; 2] = [Target::SharedGate, Target::SharedUp];

/// An adapter in GPU memory (bf16), with the scratch its terms use.
pub struct LoraGpu {
    /// Unique per upload: the decode graphs captured with it are keyed on it.
    pub id: u64,
    pub layers: Vec<LayerLoraGpu>,
    /// Whether the one-token decode step's kernels take every site of it (see the module
    /// comment; the model checks the rest: `CudaModel::fuses`).
    pub fused: bool,
    /// Whether the several-token steps' kernels (the batched step, speculative verification) do
    /// too: `fused` and no adapter of the MoE block (their MoE form takes none).
    pub several_tokens: bool,
    /// f32 [max_tokens, the largest site's Σr]: u.
    u: DevBuf,
}

impl LoraGpu {
    /// Uploads `adapter` for forward calls of up to `max_tokens` tokens.
    pub fn upload(gpu: &Gpu, adapter: &LoraAdapter, max_tokens: usize) -> Result<LoraGpu> {
        let mut layers = Vec::with_capacity(adapter.layers.len());
        for l in &adapter.layers {
            let input = match Site::upload(gpu, l, &GDN_INPUT, Some((&GDN_FIRSTS, FUSED_RANKS)))? {
                Some(s) => Some(s),
                None => Site::upload(gpu, l, &ATTENTION_INPUT, Some((&ATTENTION_FIRSTS, FUSED_RANKS)))?,
            };
            let fused_output = Some((&[0][..], FUSED_OUTPUT_RANKS));
            let output = match Site::upload(gpu, l, &[Target::OutProj], fused_output)? {
                Some(s) => Some(s),
                None => Site::upload(gpu, l, &[Target::OProj], fused_output)?,
            };
            let mut layer = LayerLoraGpu {
                input,
                output,
                // (as the MoE kernel takes them: the router's rows then the shared expert's gate;
                // the shared expert's gate rows then its up rows)
                router: Site::upload(gpu, l, &ROUTER, Some((&[0, EXPERTS], FUSED_OUTPUT_RANKS)))?,
                shared: Site::upload(gpu, l, &SHARED, Some((&[0, EXPERT_DIM], FUSED_OUTPUT_RANKS)))?,
                shared_down: Site::upload(gpu, l, &[Target::SharedDown], Some((&[0], FUSED_OUTPUT_RANKS)))?,
                experts: ExpertsSite::upload(gpu, l)?,
                moe: None,
            };
            layer.moe = layer.moe_device().map(|bytes| gpu.upload(&bytes)).transpose()?;
            layers.push(layer);
        }
        let fused = layers.iter().all(|l| {
            (!l.adapts_moe() || l.moe.is_some())
                && [&l.input, &l.output].iter().all(|s| s.as_ref().is_none_or(|s| s.fused.is_some()))
        });
        let several_tokens = fused && layers.iter().all(|l| !l.adapts_moe());
        let widest = layers
            .iter()
            .flat_map(|l| [&l.input, &l.output, &l.router, &l.shared, &l.shared_down])
            .filter_map(|s| s.as_ref().map(|s| s.rank_sum))
            .chain(layers.iter().filter_map(|l| l.experts.as_ref().map(ExpertsSite::u_width)))
            .max()
            .unwrap_or(1);
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        Ok(LoraGpu { id, layers, fused, several_tokens, u: gpu.alloc(max_tokens * widest * 4)? })
    }

    /// The scratch for u.
    pub fn u(&self) -> DevPtr {
        self.u.ptr()
    }
}

/// A layer's adapter as the mixers and the MoE block take it: the upload (its scratch) and the
/// layer's sites. `None`: the base model.
pub type Adapter<'a> = Option<(&'a LoraGpu, &'a LayerLoraGpu)>;

/// Adds the term of the layer's site that `site` picks (when the adapter has it) for x (bf16
/// [t, in]) into `outputs`.
pub fn add(
    gpu: &Gpu,
    adapter: Adapter,
    site: impl Fn(&LayerLoraGpu) -> &Option<Site>,
    x: DevPtr,
    t: usize,
    outputs: &[Out],
) -> Result<()> {
    match adapter {
        Some((lora, layer)) => match site(layer) {
            Some(s) => s.apply(gpu, x, t, lora.u(), outputs),
            None => Ok(()),
        },
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::widths::{HEAD_DIM, KV_HEADS};
    use crate::ops::testutil::*;
    use solo_model::Tensor;

    fn pair(seed: u64, rank: usize, rows: usize, cols: usize, scale: f32) -> LoraPair {
        let a = Tensor::from_f32_as_bf16(vec![rank, cols], &random(seed, rank * cols, 0.05));
        let b = Tensor::from_f32_as_bf16(vec![rows, rank], &random(seed + 1, rows * rank, 0.5));
        LoraPair { a, b, scale }
    }

    /// What the site adds for token rows x (f32, already bf16 values): per part, s · B (A x).
    fn reference(pairs: &[(usize, &LoraPair)], x: &[f32], t: usize, outs: &mut [Vec<f32>], strides: &[usize]) {
        for &(o, p) in pairs {
            let (a, b) = (p.a.to_f32(), p.b.to_f32());
            let (r, cols, rows) = (p.rank(), p.a.shape[1], p.b.shape[0]);
            for ti in 0..t {
                let xr = &x[ti * cols..(ti + 1) * cols];
                let u: Vec<f64> =
                    (0..r).map(|k| (0..cols).map(|c| a[k * cols + c] as f64 * xr[c] as f64).sum()).collect();
                for i in 0..rows {
                    let d: f64 = (0..r).map(|k| b[i * r + k] as f64 * u[k]).sum();
                    outs[o][ti * strides[o] + i] += (p.scale as f64 * d) as f32;
                }
            }
        }
    }

    /// A site of three matrices (ranks 16, 8 and 40, one output skipped) adds s · B (A x) into
    /// the right rows of strided outputs, for one token (`lora_shrink`) and more (cuBLAS), over
    /// outputs that already hold values; what lies past a matrix's rows stays as it was.
    #[test]
    #[ignore = "needs a GPU"]
    fn site_adds_the_low_rank_term() {
        let gpu = gpu();
        for (cols, t) in [(2048, 1), (2048, 3), (4096, 1), (2048, 37)] {
            let (p0, p2, p3) = (pair(1, 16, 700, cols, 2.0), pair(3, 8, 32, cols, 0.5), pair(5, 40, 300, cols, 1.25));
            let pairs = [(0, &p0), (2, &p2), (3, &p3)];
            let site = Site::of_pairs(gpu, &pairs).unwrap().unwrap();
            let strides = [704usize, 64, 40, 320];
            let x = round_bf16(&random(7, t * cols, 1.0));
            let xb = gpu.upload(&bf16_bytes(&x)).unwrap();
            let mut want: Vec<Vec<f32>> =
                strides.iter().enumerate().map(|(i, s)| random(20 + i as u64, t * s, 1.0)).collect();
            let bufs: Vec<DevBuf> = want.iter().map(|v| gpu.upload_f32(v).unwrap()).collect();
            let outs: Vec<Out> = bufs.iter().zip(strides).map(|(b, stride)| Out { ptr: b.ptr(), stride }).collect();
            let u = gpu.alloc(t * site.rank_sum * 4).unwrap();
            site.apply(gpu, xb.ptr(), t, u.ptr(), &outs).unwrap();
            reference(&pairs, &x, t, &mut want, &strides);
            for (i, (b, w)) in bufs.iter().zip(&want).enumerate() {
                let got = gpu.download_f32(b.ptr(), w.len()).unwrap();
                assert_close(&format!("in {cols}, {t} tokens, output {i}"), &got, w, 1e-5);
            }
        }
    }

    /// The fused form in the decode step's stacked q/k/v GEMV (`gemv_norm_mma_bf16`, one token and
    /// three): with a site of q (rank 16) and v (rank 8) its outputs are the plain GEMV's plus
    /// s · B (A x), x = bf16(RMSNorm(h)), in q's and v's rows of the stack, k's untouched.
    #[test]
    #[ignore = "needs a GPU"]
    fn fused_projection_adds_the_term() {
        use crate::ops::linear::gemv_norm_mma;
        use crate::weights::Vector;
        let gpu = gpu();
        let rows = ATTENTION_FIRSTS[2] + KV_HEADS * HEAD_DIM;
        let (pq, pv) = (pair(31, 16, ATTENTION_FIRSTS[1], 2048, 2.0), pair(33, 8, KV_HEADS * HEAD_DIM, 2048, 0.75));
        let pairs = [(0, &pq), (2, &pv)];
        let mut site = Site::of_pairs(gpu, &pairs).unwrap().unwrap();
        site.make_fused(gpu, &ATTENTION_FIRSTS).unwrap();
        let w = gpu.upload(&bf16_bytes(&random(35, rows * 2048, (3.0f32 / 2048.0).sqrt()))).unwrap();
        let w = Matrix::bf16(w.ptr(), rows, 2048);
        let norm_w: Vec<f32> = random(36, 2048, 0.2).iter().map(|v| 1.0 + v).collect();
        let norm_buf = gpu.upload_f32(&norm_w).unwrap();
        let norm = Vector { ptr: norm_buf.ptr(), len: 2048 };
        let scratch = crate::ops::Scratch::new(gpu, 1).unwrap();
        for t in [1, 3] {
            let h = random(37 + t as u64, t * 2048, 2.0);
            let hb = gpu.upload_f32(&h).unwrap();
            let (plain, adapted) = (gpu.alloc(t * rows * 4).unwrap(), gpu.alloc(t * rows * 4).unwrap());
            gemv_norm_mma(gpu, hb.ptr(), &norm, 1e-6, &w, t, plain.ptr(), rows, InputSites::NONE).unwrap();
            // the kernel takes a site per token: the one-token array, or t copies of its site
            let per_token: Vec<u8> = (0..t).flat_map(|_| site.fused_site().to_le_bytes()).collect();
            let sites = gpu.upload(&per_token).unwrap();
            let sites = if t == 1 { site.fused() } else { sites.ptr() };
            // (twice: the second launch finds u's count past the first's)
            for _ in 0..2 {
                gemv_norm_mma(gpu, hb.ptr(), &norm, 1e-6, &w, t, adapted.ptr(), rows, InputSites::new(sites, &scratch))
                    .unwrap();
            }
            let (plain, adapted) =
                (gpu.download_f32(plain.ptr(), t * rows).unwrap(), gpu.download_f32(adapted.ptr(), t * rows).unwrap());
            // x as the kernel stages it, then the expected term per output
            let x: Vec<f32> = h
                .chunks(2048)
                .flat_map(|row| {
                    let inv = solo_cpu::ops::inv_rms(row, 1e-6);
                    round_bf16(&row.iter().zip(&norm_w).map(|(v, w)| v * inv * w).collect::<Vec<_>>())
                })
                .collect();
            let strides = [ATTENTION_FIRSTS[1], KV_HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM];
            let mut terms: Vec<Vec<f32>> = strides.iter().map(|s| vec![0.0; t * s]).collect();
            reference(&pairs, &x, t, &mut terms, &strides);
            let mut want = plain.clone();
            for ti in 0..t {
                for (o, first) in ATTENTION_FIRSTS.iter().enumerate() {
                    for i in 0..strides[o] {
                        want[ti * rows + first + i] += terms[o][ti * strides[o] + i];
                    }
                }
            }
            assert_close(&format!("fused q/k/v, {t} tokens"), &adapted, &want, 1e-5);
            let k = |v: &[f32]| -> Vec<u32> {
                (0..t)
                    .flat_map(|ti| v[ti * rows + ATTENTION_FIRSTS[1]..ti * rows + ATTENTION_FIRSTS[2]].to_vec())
                    .map(f32::to_bits)
                    .collect()
            };
            assert_eq!(k(&adapted), k(&plain), "k's rows changed");
        }
    }
}
