//! The vision tower, one image at a time (transformers' `Qwen3_5MoeVisionModel`):
//!
//! ```text
//! x  = W_patch · patch + b                    the Conv3d (kernel = stride = T×p×p) as one matmul, [N, D]
//! x += Σ_4 w_i · pos_embed[tap_i]             the learned √P×√P grid resampled to the image's patch
//!                                             grid: bilinear, align_corners (the corners meet)
//! for each block:
//!     x += W_o · Attn(rope2d(q), rope2d(k), v)     LN1(x) → qkv; bidirectional over the image's patches
//!     x += fc2(gelu_tanh(fc1(LN2(x))))
//! y  = fc2(gelu(fc1(LN(x) as [N/4, 4D])))     the merger: 2×2 adjacent patches (merge-block order)
//!                                             become one token of the text model's width
//! ```
//!
//! rope2d rotates pairs (i, i + d/2) of a head: the first d/4 frequencies by the patch's row, the
//! next d/4 by its column, θ_j = theta^(−2j/(d/2)). Patches arrive in merge-block order
//! (`solo_model::image`), so a patch's (row, col) is decoded from its index the same way.
//!
//! Qwen3.5/3.6's tower feeds the decoder only the merged tokens: no DeepStack-style per-layer
//! features (transformers' `Qwen3_5MoeModel` scatters `pooler_output` into the embeddings and
//! nothing else).
//!
//! Notation: N patches, D = hidden_size, d = head dim, H heads, m = spatial_merge_size.

use crate::ops::{dot, matmul, softmax};
use rayon::prelude::*;
use solo_model::image::ImagePatches;
use solo_model::vision::{LayerNormWeights, Linear, VisionConfig, VisionWeights};

/// Merged image tokens [N/m², out_hidden_size] for one image's patches.
pub fn encode_image(cfg: &VisionConfig, w: &VisionWeights, img: &ImagePatches) -> Vec<f32> {
    let d_model = cfg.hidden_size;
    let n = img.grid.iter().product::<usize>();
    assert_eq!(img.values.len(), n * cfg.patch_len(), "patches do not match grid {:?}", img.grid);
    let rows_cols = patch_rows_cols(img.grid, cfg.spatial_merge_size);

    // Patch embedding and the resampled position grid.
    let mut x = matmul(&img.values, &w.patch_embed);
    add_bias(&mut x, &w.patch_embed_bias.to_f32());
    let pos = position_embeddings(cfg, w, img.grid, &rows_cols);
    for (xi, pi) in x.iter_mut().zip(&pos) {
        *xi += pi;
    }

    let rope = VisionRope::new(cfg, &rows_cols);
    let frame = img.grid[1] * img.grid[2];
    for block in &w.blocks {
        let a = layer_norm(&x, &block.norm1);
        let a = attention(cfg, block, &a, &rope, frame);
        add(&mut x, &a);
        let a = layer_norm(&x, &block.norm2);
        let mut a = linear(&a, &block.fc1);
        a.iter_mut().for_each(|v| *v = if cfg.gelu_tanh { gelu_tanh(*v) } else { gelu_erf(*v) });
        add(&mut x, &linear(&a, &block.fc2));
    }

    // The merger: each group of m² consecutive patches is one token.
    let x = layer_norm(&x, &w.merger_norm);
    debug_assert_eq!(x.len() % (d_model * cfg.spatial_merge_size.pow(2)), 0);
    let mut y = linear(&x, &w.merger_fc1);
    y.iter_mut().for_each(|v| *v = gelu_erf(*v));
    linear(&y, &w.merger_fc2)
}

/// (row, col) of each patch in merge-block order: index = ((bh·(W/m) + bw)·m + ih)·m + iw,
/// repeated per frame.
pub fn patch_rows_cols(grid: [usize; 3], m: usize) -> Vec<(usize, usize)> {
    let [t, h, w] = grid;
    let mut out = Vec::with_capacity(t * h * w);
    for _ in 0..t {
        for bh in 0..h / m {
            for bw in 0..w / m {
                for ih in 0..m {
                    for iw in 0..m {
                        out.push((bh * m + ih, bw * m + iw));
                    }
                }
            }
        }
    }
    out
}

/// The learned position grid (side s) resampled to the image's h × w patches: bilinear with
/// align_corners, i.e. source coordinate idx·(s − 1)/(size − 1), taps floor and floor + 1
/// clamped to the grid, weights 1 − distance (transformers' `get_vision_interpolation_indices_and_weights`).
fn position_embeddings(
    cfg: &VisionConfig,
    w: &VisionWeights,
    grid: [usize; 3],
    rows_cols: &[(usize, usize)],
) -> Vec<f32> {
    let (s, d) = (cfg.position_grid_side(), cfg.hidden_size);
    let table = w.pos_embed.to_f32();
    let axis = |idx: usize, size: usize| -> [(usize, f32); 2] {
        let src = (idx as f32 * (s - 1) as f32) / (size.max(2) - 1) as f32;
        let floor = src.floor();
        let mut taps = [(0, 0.0); 2];
        for (o, tap) in taps.iter_mut().enumerate() {
            let raw = floor as i64 + o as i64;
            let weight = (1.0 - (src - floor - o as f32).abs()).max(0.0);
            *tap = (raw.clamp(0, s as i64 - 1) as usize, weight);
        }
        taps
    };
    let mut out = vec![0.0f32; rows_cols.len() * d];
    for (row_out, &(r, c)) in out.chunks_mut(d).zip(rows_cols) {
        for (hi, hw) in axis(r, grid[1]) {
            for (wi, ww) in axis(c, grid[2]) {
                let weight = hw * ww;
                let e = &table[(hi * s + wi) * d..][..d];
                for (o, v) in row_out.iter_mut().zip(e) {
                    *o += v * weight;
                }
            }
        }
    }
    out
}

/// cos and sin [N, d/2] of each patch's 2-D rotary angles.
struct VisionRope {
    cos: Vec<f32>,
    sin: Vec<f32>,
    half: usize,
}

impl VisionRope {
    fn new(cfg: &VisionConfig, rows_cols: &[(usize, usize)]) -> Self {
        let d = cfg.head_dim();
        let (half, quarter) = (d / 2, d / 4);
        let inv_freq: Vec<f32> =
            (0..quarter).map(|j| (1.0 / cfg.rope_theta.powf((2 * j) as f64 / half as f64)) as f32).collect();
        let (mut cos, mut sin) =
            (Vec::with_capacity(rows_cols.len() * half), Vec::with_capacity(rows_cols.len() * half));
        for &(r, c) in rows_cols {
            for i in 0..half {
                let angle = if i < quarter { r as f32 * inv_freq[i] } else { c as f32 * inv_freq[i - quarter] };
                cos.push(angle.cos());
                sin.push(angle.sin());
            }
        }
        VisionRope { cos, sin, half }
    }

    /// Rotates one head of patch `p`: (a, b) = (x_i, x_{i+d/2}) → (a·cos − b·sin, b·cos + a·sin).
    fn apply(&self, head: &mut [f32], p: usize) {
        let (cos, sin) = (&self.cos[p * self.half..][..self.half], &self.sin[p * self.half..][..self.half]);
        for i in 0..self.half {
            let (a, b) = (head[i], head[i + self.half]);
            head[i] = a * cos[i] - b * sin[i];
            head[i + self.half] = b * cos[i] + a * sin[i];
        }
    }
}

/// Multi-head attention of x [N, D] (already normalised) within each frame of `frame` patches,
/// every patch seeing every other; returns W_o · o + b.
fn attention(
    cfg: &VisionConfig,
    block: &solo_model::vision::VisionBlockWeights,
    x: &[f32],
    rope: &VisionRope,
    frame: usize,
) -> Vec<f32> {
    let (dm, heads, d) = (cfg.hidden_size, cfg.num_heads, cfg.head_dim());
    let qkv = linear(x, &block.qkv); // [N, 3, H, d]
    let n = x.len() / dm;
    let (mut q, mut k, mut v) = (Vec::with_capacity(n * dm), Vec::with_capacity(n * dm), Vec::with_capacity(n * dm));
    for row in qkv.chunks(3 * dm) {
        q.extend_from_slice(&row[..dm]);
        k.extend_from_slice(&row[dm..2 * dm]);
        v.extend_from_slice(&row[2 * dm..]);
    }
    for p in 0..n {
        for h in 0..heads {
            rope.apply(&mut q[(p * heads + h) * d..][..d], p);
            rope.apply(&mut k[(p * heads + h) * d..][..d], p);
        }
    }
    let scale = 1.0 / (d as f32).sqrt();
    let mut o = vec![0.0f32; n * dm]; // [N, H, d]
    o.par_chunks_mut(d).enumerate().for_each(|(i, out)| {
        let (p, h) = (i / heads, i % heads);
        let first = p / frame * frame;
        let qh = &q[i * d..][..d];
        let mut scores: Vec<f32> =
            (first..first + frame).map(|s| dot(qh, &k[(s * heads + h) * d..][..d]) * scale).collect();
        softmax(&mut scores);
        for (j, ps) in scores.iter().enumerate() {
            let vs = &v[((first + j) * heads + h) * d..][..d];
            for c in 0..d {
                out[c] += ps * vs[c];
            }
        }
    });
    linear(&o, &block.proj)
}

/// y = W x + b over rows.
fn linear(x: &[f32], l: &Linear) -> Vec<f32> {
    let mut y = matmul(x, &l.weight);
    add_bias(&mut y, &l.bias.to_f32());
    y
}

fn add_bias(y: &mut [f32], b: &[f32]) {
    for row in y.chunks_mut(b.len()) {
        for (v, bi) in row.iter_mut().zip(b) {
            *v += bi;
        }
    }
}

fn add(a: &mut [f32], b: &[f32]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

/// LayerNorm over each row (eps 1e-6, biased variance), with weight and bias.
fn layer_norm(x: &[f32], ln: &LayerNormWeights) -> Vec<f32> {
    let (w, b) = (ln.weight.to_f32(), ln.bias.to_f32());
    let n = w.len();
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(n) {
        let mean = row.iter().sum::<f32>() / n as f32;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n as f32;
        let inv = 1.0 / (var + 1e-6).sqrt();
        out.extend(row.iter().zip(w.iter().zip(&b)).map(|(v, (wi, bi))| (v - mean) * inv * wi + bi));
    }
    out
}

/// GELU, tanh approximation (`gelu_pytorch_tanh`).
fn gelu_tanh(x: f32) -> f32 {
    const C: f32 = 0.797_884_6; // √(2/π)
    0.5 * x * (1.0 + (C * (x + 0.044_715 * x * x * x)).tanh())
}

/// GELU with the error function (`nn.GELU()`), in f64.
fn gelu_erf(x: f32) -> f32 {
    let x = x as f64;
    (0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2))) as f32
}
