//! GPU tests of the MoE block against the CPU reference (`#[ignore]`: run on the GPU machine).

use super::*;
use crate::kquant::KQuant;
use crate::ops::testutil::*;
use crate::weights::{RowFormat, Uploader};
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
    route(gpu, &f.gpu, xb.ptr(), t, &l, None, true).unwrap();
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
    moe_block_path(gpu, w, xb.ptr(), t, &scratch, None, out.ptr(), grouped).unwrap();
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
        format: None,
        tiled_heads: None,
    };
    let down = Matrix {
        ptr: f.gpu.down,
        rows: (EXPERTS + 1) * HIDDEN,
        cols: EXPERT_DIM,
        fp8_scales: Some(s.down),
        format: None,
        tiled_heads: None,
    };
    let gu = gpu.alloc(gate_up.rows * gate_up.cols * 2).unwrap();
    let dn = gpu.alloc(down.rows * down.cols * 2).unwrap();
    crate::ops::linear::dequantize(gpu, &gate_up, gu.ptr()).unwrap();
    crate::ops::linear::dequantize(gpu, &down, dn.ptr()).unwrap();
    let bf16 = MoeGpu { gate_up: gu.ptr(), down: dn.ptr(), fp8_scales: None, packed: None, ..f.gpu.clone() };
    for (t, seed) in [(1usize, 31u64), (4, 32), (300, 33)] {
        let x = input(seed, t);
        let xb = gpu.upload(&bf16_bytes(&x)).unwrap();
        let out = gpu.alloc(t * HIDDEN * 4).unwrap();
        moe_block(gpu, &f.gpu, xb.ptr(), t, &Scratch::new(gpu, t).unwrap(), None, out.ptr()).unwrap();
        let got = gpu.download_f32(out.ptr(), t * HIDDEN).unwrap();
        let dequantized = run_block(&bf16, t, true, &x);
        assert_close(&format!("FP8 grouped vs dequantised bf16 grouped, t={t}"), &got, &dequantized, 1e-6);
        let want = moe_forward(&f.cfg, &f.cpu, None, &x);
        check_against_cpu(f, &format!("moe_block FP8 t={t} (grouped)"), &got, &want, &x, 1e-2);
    }
    let scratch = Scratch::new(gpu, 2).unwrap();
    let err = moe_block_path(gpu, &f.gpu, 0, 2, &scratch, None, 0, false).unwrap_err();
    assert!(err.to_string().contains("FP8"), "{err}");
}

/// The mixer's output projection the decode tests fold in: w [2048, 4096] (bf16, or in a row
/// format as a checkpoint stores it), y bf16 [4096], on the GPU, and h + w·y on the CPU for a
/// given h (w as the CPU reads it).
struct MixerFixture {
    _w: Option<crate::runtime::DevBuf>, // the memory behind a bf16 w_o
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
        MixerFixture { _w: Some(w), w_o, y, w_f32, y_f32 }
    }

    /// W_o stored in `format` (int4 in groups of 128, or ggml blocks), with `tiled` its value
    /// heads' columns in the GGUF converter's order (16 key heads, 2 value heads each) as a GDN
    /// out_proj in Q4_K is; uploaded through `Uploader::mixer_out` as a checkpoint's.
    fn stored(format: RowFormat, tiled: bool) -> Self {
        use solo_model::tensor::TiledHeads;
        let values = random(23, HIDDEN * MIXER_OUT, (3.0 / MIXER_OUT as f32).sqrt());
        let order = TiledHeads { width: 128, key_heads: 16, r: 2 };
        // the file's columns: the release's value head h at stored group order.stored(h)
        let mut stored = values.clone();
        if tiled {
            for (src, dst) in values.chunks(MIXER_OUT).zip(stored.chunks_mut(MIXER_OUT)) {
                for h in 0..32 {
                    let g = order.stored(h);
                    dst[g * 128..(g + 1) * 128].copy_from_slice(&src[h * 128..(h + 1) * 128]);
                }
            }
        }
        let t = match format {
            RowFormat::Int4 => {
                use crate::int4::{quantize_symmetric, GROUP};
                let (packed, scales, _) = quantize_symmetric(&stored, HIDDEN, MIXER_OUT);
                let quant = solo_model::int4::GroupQuant { group: GROUP, scales, zeros: None, perm: None };
                Tensor::from_int4(HIDDEN, MIXER_OUT, &packed, quant)
            }
            RowFormat::K(k) => Tensor::from_bytes(
                solo_model::DType::Ggml(k.ggml()),
                vec![HIDDEN, MIXER_OUT],
                &k.ggml().quantize(&stored).unwrap(),
            ),
        };
        let t = if tiled { t.with_tiled_heads(order) } else { t };
        let mut up = Uploader::new(gpu()).unwrap();
        let w_o = up.mixer_out(&t, Some(format)).unwrap();
        std::mem::forget(up.finish().unwrap());
        assert_eq!((w_o.format, w_o.tiled_heads.is_some()), (Some(format), tiled));
        let y_f32 = round_bf16(&random(24, MIXER_OUT, 1.0));
        let y = gpu().upload(&bf16_bytes(&y_f32)).unwrap();
        MixerFixture { _w: None, w_o, y, w_f32: t.to_f32(), y_f32 }
    }

    fn out(&self) -> MixerOut<'_> {
        MixerOut::plain(&self.w_o, self.y.ptr())
    }

    fn added_to(&self, h: &[f32]) -> Vec<f32> {
        h.iter()
            .zip(self.w_f32.chunks(MIXER_OUT))
            .map(|(hv, row)| hv + row.iter().zip(&self.y_f32).map(|(a, b)| a * b).sum::<f32>())
            .collect()
    }
}

/// A decode step's input to the end of a layer: the residual h, h1 = h + W_o·y (the mixer's),
/// the post-attention norm (1 + w, on the GPU) and x = bf16(RMSNorm(h1)) as the CPU computes it.
struct DecodeInput {
    h: Vec<f32>,
    h1: Vec<f32>,
    x: Vec<f32>,
    _norm_buf: crate::runtime::DevBuf,
    norm: Vector,
}

fn decode_input(mixer: &MixerFixture) -> DecodeInput {
    let h = random(21, HIDDEN, 2.0);
    let h1 = mixer.added_to(&h);
    let norm_w = random(22, HIDDEN, 0.3);
    let x = round_bf16(&solo_cpu::ops::rms_norm_one_plus(&h1, &norm_w, 1e-6));
    let norm_buf = gpu().upload_f32(&norm_w.iter().map(|v| 1.0 + v).collect::<Vec<_>>()).unwrap();
    let norm = Vector { ptr: norm_buf.ptr(), len: HIDDEN };
    DecodeInput { h, h1, x, _norm_buf: norm_buf, norm }
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
    let DecodeInput { h, h1, x, norm, _norm_buf } = decode_input(&mixer);
    assert!(!near_ties(&f.cfg, &f.cpu, &x)[0], "router near-tie: choose another seed");
    let mut want = h1.clone();
    solo_cpu::ops::add_in_place(&mut want, &moe_forward(&f.cfg, &f.cpu, None, &x));
    let scratch = Scratch::new(gpu, 1).unwrap();
    poison_scratch(&scratch);
    for round in 0..3 {
        let hb = gpu.upload_f32(&h).unwrap();
        moe_decode(gpu, mixer.out(), &f.gpu, hb.ptr(), &norm, 1e-6, &scratch, 0).unwrap();
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
            let out = MixerOut::plain(&mixer.w_o, yb.ptr() + (i * MIXER_OUT * 2) as u64);
            moe_decode(gpu, out, &f.gpu, hb.ptr(), &norm, 1e-6, &scratch, 0).unwrap();
            alone.extend(gpu.download_f32(hb.ptr(), HIDDEN).unwrap());
        }
        for round in 0..2 {
            let hb = gpu.upload_f32(&h).unwrap();
            let out = MixerOut::plain(&mixer.w_o, yb.ptr());
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
    let w_o = Tensor::quantize_fp8(HIDDEN, MIXER_OUT, &random(23, HIDDEN * MIXER_OUT, (3.0 / MIXER_OUT as f32).sqrt()));
    let y = round_bf16(&random(24, MIXER_OUT, 1.0));
    let mut up = Uploader::new(gpu).unwrap();
    let w_o_gpu = up.matrix(&w_o).unwrap();
    let _bufs = up.finish().unwrap();
    let yb = gpu.upload(&bf16_bytes(&y)).unwrap();
    let mixer = MixerOut::plain(&w_o_gpu, yb.ptr());
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
        moe_decode(gpu, MixerOut { ..mixer }, &f.gpu, hb.ptr(), &norm, 1e-6, &scratch, 0).unwrap();
        let got = gpu.download_f32(hb.ptr(), HIDDEN).unwrap();
        assert_close(&format!("moe_decode FP8, launch {round}"), &got, &want, FP8_TOL);
    }
}

/// `fixture()`'s layer with its routed experts rounded by `q` (expert index, its matrix), and
/// with `shared` the shared expert too (as expert `EXPERTS`), the router bf16 as it was,
/// uploaded through `MoeGpu::upload` as a checkpoint's.
fn fixture_packed(shared: bool, q: impl Fn(usize, &Tensor) -> Tensor + Sync) -> Fixture {
    let bf = fixture();
    let qe =
        |(i, e): (usize, &ExpertWeights)| ExpertWeights { gate: q(i, &e.gate), up: q(i, &e.up), down: q(i, &e.down) };
    let mut experts: Vec<Option<ExpertWeights>> = (0..EXPERTS).map(|_| None).collect();
    std::thread::scope(|s| {
        for (c, (part, src)) in experts.chunks_mut(16).zip(bf.cpu.experts.chunks(16)).enumerate() {
            let qe = &qe;
            s.spawn(move || {
                part.iter_mut().zip(src.iter().enumerate()).for_each(|(slot, (j, e))| *slot = Some(qe((16 * c + j, e))))
            });
        }
    });
    let cpu = MoeWeights {
        router: bf.cpu.router.clone(),
        experts: experts.into_iter().map(|e| e.unwrap()).collect(),
        shared_expert: if shared {
            qe((EXPERTS, &bf.cpu.shared_expert))
        } else {
            ExpertWeights {
                gate: bf.cpu.shared_expert.gate.clone(),
                up: bf.cpu.shared_expert.up.clone(),
                down: bf.cpu.shared_expert.down.clone(),
            }
        },
        shared_expert_gate: bf.cpu.shared_expert_gate.clone(),
    };
    let mut up = Uploader::new(gpu()).unwrap();
    let gpu_w = MoeGpu::upload(&mut up, &cpu).unwrap();
    std::mem::forget(up.finish().unwrap());
    Fixture { cfg: bf.cfg.clone(), cpu, gpu: gpu_w }
}

/// `fixture()`'s layer with its routed experts rounded to int4 (groups of 128, f16 scales; the
/// GPTQ-Int4 release's shape). Every third expert gets zero points 6..=10 and 16 (asymmetric
/// formats, GPTQ v1's +1), so both forms of the group word are exercised.
fn fixture_int4() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        use crate::int4::{quantize_symmetric, GROUP};
        use solo_model::int4::GroupQuant;
        let f = fixture_packed(false, |e, t| {
            let (rows, cols) = (t.shape[0], t.shape[1]);
            let (packed, scales, _) = quantize_symmetric(&t.to_f32(), rows, cols);
            let zeros = e
                .is_multiple_of(3)
                .then(|| (0..scales.len()).map(|i| if i % 7 == 0 { 16 } else { 6 + (i % 5) as u8 }).collect());
            Tensor::from_int4(rows, cols, &packed, GroupQuant { group: GROUP, scales, zeros, perm: None })
        });
        assert!(f.gpu.packed.is_some_and(|p| p.gate_up == RowFormat::Int4) && f.gpu.fp8_scales.is_none());
        f
    })
}

/// `fixture()`'s layer as a GGUF file would hold it: gate and up in `gate_up`, down in `down`,
/// the shared expert's too (ggml blocks, read as stored on the GPU, dequantised by ggml's rules
/// on the CPU).
fn fixture_kquant(gate_up: KQuant, down: KQuant) -> Fixture {
    let f = fixture_packed(true, |_, t| {
        let k = if t.shape[1] == HIDDEN { gate_up } else { down };
        let blocks = k.ggml().quantize(&t.to_f32()).unwrap();
        Tensor::from_bytes(solo_model::DType::Ggml(k.ggml()), t.shape.clone(), &blocks)
    });
    let p = f.gpu.packed.expect("Q4_K/Q6_K experts go up as stored");
    assert_eq!((p.gate_up, p.down, p.shared.rows), (RowFormat::K(gate_up), RowFormat::K(down), true));
    f
}

/// The 4/6-bit grouped GEMMs (prefill) and expert GEMVs (`moe_block_path` ungrouped: the
/// multi-token steps' form) against the CPU on the dequantised experts.
fn check_packed_block(f: &Fixture, name: &str) {
    let gpu = gpu();
    for (t, seed, grouped) in [(1usize, 41u64, true), (4, 42, true), (300, 43, true), (1, 44, false), (4, 45, false)] {
        let x = input(seed, t);
        let xb = gpu.upload(&bf16_bytes(&x)).unwrap();
        let out = gpu.alloc(t * HIDDEN * 4).unwrap();
        moe_block_path(gpu, &f.gpu, xb.ptr(), t, &Scratch::new(gpu, t).unwrap(), None, out.ptr(), grouped).unwrap();
        let got = gpu.download_f32(out.ptr(), t * HIDDEN).unwrap();
        let want = moe_forward(&f.cfg, &f.cpu, None, &x);
        let form = if grouped { "grouped" } else { "GEMVs" };
        check_against_cpu(f, &format!("moe_block {name} t={t} ({form})"), &got, &want, &x, 1e-2);
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn moe_block_int4_matches_cpu() {
    check_packed_block(fixture_int4(), "int4");
}

/// The layers llama.cpp's quants make: Q4_K_M's (gate/up Q4_K, down Q6_K or Q4_K), Q5_K_S's
/// (Q5_K throughout), Q6_K's, Q8_0's: every format in both places.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn moe_block_and_decode_kquant_match_cpu() {
    use KQuant::{Q4K, Q5K, Q6K, Q8_0};
    for (gate_up, down) in [(Q4K, Q6K), (Q4K, Q4K), (Q5K, Q5K), (Q6K, Q6K), (Q8_0, Q8_0)] {
        let f = fixture_kquant(gate_up, down);
        let name = format!("{gate_up:?}/{down:?}");
        check_packed_block(&f, &name);
        check_packed_decode(&f, &name);
    }
}

/// The 4- to 8-bit forms of the decode step's MoE kernel (the router bf16; the shared expert
/// bf16 for int4, as stored for the k-quants) against the CPU over the dequantised experts, over
/// three launches: W_o bf16, and W_o in the experts' gate/up format as stored (for the k-quants
/// of 256-column blocks also with its columns in tiled value-head order, as a GGUF out_proj's).
/// The fused kernel and the four kernels must agree bit for bit, and prefill's dequantised copy
/// of W_o must be the CPU's, rounded.
fn check_packed_decode(f: &Fixture, name: &str) {
    let format = f.gpu.packed.unwrap().gate_up;
    check_packed_decode_with(f, name, MixerFixture::new());
    check_packed_decode_with(f, &format!("{name}, W_o {format:?}"), MixerFixture::stored(format, false));
    if matches!(format, RowFormat::K(k) if k != KQuant::Q8_0) {
        check_packed_decode_with(f, &format!("{name}, W_o {format:?} tiled"), MixerFixture::stored(format, true));
    }
}

fn check_packed_decode_with(f: &Fixture, name: &str, mixer: MixerFixture) {
    let gpu = gpu();
    if !mixer.w_o.is_bf16() {
        let copy = gpu.alloc(HIDDEN * MIXER_OUT * 2).unwrap();
        crate::ops::linear::dequantize(gpu, &mixer.w_o, copy.ptr()).unwrap();
        let got = gpu.download(copy.ptr(), HIDDEN * MIXER_OUT * 2).unwrap();
        assert!(got == bf16_bytes(&mixer.w_f32), "{name}: the dequantised W_o is not the CPU's, rounded");
    }
    let DecodeInput { h, h1, x, norm, _norm_buf } = decode_input(&mixer);
    assert!(!near_ties(&f.cfg, &f.cpu, &x)[0], "router near-tie: choose another seed");
    let mut want = h1.clone();
    solo_cpu::ops::add_in_place(&mut want, &moe_forward(&f.cfg, &f.cpu, None, &x));
    let scratch = Scratch::new(gpu, 1).unwrap();
    poison_scratch(&scratch);
    for round in 0..3 {
        let hb = gpu.upload_f32(&h).unwrap();
        moe_decode(gpu, mixer.out(), &f.gpu, hb.ptr(), &norm, 1e-6, &scratch, 0).unwrap();
        let got = gpu.download_f32(hb.ptr(), HIDDEN).unwrap();
        assert_close(&format!("moe_decode {name}, launch {round}"), &got, &want, FP8_TOL);
        let hb = gpu.upload_f32(&h).unwrap();
        moe_decode_kernels(gpu, mixer.out(), &f.gpu, hb.ptr(), &norm, 1e-6, 1, &scratch).unwrap();
        let kernels = gpu.download_f32(hb.ptr(), HIDDEN).unwrap();
        let differ = got.iter().zip(&kernels).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
        assert_eq!(
            differ, 0,
            "{name}, launch {round}: the fused kernel and the four kernels differ in {differ} values"
        );
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn moe_decode_int4_matches_cpu() {
    check_packed_decode(fixture_int4(), "int4");
}

/// The fused kernels on grids of one block an SM (the consumer cards' form: a warp takes several
/// output columns and a block several router rows; `moe_decode_block_wide` for bf16 experts, the
/// 4- to 8-bit kernels as they are, int4's with 16 warps a block and with 8) give the four
/// kernels' bits, for bf16 and int4 experts, at
/// 64, 82 (an RTX 3090's SMs) and 100 blocks, each grid with its own scratch, over two launches.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn moe_decode_on_one_block_an_sm_gives_the_four_kernels_bits() {
    let gpu = gpu();
    let mixer = MixerFixture::new();
    let DecodeInput { h, x, norm, _norm_buf, .. } = decode_input(&mixer);
    let (bf16, int4) = (fixture(), fixture_int4());
    // (the int4 kernel in both its forms: 16 warps a block and 8)
    for (name, f, warps) in [("bf16", &bf16, 8), ("int4", &int4, 16), ("int4", &int4, 8)] {
        assert!(!near_ties(&f.cfg, &f.cpu, &x)[0], "router near-tie: choose another seed");
        let run = |grid: Option<u32>, scratch: &Scratch| {
            let hb = gpu.upload_f32(&h).unwrap();
            moe_decode_on(gpu, mixer.out(), &f.gpu, hb.ptr(), &norm, 1e-6, scratch, 0, grid, warps).unwrap();
            gpu.download_f32(hb.ptr(), HIDDEN).unwrap()
        };
        let scratch = Scratch::new(gpu, 1).unwrap();
        let kernels = run(None, &scratch);
        for grid in [64u32, 82, 100] {
            let scratch = Scratch::new(gpu, 1).unwrap();
            poison_scratch(&scratch);
            for round in 0..2 {
                let got = run(Some(grid), &scratch);
                let differ = got.iter().zip(&kernels).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
                assert_eq!(
                    differ, 0,
                    "{name} ({warps} warps a block), {grid} blocks, launch {round}: {differ} values differ from the four kernels'"
                );
            }
        }
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

/// A rank-`rank` adapter of one layer's routed experts (every expert's gate_up_proj and
/// down_proj), and with `linears` the router, the shared expert's gate and its gate_proj, up_proj
/// and down_proj too; B `b` · U(±√(3/rank)), scale 2.
fn experts_adapter(rank: usize, b: f32, linears: bool) -> solo_model::lora::LoraAdapter {
    use solo_model::lora::{ExpertLora, LayerLora, LoraAdapter, LoraPair, Target};
    let pair = |seed: u64, rows: usize, cols: usize| LoraPair {
        a: Tensor::from_f32_as_bf16(vec![rank, cols], &random(seed, rank * cols, (3.0 / cols as f32).sqrt())),
        b: Tensor::from_f32_as_bf16(vec![rows, rank], &random(seed + 1, rows * rank, b * (3.0 / rank as f32).sqrt())),
        scale: 2.0,
    };
    let experts = (0..EXPERTS as u64)
        .map(|e| ExpertLora {
            gate_up: Some(pair(5000 + 4 * e, 2 * EXPERT_DIM, HIDDEN)),
            down: Some(pair(5002 + 4 * e, HIDDEN, EXPERT_DIM)),
        })
        .collect();
    let shapes = [
        (Target::Router, EXPERTS, HIDDEN),
        (Target::SharedExpertGate, 1, HIDDEN),
        (Target::SharedGate, EXPERT_DIM, HIDDEN),
        (Target::SharedUp, EXPERT_DIM, HIDDEN),
        (Target::SharedDown, HIDDEN, EXPERT_DIM),
    ];
    let linears = match linears {
        true => {
            shapes.iter().enumerate().map(|(i, &(t, rows, cols))| (t, pair(4000 + 2 * i as u64, rows, cols))).collect()
        }
        false => Default::default(),
    };
    LoraAdapter {
        id: 77,
        dir: "experts adapter".into(),
        rank,
        layers: vec![LayerLora { linears, experts }],
        matrices: 0,
        bytes: 0,
    }
}

/// The routed experts' adapter (`lora::ExpertsSite`) in moe_block on every path and expert
/// format the forward takes (bf16 GEMVs and grouped GEMMs, int4 both ways, FP8 grouped), with
/// the router's and the shared expert's adapters beside it on bf16: the CPU reference with the
/// same adapter, which moves the output well past the tolerance.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn moe_block_with_an_experts_adapter_matches_cpu() {
    let gpu = gpu();
    let mut cases: Vec<(&Fixture, &str, bool)> = vec![(fixture(), "bf16", true), (fixture_int4(), "int4", false)];
    if fp8_runs_here() {
        cases.push((fixture_fp8(), "fp8", false));
    }
    for (f, name, shared) in cases {
        let adapter = experts_adapter(16, 0.1, shared);
        for (t, seed, grouped) in [(4usize, 61u64, false), (4, 62, true), (300, 63, true), (37, 64, false)] {
            if f.gpu.fp8_scales.is_some() && !grouped {
                continue; // (FP8 experts take the grouped GEMMs at every size)
            }
            let lora = lora::LoraGpu::upload(gpu, &adapter, t).unwrap();
            let x = input(seed, t);
            let xb = gpu.upload(&bf16_bytes(&x)).unwrap();
            let out = gpu.alloc(t * HIDDEN * 4).unwrap();
            let scratch = Scratch::new(gpu, t).unwrap();
            poison_scratch(&scratch);
            let with = Some((&lora, &lora.layers[0]));
            moe_block_path(gpu, &f.gpu, xb.ptr(), t, &scratch, with, out.ptr(), grouped).unwrap();
            let got = gpu.download_f32(out.ptr(), t * HIDDEN).unwrap();
            let want = moe_forward(&f.cfg, &f.cpu, Some(&adapter.layers[0]), &x);
            let base = moe_forward(&f.cfg, &f.cpu, None, &x);
            let moved = rel_err(&base, &want);
            assert!(moved > 0.05, "{name}: the adapter hardly moves the output ({moved:.2e})");
            let form = if grouped { "grouped" } else { "GEMVs" };
            // (bf16 GEMVs: the shared expert apart rounds its activation to bf16 as the expert
            // kernels do, the CPU keeps f32: 1.4e-3 measured)
            let tol = if grouped || f.gpu.packed.is_some() { 1e-2 } else { 2e-3 };
            check_against_cpu(f, &format!("moe_block {name} + experts adapter t={t} ({form})"), &got, &want, &x, tol);
        }
    }
}

/// The one-token MoE kernel with an adapter of the MoE block (`moe_decode_block_lora`, on the
/// bf16 layer): rank 16 on the router, the shared expert and the routed experts, then rank 8 on
/// the routed experts alone, against the CPU with the same adapter, over three launches
/// alternating with the plain kernel on the same scratch (each launch must leave the barrier's
/// count a multiple of the grid: the adapted kernel has up to two barriers more).
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn moe_decode_with_a_moe_adapter_matches_cpu() {
    let gpu = gpu();
    if !fused_decode_fits(gpu) {
        eprintln!("(no fused MoE kernel on this GPU: nothing to test)");
        return;
    }
    let f = fixture();
    let mixer = MixerFixture::new();
    let DecodeInput { h, h1, x, norm, _norm_buf } = decode_input(&mixer);
    let scratch = Scratch::new(gpu, 2).unwrap();
    poison_scratch(&scratch);
    let plain = {
        let mut w = h1.clone();
        solo_cpu::ops::add_in_place(&mut w, &moe_forward(&f.cfg, &f.cpu, None, &x));
        w
    };
    for (rank, linears) in [(16, true), (8, false)] {
        let adapter = experts_adapter(rank, 0.1, linears);
        let lora = lora::LoraGpu::upload(gpu, &adapter, 1).unwrap();
        let experts = lora.layers[0].fused_arrays().2;
        assert!(experts != 0 && lora.fused && !lora.several_tokens, "rank {rank}: no fused form");
        let mut want = h1.clone();
        let moe = moe_forward(&f.cfg, &f.cpu, Some(&adapter.layers[0]), &x);
        let moved = rel_err(&moe_forward(&f.cfg, &f.cpu, None, &x), &moe);
        assert!(moved > 0.05, "rank {rank}: the adapter hardly moves the output ({moved:.2e})");
        solo_cpu::ops::add_in_place(&mut want, &moe);
        for round in 0..3 {
            let hb = gpu.upload_f32(&h).unwrap();
            moe_decode(gpu, mixer.out(), &f.gpu, hb.ptr(), &norm, 1e-6, &scratch, experts).unwrap();
            let got = gpu.download_f32(hb.ptr(), HIDDEN).unwrap();
            assert_close(&format!("moe_decode_block_lora rank {rank}, launch {round}"), &got, &want, 1e-4);
            let hb = gpu.upload_f32(&h).unwrap();
            moe_decode(gpu, mixer.out(), &f.gpu, hb.ptr(), &norm, 1e-6, &scratch, 0).unwrap();
            let got = gpu.download_f32(hb.ptr(), HIDDEN).unwrap();
            assert_close(&format!("moe_decode after it, launch {round}"), &got, &plain, 1e-4);
        }
    }
}
