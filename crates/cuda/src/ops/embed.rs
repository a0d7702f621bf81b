//! Token embedding lookup (`embed.cu`).

use crate::kernels::{kernel_file, Launch};
use crate::runtime::{DevPtr, Gpu};
use crate::weights::Matrix;
use anyhow::Result;

kernel_file! {
    /// `embed.cu`'s kernels.
    pub mod embed_cu = "embed.cu" {
        fn embed_rows(table: DevPtr, ids: DevPtr, h: DevPtr, width: i32);
    }
}

/// h (f32 [t, width]) = table[ids] for ids: i32 [t] on the device (a table in a row format:
/// `gemv_q::embed_q`).
pub fn embed(gpu: &Gpu, table: &Matrix, ids: DevPtr, t: usize, h: DevPtr) -> Result<()> {
    if table.format.is_some() {
        return crate::ops::gemv_q::embed_q(gpu, table, ids, t, h);
    }
    embed_cu::embed_rows(gpu, Launch::new((t as u32, 1, 1), 256, 0), table.ptr, ids, h, table.cols as i32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testutil::*;

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn embed_gathers_rows() {
        let gpu = gpu();
        let (vocab, width) = (1000, 2048);
        let table = round_bf16(&random(1, vocab * width, 1.0));
        let ids = [7i32, 999, 0, 7];
        let tb = gpu.upload(&bf16_bytes(&table)).unwrap();
        let ib = gpu.upload_i32(&ids).unwrap();
        let hb = gpu.upload_f32(&vec![f32::NAN; ids.len() * width]).unwrap();
        embed(gpu, &Matrix::bf16(tb.ptr(), vocab, width), ib.ptr(), ids.len(), hb.ptr()).unwrap();
        let got = gpu.download_f32(hb.ptr(), ids.len() * width).unwrap();
        let want: Vec<f32> =
            ids.iter().flat_map(|&i| table[i as usize * width..(i as usize + 1) * width].to_vec()).collect();
        assert_eq!(got, want);
    }
}
