//! LoRA adapters on the GPU model (`ops::lora`): a sequence's adapter is uploaded once and shared
//! by every sequence that runs it, and freed with the last one.

use super::CudaModel;
use crate::ops::lora::LoraGpu;
use anyhow::{ensure, Result};
use solo_model::lora::LoraAdapter;
use std::sync::Arc;

impl CudaModel {
    /// `adapter` in GPU memory: the upload a sequence already holds, or a new one.
    pub(crate) fn upload_adapter(&self, adapter: &LoraAdapter) -> Result<Arc<LoraGpu>> {
        ensure!(
            adapter.layers.len() == self.config.num_hidden_layers,
            "the LoRA adapter {} was loaded for another model",
            adapter.dir.display()
        );
        let mut uploads = self.adapters.borrow_mut();
        uploads.retain(|w| w.strong_count() > 0);
        if let Some(held) = uploads.iter().filter_map(|w| w.upgrade()).find(|l| l.adapter == adapter.id) {
            return Ok(held);
        }
        let lora = Arc::new(LoraGpu::upload(&self.gpu, adapter, self.scratch.max_tokens)?);
        uploads.push(Arc::downgrade(&lora));
        Ok(lora)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testutil::{random, rel_err};
    use crate::synthetic::random_model;
    use crate::weights::{Matrix, MixerGpu};
    use solo_model::lora::{LayerLora, LoraPair, Target};
    use solo_model::{Backend, Logits, Precision, Tensor};

    const RANK: usize = 16;

    /// The bf16 matrix `target` adapts in layer `i` (the router's rows and the shared expert's
    /// gate are rows of one matrix).
    fn adapted(model: &CudaModel, i: usize, target: Target) -> Matrix {
        let layer = &model.weights.layers[i];
        let router = &layer.moe.router;
        let m = match (&layer.mixer, target) {
            (_, Target::Router) => Matrix::bf16(router.ptr, 256, router.cols),
            (_, Target::SharedExpertGate) => Matrix::bf16(router.ptr + (256 * router.cols * 2) as u64, 1, router.cols),
            (MixerGpu::GatedDeltaNet(g), Target::InProjQkv) => g.in_proj_qkv,
            (MixerGpu::GatedDeltaNet(g), Target::InProjZ) => g.in_proj_z,
            (MixerGpu::GatedDeltaNet(g), Target::InProjA) => g.in_proj_a,
            (MixerGpu::GatedDeltaNet(g), Target::OutProj) => g.out_proj,
            (MixerGpu::FullAttention(a), Target::QProj) => a.q_proj,
            (MixerGpu::FullAttention(a), Target::VProj) => a.v_proj,
            (MixerGpu::FullAttention(a), Target::OProj) => a.o_proj,
            _ => panic!("layer {i}: no {target:?} here"),
        };
        assert!(m.is_bf16());
        m
    }

    fn targets(model: &CudaModel, i: usize) -> Vec<Target> {
        let mixer = match model.weights.layers[i].mixer {
            MixerGpu::GatedDeltaNet(_) => {
                [Target::InProjQkv, Target::InProjZ, Target::InProjA, Target::OutProj].to_vec()
            }
            MixerGpu::FullAttention(_) => [Target::QProj, Target::VProj, Target::OProj].to_vec(),
        };
        [mixer, vec![Target::Router, Target::SharedExpertGate]].concat()
    }

    /// A random rank-16 adapter of the mixers' projections and the router, scale 2; B's entries
    /// `b` · U(±√(3/16)), so that the term is ~`2b` of the product's size.
    fn adapter(model: &CudaModel, seed: u64, b: f32) -> LoraAdapter {
        let tensor = |seed, shape: [usize; 2], scale: f32| {
            Tensor::from_f32_as_bf16(shape.to_vec(), &random(seed, shape[0] * shape[1], scale))
        };
        let layers = (0..model.weights.layers.len())
            .map(|i| {
                let linears = targets(model, i)
                    .into_iter()
                    .enumerate()
                    .map(|(j, t)| {
                        let m = adapted(model, i, t);
                        let s = seed * 1000 + (i * 10 + j) as u64 * 2;
                        let a = tensor(s, [RANK, m.cols], (3.0 / m.cols as f32).sqrt());
                        let b = tensor(s + 1, [m.rows, RANK], b * (3.0 / RANK as f32).sqrt());
                        (t, LoraPair { a, b, scale: 2.0 })
                    })
                    .collect();
                LayerLora { linears, experts: Vec::new() }
            })
            .collect();
        LoraAdapter { id: 1_000_000 + seed, dir: "synthetic".into(), rank: RANK, layers, matrices: 0, bytes: 0 }
    }

    /// Writes W + s·B·A (rounded to bf16) over each matrix `adapter` adapts.
    fn merge(model: &CudaModel, adapter: &LoraAdapter) {
        let gpu = &model.gpu;
        for (i, l) in adapter.layers.iter().enumerate() {
            for (&t, p) in &l.linears {
                let m = adapted(model, i, t);
                let mut w = crate::ops::testutil::bf16_from_bytes(&gpu.download(m.ptr, m.rows * m.cols * 2).unwrap());
                let (a, b) = (p.a.to_f32(), p.b.to_f32());
                for r in 0..m.rows {
                    for k in 0..RANK {
                        let bk = p.scale * b[r * RANK + k];
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
        let zero = run(Some(Arc::new(adapter(&model, 1, 0.0))));
        for (i, (b, z)) in base.iter().zip(&zero).enumerate() {
            assert_eq!(bits(b), bits(z), "row {i}: an adapter whose B is zero changes the logits");
        }
        let lora = Arc::new(adapter(&model, 2, 0.05));
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
