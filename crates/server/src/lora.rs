//! LoRA adapters in the server: loaded at start (`--lora NAME=DIR`) or at run time
//! (`POST /v1/load_lora_adapter` / `/v1/unload_lora_adapter`, vLLM's names and bodies), each
//! served as its own model id (`/v1/models`); a request's `model` picks its adapter, or the base
//! model. The engine runs requests of different adapters (and none) in one batched step: each
//! sequence's state carries its adapter (`Backend::set_adapter`).
//!
//! An adapter unloaded while requests use it stays in memory until they finish; the prefix
//! cache keys on the adapter's load (`LoraAdapter::id`), so a reloaded adapter of the same name
//! never resumes the old one's snapshots.

use crate::error::ApiError;
use crate::handlers::{self, App};
use crate::request::{self, Fields};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use solo_model::lora::{LoraAdapter, LoraSupport};
use solo_model::ModelConfig;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, RwLock};

/// The adapters being served, by model id.
pub struct Adapters {
    model: ModelConfig,
    /// What the backend's adapters may adapt: a loaded adapter is checked against it.
    support: LoraSupport,
    loaded: RwLock<BTreeMap<String, Served>>,
}

#[derive(Clone)]
pub struct Served {
    pub adapter: Arc<LoraAdapter>,
    /// Unix time it was loaded (`created` of its model object).
    pub created: u64,
}

impl Adapters {
    pub fn new(model: ModelConfig, support: LoraSupport) -> Self {
        Adapters { model, support, loaded: RwLock::new(BTreeMap::new()) }
    }

    /// Reads and checks the adapter in `dir` and serves it as `name`.
    pub fn load(&self, name: &str, dir: &Path) -> anyhow::Result<Arc<LoraAdapter>> {
        let adapter = Arc::new(LoraAdapter::load(dir, &self.model)?);
        self.support.check(&adapter)?;
        let served = Served { adapter: adapter.clone(), created: handlers::unix_now() };
        self.loaded.write().unwrap_or_else(|e| e.into_inner()).insert(name.to_string(), served);
        Ok(adapter)
    }

    pub fn unload(&self, name: &str) -> bool {
        self.loaded.write().unwrap_or_else(|e| e.into_inner()).remove(name).is_some()
    }

    pub fn get(&self, name: &str) -> Option<Arc<LoraAdapter>> {
        self.loaded.read().unwrap_or_else(|e| e.into_inner()).get(name).map(|s| s.adapter.clone())
    }

    /// Every adapter served, by name.
    pub fn list(&self) -> Vec<(String, Served)> {
        self.loaded.read().unwrap_or_else(|e| e.into_inner()).iter().map(|(n, s)| (n.clone(), s.clone())).collect()
    }
}

/// The adapter a request's `model` names: `None` for the base model (or no `model`); 404 for an
/// id that is neither.
pub fn pick(app: &App, f: &Fields) -> Result<Option<Arc<LoraAdapter>>, ApiError> {
    if let Some(adapter) = f.string("model")?.and_then(|m| app.lora.get(m)) {
        return Ok(Some(adapter));
    }
    request::check_model(f, &app.model_name).map(|()| None)
}

/// A name an adapter may take: not the base model's ids, not empty.
fn check_name(app: &App, name: &str) -> Result<(), ApiError> {
    let short = app.model_name.rsplit('/').next().unwrap_or(&app.model_name);
    if name.trim().is_empty() || name == app.model_name || name == short {
        return Err(ApiError::invalid_param(
            "lora_name",
            format!("`lora_name` must be a new model id, not empty and not the base model's (`{}`).", app.model_name),
        ));
    }
    Ok(())
}

/// `POST /v1/load_lora_adapter` `{"lora_name": ID, "lora_path": DIR}` (a directory on the
/// server's disk): 200 once it is served, 400 with the adapter's problems, one per line.
pub async fn load(State(app): State<Arc<App>>, body: Result<Bytes, BytesRejection>) -> Response {
    load_adapter(app, body).await.unwrap_or_else(IntoResponse::into_response)
}

async fn load_adapter(app: Arc<App>, body: Result<Bytes, BytesRejection>) -> Result<Response, ApiError> {
    let json = handlers::parse_body(&app, body)?;
    let f = Fields::of(&json)?;
    let name = required(&f, "lora_name")?.to_string();
    let path = required(&f, "lora_path")?.to_string();
    check_name(&app, &name)?;
    if app.lora.get(&name).is_some() {
        return Err(ApiError::invalid_param(
            "lora_name",
            format!("The lora adapter '{name}' has already been loaded."),
        ));
    }
    let worker = app.clone();
    let (n, p) = (name.clone(), path.clone());
    let loaded = tokio::task::spawn_blocking(move || worker.lora.load(&n, Path::new(&p)))
        .await
        .map_err(|e| ApiError::internal(&e))?;
    match loaded {
        Ok(a) => {
            eprintln!(
                "solo serve: LoRA adapter `{name}` loaded from {path} (rank {}, {} matrices)",
                a.rank, a.matrices
            );
            Ok((StatusCode::OK, format!("Success: LoRA adapter '{name}' added successfully.")).into_response())
        }
        Err(e) => Err(ApiError::invalid_param("lora_path", format!("{e:#}"))),
    }
}

/// `POST /v1/unload_lora_adapter` `{"lora_name": ID}`: 404 when no adapter has that name.
pub async fn unload(State(app): State<Arc<App>>, body: Result<Bytes, BytesRejection>) -> Response {
    let outcome = handlers::parse_body(&app, body).and_then(|json| {
        let f = Fields::of(&json)?;
        let name = required(&f, "lora_name")?;
        if !app.lora.unload(name) {
            return Err(ApiError::not_found("lora_name", format!("The lora adapter '{name}' cannot be found.")));
        }
        Ok(format!("Success: LoRA adapter '{name}' removed successfully."))
    });
    match outcome {
        Ok(text) => (StatusCode::OK, text).into_response(),
        Err(e) => e.into_response(),
    }
}

fn required<'a>(f: &Fields<'a>, key: &str) -> Result<&'a str, ApiError> {
    f.string(key)?.ok_or_else(|| ApiError::invalid_param(key, format!("`{key}` is required.")))
}
