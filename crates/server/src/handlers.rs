//! What the generation endpoints share: the app state, reading the body, the context-length
//! check, handing a job to the engine and waiting for it to start, usage, and SSE responses.

use crate::engine::{EngineHandle, Event, Finish, Job, TokenLogprob};
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::prompt::TextAssets;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde_json::{json, Value};
use solo_model::sampler::SplitMix;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

/// State shared by every handler.
pub struct App {
    pub model_name: String,
    pub api_key: Option<String>,
    /// Context length: prompt plus completion.
    pub max_seq: usize,
    pub request_timeout: Duration,
    pub max_body_bytes: usize,
    /// From the end of a request's headers to the end of its body (0: no limit).
    pub body_timeout: Duration,
    /// The model's vocabulary (embedding rows).
    pub vocab: usize,
    /// How the checkpoint stores its weights (`bf16`, `fp8-block128`), for `/v1/models`.
    pub precision: &'static str,
    /// Unix time the server started (`created` of the model object).
    pub created: u64,
    pub text: Arc<TextAssets>,
    pub engine: EngineHandle,
    pub metrics: Arc<Metrics>,
    pub rng: Mutex<SplitMix>,
    /// The privacy gate and the cloud route (`--cloud-url`, `--policy`); `None`: local only, ungated.
    pub hybrid: Option<Arc<crate::hybrid::Hybrid>>,
    /// The LoRA adapters served beside the base model.
    pub lora: crate::lora::Adapters,
    /// How images in chat requests become prompt tokens, or why this server takes none.
    pub vision: Result<Arc<crate::images::Vision>, String>,
}

impl App {
    /// Fresh randomness for ids and default seeds.
    pub fn random(&self) -> u64 {
        self.rng.lock().unwrap_or_else(|e| e.into_inner()).next_u64()
    }

    pub fn response_id(&self, prefix: &str) -> String {
        format!("{prefix}-{:016x}{:08x}", self.random(), self.random() as u32)
    }
}

pub fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The body as JSON: 413 past the size limit, 400 when it is not JSON.
pub fn parse_body(app: &App, body: Result<Bytes, BytesRejection>) -> Result<Value, ApiError> {
    let bytes = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::body_too_large(app.max_body_bytes)
        } else {
            ApiError::invalid(format!("The request body could not be read: {rejection}"))
        }
    })?;
    serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::invalid(format!(
            "We could not parse the JSON body of your request ({e}). The body must be a JSON object."
        ))
    })
}

/// Request bodies up to this size have their prompt rendered and tokenised on the handler's own
/// thread: handing that work to a blocking thread and back costs more than the work itself
/// (tenths of a millisecond of thread wake-ups against ~0.1 ms: bench/RESULTS.md "Request
/// overhead"). Larger ones go to a blocking thread, so that a long prompt does not hold up the
/// runtime's other connections.
pub const INLINE_PROMPT_BYTES: usize = 2048;

/// Runs `work` (the chat template, the tokenizer) for a request body of `body_bytes`: here when
/// the body is small, on a blocking thread otherwise (see [`INLINE_PROMPT_BYTES`]). A panic in it
/// is a 500 either way.
pub async fn prompt_work<T: Send + 'static>(
    body_bytes: usize,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    if body_bytes <= INLINE_PROMPT_BYTES {
        return std::panic::catch_unwind(std::panic::AssertUnwindSafe(work))
            .map_err(|_| ApiError::internal(&"the prompt could not be built (a panic)"));
    }
    tokio::task::spawn_blocking(work).await.map_err(|e| ApiError::internal(&e))
}

/// The completion budget: the request's `max_tokens`, else whatever the context has left.
/// 400 with the numbers when the prompt and the completion do not fit.
pub fn max_tokens(app: &App, prompt: usize, requested: Option<usize>) -> Result<usize, ApiError> {
    let limit = app.max_seq;
    match requested {
        Some(n) if prompt.saturating_add(n) > limit => Err(ApiError::invalid_param(
            "max_tokens",
            format!(
                "This model's maximum context length is {limit} tokens. However, you requested {} tokens \
                 ({prompt} in the messages, {n} in the completion). Please reduce the length of the messages or completion.",
                prompt + n
            ),
        )),
        Some(n) => Ok(n),
        None if prompt >= limit => Err(ApiError::invalid_param(
            "messages",
            format!(
                "This model's maximum context length is {limit} tokens. However, your messages resulted in {prompt} tokens. \
                 Please reduce the length of the messages."
            ),
        )),
        None => Ok(limit - prompt),
    }
}

/// A job the engine has started: its prompt is in and tokens follow on `events`.
pub struct Started {
    pub events: UnboundedReceiver<Event>,
    pub prompt_tokens: usize,
    pub cached_tokens: usize,
}

/// Queues the job (503 when the queue is full) and waits until the engine has prefilled it,
/// so that errors up to then still get their own status. Dropping the returned future (the
/// client went away) drops the receiver, which the engine sees.
pub async fn start(app: &App, job: Job, mut events: UnboundedReceiver<Event>) -> Result<Started, ApiError> {
    app.engine.submit(job)?;
    match events.recv().await {
        Some(Event::Started { prompt_tokens, cached_tokens }) => Ok(Started { events, prompt_tokens, cached_tokens }),
        Some(Event::Error(e)) => Err(e),
        Some(other) => Err(ApiError::internal(&format!("engine sent {other:?} before starting"))),
        None => Err(ApiError::internal(&"the engine dropped the request")),
    }
}

pub fn usage(prompt: usize, completion: usize, cached: usize) -> Value {
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    })
}

/// `data: {json}\n\n`, one SSE event.
pub fn sse_data(value: &Value) -> Bytes {
    Bytes::from(format!("data: {value}\n\n"))
}

pub fn sse_done() -> Bytes {
    Bytes::from_static(b"data: [DONE]\n\n")
}

/// A `text/event-stream` response over `events`.
pub fn sse_response(events: impl Stream<Item = Result<Bytes, Infallible>> + Send + 'static) -> Response {
    ([(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")], Body::from_stream(events))
        .into_response()
}

/// How one endpoint's stream turns engine events into SSE chunks (`chat.completion.chunk`,
/// `text_completion`); `stream_events` does the rest: the queue, the usage chunk, `[DONE]`, and an
/// error that arrives after the headers went out.
pub trait Chunks: Send + 'static {
    /// The chunks of a piece of output text (and the logprob of its token).
    fn text(&mut self, text: String, logprob: Option<TokenLogprob>, out: &mut VecDeque<Bytes>);
    /// The last chunks, ending with the one that carries the finish reason.
    fn finish(&mut self, finish: Finish, out: &mut VecDeque<Bytes>);
    /// The usage-only chunk (`"choices": []`) of `stream_options.include_usage`.
    fn usage_chunk(&self, usage: Value) -> Value;
}

/// An SSE response: `first` (chunks sent before any event), then `chunks` of the engine's events.
pub fn stream_events<C: Chunks>(chunks: C, started: Started, first: Vec<Bytes>, include_usage: bool) -> Response {
    struct State<C> {
        chunks: C,
        started: Started,
        include_usage: bool,
        out: VecDeque<Bytes>,
        done: bool,
    }
    impl<C: Chunks> State<C> {
        /// Headers are gone already: the error travels as an event, then the stream ends.
        fn fail(&mut self, e: ApiError) {
            self.out.push_back(sse_data(&e.body()));
            self.out.push_back(sse_done());
            self.done = true;
        }
    }
    let s = State { chunks, started, include_usage, out: first.into(), done: false };
    let events = futures_util::stream::unfold(s, |mut s| async move {
        loop {
            if let Some(bytes) = s.out.pop_front() {
                return Some((Ok(bytes), s));
            }
            if s.done {
                return None;
            }
            match s.started.events.recv().await {
                Some(Event::Text { text, logprob }) => s.chunks.text(text, logprob, &mut s.out),
                Some(Event::Done { finish, completion_tokens }) => {
                    s.chunks.finish(finish, &mut s.out);
                    if s.include_usage {
                        let u = usage(s.started.prompt_tokens, completion_tokens, s.started.cached_tokens);
                        s.out.push_back(sse_data(&s.chunks.usage_chunk(u)));
                    }
                    s.out.push_back(sse_done());
                    s.done = true;
                }
                Some(Event::Started { .. }) => {}
                Some(Event::Error(e)) => s.fail(e),
                None => s.fail(ApiError::internal(&"the engine dropped the request")),
            }
        }
    });
    sse_response(events)
}

/// A logprob entry of the chat format: `{token, logprob, bytes}` of token `id`.
pub fn token_entry(text: &TextAssets, id: u32, logprob: f32) -> Value {
    let bytes = text.tokenizer.token_bytes(id).unwrap_or_default();
    json!({"token": String::from_utf8_lossy(&bytes), "logprob": logprob, "bytes": bytes})
}
