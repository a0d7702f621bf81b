//! Which of a checkpoint's matrices the CUDA kernels read as stored (int4 rows, a GGUF file's
//! Q4_K / Q5_K / Q6_K / Q8_0 blocks) rather than as bf16, and the GPU memory that takes: the
//! rules `weights.rs`'s uploads follow, and `repacked_bytes`, which counts them before anything
//! is converted (`--backend auto`, and the load's one-line refusal when the card is too small).

use crate::kquant::KQuant;
use crate::runtime::Gpu;
use crate::weights::RowFormat;
use anyhow::{bail, Result};
use solo_model::weights::{AttentionWeights, ExpertWeights, Mixer};
use solo_model::{DType, ModelWeights, Tensor};

/// The kernels' formats of a GGUF layer's routed experts, when they read them as stored: every
/// gate and up matrix of one type and every down matrix of one, each Q4_K, Q5_K, Q6_K or Q8_0. Other types
/// (and mixes) go up as bf16.
pub fn kquant_formats(experts: &[ExpertWeights]) -> Option<(KQuant, KQuant)> {
    // (the kernels' widths are multiples of 256; a tiny test model's may not be)
    let kind = |t: &Tensor| match t.dtype {
        DType::Ggml(g) if t.row_len().is_multiple_of(256) => KQuant::of(g),
        _ => None,
    };
    let first = experts.first()?;
    let (gate_up, down) = (kind(&first.gate)?, kind(&first.down)?);
    experts
        .iter()
        .all(|e| kind(&e.gate) == Some(gate_up) && kind(&e.up) == Some(gate_up) && kind(&e.down) == Some(down))
        .then_some((gate_up, down))
}

/// The (gate/up, down) formats `Uploader::experts` keeps a layer's routed experts packed in:
/// int4 when every matrix is int4, else the GGUF k-quants of `kquant_formats`; `None` when they go
/// up bf16 or FP8.
pub(crate) fn packed_formats(experts: &[ExpertWeights]) -> Option<(RowFormat, RowFormat)> {
    if !experts.is_empty() && experts.iter().all(|e| [&e.gate, &e.up, &e.down].iter().all(|t| t.dtype == DType::I4)) {
        return Some((RowFormat::Int4, RowFormat::Int4));
    }
    kquant_formats(experts).map(|(gate_up, down)| (RowFormat::K(gate_up), RowFormat::K(down)))
}

/// A GGUF model's ggml types, largest first (`Q4_K, Q6_K, Q8_0`); `None` for a safetensors one.
pub(crate) fn repacked_from(w: &ModelWeights) -> Option<String> {
    let types = w.ggml_types();
    (!types.is_empty()).then(|| types.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", "))
}

/// GPU bytes of the weights `ModelGpu::upload` makes of a GGUF model `w`: every matrix 2 bytes an
/// element (bf16; embed_tokens and lm_head apart even when tied), vectors 4, except what the
/// kernels read as stored, which takes its rows in the file's format: the routed experts of a
/// layer (`kquant_formats`) and its shared expert's rows beside its bf16 copy, the mixers'
/// stacked in-projections (an attention layer's v apart: `v_apart_formats`), the output
/// projections that share the experts' format (`Uploader::mixer_out`), the embedding and the
/// lm_head (`as_stored_format`); the vision tower aside.
pub fn repacked_bytes(w: &ModelWeights) -> usize {
    fn as_stored(bytes: &mut usize, parts: &[(&Tensor, RowFormat)]) {
        for (t, k) in parts {
            *bytes = *bytes - 2 * t.numel() + t.shape[0] * k.row_bytes(t.row_len());
        }
    }
    let mut bytes = bf16_bytes_of(w);
    let stacked = |bytes: &mut usize, parts: &[&Tensor]| {
        if let Some(k) = as_stored_format(parts) {
            as_stored(bytes, &parts.iter().map(|&t| (t, k)).collect::<Vec<_>>());
        }
    };
    stacked(&mut bytes, &[&w.embed_tokens]);
    stacked(&mut bytes, &[&w.lm_head]);
    for layer in w.layers.iter().chain(w.mtp.iter().map(|m| &m.layer)) {
        let w_o = match &layer.mixer {
            Mixer::GatedDeltaNet(g) => {
                stacked(&mut bytes, &[&g.in_proj_qkv, &g.in_proj_z]);
                &g.out_proj
            }
            Mixer::FullAttention(a) => {
                match v_apart_formats(a) {
                    Some((qk, v)) => as_stored(&mut bytes, &[(&a.q_proj, qk), (&a.k_proj, qk), (&a.v_proj, v)]),
                    None => stacked(&mut bytes, &[&a.q_proj, &a.k_proj, &a.v_proj]),
                }
                &a.o_proj
            }
        };
        let experts = &layer.moe.experts;
        if let Some((k, _)) = packed_formats(experts).filter(|&(k, _)| as_stored_format(&[w_o]) == Some(k)) {
            as_stored(&mut bytes, &[(w_o, k)]); // Uploader::mixer_out's rule
        }
        if let Some((gate_up, down)) = kquant_formats(experts) {
            let (gate_up, down) = (RowFormat::K(gate_up), RowFormat::K(down));
            for e in experts {
                as_stored(&mut bytes, &[(&e.gate, gate_up), (&e.up, gate_up), (&e.down, down)]);
            }
            // the shared expert's rows as stored beside its bf16 copy
            let s = &layer.moe.shared_expert;
            if shared_rows_as_stored(s, gate_up, down) {
                bytes += [(&s.gate, gate_up), (&s.up, gate_up), (&s.down, down)]
                    .iter()
                    .map(|(t, f)| t.shape[0] * f.row_bytes(t.row_len()))
                    .sum::<usize>();
            }
        }
    }
    bytes
}

/// The format `Uploader::stacked_as_stored` keeps `parts` in (matrices of one width): int4 when
/// all are int4 in groups of 128 without act-order (the expert kernels' rows), else
/// `KQuant::common` of their ggml types for a width that is a multiple of 256.
pub(crate) fn as_stored_format(parts: &[&Tensor]) -> Option<RowFormat> {
    let cols = parts[0].row_len();
    if parts.iter().any(|p| p.row_len() != cols || p.shape.len() != 2) {
        return None;
    }
    if parts.len() > 1 && parts.iter().any(|p| p.tiled_heads.is_some()) {
        return None; // (one tiled matrix goes up alone: its Matrix carries the order)
    }
    let int4 = |p: &&Tensor| p.int4().is_some_and(|(_, g)| g.group == crate::int4::GROUP && g.perm.is_none());
    if parts.iter().all(int4) && cols.is_multiple_of(crate::int4::GROUP) {
        return Some(RowFormat::Int4);
    }
    let types: Option<Vec<_>> = parts
        .iter()
        .map(|p| match p.dtype {
            DType::Ggml(t) => Some(t),
            _ => None,
        })
        .collect();
    KQuant::common(&types?).filter(|_| cols.is_multiple_of(256)).map(RowFormat::K)
}

/// The formats of an attention layer's q|k stack and of its v kept apart as stored, where the
/// three share no format but the decode GEMV reads v as a tail after q and k (`gemv_q::tail_format`:
/// Q6_K after Q4_K or Q5_K).
pub(crate) fn v_apart_formats(a: &AttentionWeights) -> Option<(RowFormat, RowFormat)> {
    if as_stored_format(&[&a.q_proj, &a.k_proj, &a.v_proj]).is_some() {
        return None;
    }
    let (qk, v) = (as_stored_format(&[&a.q_proj, &a.k_proj])?, as_stored_format(&[&a.v_proj])?);
    crate::ops::gemv_q::tail_format(qk, v).map(|_| (qk, v))
}

/// Whether a layer's shared expert goes up as stored too, beside its bf16 copy
/// (`Uploader::experts`): when its matrices have the packed routed experts' formats.
pub(crate) fn shared_rows_as_stored(shared: &ExpertWeights, gate_up: RowFormat, down: RowFormat) -> bool {
    [(&shared.gate, gate_up), (&shared.up, gate_up), (&shared.down, down)]
        .iter()
        .all(|(t, f)| as_stored_format(&[t]) == Some(*f))
}

/// GPU bytes of `w` all in bf16 (every matrix 2 bytes an element, vectors 4; embed_tokens and
/// lm_head apart even when tied), the vision tower aside.
pub(crate) fn bf16_bytes_of(w: &ModelWeights) -> usize {
    let mut all = vec![&w.embed_tokens, &w.final_norm, &w.lm_head];
    all.extend(w.layers.iter().flat_map(|l| l.tensors()));
    all.extend(w.mtp.iter().flat_map(|m| m.tensors()));
    all.into_iter().map(|t| if t.shape.len() == 1 { 4 } else { 2 } * t.numel()).sum()
}

/// Says what the GGUF weights take on the GPU, and fails in one line, before converting
/// anything, when the card's free memory (or what `--gpu-memory` leaves) cannot hold them.
pub(crate) fn check_repacked_fits(gpu: &Gpu, w: &ModelWeights, types: &str) -> Result<()> {
    let gib = |b: usize| b as f64 / (1u64 << 30) as f64;
    let need = repacked_bytes(w);
    let kept = w.layers.iter().filter(|l| kquant_formats(&l.moe.experts).is_some()).count();
    eprintln!(
        "solo: GGUF {types} ({:.1} GiB in the file) on the GPU: {:.1} GiB (the routed experts of {kept} of {} layers, and the k-quant in- and output projections, embedding and lm_head as stored; the rest bf16)",
        gib(w.bytes()),
        gib(need),
        w.layers.len()
    );
    let (card_free, _) = gpu.ctx.mem_get_info().map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let (free, what) = match gpu.budget_left() {
        Some(left) if left < card_free => (left, "--gpu-memory leaves"),
        _ => (card_free, "the GPU has free"),
    };
    if need > free {
        bail!(
            "the GGUF weights need {:.1} GiB of GPU memory and {what} {:.1} GiB (the CUDA backend keeps Q4_K, Q5_K, Q6_K and Q8_0 experts, mixer projections, embedding and lm_head as stored and repacks the rest to bf16); use --backend cpu, or a GPU with more memory",
            gib(need),
            gib(free)
        );
    }
    Ok(())
}
