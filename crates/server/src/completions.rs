//! `POST /v1/completions` (the legacy text API): a raw prompt, the raw continuation. No chat
//! template and no reasoning or tool-call parsing.

use crate::engine::{Event, Finish, Job, TokenLogprob};
use crate::error::ApiError;
use crate::handlers::{self, sse_data, App, Started};
use crate::prompt;
use crate::request::{self, Fields};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;

pub async fn completions(State(app): State<Arc<App>>, body: Result<Bytes, BytesRejection>) -> Response {
    handle(app, body).await.unwrap_or_else(IntoResponse::into_response)
}

async fn handle(app: Arc<App>, body: Result<Bytes, BytesRejection>) -> Result<Response, ApiError> {
    let arrived = Instant::now();
    let body_bytes = body.as_ref().map_or(0, Bytes::len);
    let json = handlers::parse_body(&app, body)?;
    let f = Fields::of(&json)?;
    let adapter = crate::lora::pick(&app, &f)?;
    let common = request::common(&f, &app.text.defaults, app.vocab, app.random())?;
    let logprobs = request::completion_logprobs(&f)?;
    let text = app.text.clone();
    let prompt_field = f.get("prompt").cloned();
    let vocab = app.vocab;
    let prompt =
        handlers::prompt_work(body_bytes, move || prompt::completion(&text, prompt_field.as_ref(), vocab)).await??;
    // OpenAI's default for this endpoint is 16 tokens.
    let max_tokens = handlers::max_tokens(&app, prompt.len(), Some(common.max_tokens.unwrap_or(16)))?;

    let (tx, rx) = mpsc::unbounded_channel();
    let job = Job {
        prompt,
        snapshot_points: Vec::new(),
        max_tokens,
        sampling: common.sampling,
        logprobs,
        stop: common.stop,
        forced: None,
        arrived,
        deadline: arrived + app.request_timeout,
        events: tx,
        adapter,
        images: Vec::new(),
        image_token: 0,
    };
    let started = handlers::start(&app, job, rx).await?;
    let reply =
        Reply { id: app.response_id("cmpl"), created: handlers::unix_now(), logprobs: Logprobs::default(), app };
    if common.stream {
        Ok(stream(reply, started, common.include_usage))
    } else {
        collect(reply, started).await
    }
}

struct Reply {
    app: Arc<App>,
    id: String,
    created: u64,
    logprobs: Logprobs,
}

/// The completions logprobs format: parallel lists.
#[derive(Default)]
struct Logprobs {
    tokens: Vec<Value>,
    token_logprobs: Vec<Value>,
    top_logprobs: Vec<Value>,
    text_offset: Vec<Value>,
    /// Characters of text so far, for `text_offset`.
    offset: usize,
}

impl Logprobs {
    fn add(&mut self, app: &App, lp: &TokenLogprob) {
        let text =
            |id: u32| String::from_utf8_lossy(&app.text.tokenizer.token_bytes(id).unwrap_or_default()).into_owned();
        let token = text(lp.token);
        self.text_offset.push(self.offset.into());
        self.offset += token.chars().count();
        self.tokens.push(token.into());
        self.token_logprobs.push(lp.logprob.into());
        let top: Map<String, Value> = lp.top.iter().map(|&(t, l)| (text(t), Value::from(l))).collect();
        self.top_logprobs.push(Value::Object(top));
    }

    /// The entries gathered since the last call, as a `logprobs` object (null if none).
    fn take(&mut self) -> Value {
        if self.tokens.is_empty() {
            return Value::Null;
        }
        json!({
            "tokens": std::mem::take(&mut self.tokens),
            "token_logprobs": std::mem::take(&mut self.token_logprobs),
            "top_logprobs": std::mem::take(&mut self.top_logprobs),
            "text_offset": std::mem::take(&mut self.text_offset),
        })
    }
}

fn finish_reason(finish: Finish) -> &'static str {
    match finish {
        Finish::Stop => "stop",
        Finish::Length => "length",
    }
}

async fn collect(mut reply: Reply, mut started: Started) -> Result<Response, ApiError> {
    let mut text = String::new();
    let (finish, completion_tokens) = loop {
        match started.events.recv().await {
            Some(Event::Text { text: piece, logprob }) => {
                text += &piece;
                if let Some(lp) = logprob {
                    reply.logprobs.add(&reply.app, &lp);
                }
            }
            Some(Event::Done { finish, completion_tokens }) => break (finish, completion_tokens),
            Some(Event::Error(e)) => return Err(e),
            Some(Event::Started { .. }) => {}
            None => return Err(ApiError::internal(&"the engine dropped the request")),
        }
    };
    let body = json!({
        "id": reply.id, "object": "text_completion", "created": reply.created, "model": reply.app.model_name,
        "choices": [{"index": 0, "text": text, "logprobs": reply.logprobs.take(), "finish_reason": finish_reason(finish)}],
        "usage": handlers::usage(started.prompt_tokens, completion_tokens, started.cached_tokens),
    });
    Ok(axum::Json(body).into_response())
}

/// The SSE side: engine events in, `text_completion` chunks out.
struct ChunkStream {
    reply: Reply,
    include_usage: bool,
}

fn stream(reply: Reply, started: Started, include_usage: bool) -> Response {
    handlers::stream_events(ChunkStream { reply, include_usage }, started, Vec::new(), include_usage)
}

impl ChunkStream {
    fn chunk(&self, text: &str, logprobs: Value, finish: Option<&str>) -> Bytes {
        let r = &self.reply;
        let mut v = json!({
            "id": r.id, "object": "text_completion", "created": r.created, "model": r.app.model_name,
            "choices": [{"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish}],
        });
        if self.include_usage {
            v["usage"] = Value::Null;
        }
        sse_data(&v)
    }
}

impl handlers::Chunks for ChunkStream {
    fn text(&mut self, text: String, logprob: Option<TokenLogprob>, out: &mut VecDeque<Bytes>) {
        if let Some(lp) = logprob {
            self.reply.logprobs.add(&self.reply.app, &lp);
        }
        if !text.is_empty() {
            let logprobs = self.reply.logprobs.take();
            out.push_back(self.chunk(&text, logprobs, None));
        }
    }

    fn finish(&mut self, finish: Finish, out: &mut VecDeque<Bytes>) {
        let logprobs = self.reply.logprobs.take();
        out.push_back(self.chunk("", logprobs, Some(finish_reason(finish))));
    }

    fn usage_chunk(&self, usage: Value) -> Value {
        let r = &self.reply;
        json!({
            "id": r.id, "object": "text_completion", "created": r.created, "model": r.app.model_name,
            "choices": [], "usage": usage,
        })
    }
}
