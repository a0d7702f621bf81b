//! Token embedding lookup (`embed.cu`).

use crate::kernels::Source;
use crate::runtime::{Arg, DevPtr, Gpu};
use crate::weights::Matrix;
use anyhow::Result;

pub const SOURCE: Source = Source { file: "embed.cu", text: include_str!("embed.cu"), functions: &["embed_rows"] };

/// h (f32 [t, width]) = table[ids] for ids: i32 [t] on the device.
pub fn embed(gpu: &Gpu, table: &Matrix, ids: DevPtr, t: usize, h: DevPtr) -> Result<()> {
    gpu.launch(
        "embed_rows",
        (t as u32, 1, 1),
        256,
        0,
        &[Arg::Ptr(table.ptr), Arg::Ptr(ids), Arg::Ptr(h), Arg::I32(table.cols as i32)],
    )
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
