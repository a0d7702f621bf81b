//! The small f32 operations every layer is built from. Activations are row-major `[T, width]`.

use rayon::prelude::*;
use solo_model::Tensor;

/// Output rows of a weight handled by one rayon task in `matmul`.
const ROWS_PER_TASK: usize = 16;

/// `y[T, out] = x[T, in] · Wᵀ` for a weight `W: [out, in]` of any stored float dtype.
///
/// Each weight row is converted to f32 once and used for every token; tasks split the output rows.
pub fn matmul(x: &[f32], w: &Tensor) -> Vec<f32> {
    let (out_dim, in_dim) = (w.shape[0], w.row_len());
    assert_eq!(x.len() % in_dim, 0, "matmul: input width does not match weight {:?}", w.shape);
    let tokens = x.len() / in_dim;
    // Computed transposed ([out, T]) so that each task writes one contiguous block.
    let mut yt = vec![0.0f32; out_dim * tokens];
    if tokens == 0 {
        return yt;
    }
    yt.par_chunks_mut(tokens * ROWS_PER_TASK).enumerate().for_each(|(task, block)| {
        let mut row = vec![0.0f32; in_dim];
        for (i, y_row) in block.chunks_mut(tokens).enumerate() {
            w.read_row_f32(task * ROWS_PER_TASK + i, &mut row);
            for (t, y) in y_row.iter_mut().enumerate() {
                *y = dot(&x[t * in_dim..(t + 1) * in_dim], &row);
            }
        }
    });
    transpose(&yt, out_dim, tokens)
}

/// `[rows, cols]` → `[cols, rows]`.
pub fn transpose(a: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; a.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = a[r * cols + c];
        }
    }
    out
}

/// Dot product with eight partial sums (faster, and closer to a tree sum than a serial loop).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// Zero-centred RMSNorm over each row of `x` (width = `w.len()`): `x · rsqrt(mean(x²) + eps) · (1 + w)`.
/// Used for the input/post/final norms and q_norm/k_norm.
pub fn rms_norm_one_plus(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    let mut out = x.to_vec();
    for row in out.chunks_mut(w.len()) {
        let inv = inv_rms(row, eps);
        for (v, wi) in row.iter_mut().zip(w) {
            *v *= inv * (1.0 + wi);
        }
    }
    out
}

/// `1 / sqrt(mean(x²) + eps)`.
pub fn inv_rms(x: &[f32], eps: f32) -> f32 {
    let mean_sq = x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32;
    1.0 / (mean_sq + eps).sqrt()
}

pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// PyTorch's softplus (beta 1, threshold 20: linear above it).
pub fn softplus(x: f32) -> f32 {
    if x > 20.0 {
        x
    } else {
        x.exp().ln_1p()
    }
}

/// In-place softmax of one row, max-subtracted.
pub fn softmax(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for v in row.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    for v in row.iter_mut() {
        *v /= sum;
    }
}

/// `a += b`, elementwise.
pub fn add_in_place(a: &mut [f32], b: &[f32]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose_round_trips() {
        let a: Vec<f32> = (0..6).map(|i| i as f32).collect();
        let t = transpose(&a, 2, 3);
        assert_eq!(t, vec![0., 3., 1., 4., 2., 5.]);
        assert_eq!(transpose(&t, 3, 2), a);
    }

    #[test]
    fn softmax_sums_to_one_and_keeps_order() {
        let mut r = vec![1.0, 3.0, -2.0, 9.0];
        softmax(&mut r);
        assert!((r.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!(r[3] > 0.99 && r[1] > r[0] && r[0] > r[2]);
    }

    #[test]
    fn dot_matches_serial_sum() {
        let a: Vec<f32> = (0..19).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..19).map(|i| 1.0 - i as f32 * 0.25).collect();
        let serial: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - serial).abs() < 1e-4);
    }
}
