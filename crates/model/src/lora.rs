//! LoRA adapters as PEFT saves them: a directory with `adapter_config.json` and
//! `adapter_model.safetensors`. An adapted matrix W computes W x + s · B (A x), with A: [r, in],
//! B: [out, r] and s = lora_alpha / r (rsLoRA: lora_alpha / √r).
//!
//! Tensor names are PEFT's: `base_model.model.` + the module's path in transformers' model +
//! `.lora_A.weight` / `.lora_B.weight`. Linear layers (`target_modules`) carry one pair each. The
//! fused routed experts (`mlp.experts.gate_up_proj [E, 2I, H]`, `down_proj [E, H, I]`) are adapted
//! through `target_parameters`: one pair per expert tensor with every expert's rank stacked,
//! A: [E·r, in] (expert e: rows e·r ..), B: [out, r·E] (expert e: columns k·E + e). When both expert
//! tensors are targeted PEFT nests its wrappers, in the module's parameter order: the first
//! targeted one (gate_up_proj) is saved under `experts.base_layer.lora_*`, the second under
//! `experts.lora_*`.
//!
//! Every tensor is checked against the model's config (name, dtype, shape, rank ≤ `MAX_RANK`,
//! finite values) and so is the config (DoRA, biases, `modules_to_save` and the other variants
//! PEFT offers are refused); each problem is one line naming the tensor or the key. Adapters of
//! the vision tower are skipped, as the checkpoint's vision tensors are.
//!
//! The loaded form is what every backend takes: per layer, per adapted matrix, A and B in their
//! stored dtype with the scale beside them (a GPU backend converts them to bf16 as it uploads).

use crate::checkpoint::read_file;
use crate::config::{LayerKind, ModelConfig};
use crate::tensor::{DType, Tensor};
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The largest rank solo takes (a GPU kernel keeps A x for a row in registers).
pub const MAX_RANK: usize = 256;

const WEIGHTS: &str = "adapter_model.safetensors";
const CONFIG: &str = "adapter_config.json";

/// One adapted matrix: ΔW = scale · B A.
#[derive(Clone, Debug)]
pub struct LoraPair {
    /// [r, in]
    pub a: Tensor,
    /// [out, r]
    pub b: Tensor,
    pub scale: f32,
}

impl LoraPair {
    pub fn rank(&self) -> usize {
        self.a.shape[0]
    }
}

/// The linear layers of a decoder layer an adapter can target (routed experts apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Target {
    QProj,
    KProj,
    VProj,
    OProj,
    InProjQkv,
    InProjZ,
    InProjB,
    InProjA,
    OutProj,
    /// The router `mlp.gate` (a parameter, targeted through `target_parameters`).
    Router,
    SharedGate,
    SharedUp,
    SharedDown,
    SharedExpertGate,
}

impl Target {
    /// Each target with its module path inside a layer (transformers' names).
    const PATHS: [(Target, &'static str); 14] = [
        (Target::QProj, "self_attn.q_proj"),
        (Target::KProj, "self_attn.k_proj"),
        (Target::VProj, "self_attn.v_proj"),
        (Target::OProj, "self_attn.o_proj"),
        (Target::InProjQkv, "linear_attn.in_proj_qkv"),
        (Target::InProjZ, "linear_attn.in_proj_z"),
        (Target::InProjB, "linear_attn.in_proj_b"),
        (Target::InProjA, "linear_attn.in_proj_a"),
        (Target::OutProj, "linear_attn.out_proj"),
        (Target::Router, "mlp.gate"),
        (Target::SharedGate, "mlp.shared_expert.gate_proj"),
        (Target::SharedUp, "mlp.shared_expert.up_proj"),
        (Target::SharedDown, "mlp.shared_expert.down_proj"),
        (Target::SharedExpertGate, "mlp.shared_expert_gate"),
    ];

    /// The layer kind that has this module (`None`: every layer).
    fn layer_kind(self) -> Option<LayerKind> {
        match self {
            Target::QProj | Target::KProj | Target::VProj | Target::OProj => Some(LayerKind::FullAttention),
            Target::InProjQkv | Target::InProjZ | Target::InProjB | Target::InProjA | Target::OutProj => {
                Some(LayerKind::GatedDeltaNet)
            }
            _ => None,
        }
    }

    /// The weight's [out, in].
    fn shape(self, c: &ModelConfig) -> [usize; 2] {
        let (h, d) = (c.hidden_size, c.head_dim);
        match self {
            Target::QProj => [c.num_attention_heads * 2 * d, h],
            Target::KProj | Target::VProj => [c.num_key_value_heads * d, h],
            Target::OProj => [h, c.num_attention_heads * d],
            Target::InProjQkv => [c.gdn_conv_dim(), h],
            Target::InProjZ => [c.gdn_value_dim(), h],
            Target::InProjB | Target::InProjA => [c.linear_num_value_heads, h],
            Target::OutProj => [h, c.gdn_value_dim()],
            Target::Router => [c.num_experts, h],
            Target::SharedGate | Target::SharedUp => [c.shared_expert_intermediate_size, h],
            Target::SharedDown => [h, c.shared_expert_intermediate_size],
            Target::SharedExpertGate => [1, h],
        }
    }
}

/// The fused expert tensors, in the order transformers' `Qwen3_5MoeExperts` declares them
/// (which decides PEFT's nesting).
const EXPERT_PARAMS: [&str; 2] = ["gate_up_proj", "down_proj"];

/// One routed expert's adapters.
#[derive(Clone, Debug, Default)]
pub struct ExpertLora {
    /// On the fused [2I, H] matrix: B's rows 0..I adapt the gate, I..2I the up projection.
    pub gate_up: Option<LoraPair>,
    /// On [H, I].
    pub down: Option<LoraPair>,
}

/// One decoder layer's adapters.
#[derive(Clone, Debug, Default)]
pub struct LayerLora {
    pub linears: BTreeMap<Target, LoraPair>,
    /// One per routed expert when the experts are adapted, else empty.
    pub experts: Vec<ExpertLora>,
}

impl LayerLora {
    pub fn get(&self, target: Target) -> Option<&LoraPair> {
        self.linears.get(&target)
    }

    pub fn expert(&self, e: usize) -> Option<&ExpertLora> {
        self.experts.get(e)
    }
}

/// A loaded, checked adapter.
#[derive(Debug)]
pub struct LoraAdapter {
    /// Unique in this process: a reloaded adapter gets a new one (the prefix cache keys on it).
    pub id: u64,
    pub dir: PathBuf,
    /// The largest rank of its matrices.
    pub rank: usize,
    /// One per decoder layer.
    pub layers: Vec<LayerLora>,
    /// Adapted matrices (a fused expert tensor counts once).
    pub matrices: usize,
    /// Bytes of A and B.
    pub bytes: usize,
}

/// Whether a backend runs adapters (`Backend::lora_support`): the CPU and CUDA backends run
/// every matrix an adapter may target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoraSupport {
    Nothing,
    All,
}

impl LoraSupport {
    /// Refuses, in one line naming the adapter, an adapter the backend cannot run.
    pub fn check(self, adapter: &LoraAdapter) -> Result<()> {
        match self {
            LoraSupport::All => Ok(()),
            LoraSupport::Nothing => {
                bail!("this backend does not run LoRA adapters ({}); the CPU backend does", adapter.dir.display())
            }
        }
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What `adapter_config.json` says that the weights need.
struct AdapterConfig {
    r: usize,
    alpha: f64,
    rslora: bool,
    /// `rank_pattern` gives some modules their own rank: the tensors' shapes are then the truth.
    rank_pattern: bool,
    target_parameters: Vec<String>,
}

impl AdapterConfig {
    fn scale(&self, rank: usize) -> f32 {
        let r = rank as f64;
        (if self.rslora { self.alpha / r.sqrt() } else { self.alpha / r }) as f32
    }
}

impl LoraAdapter {
    /// Reads and checks the PEFT adapter in `dir` against the model `cfg`.
    pub fn load(dir: &Path, cfg: &ModelConfig) -> Result<LoraAdapter> {
        if !dir.is_dir() {
            bail!("LoRA adapter directory {} does not exist", dir.display());
        }
        let config_path = dir.join(CONFIG);
        if !config_path.exists() {
            bail!("{}: no {CONFIG}; solo reads LoRA adapters as PEFT saves them ({CONFIG} + {WEIGHTS})", dir.display());
        }
        let text =
            std::fs::read_to_string(&config_path).with_context(|| format!("cannot read {}", config_path.display()))?;
        let json: Value =
            serde_json::from_str(&text).with_context(|| format!("{}: not valid JSON", config_path.display()))?;
        let config = read_config(&json).map_err(|problems| lines(problems, &config_path.display().to_string()))?;
        let weights = dir.join(WEIGHTS);
        if !weights.exists() {
            let bin = dir.join("adapter_model.bin");
            if bin.exists() {
                bail!(
                    "{}: solo reads {WEIGHTS}, not the pickle adapter_model.bin (save with safe_serialization=True)",
                    bin.display()
                );
            }
            bail!("{}: no {WEIGHTS}", dir.display());
        }
        let tensors = read_file(&weights, WEIGHTS)?;
        let mut layers = vec![LayerLora::default(); cfg.num_hidden_layers];
        let problems = build(cfg, &config, tensors, &mut layers);
        if !problems.is_empty() {
            bail!(lines(problems, &weights.display().to_string()));
        }
        let pairs = || layers.iter().flat_map(|l| l.linears.values().chain(l.experts.iter().flat_map(expert_pairs)));
        let rank = pairs().map(LoraPair::rank).max().unwrap_or(0);
        if rank == 0 {
            bail!("{}: holds no LoRA tensor for the text model", weights.display());
        }
        let bytes = pairs().map(|p| p.a.stored_bytes() + p.b.stored_bytes()).sum();
        let matrices = layers
            .iter()
            .map(|l| {
                let first = l.experts.first();
                l.linears.len() + first.map_or(0, |e| e.gate_up.is_some() as usize + e.down.is_some() as usize)
            })
            .sum();
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        Ok(LoraAdapter { id, dir: dir.to_path_buf(), rank, layers, matrices, bytes })
    }
}

fn expert_pairs(e: &ExpertLora) -> impl Iterator<Item = &LoraPair> {
    e.gate_up.iter().chain(e.down.iter())
}

/// Problems as the error: one line each, the first few of many.
fn lines(problems: Vec<String>, file: &str) -> anyhow::Error {
    const SHOWN: usize = 20;
    let mut out: Vec<String> = problems.iter().take(SHOWN).map(|p| format!("{file}: {p}")).collect();
    if problems.len() > SHOWN {
        out.push(format!("{file}: … and {} more problems", problems.len() - SHOWN));
    }
    anyhow::anyhow!(out.join("\n"))
}

/// The keys of `adapter_config.json` solo needs, or every reason to refuse it.
fn read_config(json: &Value) -> std::result::Result<AdapterConfig, Vec<String>> {
    let mut problems = Vec::new();
    let get = |key: &str| json.get(key).filter(|v| !v.is_null());
    let flag = |key: &str| get(key).and_then(Value::as_bool).unwrap_or(false);
    if let Some(kind) = get("peft_type").and_then(Value::as_str).filter(|t| *t != "LORA") {
        problems.push(format!("peft_type is \"{kind}\"; solo reads LoRA adapters (peft_type \"LORA\")"));
    }
    let r = get("r").and_then(Value::as_u64).unwrap_or(8) as usize;
    if r == 0 || r > MAX_RANK {
        problems.push(format!("r is {r}; solo takes ranks 1 to {MAX_RANK}"));
    }
    let alpha = get("lora_alpha").map_or(Some(8.0), Value::as_f64);
    if alpha.is_none() {
        problems.push(format!("lora_alpha is {}, not a number", json["lora_alpha"]));
    }
    if flag("use_dora") {
        problems.push("use_dora is true: DoRA adapters are not supported (solo reads plain LoRA)".into());
    }
    for key in ["use_qalora", "use_bdlora", "lora_bias", "fan_in_fan_out"] {
        if flag(key) {
            problems.push(format!("{key} is true; solo reads plain LoRA, where it is false"));
        }
    }
    if let Some(bias) = get("bias").and_then(Value::as_str).filter(|b| *b != "none") {
        problems.push(format!("bias is \"{bias}\"; solo reads adapters with bias \"none\" only"));
    }
    if let Some(modules) = get("modules_to_save").filter(|m| m.as_array().is_none_or(|a| !a.is_empty())) {
        problems.push(format!(
            "modules_to_save is {modules}: the adapter replaces whole modules, which solo cannot swap per \
             request (merge them into the checkpoint instead)"
        ));
    }
    if get("alpha_pattern").and_then(Value::as_object).is_some_and(|m| !m.is_empty()) {
        problems.push("alpha_pattern gives modules their own lora_alpha; solo reads one lora_alpha".into());
    }
    for key in [
        "layer_replication",
        "trainable_token_indices",
        "alora_invocation_tokens",
        "arrow_config",
        "velora_config",
        "kasa_config",
        "monteclora_config",
    ] {
        if get(key).is_some() {
            problems.push(format!("{key} is set; solo reads plain LoRA, without it"));
        }
    }
    let strings = |key: &str| -> Vec<String> {
        get(key)
            .and_then(Value::as_array)
            .map_or(Vec::new(), |a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
    };
    let rank_pattern = get("rank_pattern").and_then(Value::as_object).is_some_and(|m| !m.is_empty());
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(AdapterConfig {
        r,
        alpha: alpha.unwrap_or(8.0),
        rslora: flag("use_rslora"),
        rank_pattern,
        target_parameters: strings("target_parameters"),
    })
}

/// Where a tensor goes: a linear layer's pair, or the fused experts' pair nested `depth` deep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Slot {
    Linear(Target),
    Experts { depth: usize },
}

/// A and B of one slot, with their names.
#[derive(Default)]
struct Found {
    a: Option<(String, Tensor)>,
    b: Option<(String, Tensor)>,
    /// The module's path as PEFT saw it (`model.language_model.layers.0.mlp.experts`), for
    /// matching `target_parameters`.
    module: String,
    /// One of its tensors could not be read (already reported).
    unreadable: bool,
}

/// Sorts the tensors into `layers`; returns the problems, one per tensor.
fn build(
    cfg: &ModelConfig,
    config: &AdapterConfig,
    mut tensors: Vec<(String, std::result::Result<Tensor, String>)>,
    layers: &mut [LayerLora],
) -> Vec<String> {
    tensors.sort_by(|a, b| a.0.cmp(&b.0)); // problems in name order, the same every time
    let mut problems = Vec::new();
    let mut slots: BTreeMap<(usize, Slot), Found> = BTreeMap::new();
    for (name, tensor) in tensors {
        match place(cfg, &name) {
            Ok(None) => {}
            Ok(Some((layer, slot, module, is_a))) => {
                let found = slots.entry((layer, slot)).or_default();
                found.module = module;
                match tensor {
                    Ok(t) => *(if is_a { &mut found.a } else { &mut found.b }) = Some((name, t)),
                    Err(why) => {
                        // (the reader's message starts with the file's name, which `lines` adds)
                        problems.push(why.split_once(": ").map_or(why.clone(), |(_, rest)| rest.to_string()));
                        found.unreadable = true;
                    }
                }
            }
            Err(why) => problems.push(format!("tensor `{name}` {why}")),
        }
    }
    for ((layer, slot), found) in slots {
        if found.unreadable {
            continue;
        }
        let (Some((a_name, a)), Some((b_name, b))) = (found.a.as_ref(), found.b.as_ref()) else {
            let (have, missing) = match (&found.a, &found.b) {
                (Some((n, _)), None) => (n, "lora_B"),
                (None, Some((n, _))) => (n, "lora_A"),
                _ => unreachable!("a slot is made by one of its tensors"),
            };
            problems.push(format!("tensor `{have}` has no {missing} beside it"));
            continue;
        };
        let (a, b) = ((a_name, a), (b_name, b));
        match slot {
            Slot::Linear(target) => match pair(config, target.shape(cfg), 1, a, b) {
                Ok(mut pairs) => drop(layers[layer].linears.insert(target, pairs.remove(0))),
                Err(why) => problems.push(why),
            },
            Slot::Experts { depth } => match experts(cfg, config, &found.module, depth, a, b) {
                Ok((param, pairs)) => {
                    let experts = &mut layers[layer].experts;
                    experts.resize(cfg.num_experts, ExpertLora::default());
                    for (expert, p) in experts.iter_mut().zip(pairs) {
                        *(if param == 0 { &mut expert.gate_up } else { &mut expert.down }) = Some(p);
                    }
                }
                Err(why) => problems.push(why),
            },
        }
    }
    problems
}

/// The layer and slot a tensor name is for, the module's path and whether it is A; `None` for a
/// tensor solo skips (the vision tower); `Err` says what is wrong with the name.
fn place(cfg: &ModelConfig, name: &str) -> std::result::Result<Option<(usize, Slot, String, bool)>, String> {
    let path = name.strip_prefix("base_model.model.").unwrap_or(name);
    if path.starts_with("model.visual.") || path.starts_with("visual.") {
        return Ok(None);
    }
    let (module, is_a) = if let Some(m) = path.strip_suffix(".lora_A.weight") {
        (m, true)
    } else if let Some(m) = path.strip_suffix(".lora_B.weight") {
        (m, false)
    } else if path.contains("lora_magnitude_vector") {
        return Err("is a DoRA magnitude: DoRA adapters are not supported (solo reads plain LoRA)".into());
    } else if path.contains("lora_embedding_") {
        return Err("adapts the token embedding; solo adapts linear layers and experts only".into());
    } else if path.ends_with(".lora_B.bias") {
        return Err("is a LoRA bias; solo reads adapters without biases (lora_bias false)".into());
    } else {
        return Err("is not a LoRA tensor (`….lora_A.weight` / `….lora_B.weight`)".into());
    };
    let in_layers =
        module.strip_prefix("model.language_model.layers.").or_else(|| module.strip_prefix("model.layers."));
    let Some(rest) = in_layers else {
        return Err(format!(
            "adapts `{module}`, which solo does not adapt (it adapts the decoder layers' linear layers and experts)"
        ));
    };
    let (index, inner) = rest.split_once('.').unwrap_or((rest, ""));
    let Some(layer) = index.parse::<usize>().ok().filter(|&i| i < cfg.num_hidden_layers) else {
        return Err(format!("names layer {index}, but the model has {} layers", cfg.num_hidden_layers));
    };
    let kind = cfg.layer_types[layer];
    if let Some(nesting) = inner.strip_prefix("mlp.experts") {
        let depth = nesting.matches(".base_layer").count();
        if nesting != ".base_layer".repeat(depth) {
            return Err(format!("adapts `{inner}`; solo adapts the routed experts as the fused `mlp.experts` tensors (target_parameters)"));
        }
        let module = module.trim_end_matches(".base_layer").to_string();
        return Ok(Some((layer, Slot::Experts { depth }, module, is_a)));
    }
    let Some(&(target, _)) = Target::PATHS.iter().find(|(_, p)| *p == inner) else {
        return Err(format!("adapts `{inner}` of layer {layer}, a module this model does not have"));
    };
    if let Some(needed) = target.layer_kind().filter(|k| *k != kind) {
        return Err(format!("adapts `{inner}`, but layer {layer} is a {kind:?} layer, not a {needed:?} one"));
    }
    Ok(Some((layer, Slot::Linear(target), module.to_string(), is_a)))
}

/// Checks one A/B pair against the weight [out, in] it adapts, with `stack` matrices' ranks
/// stacked (1 for a linear layer, E for the fused experts); returns one pair per matrix.
fn pair(
    config: &AdapterConfig,
    [out, inner]: [usize; 2],
    stack: usize,
    (a_name, a): (&String, &Tensor),
    (b_name, b): (&String, &Tensor),
) -> std::result::Result<Vec<LoraPair>, String> {
    for (name, t) in [(a_name, a), (b_name, b)] {
        if !matches!(t.dtype, DType::BF16 | DType::F16 | DType::F32) {
            return Err(format!("tensor `{name}` is {}; solo reads LoRA weights in BF16, F16 or F32", t.dtype.name()));
        }
        if t.shape.len() != 2 {
            return Err(format!("tensor `{name}` has shape {:?}; LoRA weights are 2-D", t.shape));
        }
    }
    let stacked = a.shape[0];
    let rank = stacked / stack;
    let per = if stack > 1 { format!(" ({stack} experts × rank)") } else { String::new() };
    if stacked % stack != 0 || rank == 0 || a.shape[1] != inner {
        return Err(format!(
            "tensor `{a_name}` has shape {:?} but the weight it adapts needs [rank{per}, {inner}]",
            a.shape
        ));
    }
    if b.shape != [out, stacked] {
        return Err(format!("tensor `{b_name}` has shape {:?} but its lora_A implies [{out}, {stacked}]", b.shape));
    }
    if rank > MAX_RANK {
        return Err(format!("tensor `{a_name}` has rank {rank}; solo takes ranks up to {MAX_RANK}"));
    }
    if !config.rank_pattern && rank != config.r {
        return Err(format!("tensor `{a_name}` has rank {rank} but adapter_config.json says r = {}", config.r));
    }
    for (name, t) in [(a_name, a), (b_name, b)] {
        if let Some(bad) = t.to_f32().into_iter().find(|v| !v.is_finite()) {
            return Err(format!("tensor `{name}` holds {bad}"));
        }
    }
    let scale = config.scale(rank);
    if stack == 1 {
        return Ok(vec![LoraPair { a: a.clone(), b: b.clone(), scale }]);
    }
    // Expert e: A's rows e·r .. (e+1)·r, B's columns k·E + e (PEFT's reshape of [out, r, E]).
    let size = b.dtype.size();
    let bytes = b.bytes();
    Ok((0..stack)
        .map(|e| {
            let mut columns = Vec::with_capacity(out * rank * size);
            for o in 0..out {
                for k in 0..rank {
                    let at = (o * stacked + k * stack + e) * size;
                    columns.extend_from_slice(&bytes[at..at + size]);
                }
            }
            let b = Tensor::from_bytes(b.dtype, vec![out, rank], &columns);
            LoraPair { a: a.rows(e * rank, rank), b, scale }
        })
        .collect())
}

/// The fused experts' pair nested `depth` deep under `module`: which expert tensor it adapts
/// (0 gate_up_proj, 1 down_proj) and one pair per expert.
fn experts(
    cfg: &ModelConfig,
    config: &AdapterConfig,
    module: &str,
    depth: usize,
    a: (&String, &Tensor),
    b: (&String, &Tensor),
) -> std::result::Result<(usize, Vec<LoraPair>), String> {
    // PEFT matches a target against `{module}.{param}` by equality or as a dotted suffix.
    let targeted: Vec<usize> = (0..EXPERT_PARAMS.len())
        .filter(|&i| {
            let key = format!("{module}.{}", EXPERT_PARAMS[i]);
            config.target_parameters.iter().any(|t| key == *t || key.ends_with(&format!(".{t}")))
        })
        .collect();
    let Some(&param) = targeted.len().checked_sub(depth + 1).and_then(|i| targeted.get(i)) else {
        return Err(format!(
            "tensor `{}` adapts the fused experts, but adapter_config.json's target_parameters {:?} name {} of \
             their tensors ({})",
            a.0,
            config.target_parameters,
            targeted.len(),
            EXPERT_PARAMS.join(", ")
        ));
    };
    let (h, inter) = (cfg.hidden_size, cfg.moe_intermediate_size);
    let shape = if param == 0 { [2 * inter, h] } else { [h, inter] };
    pair(config, shape, cfg.num_experts, a, b).map(|pairs| (param, pairs))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backend without adapters refuses every one, in one line naming it; one with them takes
    /// any.
    #[test]
    fn backends_without_adapters_refuse_them_in_one_line() {
        let p = LoraPair {
            a: Tensor::from_f32_as_bf16(vec![4, 256], &[0.0; 1024]),
            b: Tensor::from_f32_as_bf16(vec![8, 4], &[0.0; 32]),
            scale: 1.0,
        };
        let experts = vec![ExpertLora { gate_up: None, down: Some(p.clone()) }];
        let adapter = LoraAdapter {
            id: 7,
            dir: "my-adapter".into(),
            rank: 4,
            layers: vec![LayerLora::default(), LayerLora { linears: [(Target::QProj, p)].into(), experts }],
            matrices: 2,
            bytes: 0,
        };
        LoraSupport::All.check(&adapter).unwrap();
        let e = LoraSupport::Nothing.check(&adapter).unwrap_err().to_string();
        assert!(e.contains("my-adapter") && e.contains("CPU backend") && !e.contains('\n'), "{e}");
    }
}
