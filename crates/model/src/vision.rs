//! The vision tower's configuration (`vision_config` and the image token ids of `config.json`),
//! its weights (`model.visual.*`) and the image processor's settings
//! (`preprocessor_config.json`). The tower itself is `solo_cpu::vision`; decoding and
//! preprocessing are `crate::image`.

use crate::tensor::Tensor;
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::Path;

/// `vision_config` of `config.json`, with the image token ids from its top level.
#[derive(Clone, Debug, PartialEq)]
pub struct VisionConfig {
    /// ViT blocks (27 in the release).
    pub depth: usize,
    /// The tower's width (1152).
    pub hidden_size: usize,
    /// The blocks' MLP width (4304).
    pub intermediate_size: usize,
    pub num_heads: usize,
    /// Pixels on a patch side (16).
    pub patch_size: usize,
    /// Frames in a patch (2: a still image is repeated).
    pub temporal_patch_size: usize,
    /// Patches on a merged token's side (2: 2×2 patches become one token).
    pub spatial_merge_size: usize,
    pub in_channels: usize,
    /// The text model's width, what the merger writes (2048).
    pub out_hidden_size: usize,
    /// Learned position embeddings, a square grid (2304 = 48×48).
    pub num_position_embeddings: usize,
    pub rope_theta: f64,
    /// The blocks' activation: true for `gelu_pytorch_tanh` (tanh approximation), false for `gelu`.
    pub gelu_tanh: bool,
    /// `<|image_pad|>`: the placeholder each merged image token takes in the prompt.
    pub image_token_id: u32,
    /// `<|vision_start|>` and `<|vision_end|>`, around an image's placeholders.
    pub vision_start_token_id: u32,
    pub vision_end_token_id: u32,
}

impl VisionConfig {
    /// Dims per attention head.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_heads
    }
    /// Values in one flattened patch: channels × frames × patch × patch.
    pub fn patch_len(&self) -> usize {
        self.in_channels * self.temporal_patch_size * self.patch_size * self.patch_size
    }
    /// Side of the learned position-embedding grid.
    pub fn position_grid_side(&self) -> usize {
        (self.num_position_embeddings as f64).sqrt() as usize
    }

    /// Reads `vision_config` and the image token ids from a parsed `config.json`; `None` when it
    /// has no vision tower.
    pub fn from_top(top: &serde_json::Value) -> Result<Option<Self>> {
        let Some(v) = top.get("vision_config").filter(|v| !v.is_null()) else {
            return Ok(None);
        };
        let raw: RawVisionConfig =
            serde_json::from_value(v.clone()).context("vision_config has missing or mistyped keys")?;
        let id = |key: &str| -> Result<u32> {
            top.get(key)
                .and_then(|v| v.as_u64())
                .map(|v| v as u32)
                .with_context(|| format!("config.json has a vision_config but no `{key}`"))
        };
        let gelu_tanh = match raw.hidden_act.as_str() {
            "gelu_pytorch_tanh" => true,
            "gelu" => false,
            other => bail!("vision_config.hidden_act `{other}` is not supported (gelu_pytorch_tanh or gelu)"),
        };
        if let Some(kind) = raw.rope_parameters.as_ref().and_then(|r| r.rope_type.as_deref()) {
            if kind != "axial" {
                bail!("vision_config.rope_parameters.rope_type `{kind}` is not supported (only `axial`)");
            }
        }
        let rope_theta = raw.rope_parameters.as_ref().and_then(|r| r.rope_theta).unwrap_or(10000.0);
        let cfg = VisionConfig {
            depth: raw.depth,
            hidden_size: raw.hidden_size,
            intermediate_size: raw.intermediate_size,
            num_heads: raw.num_heads,
            patch_size: raw.patch_size,
            temporal_patch_size: raw.temporal_patch_size,
            spatial_merge_size: raw.spatial_merge_size,
            in_channels: raw.in_channels,
            out_hidden_size: raw.out_hidden_size,
            num_position_embeddings: raw.num_position_embeddings,
            rope_theta,
            gelu_tanh,
            image_token_id: id("image_token_id")?,
            vision_start_token_id: id("vision_start_token_id")?,
            vision_end_token_id: id("vision_end_token_id")?,
        };
        if cfg.num_heads == 0 || !cfg.hidden_size.is_multiple_of(cfg.num_heads) {
            bail!("vision_config.hidden_size {} is not a multiple of num_heads {}", cfg.hidden_size, cfg.num_heads);
        }
        let side = cfg.position_grid_side();
        if side * side != cfg.num_position_embeddings {
            bail!("vision_config.num_position_embeddings {} is not a square", cfg.num_position_embeddings);
        }
        Ok(Some(cfg))
    }

    /// Why the tower cannot run, if it cannot: its 2-D rotary form splits each head in four
    /// (height and width, each as rotated pairs). tiny-b's head of 6 is such a tower; transformers
    /// fails on it too.
    pub fn unsupported(&self) -> Option<String> {
        (!self.head_dim().is_multiple_of(4)).then(|| {
            format!(
                "the checkpoint's vision tower has a head dim of {}; its 2-D rotary form needs a multiple of 4",
                self.head_dim()
            )
        })
    }
}

#[derive(Deserialize)]
struct RawVisionConfig {
    depth: usize,
    hidden_size: usize,
    intermediate_size: usize,
    num_heads: usize,
    patch_size: usize,
    temporal_patch_size: usize,
    spatial_merge_size: usize,
    #[serde(default = "three")]
    in_channels: usize,
    out_hidden_size: usize,
    num_position_embeddings: usize,
    #[serde(default = "gelu_tanh")]
    hidden_act: String,
    #[serde(default)]
    rope_parameters: Option<RawVisionRope>,
}

#[derive(Deserialize)]
struct RawVisionRope {
    #[serde(default)]
    rope_type: Option<String>,
    #[serde(default)]
    rope_theta: Option<f64>,
}

fn three() -> usize {
    3
}

fn gelu_tanh() -> String {
    "gelu_pytorch_tanh".into()
}

/// `preprocessor_config.json`: how an image becomes patches (transformers'
/// `Qwen2VLImageProcessor`, which the release names).
#[derive(Clone, Debug, PartialEq)]
pub struct PreprocessorConfig {
    /// Fewest pixels after resizing (`size.shortest_edge`, or the older `min_pixels`).
    pub min_pixels: usize,
    /// Most pixels after resizing (`size.longest_edge`, or `max_pixels`).
    pub max_pixels: usize,
    pub patch_size: usize,
    pub temporal_patch_size: usize,
    pub merge_size: usize,
    pub do_resize: bool,
    pub do_rescale: bool,
    pub rescale_factor: f64,
    pub do_normalize: bool,
    pub image_mean: [f32; 3],
    pub image_std: [f32; 3],
}

impl PreprocessorConfig {
    /// Reads `DIR/preprocessor_config.json` and checks it against the tower.
    pub fn from_dir(dir: &Path, vision: &VisionConfig) -> Result<Self> {
        let path = dir.join("preprocessor_config.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {} (the checkpoint has a vision tower)", path.display()))?;
        Self::from_json(&text, vision).with_context(|| format!("{}", path.display()))
    }

    pub fn from_json(text: &str, vision: &VisionConfig) -> Result<Self> {
        let v: serde_json::Value = serde_json::from_str(text).context("not valid JSON")?;
        let num = |key: &str| v.get(key).and_then(|x| x.as_f64());
        let size = |key: &str| v.get("size").and_then(|s| s.get(key)).and_then(|x| x.as_u64()).map(|x| x as usize);
        let min_pixels = size("shortest_edge").or(num("min_pixels").map(|x| x as usize)).unwrap_or(56 * 56);
        let max_pixels = size("longest_edge").or(num("max_pixels").map(|x| x as usize)).unwrap_or(28 * 28 * 1280);
        let triple = |key: &str, default: [f64; 3]| -> Result<[f32; 3]> {
            match v.get(key) {
                None => Ok(default.map(|x| x as f32)),
                Some(x) => match x.as_array().map(|a| a.iter().filter_map(|e| e.as_f64()).collect::<Vec<_>>()) {
                    Some(a) if a.len() == 3 => Ok([a[0] as f32, a[1] as f32, a[2] as f32]),
                    _ => bail!("`{key}` must be three numbers, found {x}"),
                },
            }
        };
        let flag = |key: &str| v.get(key).and_then(|x| x.as_bool()).unwrap_or(true);
        // Defaults are Qwen2VLImageProcessor's (OpenAI CLIP's mean and std).
        let cfg = PreprocessorConfig {
            min_pixels,
            max_pixels,
            patch_size: num("patch_size").map_or(vision.patch_size, |x| x as usize),
            temporal_patch_size: num("temporal_patch_size").map_or(vision.temporal_patch_size, |x| x as usize),
            merge_size: num("merge_size").map_or(vision.spatial_merge_size, |x| x as usize),
            do_resize: flag("do_resize"),
            do_rescale: flag("do_rescale"),
            rescale_factor: num("rescale_factor").unwrap_or(1.0 / 255.0),
            do_normalize: flag("do_normalize"),
            image_mean: triple("image_mean", [0.48145466, 0.4578275, 0.40821073])?,
            image_std: triple("image_std", [0.26862954, 0.26130258, 0.27577711])?,
        };
        if let Some(r) = v.get("resample").and_then(|x| x.as_u64()) {
            if r != 3 {
                bail!("`resample` is {r}; solo resizes with bicubic (3) only");
            }
        }
        if (cfg.patch_size, cfg.temporal_patch_size, cfg.merge_size)
            != (vision.patch_size, vision.temporal_patch_size, vision.spatial_merge_size)
        {
            bail!(
                "patch_size/temporal_patch_size/merge_size {}/{}/{} differ from config.json's vision_config {}/{}/{}",
                cfg.patch_size,
                cfg.temporal_patch_size,
                cfg.merge_size,
                vision.patch_size,
                vision.temporal_patch_size,
                vision.spatial_merge_size
            );
        }
        if cfg.min_pixels > cfg.max_pixels {
            bail!("size.shortest_edge {} (min pixels) is above size.longest_edge {}", cfg.min_pixels, cfg.max_pixels);
        }
        Ok(cfg)
    }

    /// Side of a merged token in pixels: resized images are multiples of it.
    pub fn factor(&self) -> usize {
        self.patch_size * self.merge_size
    }
}

/// The tower's tensors (`model.visual.*`), by role. Linear weights are `[out, in]` with a bias.
pub struct VisionWeights {
    /// [hidden, channels, frames, patch, patch]: the Conv3d whose stride is its kernel, so one
    /// matrix product per patch ([hidden, patch_len] as rows).
    pub patch_embed: Tensor,
    /// [hidden]
    pub patch_embed_bias: Tensor,
    /// [num_position_embeddings, hidden]: the learned square grid, resampled to each image.
    pub pos_embed: Tensor,
    pub blocks: Vec<VisionBlockWeights>,
    /// The 2×2 merger: LayerNorm over each patch [hidden], then fc1 [4h, 4h], GELU, fc2 [out, 4h].
    pub merger_norm: LayerNormWeights,
    pub merger_fc1: Linear,
    pub merger_fc2: Linear,
}

pub struct VisionBlockWeights {
    pub norm1: LayerNormWeights,
    /// [3·hidden, hidden]: rows q (all heads), then k, then v.
    pub qkv: Linear,
    /// [hidden, hidden]
    pub proj: Linear,
    pub norm2: LayerNormWeights,
    /// [intermediate, hidden]
    pub fc1: Linear,
    /// [hidden, intermediate]
    pub fc2: Linear,
}

pub struct LayerNormWeights {
    pub weight: Tensor,
    pub bias: Tensor,
}

pub struct Linear {
    pub weight: Tensor,
    pub bias: Tensor,
}

impl VisionWeights {
    /// Takes every `{prefix}*` tensor through `take(name, shape)` (the loader's shape check).
    pub fn load(
        cfg: &VisionConfig,
        prefix: &str,
        take: &mut dyn FnMut(&str, &[usize]) -> Result<Tensor>,
    ) -> Result<Self> {
        let (h, inter, m2) = (cfg.hidden_size, cfg.intermediate_size, cfg.spatial_merge_size.pow(2));
        let mut t = |name: &str, shape: &[usize]| take(&format!("{prefix}{name}"), shape);
        let linear = |t: &mut dyn FnMut(&str, &[usize]) -> Result<Tensor>, name: &str, out: usize, inp: usize| {
            Ok::<_, anyhow::Error>(Linear {
                weight: t(&format!("{name}.weight"), &[out, inp])?,
                bias: t(&format!("{name}.bias"), &[out])?,
            })
        };
        let norm = |t: &mut dyn FnMut(&str, &[usize]) -> Result<Tensor>, name: &str, n: usize| {
            Ok::<_, anyhow::Error>(LayerNormWeights {
                weight: t(&format!("{name}.weight"), &[n])?,
                bias: t(&format!("{name}.bias"), &[n])?,
            })
        };
        let (p, tp) = (cfg.patch_size, cfg.temporal_patch_size);
        let patch_embed = t("patch_embed.proj.weight", &[h, cfg.in_channels, tp, p, p])?;
        let patch_embed_bias = t("patch_embed.proj.bias", &[h])?;
        let pos_embed = t("pos_embed.weight", &[cfg.num_position_embeddings, h])?;
        let mut blocks = Vec::with_capacity(cfg.depth);
        for i in 0..cfg.depth {
            let b = format!("blocks.{i}.");
            blocks.push(VisionBlockWeights {
                norm1: norm(&mut t, &format!("{b}norm1"), h)?,
                qkv: linear(&mut t, &format!("{b}attn.qkv"), 3 * h, h)?,
                proj: linear(&mut t, &format!("{b}attn.proj"), h, h)?,
                norm2: norm(&mut t, &format!("{b}norm2"), h)?,
                fc1: linear(&mut t, &format!("{b}mlp.linear_fc1"), inter, h)?,
                fc2: linear(&mut t, &format!("{b}mlp.linear_fc2"), h, inter)?,
            });
        }
        Ok(VisionWeights {
            patch_embed,
            patch_embed_bias,
            pos_embed,
            blocks,
            merger_norm: norm(&mut t, "merger.norm", h)?,
            merger_fc1: linear(&mut t, "merger.linear_fc1", m2 * h, m2 * h)?,
            merger_fc2: linear(&mut t, "merger.linear_fc2", cfg.out_hidden_size, m2 * h)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ModelConfig;

    fn tiny_a() -> ModelConfig {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tiny-a");
        ModelConfig::from_dir(&dir).unwrap()
    }

    #[test]
    fn tiny_a_vision_and_mrope() {
        let cfg = tiny_a();
        let v = cfg.vision.as_ref().unwrap();
        assert_eq!((v.depth, v.hidden_size, v.num_heads, v.patch_size, v.position_grid_side()), (1, 16, 2, 4, 4));
        assert_eq!((v.image_token_id, v.vision_start_token_id, v.vision_end_token_id), (392, 389, 390));
        assert!(v.gelu_tanh && v.unsupported().is_none());
        // mrope_section [2, 1, 1] over R/2 = 4 frequencies: T, H, W, T.
        assert_eq!(cfg.mrope_section, [2, 1, 1]);
        assert_eq!((0..4).map(|i| cfg.mrope_axis(i)).collect::<Vec<_>>(), [0, 1, 2, 0]);
    }

    #[test]
    fn the_release_section_interleaves_t_h_w() {
        let mut cfg = tiny_a();
        cfg.mrope_section = [11, 11, 10];
        let axes: Vec<usize> = (0..32).map(|i| cfg.mrope_axis(i)).collect();
        assert_eq!(&axes[..6], &[0, 1, 2, 0, 1, 2]);
        assert_eq!(&axes[27..], &[0, 1, 2, 0, 1]); // 29 is the last W (3·10), 31 the last H
        assert_eq!(axes.iter().filter(|&&a| a == 1).count(), 11);
        assert_eq!(axes.iter().filter(|&&a| a == 2).count(), 10);
    }

    #[test]
    fn preprocessor_configs() {
        let cfg = tiny_a();
        let v = cfg.vision.as_ref().unwrap();
        // The release's keys (patch sizes scaled to tiny-a's tower).
        let release = r#"{"size": {"longest_edge": 16777216, "shortest_edge": 65536}, "patch_size": 4,
            "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
            "processor_class": "Qwen3VLProcessor", "image_processor_type": "Qwen2VLImageProcessorFast"}"#;
        let p = PreprocessorConfig::from_json(release, v).unwrap();
        assert_eq!((p.min_pixels, p.max_pixels, p.factor()), (65536, 16777216, 8));
        assert_eq!(p.image_mean, [0.5; 3]);
        let err = |json: &str| PreprocessorConfig::from_json(json, v).unwrap_err().to_string();
        assert!(err(r#"{"patch_size": 16}"#).contains("differ from config.json"));
        assert!(err(r#"{"resample": 2}"#).contains("bicubic"));
        assert!(err(r#"{"image_mean": [0.5]}"#).contains("`image_mean` must be three numbers"));
        assert!(err(r#"{"min_pixels": 100, "max_pixels": 10}"#).contains("min pixels"));
    }
}
