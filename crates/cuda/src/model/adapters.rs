//! LoRA adapters on the GPU model (`ops::lora`): an adapter is uploaded on its first sequence
//! and kept while the caller holds it (the server: while it serves it), so its sequences share
//! one copy and their decode graphs stay captured; freed once the caller and every sequence
//! (or prefix-cache snapshot) that ran it have let go.

use super::CudaModel;
use crate::ops::lora::LoraGpu;
use anyhow::{ensure, Result};
use solo_model::lora::LoraAdapter;
use std::sync::Arc;

impl CudaModel {
    /// `adapter` in GPU memory: the copy made for an earlier sequence, or a new one.
    pub(crate) fn upload_adapter(&self, adapter: &Arc<LoraAdapter>) -> Result<Arc<LoraGpu>> {
        ensure!(
            adapter.layers.len() == self.config.num_hidden_layers,
            "the LoRA adapter {} was loaded for another model",
            adapter.dir.display()
        );
        let mut uploads = self.adapters.borrow_mut();
        if let Some((_, held)) = uploads.iter().find(|(a, _)| std::ptr::eq(a.as_ptr(), Arc::as_ptr(adapter))) {
            return Ok(held.clone());
        }
        let lora = Arc::new(LoraGpu::upload(&self.gpu, adapter, self.scratch.max_tokens)?);
        uploads.push((Arc::downgrade(adapter), lora.clone()));
        Ok(lora)
    }

    /// Lets go of the copies of adapters the caller has dropped (`Backend::set_adapter`).
    pub(crate) fn drop_released_adapters(&self) {
        self.adapters.borrow_mut().retain(|(a, _)| a.strong_count() > 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testutil::rel_err;
    use crate::synthetic::{adapted_matrix, random_adapter, random_model};
    use solo_model::{Backend, Logits, Precision};

    /// Writes W + s·B·A (rounded to bf16) over each matrix `adapter` adapts.
    fn merge(model: &CudaModel, adapter: &LoraAdapter) {
        let gpu = &model.gpu;
        for (i, l) in adapter.layers.iter().enumerate() {
            for (&t, p) in &l.linears {
                let m = adapted_matrix(model, i, t);
                let mut w = crate::ops::testutil::bf16_from_bytes(&gpu.download(m.ptr, m.rows * m.cols * 2).unwrap());
                let (a, b) = (p.a.to_f32(), p.b.to_f32());
                let rank = p.rank();
                for r in 0..m.rows {
                    for k in 0..rank {
                        let bk = p.scale * b[r * rank + k];
                        let (row, ak) = (&mut w[r * m.cols..(r + 1) * m.cols], &a[k * m.cols..(k + 1) * m.cols]);
                        row.iter_mut().zip(ak).for_each(|(x, y)| *x += bk * y);
                    }
                }
                gpu.write(m.ptr, &crate::ops::testutil::bf16_bytes(&w)).unwrap();
            }
        }
    }

    fn bits(a: &[f32]) -> Vec<u32> {
        a.iter().map(|v| v.to_bits()).collect()
    }

    /// A sequence with an adapter of the mixers' projections and the router: its prefill and
    /// decode steps (the graph) give the logits of the base model whose matrices hold the merged
    /// W + s·B·A, up to bf16's rounding of the merge; its decode steps are its one-token
    /// prefills' bits; an adapter whose B is zero gives the base model's bits; a batch of a
    /// sequence with the adapter and one without gives each its own step.
    #[test]
    #[ignore = "needs a GPU"]
    fn adapted_steps_match_merged_weights() {
        let model = random_model(4, 256, Precision::Bf16).unwrap();
        let prompt: Vec<u32> = (0..40u32).map(|i| i * 7919 % 200_000).collect();
        let tokens = [11u32, 22, 33, 44];
        let run = |lora: Option<Arc<LoraAdapter>>| {
            let mut s = model.try_new_state().unwrap();
            model.set_adapter(&mut s, lora).unwrap();
            let mut rows = vec![model.prefill(&mut s, &prompt, Logits::Last).unwrap()];
            let mut one = model.copy_state(&s).unwrap();
            for &t in &tokens {
                let step = model.decode(&mut s, t).unwrap();
                let prefilled = model.prefill(&mut one, &[t], Logits::Last).unwrap();
                assert_eq!(bits(&step), bits(&prefilled), "decode step vs one-token prefill, token {t}");
                rows.push(step);
            }
            rows
        };
        let base = run(None);
        let zero = run(Some(Arc::new(random_adapter(&model, 16, 1, 0.0, true))));
        for (i, (b, z)) in base.iter().zip(&zero).enumerate() {
            assert_eq!(bits(b), bits(z), "row {i}: an adapter whose B is zero changes the logits");
        }
        let lora = Arc::new(random_adapter(&model, 16, 2, 0.05, true));
        // a batch of a sequence with the adapter and one without: each its own decode step
        let (mut with, mut without) = (model.try_new_state().unwrap(), model.try_new_state().unwrap());
        model.set_adapter(&mut with, Some(lora.clone())).unwrap();
        for s in [&mut with, &mut without] {
            model.prefill(s, &prompt, Logits::Last).unwrap();
        }
        let batch = model.decode_batch(&mut [&mut with, &mut without], &[tokens[0], tokens[0]]).unwrap();
        let adapted = run(Some(lora.clone()));
        let vocab = model.config.vocab_size;
        assert_eq!(bits(&batch[..vocab]), bits(&adapted[1]), "the batch's adapted row");
        assert_eq!(bits(&batch[vocab..]), bits(&base[1]), "the batch's base row");
        merge(&model, &lora);
        let merged = run(None);
        for (i, ((a, m), b)) in adapted.iter().zip(&merged).zip(&base).enumerate() {
            let (err, moved) = (rel_err(a, m), rel_err(b, m));
            eprintln!("row {i}: adapter vs merged {err:.2e}; base vs merged {moved:.2e}");
            assert!(moved > 2e-2, "row {i}: the adapter hardly moves the logits ({moved:.2e})");
            assert!(err < 2e-2 && err < 0.2 * moved, "row {i}: adapter vs merged {err:.2e} (base {moved:.2e})");
        }
    }
}
