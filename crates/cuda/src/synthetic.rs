//! The full-size model (the real config, 40 layers) with random weights made directly in GPU
//! memory, for `solo bench --synthetic [--precision fp8]`. Scales keep activations O(1) like a
//! trained model: matrices U(±√(3/fan_in)), norm weights near 1, decays spread out. FP8 makes
//! the matrices the FP8 release quantises e4m3 with block scales (the rest stays bf16), in the
//! layout `weights.rs` uploads a checkpoint to.

use crate::kernels::{kernel_file, Launch, Seed};
use crate::kquant::KQuant;
use crate::runtime::{DevBuf, DevPtr, Gpu};
use crate::weights::{
    AttentionGpu, ExpertScales, GdnGpu, LayerGpu, Matrix, MixerGpu, ModelGpu, MoeGpu, MtpGpu, Packed, RowFormat,
    SharedExpert, Vector,
};
use anyhow::Result;
use solo_model::lora::{ExpertLora, LayerLora, LoraAdapter, LoraPair, Target};
use solo_model::tensor::TiledHeads;
use solo_model::Tensor;
use solo_model::{LayerKind, ModelConfig, Precision};

kernel_file! {
    /// `synthetic.cu`'s kernels.
    pub mod synthetic_cu = "synthetic.cu" {
        fn fill_random_bf16(dst: DevPtr, n: i64, seed: Seed, center: f32, scale: f32);
        fn fill_random_f32(dst: DevPtr, n: i64, seed: Seed, center: f32, scale: f32);
        fn fill_random_fp8(dst: DevPtr, n: i64, seed: Seed, center: f32, scale: f32);
        fn fill_random_int4_rows(dst: DevPtr, rows: i64, cols: i32, seed: Seed, scale: f32);
        fn fill_random_kquant_rows(dst: DevPtr, rows: i64, cols: i32, format: i32, seed: Seed, scale: f32);
    }
}

/// The real model's config.json (text part), 40 layers or `layers`.
pub fn real_config(layers: usize) -> ModelConfig {
    let text = serde_json_config(layers);
    ModelConfig::from_json(&text).expect("the built-in real config parses")
}

fn serde_json_config(layers: usize) -> String {
    format!(
        r#"{{"model_type": "qwen3_5_moe_text", "hidden_size": 2048, "num_hidden_layers": {layers},
        "full_attention_interval": 4, "vocab_size": 248320, "rms_norm_eps": 1e-6,
        "max_position_embeddings": 262144, "num_attention_heads": 16, "num_key_value_heads": 2,
        "head_dim": 256, "rope_parameters": {{"rope_type": "default", "rope_theta": 10000000,
        "partial_rotary_factor": 0.25}}, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
        "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
        "num_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512, "eos_token_id": 248044}}"#
    )
}

type Fill = fn(&Gpu, Launch, DevPtr, i64, u64, f32, f32) -> Result<()>;

struct Maker<'g> {
    gpu: &'g Gpu,
    seed: u64,
    buffers: Vec<DevBuf>,
    /// Whether the matrices the FP8 release quantises are made e4m3.
    fp8: bool,
    /// Whether the routed experts are made int4 (the GPTQ-Int4 release's shape).
    int4: bool,
    /// With `int4`: the mixers' projections int4 too (the all-linear recipe; the GDN's b | a
    /// rows bf16 apart, as `weights.rs` uploads a checkpoint's).
    int4_all: bool,
    /// A GGUF Q4_K_M file's shape: routed experts gate/up Q4_K, down Q6_K in every other layer
    /// (as llama.cpp's `use_more_bits` gives about half the down matrices 6 bits) and Q4_K
    /// between; the mixers' in-projections, embedding and lm_head as stored (see
    /// `random_weights_as`).
    gguf_q4km: bool,
    /// MoE layers made so far.
    moe_layers: usize,
    /// Attention layers made so far.
    attention_layers: usize,
}

impl<'g> Maker<'g> {
    /// A maker of bf16 weights (no FP8, int4 or GGUF layout) from `seed`.
    fn bf16(gpu: &'g Gpu, seed: u64) -> Self {
        Maker {
            gpu,
            seed,
            buffers: Vec::new(),
            fp8: false,
            int4: false,
            int4_all: false,
            gguf_q4km: false,
            moe_layers: 0,
            attention_layers: 0,
        }
    }

    /// A new buffer of n elements of `elem` bytes, filled by `kernel` (a `synthetic_cu` launcher)
    /// with center + scale · U(−1, 1).
    fn fill(&mut self, kernel: Fill, elem: usize, n: usize, center: f32, scale: f32) -> Result<DevPtr> {
        let buf = self.gpu.alloc(n * elem)?;
        self.seed += 1;
        kernel(self.gpu, Launch::new((4096, 1, 1), 256, 0), buf.ptr(), n as i64, self.seed, center, scale)?;
        let ptr = buf.ptr();
        self.buffers.push(buf);
        Ok(ptr)
    }

    /// A bf16 matrix U(±√(3/cols)).
    fn matrix(&mut self, rows: usize, cols: usize) -> Result<Matrix> {
        let ptr = self.fill(synthetic_cu::fill_random_bf16, 2, rows * cols, 0.0, (3.0 / cols as f32).sqrt())?;
        Ok(Matrix::bf16(ptr, rows, cols))
    }

    /// A matrix the FP8 release quantises: bf16, or e4m3 with block scales (the same spread).
    fn quantised(&mut self, rows: usize, cols: usize) -> Result<Matrix> {
        if !self.fp8 {
            return self.matrix(rows, cols);
        }
        let (ptr, scales) = self.fp8_rows(rows, cols)?;
        Ok(Matrix { ptr, rows, cols, fp8_scales: Some(scales), format: None, tiled_heads: None })
    }

    /// e4m3 [rows, cols] U(±448) and f32 scales [rows/128, cols/128] ≈ √(3/cols)/448, a power of
    /// two: then every q · s is a bf16 value, and prefill's bf16 copy of the weights is exact.
    fn fp8_rows(&mut self, rows: usize, cols: usize) -> Result<(DevPtr, DevPtr)> {
        let ptr = self.fill(synthetic_cu::fill_random_fp8, 1, rows * cols, 0.0, 448.0)?;
        let s = ((3.0 / cols as f32).sqrt() / 448.0).log2().round().exp2();
        let scales = self.fill(synthetic_cu::fill_random_f32, 4, rows.div_ceil(128) * cols.div_ceil(128), s, 0.0)?;
        Ok((ptr, scales))
    }

    /// A buffer of `bytes` that `fill(launch, ptr, seed)` writes: the 4/8-bit rows below.
    fn rows(&mut self, bytes: usize, fill: impl FnOnce(&Gpu, Launch, DevPtr, Seed) -> Result<()>) -> Result<DevPtr> {
        let buf = self.gpu.alloc(bytes)?;
        self.seed += 1;
        fill(self.gpu, Launch::new((4096, 1, 1), 256, 0), buf.ptr(), self.seed)?;
        let ptr = buf.ptr();
        self.buffers.push(buf);
        Ok(ptr)
    }

    /// int4 rows [rows, cols] (`int4.rs`'s layout), w = (q − 8) · s with s ≈ √(3/cols)/8 (an f16).
    fn int4_rows(&mut self, rows: usize, cols: usize) -> Result<DevPtr> {
        let s = (3.0 / cols as f32).sqrt() / 8.0;
        self.rows(rows * crate::int4::row_bytes(cols), |gpu, launch, ptr, seed| {
            synthetic_cu::fill_random_int4_rows(gpu, launch, ptr, rows as i64, cols as i32, seed, s)
        })
    }

    fn kquant_rows(&mut self, k: KQuant, rows: usize, cols: usize) -> Result<DevPtr> {
        let s = (3.0 / cols as f32).sqrt() / 8.0;
        let (format, d) = match k {
            KQuant::Q4K => (0, s / 32.0),
            KQuant::Q5K => (1, s / 64.0),
            KQuant::Q6K => (2, s / 512.0),
            KQuant::Q8_0 => anyhow::bail!("the synthetic Q4_K_M layout has no {k:?} rows"),
        };
        self.rows(rows * k.row_bytes(cols), |gpu, launch, ptr, seed| {
            synthetic_cu::fill_random_kquant_rows(gpu, launch, ptr, rows as i64, cols as i32, format, seed, d)
        })
    }

    /// A random int4 matrix [rows, cols] as stored (an all-linear int4 recipe's mixers).
    fn int4_matrix(&mut self, rows: usize, cols: usize) -> Result<Matrix> {
        let ptr = self.int4_rows(rows, cols)?;
        Ok(Matrix::stored(ptr, rows, cols, RowFormat::Int4))
    }

    /// A mixer's output projection [2048, 4096]: Q4_K for a Q4_K_M file (a GDN's with its columns
    /// in the converter's tiled value-head order, `gdn`), int4 for the all-linear int4 recipe,
    /// else as `quantised` makes it.
    fn output_projection(&mut self, gdn: bool) -> Result<Matrix> {
        if self.gguf_q4km {
            let tiled = gdn.then_some(TiledHeads { width: 128, key_heads: 16, r: 2 });
            return Ok(Matrix { tiled_heads: tiled, ..self.kquant_matrix(KQuant::Q4K, 2048, 4096)? });
        }
        if self.int4_all {
            return self.int4_matrix(2048, 4096);
        }
        self.quantised(2048, 4096)
    }

    /// A random [rows, cols] matrix as stored in `k` (a GGUF file's mixers, embedding, lm_head).
    fn kquant_matrix(&mut self, k: KQuant, rows: usize, cols: usize) -> Result<Matrix> {
        Ok(Matrix::stored(self.kquant_rows(k, rows, cols)?, rows, cols, RowFormat::K(k)))
    }

    fn vector(&mut self, len: usize, center: f32, scale: f32) -> Result<Vector> {
        Ok(Vector { ptr: self.fill(synthetic_cu::fill_random_f32, 4, len, center, scale)?, len })
    }
}

/// One random bf16 matrix [rows, cols] as the synthetic model's are made, with the buffer that owns it.
pub fn random_matrix(gpu: &Gpu, rows: usize, cols: usize, seed: u64) -> Result<(Matrix, DevBuf)> {
    let mut m = Maker::bf16(gpu, seed);
    let w = m.matrix(rows, cols)?;
    Ok((w, m.buffers.pop().unwrap()))
}

/// The real model with `layers` layers and random weights, ready to run with contexts up to
/// `max_seq` tokens (`solo bench --synthetic`, and the GPU tests of the whole model).
pub fn random_model(layers: usize, max_seq: usize, precision: Precision) -> Result<crate::model::CudaModel> {
    random_model_as(layers, max_seq, Synthetic::Checkpoint(precision))
}

/// What the synthetic model's weights look like.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Synthetic {
    /// A checkpoint of this precision.
    Checkpoint(Precision),
    /// A GGUF Q4_K_M file as the CUDA backend holds it: the routed experts' Q4_K and Q6_K rows,
    /// the mixers' in- and output projections, embedding and lm_head as stored (`Maker::gguf_q4km`).
    GgufQ4KM,
    /// An int4 checkpoint of the all-linear recipe: the routed experts and the mixers'
    /// projections int4 in groups of 128 (issue #40's second row).
    Int4AllLinear,
    /// `GgufQ4KM`'s very weights (the same seeds) with every mixer matrix and expert
    /// dequantised to bf16, as prefill's copies are: the bf16 kernels' twin of that model (its
    /// embedding and lm_head stay as stored).
    GgufQ4KMDequantised,
}

/// `random_model` of either form.
pub fn random_model_as(layers: usize, max_seq: usize, form: Synthetic) -> Result<crate::model::CudaModel> {
    random_model_of(real_config(layers), max_seq, form)
}

/// `random_model_as` of a config of the real widths with its own layers (`layer_types`).
pub fn random_model_of(cfg: ModelConfig, max_seq: usize, form: Synthetic) -> Result<crate::model::CudaModel> {
    let gpu = Gpu::new()?;
    let weights = random_weights_as(&gpu, &cfg, form)?;
    crate::model::CudaModel::from_gpu_weights(gpu, cfg, weights, max_seq)
}

/// Random full-size weights for `cfg` (which must have the real widths).
pub fn random_weights(gpu: &Gpu, cfg: &ModelConfig, precision: Precision) -> Result<ModelGpu> {
    random_weights_as(gpu, cfg, Synthetic::Checkpoint(precision))
}

fn random_weights_as(gpu: &Gpu, cfg: &ModelConfig, form: Synthetic) -> Result<ModelGpu> {
    let (precision, gguf_q4km, int4_all) = match form {
        Synthetic::Checkpoint(p) => (p, false, false),
        Synthetic::GgufQ4KM | Synthetic::GgufQ4KMDequantised => (Precision::Bf16, true, false),
        Synthetic::Int4AllLinear => (Precision::Int4 { group: crate::int4::GROUP }, false, true),
    };
    crate::weights::check_real_widths(cfg)?;
    let fp8 = precision == Precision::Fp8Block128;
    if fp8 {
        gpu.target.check_fp8(&gpu.name)?;
    }
    let int4 = matches!(precision, Precision::Int4 { .. });
    anyhow::ensure!(
        !int4 || precision == (Precision::Int4 { group: crate::int4::GROUP }),
        "the synthetic int4 model has groups of {}",
        crate::int4::GROUP
    );
    let mut m = Maker { fp8, int4, int4_all, gguf_q4km, ..Maker::bf16(gpu, 0x5017) };
    let h = cfg.hidden_size;
    // a Q4_K_M file: the embedding Q4_K, the lm_head Q6_K, both read as stored
    let head = |m: &mut Maker, k: KQuant| {
        if gguf_q4km {
            m.kquant_matrix(k, cfg.vocab_size, h)
        } else {
            m.matrix(cfg.vocab_size, h)
        }
    };
    let embed_tokens = head(&mut m, KQuant::Q4K)?;
    let final_norm = m.vector(h, 1.0, 0.1)?;
    let lm_head = head(&mut m, KQuant::Q6K)?;
    let mut layers = cfg.layer_types.iter().map(|&kind| random_layer(&mut m, cfg, kind)).collect::<Result<Vec<_>>>()?;
    // The MTP head: random too (it proposes tokens the main model rejects; `solo bench --accept`
    // replays drafts instead).
    let mut mtp = Some(MtpGpu {
        pre_fc_norm_embedding: m.vector(h, 1.0, 0.1)?,
        pre_fc_norm_hidden: m.vector(h, 1.0, 0.1)?,
        fc_embedding: m.matrix(h, h)?,
        fc_hidden: m.matrix(h, h)?,
        layer: random_layer(&mut m, cfg, LayerKind::FullAttention)?,
        norm: m.vector(h, 1.0, 0.1)?,
    });
    if form == Synthetic::GgufQ4KMDequantised {
        for layer in layers.iter_mut().chain(mtp.iter_mut().map(|m| &mut m.layer)) {
            *layer = dequantised_twin(&mut m, layer, cfg)?;
        }
    }
    gpu.sync()?;
    Ok(ModelGpu {
        embed_tokens,
        final_norm,
        lm_head,
        layers,
        mtp,
        vision: None,
        precision,
        repacked_from: (form == Synthetic::GgufQ4KM).then(|| "Q4_K, Q5_K, Q6_K (synthetic Q4_K_M)".to_string()),
        buffers: m.buffers,
    })
}

/// `layer` (the synthetic Q4_K_M shape) with its mixer's matrices and its experts (the shared
/// one too, expert 256 of their buffers) dequantised to bf16: `GgufQ4KMDequantised`. A GDN
/// layer's in-projection is stacked as a bf16 checkpoint's is (qkv | z | b | a, 12,352 rows):
/// the bf16 decode step reads b | a inside it.
fn dequantised_twin(m: &mut Maker, layer: &LayerGpu, cfg: &ModelConfig) -> Result<LayerGpu> {
    let buf = m.gpu.alloc(layer.dequantized_bytes())?;
    let mut twin = layer.dequantized(m.gpu, &buf)?;
    m.buffers.push(buf);
    if let MixerGpu::GatedDeltaNet(g) = &mut twin.mixer {
        let (rows, cols) = (g.in_proj.rows, g.in_proj.cols);
        let stacked = m.gpu.alloc((rows + 64) * cols * 2)?;
        m.gpu.copy(stacked.ptr(), g.in_proj.ptr, rows * cols * 2)?;
        m.gpu.copy(stacked.ptr() + (rows * cols * 2) as DevPtr, g.in_proj_b.ptr, 64 * cols * 2)?;
        let all = Matrix::bf16(stacked.ptr(), rows + 64, cols);
        m.buffers.push(stacked);
        g.in_proj = all;
        g.in_proj_qkv = all.rows(0, g.in_proj_qkv.rows);
        g.in_proj_z = all.rows(g.in_proj_qkv.rows, g.in_proj_z.rows);
        g.in_proj_b = all.rows(rows, 32);
        g.in_proj_a = all.rows(rows + 32, 32);
    }
    if let Some(p) = twin.moe.packed.take() {
        let (experts, hidden) = (cfg.num_experts + 1, cfg.hidden_size);
        let mut bf16 = |ptr: DevPtr, format: RowFormat, rows: usize, cols: usize| -> Result<DevPtr> {
            let out = m.gpu.alloc(rows * cols * 2)?;
            crate::ops::linear::dequantize(m.gpu, &Matrix::stored(ptr, rows, cols, format), out.ptr())?;
            let ptr = out.ptr();
            m.buffers.push(out);
            Ok(ptr)
        };
        twin.moe.gate_up = bf16(twin.moe.gate_up, p.gate_up, experts * 1024, hidden)?;
        twin.moe.down = bf16(twin.moe.down, p.down, experts * hidden, 512)?;
    }
    Ok(twin)
}

/// One random decoder layer of the real widths.
fn random_layer(m: &mut Maker, cfg: &ModelConfig, kind: LayerKind) -> Result<LayerGpu> {
    let (h, fp8) = (cfg.hidden_size, m.fp8);
    let mixer = match kind {
        LayerKind::GatedDeltaNet => {
            // FP8: qkv | z quantised, b | a a bf16 matrix of their own (as `weights.rs` uploads);
            // Q4_K_M: qkv Q5_K and z Q4_K as one Q5_K matrix, b | a apart in bf16
            let (in_proj, ba) = if m.gguf_q4km {
                (m.kquant_matrix(KQuant::Q5K, 8192 + 4096, h)?, m.matrix(64, h)?)
            } else if m.int4_all {
                (m.int4_matrix(8192 + 4096, h)?, m.matrix(64, h)?)
            } else if fp8 {
                (m.quantised(8192 + 4096, h)?, m.matrix(64, h)?)
            } else {
                let all = m.matrix(8192 + 4096 + 64, h)?;
                (all, all.rows(12288, 64))
            };
            MixerGpu::GatedDeltaNet(GdnGpu {
                in_proj,
                in_proj_qkv: in_proj.rows(0, 8192),
                in_proj_z: in_proj.rows(8192, 4096),
                in_proj_b: ba.rows(0, 32),
                in_proj_a: ba.rows(32, 32),
                conv1d: m.vector(8192 * 4, 0.0, 0.5)?,
                a_log: m.vector(32, 1.4, 1.3)?,
                dt_bias: m.vector(32, 0.0, 1.0)?,
                norm: m.vector(128, 1.0, 0.1)?,
                out_proj: m.output_projection(true)?,
            })
        }
        LayerKind::FullAttention => {
            // Q4_K_M: q, k and v Q4_K as one matrix, or q and k Q4_K with v Q6_K apart
            // (use_more_bits: every other attention layer here)
            m.attention_layers += 1;
            let (qkv_proj, v_proj) = if m.gguf_q4km && m.attention_layers.is_multiple_of(2) {
                let qkv = m.kquant_matrix(KQuant::Q4K, 16 * 512 + 2 * 512, h)?;
                (qkv, qkv.rows(16 * 512 + 512, 512))
            } else if m.gguf_q4km {
                (m.kquant_matrix(KQuant::Q4K, 16 * 512 + 512, h)?, m.kquant_matrix(KQuant::Q6K, 512, h)?)
            } else if m.int4_all {
                let qkv = m.int4_matrix(16 * 512 + 2 * 512, h)?;
                (qkv, qkv.rows(16 * 512 + 512, 512))
            } else {
                let qkv = m.quantised(16 * 512 + 2 * 512, h)?;
                (qkv, qkv.rows(16 * 512 + 512, 512))
            };
            MixerGpu::FullAttention(AttentionGpu {
                qkv_proj,
                q_proj: qkv_proj.rows(0, 16 * 512),
                k_proj: qkv_proj.rows(16 * 512, 512),
                v_proj,
                o_proj: m.output_projection(false)?,
                q_norm: m.vector(256, 1.0, 0.1)?,
                k_norm: m.vector(256, 1.0, 0.1)?,
            })
        }
    };
    let experts = cfg.num_experts + 1; // + the shared expert
    let mut packed = None;
    m.moe_layers += 1;
    // (rows: the shared expert's rows are in the routed experts' buffers too, as expert 256)
    let shared_parts = |m: &mut Maker, rows: bool| -> Result<SharedExpert> {
        let gate_up = m.fill(synthetic_cu::fill_random_bf16, 2, 1024 * h, 0.0, (3.0 / h as f32).sqrt())?;
        let down = m.fill(synthetic_cu::fill_random_bf16, 2, h * 512, 0.0, (3.0f32 / 512.0).sqrt())?;
        Ok(SharedExpert { gate_up, down, rows })
    };
    let (gate_up, down, fp8_scales) = if m.gguf_q4km {
        // a Q4_K_M file's shared expert has the routed experts' types: its rows go up as stored
        // beside its bf16 copy
        let down_format = if m.moe_layers % 2 == 1 { KQuant::Q6K } else { KQuant::Q4K };
        let gate_up = m.kquant_rows(KQuant::Q4K, experts * 1024, h)?;
        let down = m.kquant_rows(down_format, experts * h, 512)?;
        // its bf16 copy (prefill's) is its rows dequantised, as a file's load makes it
        let shared = shared_parts(m, true)?;
        let stored = |ptr: DevPtr, k: KQuant, rows: usize, cols: usize| {
            Matrix::stored(ptr + (cfg.num_experts * rows * k.row_bytes(cols)) as DevPtr, rows, cols, RowFormat::K(k))
        };
        crate::ops::gemv_q::dequantize_q(m.gpu, &stored(gate_up, KQuant::Q4K, 1024, h), shared.gate_up)?;
        crate::ops::gemv_q::dequantize_q(m.gpu, &stored(down, down_format, h, 512), shared.down)?;
        packed = Some(Packed { gate_up: RowFormat::K(KQuant::Q4K), down: RowFormat::K(down_format), shared });
        (gate_up, down, None)
    } else if m.int4 {
        // the routed experts int4, the shared one bf16 apart
        let gate_up = m.int4_rows(cfg.num_experts * 1024, h)?;
        let down = m.int4_rows(cfg.num_experts * h, 512)?;
        let shared = shared_parts(m, false)?;
        packed = Some(Packed { gate_up: RowFormat::Int4, down: RowFormat::Int4, shared });
        (gate_up, down, None)
    } else if fp8 {
        let (gate_up, gs) = m.fp8_rows(experts * 1024, h)?;
        let (down, ds) = m.fp8_rows(experts * h, 512)?;
        (gate_up, down, Some(ExpertScales { gate_up: gs, down: ds }))
    } else {
        let gate_up = m.fill(synthetic_cu::fill_random_bf16, 2, experts * 1024 * h, 0.0, (3.0 / h as f32).sqrt())?;
        let down = m.fill(synthetic_cu::fill_random_bf16, 2, experts * h * 512, 0.0, (3.0f32 / 512.0).sqrt())?;
        (gate_up, down, None)
    };
    Ok(LayerGpu {
        input_norm: m.vector(h, 1.0, 0.1)?,
        post_attention_norm: m.vector(h, 1.0, 0.1)?,
        mixer,
        // router: 256 experts' rows + the shared expert's gate row
        moe: MoeGpu { router: m.matrix(cfg.num_experts + 1, h)?, gate_up, down, fp8_scales, packed },
    })
}

/// The release's vision tower (`vision_config` of Qwen3.6-35B-A3B's config.json: 27 blocks, 1152
/// wide, 16 heads, MLP 4304, 16-pixel patches of 2 frames, 2×2 merge to the text's 2048, a 48×48
/// position grid).
pub fn real_vision_config() -> solo_model::vision::VisionConfig {
    let top = serde_json::json!({
        "vision_config": {"depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16,
            "patch_size": 16, "temporal_patch_size": 2, "spatial_merge_size": 2, "in_channels": 3,
            "out_hidden_size": 2048, "num_position_embeddings": 2304, "hidden_act": "gelu_pytorch_tanh"},
        "image_token_id": 248056, "vision_start_token_id": 248053, "vision_end_token_id": 248054
    });
    solo_model::vision::VisionConfig::from_top(&top).expect("the built-in vision config parses").unwrap()
}

/// A vision tower of `cfg`'s widths with random weights made in GPU memory (`solo bench
/// --synthetic --image WxH`).
pub fn random_vision(gpu: &Gpu, cfg: &solo_model::vision::VisionConfig) -> Result<crate::ops::vision::VisionGpu> {
    use crate::ops::vision::{LinearGpu, NormGpu, VisionBlockGpu, VisionGpu};
    let mut m = Maker::bf16(gpu, 7000);
    let linear = |m: &mut Maker, out: usize, inp: usize| -> Result<LinearGpu> {
        Ok(LinearGpu { weight: m.matrix(out, inp)?, bias: m.vector(out, 0.0, 0.02)? })
    };
    let norm = |m: &mut Maker, n: usize| -> Result<NormGpu> {
        Ok(NormGpu { weight: m.vector(n, 1.0, 0.1)?, bias: m.vector(n, 0.0, 0.02)? })
    };
    let (d, inter, m2) = (cfg.hidden_size, cfg.intermediate_size, cfg.spatial_merge_size.pow(2));
    let patch_embed = linear(&mut m, d, cfg.patch_len())?;
    let pos_embed = m.matrix(cfg.num_position_embeddings, d)?;
    let mut blocks = Vec::with_capacity(cfg.depth);
    for _ in 0..cfg.depth {
        blocks.push(VisionBlockGpu {
            norm1: norm(&mut m, d)?,
            qkv: linear(&mut m, 3 * d, d)?,
            proj: linear(&mut m, d, d)?,
            norm2: norm(&mut m, d)?,
            fc1: linear(&mut m, inter, d)?,
            fc2: linear(&mut m, d, inter)?,
        });
    }
    let merger_norm = norm(&mut m, d)?;
    let merger_fc1 = linear(&mut m, m2 * d, m2 * d)?;
    let merger_fc2 = linear(&mut m, cfg.out_hidden_size, m2 * d)?;
    Ok(VisionGpu {
        cfg: cfg.clone(),
        patch_embed,
        pos_embed,
        blocks,
        merger_norm,
        merger_fc1,
        merger_fc2,
        buffers: m.buffers,
    })
}

/// The bf16 matrix that LoRA `target` adapts in layer `i` of `model` (the router's rows and the
/// shared expert's gate are rows of one matrix); its shape only (ptr 0) where the weights hold it
/// in no bf16 form (the shared expert of FP8 experts). Panics for a target the layer lacks.
pub fn adapted_matrix(model: &crate::model::CudaModel, i: usize, target: Target) -> Matrix {
    let layer = &model.weights.layers[i];
    let router = &layer.moe.router;
    match (&layer.mixer, target) {
        (_, Target::Router) => Matrix::bf16(router.ptr, 256, router.cols),
        (_, Target::SharedExpertGate) => Matrix::bf16(router.ptr + (256 * router.cols * 2) as u64, 1, router.cols),
        (_, Target::SharedGate | Target::SharedUp | Target::SharedDown) => {
            use crate::kernels::widths::{EXPERT_DIM, HIDDEN};
            let (gate_up, down) = layer.moe.shared_bf16().unwrap_or((0, 0)); // (FP8: its shape only)
            let up = if gate_up == 0 { 0 } else { gate_up + (EXPERT_DIM * HIDDEN * 2) as u64 };
            match target {
                Target::SharedGate => Matrix::bf16(gate_up, EXPERT_DIM, HIDDEN),
                Target::SharedUp => Matrix::bf16(up, EXPERT_DIM, HIDDEN),
                _ => Matrix::bf16(down, HIDDEN, EXPERT_DIM),
            }
        }
        (MixerGpu::GatedDeltaNet(g), Target::InProjQkv) => g.in_proj_qkv,
        (MixerGpu::GatedDeltaNet(g), Target::InProjZ) => g.in_proj_z,
        (MixerGpu::GatedDeltaNet(g), Target::InProjB) => g.in_proj_b,
        (MixerGpu::GatedDeltaNet(g), Target::InProjA) => g.in_proj_a,
        (MixerGpu::GatedDeltaNet(g), Target::OutProj) => g.out_proj,
        (MixerGpu::FullAttention(a), Target::QProj) => a.q_proj,
        (MixerGpu::FullAttention(a), Target::KProj) => a.k_proj,
        (MixerGpu::FullAttention(a), Target::VProj) => a.v_proj,
        (MixerGpu::FullAttention(a), Target::OProj) => a.o_proj,
        _ => panic!("layer {i}: no {target:?} here"),
    }
}

/// Which matrices `random_adapter` adapts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdapterTargets {
    /// Every projection of the mixers (attention q/k/v/o, GDN in_proj_qkv/z/b/a and out_proj).
    Mixers,
    /// Those, the router, the shared expert and its gate: every linear layer but the routed
    /// experts (PEFT's `all-linear` on this model).
    AllLinear,
    /// The mixers' projections and the routed experts' fused tensors (gate_up_proj and
    /// down_proj): what the one-token decode step's kernels take with the experts.
    MixersAndExperts,
    /// Every linear layer and the routed experts.
    All,
}

/// A random LoRA adapter of rank `rank` on `targets`: scale 2, A U(±√(3/in)), B `b` ·
/// U(±√(3/rank)): the term is ~`2b` of the product's size (`solo bench --lora-rank`, the GPU
/// tests).
pub fn random_adapter(
    model: &crate::model::CudaModel,
    rank: usize,
    seed: u64,
    b: f32,
    targets: AdapterTargets,
) -> LoraAdapter {
    use crate::kernels::widths::{EXPERTS, EXPERT_DIM, HIDDEN};
    let tensor = |seed, shape: [usize; 2], scale: f32| {
        let mut rng = solo_model::sampler::SplitMix(seed);
        let v: Vec<f32> = (0..shape[0] * shape[1]).map(|_| scale * (2.0 * rng.next_f32() - 1.0)).collect();
        Tensor::from_f32_as_bf16(shape.to_vec(), &v)
    };
    let pair = |s: u64, rows: usize, cols: usize| LoraPair {
        a: tensor(s, [rank, cols], (3.0 / cols as f32).sqrt()),
        b: tensor(s + 1, [rows, rank], b * (3.0 / rank as f32).sqrt()),
        scale: 2.0,
    };
    let layers: Vec<LayerLora> = (0..model.weights.layers.len())
        .map(|i| {
            let mut linears = match model.weights.layers[i].mixer {
                MixerGpu::GatedDeltaNet(_) => {
                    vec![Target::InProjQkv, Target::InProjZ, Target::InProjB, Target::InProjA, Target::OutProj]
                }
                MixerGpu::FullAttention(_) => vec![Target::QProj, Target::KProj, Target::VProj, Target::OProj],
            };
            if matches!(targets, AdapterTargets::AllLinear | AdapterTargets::All) {
                linears.extend([
                    Target::Router,
                    Target::SharedExpertGate,
                    Target::SharedGate,
                    Target::SharedUp,
                    Target::SharedDown,
                ]);
            }
            let base = seed * 1_000_000 + i as u64 * 10_000;
            let linears = linears
                .into_iter()
                .enumerate()
                .map(|(j, t)| {
                    let m = adapted_matrix(model, i, t);
                    (t, pair(base + j as u64 * 2, m.rows, m.cols))
                })
                .collect();
            let experts = match targets {
                AdapterTargets::All | AdapterTargets::MixersAndExperts => (0..EXPERTS as u64)
                    .map(|e| ExpertLora {
                        gate_up: Some(pair(base + 100 + 4 * e, 2 * EXPERT_DIM, HIDDEN)),
                        down: Some(pair(base + 102 + 4 * e, HIDDEN, EXPERT_DIM)),
                    })
                    .collect(),
                _ => Vec::new(),
            };
            LayerLora { linears, experts }
        })
        .collect();
    let pairs = || {
        layers
            .iter()
            .flat_map(|l| l.linears.values().chain(l.experts.iter().flat_map(|e| e.gate_up.iter().chain(&e.down))))
    };
    let matrices = layers.iter().map(|l| l.linears.len() + if l.experts.is_empty() { 0 } else { 2 }).sum();
    let bytes = pairs().map(|p| p.a.stored_bytes() + p.b.stored_bytes()).sum();
    LoraAdapter {
        id: 1_000_000 + seed,
        dir: format!("synthetic rank-{rank} adapter").into(),
        rank,
        layers,
        matrices,
        bytes,
    }
}

#[cfg(test)]
mod tests {
    /// The release's vision widths as the CUDA tower reads them (no GPU needed).
    #[test]
    fn the_real_vision_config() {
        let v = super::real_vision_config();
        assert_eq!(
            (v.depth, v.hidden_size, v.head_dim(), v.patch_len(), v.position_grid_side()),
            (27, 1152, 72, 1536, 48)
        );
        assert!(v.gelu_tanh && v.unsupported().is_none());
    }
}
