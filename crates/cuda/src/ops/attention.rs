//! Gated full attention over a bf16 KV cache (the formulas: crates/cpu/src/attention.rs).
//!
//! `attention_mixer` runs: q/k/v projections (`linear`) → `qk_norm_rope` (q/k RMSNorm, partial
//! NeoX RoPE, KV append) → `attn_prefill` or `attn_decode` (causal GQA flash attention on the
//! tensor cores, split-K over the positions) → `attn_combine` (merge splits, ∘ sigmoid(gate),
//! bf16) → o_proj.
//!
//! The start position is device memory (`pos`: an i32 = tokens already in the cache), read by the
//! kernels; no launch shape depends on it, so a decode step can be captured in a CUDA graph.

use crate::kernels::{kernel_file, Launch};
use crate::ops::gemv_q;
use crate::ops::linear::{gemv_norm_mma, linear, project};
use crate::ops::lora::{self, InputSites, Out};
use crate::ops::{Scratch, SCRATCH_WIDTH};
use crate::runtime::{DevBuf, DevPtr, Gpu};
use crate::weights::{AttentionGpu, Vector};
use anyhow::{ensure, Result};

kernel_file! {
    /// `attention_rope.cu`'s kernels.
    pub mod attention_rope_cu = "attention_rope.cu" {
        fn qk_norm_rope(qg: DevPtr, k: DevPtr, v: DevPtr, q_norm: DevPtr, k_norm: DevPtr, pos: DevPtr, delta: Option<DevPtr>, mrope: Option<DevPtr>, t: i32, max_seq: i32, q_out: DevPtr, k_cache: DevPtr, v_cache: DevPtr);
        fn qk_norm_rope_batch(proj: DevPtr, proj_stride: i32, q_norm: DevPtr, k_norm: DevPtr, pos: DevPtr, deltas: DevPtr, max_seq: i32, q_out: DevPtr, k_caches: DevPtr, v_caches: DevPtr);
    }
}
kernel_file! {
    /// `attention.cu`'s kernels.
    pub mod attention_cu = "attention.cu" {
        fn attn_prefill(q: DevPtr, kc: DevPtr, vc: DevPtr, pos: DevPtr, t: i32, splits: i32, part_o: DevPtr, part_ml: DevPtr);
        fn attn_prefill_small(q: DevPtr, kc: DevPtr, vc: DevPtr, pos: DevPtr, t: i32, splits: i32, part_o: DevPtr, part_ml: DevPtr);
        fn attn_decode(q: DevPtr, kc: DevPtr, vc: DevPtr, pos: DevPtr, t: i32, splits: i32, part_o: DevPtr, part_ml: DevPtr);
        fn attn_decode_batch(q: DevPtr, k_caches: DevPtr, v_caches: DevPtr, pos: DevPtr, splits: i32, part_o: DevPtr, part_ml: DevPtr);
        fn attn_combine(part_o: DevPtr, part_ml: DevPtr, qg: DevPtr, pos_ptr: DevPtr, t: i32, splits: i32, align: i32, out: DevPtr);
        fn attn_combine_batch(part_o: DevPtr, part_ml: DevPtr, qg: DevPtr, pos: DevPtr, splits: i32, align: i32, qg_stride: i32, out: DevPtr);
        fn attn_combine_sliced(part_o: DevPtr, part_ml: DevPtr, qg: DevPtr, pos_ptr: DevPtr, t: i32, splits: i32, align: i32, out: DevPtr);
    }
}

use crate::kernels::widths::{ATTN_HEADS as HEADS, HEAD_DIM, HIDDEN, KV_HEADS};
/// Most split-K chunks per call (`COMBINE_MAX_SPLITS` in attention.cu: one combine thread each).
const MAX_SPLITS: usize = 256;
/// Dims per `attn_combine_sliced` block (`COMBINE_SLICE`).
const COMBINE_SLICE: usize = 32;
/// Chunks shorter than this many tokens use the decode kernel (2 tokens per block), longer ones
/// the prefill kernel (16 tokens per block).
const DECODE_KERNEL_MAX_T: usize = 15;

/// Shared-memory row stride of the attend kernels, in bf16 (`KV_STRIDE` in attention.cu).
const KV_STRIDE: usize = HEAD_DIM + 8;

/// One attend kernel's shape: warps per block (16 rows = 2 tokens each) and key-tile length.
struct AttendKernel {
    /// `attention_cu::attn_prefill` or `attn_decode` (the same parameters).
    launch: AttendLauncher,
    warps: usize,
    key_tile: usize,
    /// Blocks to aim for per streaming multiprocessor when choosing the split count.
    blocks_per_sm: usize,
    /// Launched with PDL: requests its first key tile before `pdl_wait()` (attention.cu, EARLY).
    early: bool,
}

type AttendLauncher = fn(&Gpu, Launch, DevPtr, DevPtr, DevPtr, DevPtr, i32, i32, DevPtr, DevPtr) -> Result<()>;

const PREFILL: AttendKernel =
    AttendKernel { launch: attention_cu::attn_prefill, warps: 8, key_tile: 64, blocks_per_sm: 1, early: false };
/// The prefill form for 99 KB of shared memory (the consumer cards, the portable forms).
const PREFILL_SMALL: AttendKernel =
    AttendKernel { launch: attention_cu::attn_prefill_small, warps: 4, key_tile: 32, blocks_per_sm: 1, early: false };

/// The prefill kernel the target's shared memory holds.
fn prefill_kernel(gpu: &Gpu) -> &'static AttendKernel {
    if gpu.target.big_shared() {
        &PREFILL
    } else {
        &PREFILL_SMALL
    }
}
const DECODE: AttendKernel =
    AttendKernel { launch: attention_cu::attn_decode, warps: 1, key_tile: 32, blocks_per_sm: 3, early: true };

impl AttendKernel {
    fn tokens_per_block(&self) -> usize {
        2 * self.warps
    }
    fn shared_bytes(&self) -> usize {
        (16 * self.warps + 4 * self.key_tile) * KV_STRIDE * 2
    }
}

/// One attention layer's cache: keys (after k_norm and RoPE) and values, bf16 `[max_seq, 2, 256]`.
/// The rotary positions of a call's tokens (the kernel: `attention_rope.cu`). A text token turns
/// by its cache row plus `delta`; with `mrope`, every token by its own three positions.
#[derive(Clone, Copy, Debug, Default)]
pub struct Rope {
    /// i32 on the device: a text token's rotary position minus its cache row (0 until an image,
    /// then negative: what the images took less than their tokens); `None` is 0.
    pub delta: Option<DevPtr>,
    /// i32 `[t, 3]` on the device: each token's (temporal, height, width) rotary positions, for a
    /// prefill whose tokens hold an image.
    pub mrope: Option<DevPtr>,
}

impl Rope {
    /// Plain RoPE by the cache row (no image before).
    pub const ROW: Rope = Rope { delta: None, mrope: None };

    /// Text tokens of a sequence whose delta is at `delta`.
    pub fn text(delta: DevPtr) -> Rope {
        Rope { delta: Some(delta), mrope: None }
    }
}

pub struct KvCacheGpu {
    pub keys: DevBuf,
    pub values: DevBuf,
    pub max_seq: usize,
}

/// Bytes of one position's keys (or values) in a layer's cache.
const POSITION_BYTES: usize = KV_HEADS * HEAD_DIM * 2;

impl KvCacheGpu {
    pub fn new(gpu: &Gpu, max_seq: usize) -> Result<Self> {
        ensure!(max_seq >= 1 && max_seq <= i32::MAX as usize / 2, "KV cache length {max_seq} out of range");
        Ok(KvCacheGpu {
            keys: gpu.alloc(max_seq * POSITION_BYTES)?,
            values: gpu.alloc(max_seq * POSITION_BYTES)?,
            max_seq,
        })
    }

    /// Device bytes of a cache of `max_seq` positions (keys and values).
    pub fn bytes_for(max_seq: usize) -> usize {
        2 * max_seq * POSITION_BYTES
    }

    /// Copies the first `tokens` positions of `other` into this cache (snapshot / restore).
    pub fn copy_from(&self, gpu: &Gpu, other: &Self, tokens: usize) -> Result<()> {
        ensure!(
            tokens <= self.max_seq && tokens <= other.max_seq,
            "KV copy of {tokens} positions exceeds a cache of {} / {}",
            self.max_seq,
            other.max_seq
        );
        if tokens == 0 {
            return Ok(());
        }
        gpu.copy(self.keys.ptr(), other.keys.ptr(), tokens * POSITION_BYTES)?;
        gpu.copy(self.values.ptr(), other.values.ptr(), tokens * POSITION_BYTES)
    }
}

/// The gated attention mixer for `t` tokens at positions `*pos .. *pos + t`.
///
/// x: bf16 `[t, 2048]` (normalised input); out: f32 `[t, 2048]` (not added to the residual).
/// Appends the tokens' keys and values to `cache`; the caller keeps `*pos + t <= cache.max_seq`
/// (positions past the cache are dropped, not written out of bounds).
///
/// Scratch: buffer 0 = q_proj output f32 `[t, 8192]`; buffer 1 = k, v f32 `[t, 512]` each and q
/// bf16 `[t, 4096]`; buffer 2 = gated attention output bf16 `[t, 4096]`; buffers 3 and 4 =
/// split-K partials (f32 `[splits, t·16, 256]` and `[splits, t·16, 2]`). Decode gets its full
/// split count (`3·132 / 2 = 198` chunks) when `scratch.max_tokens >= 100`.
/// With an adapter (`lora`), its terms join the projections' outputs (`ops::lora`).
#[allow(clippy::too_many_arguments)]
pub fn attention_mixer(
    gpu: &Gpu,
    w: &AttentionGpu,
    x: DevPtr,
    t: usize,
    pos: DevPtr,
    rope: Rope,
    cache: &KvCacheGpu,
    scratch: &Scratch,
    lora: lora::Adapter,
    out: DevPtr,
) -> Result<()> {
    ensure!(t >= 1 && t <= scratch.max_tokens, "attention: {t} tokens but scratch holds {}", scratch.max_tokens);
    let qg = scratch.ptr(0);
    let k = scratch.ptr(1);
    let v = k + (t * KV_HEADS * HEAD_DIM * 4) as u64;
    let q = k + (2 * t * KV_HEADS * HEAD_DIM * 4) as u64;
    let gated = scratch.ptr(2);

    project(gpu, x, &w.q_proj, t, qg)?;
    project(gpu, x, &w.k_proj, t, k)?;
    project(gpu, x, &w.v_proj, t, v)?;
    let outs = [(qg, HEADS * 2 * HEAD_DIM), (k, KV_HEADS * HEAD_DIM), (v, KV_HEADS * HEAD_DIM)];
    lora::add(gpu, lora, |l| &l.input, x, t, &outs.map(|(ptr, stride)| Out { ptr, stride }))?;
    qk_norm_rope(gpu, w, qg, k, v, t, pos, rope, cache, q)?;
    attend(gpu, q, qg, t, pos, cache, scratch, gated)?;
    linear(gpu, gated, &w.o_proj, t, out)?;
    lora::add(gpu, lora, |l| &l.output, gated, t, &[Out { ptr: out, stride: HIDDEN }])
}

/// The decode step's attention sub-layer for one token on the residual stream h (f32 `[2048]`),
/// all but o_proj: returns the gated output (bf16 `[4096]`, scratch buffer 2) with
/// Attention(RMSNorm(h; norm)) = o_proj · gated. The input norm is folded into one GEMV over the
/// stacked q/k/v projections; o_proj and its residual add are the first phase of the MoE kernel
/// (`moe::moe_decode`). Fixed launch shapes, no host sync (graph-capturable). Scratch buffers 0–4.
/// `lora`: a one-entry device array of a LoRA adapter's q/k/v site (`ops::lora::Site::fused`;
/// bf16), or 0.
#[allow(clippy::too_many_arguments)]
pub fn attention_decode(
    gpu: &Gpu,
    w: &AttentionGpu,
    h: DevPtr,
    norm: &Vector,
    eps: f32,
    pos: DevPtr,
    rope: Rope,
    cache: &KvCacheGpu,
    scratch: &Scratch,
    lora: DevPtr,
) -> Result<DevPtr> {
    // proj f32 [9216] = [q and gate 16·512 | k 512 | v 512]
    let proj = scratch.ptr(0);
    let [qg, k, v] = PROJ_FIRSTS.map(|i| proj + (i * 4) as DevPtr);
    let (q, gated) = (scratch.ptr(1), scratch.ptr(2));
    qkv_projection(gpu, w, h, norm, eps, 1, proj, InputSites::new(lora, scratch))?;
    qk_norm_rope(gpu, w, qg, k, v, 1, pos, rope, cache, q)?;
    attend(gpu, q, qg, 1, pos, cache, scratch, gated)?;
    Ok(gated)
}

/// Rows of the stacked q/k/v projection, per token [q and gate 16·512 | k 512 | v 512].
const PROJ: usize = HEADS * 2 * HEAD_DIM + 2 * KV_HEADS * HEAD_DIM;
/// Where its parts start (also where a LoRA adapter's fused sites add their terms: `ops::lora`).
pub const PROJ_FIRSTS: [usize; 3] = [0, HEADS * 2 * HEAD_DIM, HEADS * 2 * HEAD_DIM + KV_HEADS * HEAD_DIM];

/// The stacked q/k/v projection of t ≤ 8 tokens' RMSNorm(h), each row read once for all of them
/// (`gemv_norm_mma`): scratch buffer 0, f32 `[t, PROJ]`, returned.
#[allow(clippy::too_many_arguments)]
fn qkv_tokens(
    gpu: &Gpu,
    w: &AttentionGpu,
    h: DevPtr,
    norm: &Vector,
    eps: f32,
    t: usize,
    scratch: &Scratch,
    lora: DevPtr,
) -> Result<DevPtr> {
    let proj = scratch.ptr(0);
    qkv_projection(gpu, w, h, norm, eps, t, proj, InputSites::new(lora, scratch))?;
    Ok(proj)
}

/// y (f32 [t, PROJ]) = the stacked q/k/v projection of t ≤ 8 tokens' RMSNorm(h): one
/// `gemv_norm_mma` over `qkv_proj`, or with v apart (`AttentionGpu::v_apart`: a GGUF file's Q6_K v)
/// `gemv_norm_q` a token at a time with v as its tail.
/// `lora`: the tokens' LoRA q/k/v sites (bf16), or none.
#[allow(clippy::too_many_arguments)]
fn qkv_projection(
    gpu: &Gpu,
    w: &AttentionGpu,
    h: DevPtr,
    norm: &Vector,
    eps: f32,
    t: usize,
    y: DevPtr,
    lora: InputSites,
) -> Result<()> {
    let rows = w.qkv_proj.rows + if w.v_apart() { w.v_proj.rows } else { 0 };
    ensure!(rows == PROJ, "attention: stacked q/k/v of {rows} rows, not {PROJ}");
    if w.v_apart() {
        ensure!(lora.sites == 0, "attention: a LoRA site with v apart");
        for i in 0..t {
            let (h, y) = (h + (i * 2048 * 4) as DevPtr, y + (i * PROJ * 4) as DevPtr);
            gemv_q::gemv_norm_q(gpu, h, norm, eps, &w.qkv_proj, Some(&w.v_proj), y, None)?;
        }
        return Ok(());
    }
    gemv_norm_mma(gpu, h, norm, eps, &w.qkv_proj, t, y, PROJ, lora)
}

/// `attention_decode` for t ≤ 8 consecutive tokens of one sequence (h f32 `[t, 2048]`; the
/// multi-token step), bf16 weights: token i goes to `cache` at `positions[i]`. Returns the gated
/// outputs (bf16 `[t, 4096]`, scratch buffer 2). The stacked q/k/v projection is read once for
/// all t tokens (`gemv_norm_mma`); then, token by token, q/k norm + RoPE writes token i's keys
/// and values and it attends over `0 ..= positions[i]` as the one-token step does (the same
/// split count, so the same bits). positions: i32 `[t]` on the device. Scratch buffers 0–4.
/// `lora`: a u64 [t] device array of the tokens' LoRA q/k/v sites (`LoraSite`), or 0.
#[allow(clippy::too_many_arguments)]
pub fn attention_decode_tokens(
    gpu: &Gpu,
    w: &AttentionGpu,
    h: DevPtr,
    norm: &Vector,
    eps: f32,
    positions: DevPtr,
    rope: Rope,
    t: usize,
    cache: &KvCacheGpu,
    scratch: &Scratch,
    lora: DevPtr,
) -> Result<DevPtr> {
    let (proj, q, gated) = (qkv_tokens(gpu, w, h, norm, eps, t, scratch, lora)?, scratch.ptr(1), scratch.ptr(2));
    for i in 0..t {
        let [qg, k, v] = PROJ_FIRSTS.map(|j| proj + ((i * PROJ + j) * 4) as DevPtr);
        let pos = positions + (i * 4) as DevPtr;
        let (q_i, gated_i) = (q + (i * HEADS * HEAD_DIM * 2) as DevPtr, gated + (i * HEADS * HEAD_DIM * 2) as DevPtr);
        qk_norm_rope(gpu, w, qg, k, v, 1, pos, rope, cache, q_i)?;
        attend(gpu, q_i, qg, 1, pos, cache, scratch, gated_i)?;
    }
    Ok(gated)
}

/// Where the batched decode step's attention finds its sequences: per sequence, its position
/// and its cache (device arrays of n entries).
pub struct BatchCaches {
    /// i32 `[n]`
    pub positions: DevPtr,
    /// i32 `[n]`: each sequence's rotary delta (`Rope::delta`)
    pub deltas: DevPtr,
    /// u64 `[n]`: each sequence's key cache, bf16 `[max_seq, 2, 256]`
    pub keys: DevPtr,
    /// u64 `[n]`: each sequence's value cache
    pub values: DevPtr,
    /// Rows every one of the caches holds.
    pub max_seq: usize,
}

/// `attention_decode_tokens` for one token of each of n ≤ 8 sequences, in three launches
/// whatever n: q/k/v read once (`gemv_norm_mma`), then q/k norm + RoPE, attention and the
/// combine each in one launch over the sequences, each block doing what it does in sequence s's
/// own one-token launch (the same split count), so each row gets the same bits. Returns the gated
/// outputs (bf16 `[n, 4096]`, scratch buffer 2). Scratch buffers 0–4.
/// `lora`: a u64 [n] device array of the sequences' LoRA q/k/v sites (`LoraSite`, 0: none), or 0.
#[allow(clippy::too_many_arguments)]
pub fn attention_decode_batch(
    gpu: &Gpu,
    w: &AttentionGpu,
    h: DevPtr,
    norm: &Vector,
    eps: f32,
    n: usize,
    caches: &BatchCaches,
    scratch: &Scratch,
    lora: DevPtr,
) -> Result<DevPtr> {
    let (proj, q, gated) = (qkv_tokens(gpu, w, h, norm, eps, n, scratch, lora)?, scratch.ptr(1), scratch.ptr(2));
    let max_seq = caches.max_seq as i32;
    let launch = Launch::new((n as u32, (HEADS + KV_HEADS) as u32, 1), HEAD_DIM as u32, 0);
    attention_rope_cu::qk_norm_rope_batch(
        gpu,
        launch,
        proj,
        PROJ as i32,
        w.q_norm.ptr,
        w.k_norm.ptr,
        caches.positions,
        caches.deltas,
        max_seq,
        q,
        caches.keys,
        caches.values,
    )?;
    let kernel = &DECODE;
    let splits = split_count(kernel, 1, scratch.max_tokens, gpu.sms as usize);
    ensure!(
        n * splits * HEADS * HEAD_DIM <= scratch.max_tokens * SCRATCH_WIDTH,
        "attention of {n} sequences: their partials do not fit the scratch buffer"
    );
    let (part_o, part_ml) = (scratch.ptr(3), scratch.ptr(4));
    let launch = Launch::new(
        (n as u32, KV_HEADS as u32, splits as u32),
        (32 * kernel.warps) as u32,
        kernel.shared_bytes() as u32,
    )
    .pdl(kernel.early);
    let (positions, splits) = (caches.positions, splits as i32);
    attention_cu::attn_decode_batch(gpu, launch, q, caches.keys, caches.values, positions, splits, part_o, part_ml)?;
    let launch = Launch::new((HEADS as u32, (HEAD_DIM / COMBINE_SLICE) as u32, n as u32), 256, 0);
    let align = kernel.key_tile as i32;
    attention_cu::attn_combine_batch(gpu, launch, part_o, part_ml, proj, positions, splits, align, PROJ as i32, gated)?;
    Ok(gated)
}

/// q (bf16 `[t, 16, 256]`) = RoPE(RMSNorm(q part of qg)); cache rows `*pos..*pos+t` =
/// (RoPE(RMSNorm(k)), v) in bf16.
#[allow(clippy::too_many_arguments)]
pub(crate) fn qk_norm_rope(
    gpu: &Gpu,
    w: &AttentionGpu,
    qg: DevPtr,
    k: DevPtr,
    v: DevPtr,
    t: usize,
    pos: DevPtr,
    rope: Rope,
    cache: &KvCacheGpu,
    q: DevPtr,
) -> Result<()> {
    attention_rope_cu::qk_norm_rope(
        gpu,
        Launch::new((t as u32, (HEADS + KV_HEADS) as u32, 1), HEAD_DIM as u32, 0),
        qg,
        k,
        v,
        w.q_norm.ptr,
        w.k_norm.ptr,
        pos,
        rope.delta,
        rope.mrope,
        t as i32,
        cache.max_seq as i32,
        q,
        cache.keys.ptr(),
        cache.values.ptr(),
    )
}

/// gated (bf16 `[t, 4096]`) = softmax(q kᵀ / 16) v ∘ sigmoid(gate), causal over the cache
/// positions `0 ..= *pos + i` for token i. q: bf16 `[t, 16, 256]`; qg: the q_proj output (for
/// the gate). Uses scratch buffers 3 and 4.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attend(
    gpu: &Gpu,
    q: DevPtr,
    qg: DevPtr,
    t: usize,
    pos: DevPtr,
    cache: &KvCacheGpu,
    scratch: &Scratch,
    gated: DevPtr,
) -> Result<()> {
    let kernel = if t <= DECODE_KERNEL_MAX_T { &DECODE } else { prefill_kernel(gpu) };
    let splits = split_count(kernel, t, scratch.max_tokens, gpu.sms as usize);
    let row_tiles = t.div_ceil(kernel.tokens_per_block());
    let (part_o, part_ml) = (scratch.ptr(3), scratch.ptr(4));
    (kernel.launch)(
        gpu,
        Launch::new(
            (row_tiles as u32, KV_HEADS as u32, splits as u32),
            (32 * kernel.warps) as u32,
            kernel.shared_bytes() as u32,
        )
        .pdl(kernel.early),
        q,
        cache.keys.ptr(),
        cache.values.ptr(),
        pos,
        t as i32,
        splits as i32,
        part_o,
        part_ml,
    )?;
    // few rows (decode): a block per 32 dims of a row, so they fill the GPU
    let (rows, splits, align) = (t * HEADS, splits as i32, kernel.key_tile as i32);
    if rows < gpu.sms as usize {
        let slices = (HEAD_DIM / COMBINE_SLICE) as u32;
        let launch = Launch::new((rows as u32, slices, 1), 256, 0);
        attention_cu::attn_combine_sliced(gpu, launch, part_o, part_ml, qg, pos, t as i32, splits, align, gated)
    } else {
        let launch = Launch::new((rows as u32, 1, 1), 256, 0);
        attention_cu::attn_combine(gpu, launch, part_o, part_ml, qg, pos, t as i32, splits, align, gated)
    }
}

/// Split-K chunks: enough blocks to fill the GPU, as many as the scratch partial buffers hold.
/// Depends only on `t` (never on the position), so graph replays stay valid.
fn split_count(kernel: &AttendKernel, t: usize, scratch_tokens: usize, sms: usize) -> usize {
    let base = t.div_ceil(kernel.tokens_per_block()) * KV_HEADS;
    let want = (kernel.blocks_per_sm * sms).div_ceil(base).clamp(1, MAX_SPLITS);
    // part_o needs splits · t·16 · 256 f32 in one scratch buffer of scratch_tokens · SCRATCH_WIDTH f32.
    let fits = (scratch_tokens * SCRATCH_WIDTH) / (t * HEADS * HEAD_DIM);
    want.min(fits).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testutil::*;
    use crate::weights::Uploader;
    use solo_cpu::attention::{apply_mrope, attention_forward, KvCache};
    use solo_cpu::ops::rms_norm_one_plus;
    use solo_model::weights::AttentionWeights;
    use solo_model::{ModelConfig, Tensor};

    /// Random attention weights at realistic scales, on the CPU and (the same bf16 values) on the GPU.
    fn random_weights(seed: u64) -> (AttentionWeights, AttentionGpu, Vec<DevBuf>) {
        let mat = |s: u64, rows: usize, cols: usize| {
            Tensor::from_f32_as_bf16(vec![rows, cols], &random(s, rows * cols, (3.0 / cols as f32).sqrt()))
        };
        let cpu = AttentionWeights {
            q_proj: mat(seed, HEADS * 2 * HEAD_DIM, HIDDEN),
            k_proj: mat(seed + 1, KV_HEADS * HEAD_DIM, HIDDEN),
            v_proj: mat(seed + 2, KV_HEADS * HEAD_DIM, HIDDEN),
            o_proj: mat(seed + 3, HIDDEN, HEADS * HEAD_DIM),
            q_norm: Tensor::from_f32_as_bf16(vec![HEAD_DIM], &random(seed + 4, HEAD_DIM, 0.5)),
            k_norm: Tensor::from_f32_as_bf16(vec![HEAD_DIM], &random(seed + 5, HEAD_DIM, 0.5)),
        };
        let mut up = Uploader::new(gpu()).unwrap();
        let w = AttentionGpu::upload(&mut up, &cpu, None).unwrap();
        (cpu, w, up.finish().unwrap())
    }

    /// Fills device memory with 0xFF bytes: NaN as f32 and as bf16, so unwritten outputs fail.
    fn poison(ptr: DevPtr, bytes: usize) {
        let gpu = gpu();
        let nan = gpu.upload(&vec![0xFFu8; bytes]).unwrap();
        gpu.copy(ptr, nan.ptr(), bytes).unwrap();
        gpu.sync().unwrap();
    }

    fn poison_scratch(s: &Scratch) {
        for b in &s.bufs {
            poison(b.ptr(), b.bytes);
        }
    }

    fn poison_cache(c: &KvCacheGpu) {
        poison(c.keys.ptr(), c.keys.bytes);
        poison(c.values.ptr(), c.values.bytes);
    }

    /// Runs the GPU mixer for `x` at `start` and the CPU reference on its own cache; compares.
    #[allow(clippy::too_many_arguments)]
    fn step(
        what: &str,
        cfg: &ModelConfig,
        cpu_w: &AttentionWeights,
        w: &AttentionGpu,
        x: &[f32],
        start: usize,
        cache: &KvCacheGpu,
        cpu_cache: &mut KvCache,
        scratch: &Scratch,
        tol: f32,
    ) {
        let gpu = gpu();
        let t = x.len() / HIDDEN;
        let xb = gpu.upload(&bf16_bytes(x)).unwrap();
        let pos = gpu.upload_i32(&[start as i32]).unwrap();
        let out = gpu.upload_f32(&vec![f32::NAN; t * HIDDEN]).unwrap();
        poison_scratch(scratch);
        attention_mixer(gpu, w, xb.ptr(), t, pos.ptr(), Rope::ROW, cache, scratch, None, out.ptr()).unwrap();
        let got = gpu.download_f32(out.ptr(), t * HIDDEN).unwrap();
        let want = attention_forward(cfg, cpu_w, None, x, start, cpu_cache);
        assert_close(what, &got, &want, tol);

        // The cache rows this call appended, against the CPU's keys and values.
        let n = t * KV_HEADS * HEAD_DIM;
        let off = (start * POSITION_BYTES) as u64;
        let keys = bf16_from_bytes(&gpu.download(cache.keys.ptr() + off, n * 2).unwrap());
        let values = bf16_from_bytes(&gpu.download(cache.values.ptr() + off, n * 2).unwrap());
        let base = start * KV_HEADS * HEAD_DIM;
        assert_close(&format!("{what}: new keys"), &keys, &cpu_cache.keys[base..base + n], 4e-3);
        assert_close(&format!("{what}: new values"), &values, &cpu_cache.values[base..base + n], 4e-3);
    }

    fn input(seed: u64, t: usize) -> Vec<f32> {
        // A normalised hidden state: RMS about 1.
        round_bf16(&random(seed, t * HIDDEN, 1.7))
    }

    /// Prefill of 100 tokens at position 0, three decode steps, and (from a snapshot of the cache
    /// after the prefill) a second prefill chunk at position 100.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn attention_mixer_matches_cpu() {
        let gpu = gpu();
        let cfg = crate::synthetic::real_config(4);
        let (cpu_w, w, _bufs) = random_weights(10);
        let scratch = Scratch::new(gpu, 128).unwrap();
        let cache = KvCacheGpu::new(gpu, 512).unwrap();
        poison_cache(&cache);
        let mut cpu_cache = KvCache::default();

        step("prefill t=100 at 0", &cfg, &cpu_w, &w, &input(1, 100), 0, &cache, &mut cpu_cache, &scratch, 1e-2);

        let snapshot = KvCacheGpu::new(gpu, 512).unwrap();
        poison_cache(&snapshot);
        snapshot.copy_from(gpu, &cache, 100).unwrap();
        let mut cpu_snapshot = cpu_cache.clone();

        for i in 0..3 {
            let what = format!("decode at {}", 100 + i);
            step(&what, &cfg, &cpu_w, &w, &input(2 + i as u64, 1), 100 + i, &cache, &mut cpu_cache, &scratch, 1e-2);
        }
        step("prefill t=37 at 100", &cfg, &cpu_w, &w, &input(7, 37), 100, &snapshot, &mut cpu_snapshot, &scratch, 1e-2);
        // A chunk longer than one prefill block row and not a multiple of it, after that.
        step("prefill t=45 at 137", &cfg, &cpu_w, &w, &input(8, 45), 137, &snapshot, &mut cpu_snapshot, &scratch, 1e-2);
    }

    /// A long cache (100,000 random positions) then short chunks: RoPE at large positions, and
    /// split-K over many chunks for both attend kernels.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn attention_long_context_matches_cpu() {
        let gpu = gpu();
        let cfg = crate::synthetic::real_config(4);
        let (cpu_w, w, _bufs) = random_weights(20);
        let scratch = Scratch::new(gpu, 64).unwrap();
        let start = 100_000;
        let cache = KvCacheGpu::new(gpu, start + 64).unwrap();
        poison_cache(&cache);
        let n = start * KV_HEADS * HEAD_DIM;
        let mut cpu_cache = KvCache { keys: round_bf16(&random(21, n, 1.7)), values: round_bf16(&random(22, n, 1.0)) };
        let kb = gpu.upload(&bf16_bytes(&cpu_cache.keys)).unwrap();
        let vb = gpu.upload(&bf16_bytes(&cpu_cache.values)).unwrap();
        gpu.copy(cache.keys.ptr(), kb.ptr(), n * 2).unwrap();
        gpu.copy(cache.values.ptr(), vb.ptr(), n * 2).unwrap();

        step("t=2 at 100000", &cfg, &cpu_w, &w, &input(23, 2), start, &cache, &mut cpu_cache, &scratch, 1e-2);
        step("decode at 100002", &cfg, &cpu_w, &w, &input(24, 1), start + 2, &cache, &mut cpu_cache, &scratch, 1e-2);
        step("t=40 at 100003", &cfg, &cpu_w, &w, &input(25, 40), start + 3, &cache, &mut cpu_cache, &scratch, 1e-2);
    }

    /// qk_norm_rope alone at large positions, against the CPU's RMSNorm and RoPE.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn qk_norm_rope_matches_cpu_at_large_positions() {
        let gpu = gpu();
        let cfg = crate::synthetic::real_config(4);
        let (cpu_w, w, _bufs) = random_weights(30);
        let max_seq = 262_144;
        let cache = KvCacheGpu::new(gpu, max_seq).unwrap();
        // (first row, tokens, rotary delta, per-token multimodal positions): plain rows, text
        // after an image (a delta), and a prompt piece with an image's (t, h, w) positions
        let image: Vec<[usize; 3]> = vec![[400, 400, 400], [401, 401, 401], [401, 401, 402], [401, 402, 401]];
        type Case<'a> = (usize, usize, i32, Option<&'a [[usize; 3]]>);
        let cases: [Case; 5] = [
            (0, 3, 0, None),
            (100_000, 3, 0, None),
            (max_seq - 3, 3, 0, None),
            (5_000, 3, -1_234, None),
            (400, 4, 0, Some(&image)),
        ];
        for &(start, t, rope_delta, mrope) in &cases {
            let qg_v = random(31 + start as u64, t * HEADS * 2 * HEAD_DIM, 2.0);
            let k_v = random(32 + start as u64, t * KV_HEADS * HEAD_DIM, 2.0);
            let v_v = random(33 + start as u64, t * KV_HEADS * HEAD_DIM, 2.0);
            let qg = gpu.upload_f32(&qg_v).unwrap();
            let k = gpu.upload_f32(&k_v).unwrap();
            let v = gpu.upload_f32(&v_v).unwrap();
            let q = gpu.upload(&bf16_bytes(&vec![f32::NAN; t * HEADS * HEAD_DIM])).unwrap();
            let pos = gpu.upload_i32(&[start as i32, rope_delta]).unwrap();
            let flat: Vec<i32> = mrope.unwrap_or(&[]).iter().flatten().map(|&p| p as i32).collect();
            let mrope_buf = gpu.upload_i32(&flat).unwrap();
            let rope = Rope { delta: Some(pos.ptr() + 4), mrope: mrope.map(|_| mrope_buf.ptr()) };
            let at = |i: usize| match mrope {
                Some(m) => m[i],
                None => [(start + i) as i64 + rope_delta as i64; 3].map(|p| p as usize),
            };
            poison(cache.keys.ptr() + (start * POSITION_BYTES) as u64, t * POSITION_BYTES);
            poison(cache.values.ptr() + (start * POSITION_BYTES) as u64, t * POSITION_BYTES);
            qk_norm_rope(gpu, &w, qg.ptr(), k.ptr(), v.ptr(), t, pos.ptr(), rope, &cache, q.ptr()).unwrap();

            let q_only: Vec<f32> = qg_v.chunks(2 * HEAD_DIM).flat_map(|h| h[..HEAD_DIM].to_vec()).collect();
            let mut want_q = rms_norm_one_plus(&q_only, &cpu_w.q_norm.to_f32(), 1e-6);
            let mut want_k = rms_norm_one_plus(&k_v, &cpu_w.k_norm.to_f32(), 1e-6);
            for (i, head) in want_q.chunks_mut(HEAD_DIM).enumerate() {
                apply_mrope(&cfg, head, at(i / HEADS));
            }
            for (i, head) in want_k.chunks_mut(HEAD_DIM).enumerate() {
                apply_mrope(&cfg, head, at(i / KV_HEADS));
            }
            let got_q = bf16_from_bytes(&gpu.download(q.ptr(), t * HEADS * HEAD_DIM * 2).unwrap());
            let off = (start * POSITION_BYTES) as u64;
            let got_k = bf16_from_bytes(&gpu.download(cache.keys.ptr() + off, t * POSITION_BYTES).unwrap());
            let got_v = bf16_from_bytes(&gpu.download(cache.values.ptr() + off, t * POSITION_BYTES).unwrap());
            assert_close(&format!("q at {start}"), &got_q, &want_q, 3e-3);
            assert_close(&format!("k at {start}"), &got_k, &want_k, 3e-3);
            assert_close(&format!("v at {start}"), &got_v, &v_v, 3e-3);
            // The rotated dims alone (an error there would hide among the 192 unrotated ones).
            let rot = |v: &[f32]| -> Vec<f32> { v.chunks(HEAD_DIM).flat_map(|h| h[..64].to_vec()).collect() };
            assert_close(&format!("rotated q dims at {start}"), &rot(&got_q), &rot(&want_q), 3e-3);
            assert_close(&format!("rotated k dims at {start}"), &rot(&got_k), &rot(&want_k), 3e-3);
        }
    }

    #[test]
    fn split_count_fits_scratch() {
        assert_eq!(split_count(&DECODE, 1, 128, 132), 198);
        assert_eq!(split_count(&DECODE, 1, 1, 132), 2);
        assert_eq!(split_count(&PREFILL, 4096, 4096, 132), 1);
        for t in [1, 2, 15, 16, 100, 1000, 8192] {
            let kernel = if t <= DECODE_KERNEL_MAX_T { &DECODE } else { &PREFILL };
            let s = split_count(kernel, t, 8192, 132);
            assert!(s >= 1 && s * t * HEADS * HEAD_DIM <= 8192 * SCRATCH_WIDTH);
        }
        assert!(PREFILL.shared_bytes() <= 227 * 1024 && DECODE.shared_bytes() <= 227 * 1024);
        let small = crate::runtime::CONSUMER_SHARED as usize;
        assert!(PREFILL_SMALL.shared_bytes() <= small && DECODE.shared_bytes() <= small);
    }
}
