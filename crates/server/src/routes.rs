//! The router: endpoints, the API-key check, per-route status counting, the body limit and
//! deadline, and
//! OpenAI error objects for unknown routes and methods.

use crate::completions::completions;
use crate::error::ApiError;
use crate::handlers::App;
use axum::extract::{DefaultBodyLimit, MatchedPath, Path, Request, State};
use axum::http::{header, Method, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::sync::Arc;

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(crate::web::index))
        .route("/ui/{name}", get(crate::web::asset))
        .route("/v1/chat/completions", post(crate::hybrid::chat))
        .route("/v1/completions", post(completions))
        .route("/v1/models", get(models))
        .route("/v1/models/{*id}", get(model))
        .route("/v1/load_lora_adapter", post(crate::lora::load))
        .route("/v1/unload_lora_adapter", post(crate::lora::unload))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .fallback(unknown_route)
        .method_not_allowed_fallback(wrong_method)
        .layer(middleware::from_fn_with_state(app.clone(), authorize))
        .layer(middleware::from_fn_with_state(app.body_timeout, crate::conn::body_deadline))
        .layer(middleware::from_fn_with_state(app.clone(), count))
        .layer(DefaultBodyLimit::max(app.max_body_bytes))
        .with_state(app)
}

fn model_object(app: &App) -> Value {
    json!({"id": app.model_name, "object": "model", "created": app.created, "owned_by": "solo",
           "max_model_len": app.max_seq, "precision": app.precision})
}

/// The base model, then each LoRA adapter as a model of its own (`parent`: the base, `root`: its
/// directory, as vLLM lists them).
fn model_objects(app: &App) -> Vec<Value> {
    let adapters = app.lora.list().into_iter().map(|(name, served)| {
        json!({"id": name, "object": "model", "created": served.created, "owned_by": "solo",
               "root": served.adapter.dir.display().to_string(), "parent": app.model_name,
               "max_model_len": app.max_seq, "precision": app.precision, "lora_rank": served.adapter.rank})
    });
    std::iter::once(model_object(app)).chain(adapters).collect()
}

async fn models(State(app): State<Arc<App>>) -> Json<Value> {
    Json(json!({"object": "list", "data": model_objects(&app)}))
}

async fn model(State(app): State<Arc<App>>, Path(id): Path<String>) -> Response {
    let short = app.model_name.rsplit('/').next().unwrap_or(&app.model_name);
    let id = if id == short { app.model_name.clone() } else { id };
    match model_objects(&app).into_iter().find(|m| m["id"] == id.as_str()) {
        Some(m) => Json(m).into_response(),
        None => ApiError::model_not_found(&id).into_response(),
    }
}

async fn health() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], app.metrics.render()).into_response()
}

async fn unknown_route(method: Method, uri: Uri) -> ApiError {
    ApiError::unknown_route(method.as_str(), uri.path())
}

async fn wrong_method(method: Method, uri: Uri) -> ApiError {
    ApiError::method_not_allowed(method.as_str(), uri.path())
}

/// With `--api-key`, every `/v1/` route needs `Authorization: Bearer KEY`; `/health` and
/// `/metrics` stay open for probes and scrapers.
async fn authorize(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let Some(key) = app.api_key.as_deref() else { return next.run(request).await };
    if !request.uri().path().starts_with("/v1/") {
        return next.run(request).await;
    }
    let given = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    match given.and_then(|v| v.strip_prefix("Bearer ")).map(str::trim) {
        Some(token) if constant_time_eq(token.as_bytes(), key.as_bytes()) => next.run(request).await,
        Some(_) => ApiError::unauthorized("Incorrect API key provided.").into_response(),
        None => ApiError::unauthorized(
            "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
        )
        .into_response(),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Counts responses by route and status (unknown paths share one label).
async fn count(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().map_or("unmatched".to_string(), |p| p.as_str().to_string());
    let response = next.run(request).await;
    app.metrics.count_request(&route, response.status().as_u16());
    response
}
