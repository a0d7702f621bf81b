//! Zero-centred RMSNorm, alone or fused with the residual add before it (`norm.cu`).

use crate::kernels::{kernel_file, Launch};
use crate::runtime::{DevPtr, Gpu};
use crate::weights::Vector;
use anyhow::{ensure, Result};

kernel_file! {
    /// `norm.cu`'s kernels.
    pub mod norm_cu = "norm.cu" {
        fn rms_norm_bf16(h: DevPtr, w1p: DevPtr, out: DevPtr, eps: f32);
        fn add_rms_norm_bf16(h: DevPtr, delta: DevPtr, w1p: DevPtr, out: DevPtr, eps: f32);
        fn rms_norm_twice_bf16(h: DevPtr, w1p: DevPtr, w2p: DevPtr, out: DevPtr, eps: f32);
    }
}

/// The kernels' row width (the model's hidden size).
const WIDTH: usize = crate::kernels::widths::HIDDEN;

/// out (bf16 [t, 2048]) = RMSNorm(h (f32 [t, 2048])) with weight `w1p` (= 1 + w).
pub fn rms_norm(gpu: &Gpu, h: DevPtr, w1p: &Vector, t: usize, eps: f32, out: DevPtr) -> Result<()> {
    ensure!(w1p.len == WIDTH, "rms_norm: width {} (the kernel's is {WIDTH})", w1p.len);
    norm_cu::rms_norm_bf16(gpu, Launch::new((t as u32, 1, 1), 256, 0), h, w1p.ptr, out, eps)
}

/// h += delta; out = RMSNorm(h). h, delta: f32 [t, 2048]; out: bf16 [t, 2048].
pub fn add_rms_norm(gpu: &Gpu, h: DevPtr, delta: DevPtr, w1p: &Vector, t: usize, eps: f32, out: DevPtr) -> Result<()> {
    ensure!(w1p.len == WIDTH, "add_rms_norm: width {} (the kernel's is {WIDTH})", w1p.len);
    norm_cu::add_rms_norm_bf16(gpu, Launch::new((t as u32, 1, 1), 256, 0), h, delta, w1p.ptr, out, eps)
}

/// out (bf16 [t, 2048]) = RMSNorm(RMSNorm(h; w1p); w2p), the inner one in f32.
pub fn rms_norm_twice(gpu: &Gpu, h: DevPtr, w1p: &Vector, w2p: &Vector, t: usize, eps: f32, out: DevPtr) -> Result<()> {
    ensure!(
        w1p.len == WIDTH && w2p.len == WIDTH,
        "rms_norm_twice: widths {} / {} (the kernel's is {WIDTH})",
        w1p.len,
        w2p.len
    );
    norm_cu::rms_norm_twice_bf16(gpu, Launch::new((t as u32, 1, 1), 256, 0), h, w1p.ptr, w2p.ptr, out, eps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testutil::*;

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn add_rms_norm_matches_cpu() {
        let gpu = gpu();
        let (t, width) = (5, 2048);
        let h = random(1, t * width, 3.0);
        let delta = random(2, t * width, 1.0);
        let w = random(3, width, 0.3);
        let w1p: Vec<f32> = w.iter().map(|x| 1.0 + x).collect();
        let mut sum = h.clone();
        solo_cpu::ops::add_in_place(&mut sum, &delta);
        let want = round_bf16(&solo_cpu::ops::rms_norm_one_plus(&sum, &w, 1e-6));

        let hb = gpu.upload_f32(&h).unwrap();
        let db = gpu.upload_f32(&delta).unwrap();
        let wb = gpu.upload_f32(&w1p).unwrap();
        let out = gpu.upload(&bf16_bytes(&vec![f32::NAN; t * width])).unwrap();
        let w1p = Vector { ptr: wb.ptr(), len: width };
        add_rms_norm(gpu, hb.ptr(), db.ptr(), &w1p, t, 1e-6, out.ptr()).unwrap();
        let got = bf16_from_bytes(&gpu.download(out.ptr(), t * width * 2).unwrap());
        assert_close("add_rms_norm output", &got, &want, 4e-3);
        assert_close("residual after add", &gpu.download_f32(hb.ptr(), t * width).unwrap(), &sum, 1e-7);

        rms_norm(gpu, hb.ptr(), &w1p, t, 1e-6, out.ptr()).unwrap();
        let got = bf16_from_bytes(&gpu.download(out.ptr(), t * width * 2).unwrap());
        assert_close("rms_norm output", &got, &want, 4e-3);
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn rms_norm_twice_matches_cpu() {
        let gpu = gpu();
        let (t, width) = (3, 2048);
        let h = random(4, t * width, 3.0);
        let (w1, w2) = (random(5, width, 0.3), random(6, width, 0.3));
        let inner = solo_cpu::ops::rms_norm_one_plus(&h, &w1, 1e-6);
        let want = round_bf16(&solo_cpu::ops::rms_norm_one_plus(&inner, &w2, 1e-6));
        let hb = gpu.upload_f32(&h).unwrap();
        let plus_one = |w: &[f32]| w.iter().map(|x| 1.0 + x).collect::<Vec<f32>>();
        let (b1, b2) = (gpu.upload_f32(&plus_one(&w1)).unwrap(), gpu.upload_f32(&plus_one(&w2)).unwrap());
        let out = gpu.upload(&bf16_bytes(&vec![f32::NAN; t * width])).unwrap();
        let (v1, v2) = (Vector { ptr: b1.ptr(), len: width }, Vector { ptr: b2.ptr(), len: width });
        rms_norm_twice(gpu, hb.ptr(), &v1, &v2, t, 1e-6, out.ptr()).unwrap();
        let got = bf16_from_bytes(&gpu.download(out.ptr(), t * width * 2).unwrap());
        assert_close("rms_norm_twice output", &got, &want, 4e-3);
    }
}
