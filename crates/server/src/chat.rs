//! `POST /v1/chat/completions`: messages → prompt → engine → reasoning / content / tool calls,
//! as one JSON response or as OpenAI's stream of `chat.completion.chunk` events.

use crate::engine::{Event, Finish, Forced, Job, TokenLogprob};
use crate::error::ApiError;
use crate::handlers::{self, sse_data, token_entry, App, Started};
use crate::parser::{Channel, Delta, OutputParser};
use crate::prompt;
use crate::request::{self, Fields, ToolChoice};
use crate::tool_args::ToolSchemas;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;

pub async fn chat_completions(State(app): State<Arc<App>>, body: Result<Bytes, BytesRejection>) -> Response {
    handle(app, body).await.unwrap_or_else(IntoResponse::into_response)
}

async fn handle(app: Arc<App>, body: Result<Bytes, BytesRejection>) -> Result<Response, ApiError> {
    let arrived = Instant::now();
    let body_bytes = body.as_ref().map_or(0, Bytes::len);
    let json = handlers::parse_body(&app, body)?;
    let f = Fields::of(&json)?;
    let adapter = crate::lora::pick(&app, &f)?;
    let common = request::common(&f, &app.text.defaults, app.vocab, app.random())?;
    let logprobs = request::chat_logprobs(&f)?;
    let (tools, choice) = request::tools(&f)?;
    let (enable_thinking, preserve_thinking) = request::thinking(&f)?;
    // `tool_choice: none` leaves the tools out of the prompt and the output unparsed.
    let use_tools = !tools.is_empty() && choice != ToolChoice::None;

    let text = app.text.clone();
    let messages = f.get("messages").cloned();
    let tools_value = use_tools.then(|| Value::Array(tools.clone()));
    let vision = app.vision.clone();
    let prompt = handlers::prompt_work(body_bytes, move || {
        let vision = vision.as_deref().map_err(String::as_str);
        prompt::chat_with_images(
            &text,
            messages.as_ref(),
            tools_value.as_ref(),
            enable_thinking,
            preserve_thinking,
            vision,
        )
    })
    .await??;
    let max_tokens = handlers::max_tokens(&app, prompt.tokens.len(), common.max_tokens)?;

    let (tx, rx) = mpsc::unbounded_channel();
    let job = Job {
        forced: forced_call(&app, &choice, prompt.starts_in_reasoning),
        prompt: crate::images::cache_keys(&prompt.tokens, &prompt.images),
        snapshot_points: prompt.snapshot_points,
        max_tokens,
        sampling: common.sampling,
        logprobs,
        stop: common.stop,
        arrived,
        deadline: arrived + app.request_timeout,
        events: tx,
        adapter,
        images: prompt.images,
        image_token: app.vision.as_ref().map_or(0, |v| v.image_token),
    };
    let started = handlers::start(&app, job, rx).await?;
    let start = if prompt.starts_in_reasoning { Channel::Reasoning } else { Channel::Content };
    let schemas = use_tools.then(|| ToolSchemas::from_tools(&tools));
    let reply = Reply {
        parser: OutputParser::new(start, schemas, app.random()),
        id: app.response_id("chatcmpl"),
        created: handlers::unix_now(),
        logprobs: Vec::new(),
        app,
    };
    if common.stream {
        Ok(stream(reply, started, common.include_usage))
    } else {
        collect(reply, started).await
    }
}

/// With `tool_choice` `required` or a named function, the call's opening tags are written into
/// the output once the reasoning is over (right away when thinking is off).
fn forced_call(app: &App, choice: &ToolChoice, in_reasoning: bool) -> Option<Forced> {
    let opening = match choice {
        ToolChoice::Required => "<tool_call>\n".to_string(),
        ToolChoice::Named(name) => format!("<tool_call>\n<function={name}>\n"),
        ToolChoice::Auto | ToolChoice::None => return None,
    };
    let (after, text) =
        if in_reasoning { (Some(app.text.think_end?), format!("\n\n{opening}")) } else { (None, opening) };
    let tokens = app.text.tokenizer.encode(&text).ok()?;
    Some(Forced { after, tokens })
}

/// One reply in the making.
struct Reply {
    app: Arc<App>,
    parser: OutputParser,
    id: String,
    created: u64,
    /// Logprob entries not yet sent.
    logprobs: Vec<Value>,
}

impl Reply {
    fn finish_reason(&self, finish: Finish) -> &'static str {
        match finish {
            Finish::Length => "length",
            Finish::Stop if self.parser.tool_calls() > 0 => "tool_calls",
            Finish::Stop => "stop",
        }
    }

    fn add_logprob(&mut self, lp: &crate::engine::TokenLogprob) {
        let mut entry = token_entry(&self.app.text, lp.token, lp.logprob);
        entry["top_logprobs"] = lp.top.iter().map(|&(t, l)| token_entry(&self.app.text, t, l)).collect();
        self.logprobs.push(entry);
    }
}

async fn collect(mut reply: Reply, mut started: Started) -> Result<Response, ApiError> {
    let (mut reasoning, mut content) = (String::new(), String::new());
    let mut calls: Vec<Value> = Vec::new();
    let mut apply = |deltas: Vec<Delta>| {
        for d in deltas {
            match d {
                Delta::Reasoning(t) => reasoning += &t,
                Delta::Content(t) => content += &t,
                Delta::ToolCallStart { id, name, .. } => {
                    calls.push(json!({"id": id, "type": "function", "function": {"name": name, "arguments": ""}}))
                }
                Delta::ToolCallArgs { index, fragment } => {
                    let args = &mut calls[index]["function"]["arguments"];
                    *args = Value::from(format!("{}{fragment}", args.as_str().unwrap_or("")));
                }
            }
        }
    };
    let (finish, completion_tokens) = loop {
        match started.events.recv().await {
            Some(Event::Text { text, logprob }) => {
                apply(reply.parser.push(&text));
                if let Some(lp) = logprob {
                    reply.add_logprob(&lp);
                }
            }
            Some(Event::Done { finish, completion_tokens }) => break (finish, completion_tokens),
            Some(Event::Error(e)) => return Err(e),
            Some(Event::Started { .. }) => {}
            None => return Err(ApiError::internal(&"the engine dropped the request")),
        }
    };
    apply(reply.parser.finish());

    let mut message = json!({
        "role": "assistant",
        "content": if content.is_empty() && !calls.is_empty() { Value::Null } else { Value::from(content) },
        "reasoning_content": if reasoning.is_empty() { Value::Null } else { Value::from(reasoning) },
    });
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    let logprobs = match reply.logprobs.is_empty() {
        true => Value::Null,
        false => json!({"content": std::mem::take(&mut reply.logprobs)}),
    };
    let body = json!({
        "id": reply.id,
        "object": "chat.completion",
        "created": reply.created,
        "model": reply.app.model_name,
        "choices": [{"index": 0, "message": message, "logprobs": logprobs, "finish_reason": reply.finish_reason(finish)}],
        "usage": handlers::usage(started.prompt_tokens, completion_tokens, started.cached_tokens),
    });
    Ok(axum::Json(body).into_response())
}

/// The SSE side: engine events in, `chat.completion.chunk` events out.
struct ChunkStream {
    reply: Reply,
    include_usage: bool,
}

fn stream(reply: Reply, started: Started, include_usage: bool) -> Response {
    let s = ChunkStream { reply, include_usage };
    let first = s.chunk(json!({"role": "assistant", "content": ""}), Value::Null, None);
    handlers::stream_events(s, started, vec![first], include_usage)
}

impl ChunkStream {
    fn chunk(&self, delta: Value, logprobs: Value, finish: Option<&str>) -> Bytes {
        let r = &self.reply;
        let mut v = json!({
            "id": r.id, "object": "chat.completion.chunk", "created": r.created, "model": r.app.model_name,
            "choices": [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}],
        });
        if self.include_usage {
            v["usage"] = Value::Null;
        }
        sse_data(&v)
    }

    /// Logprobs not yet sent, as the `logprobs` of the next chunk.
    fn take_logprobs(&mut self) -> Value {
        match self.reply.logprobs.is_empty() {
            true => Value::Null,
            false => json!({"content": std::mem::take(&mut self.reply.logprobs)}),
        }
    }

    fn send(&mut self, deltas: Vec<Delta>, out: &mut VecDeque<Bytes>) {
        for d in deltas {
            let delta = match d {
                Delta::Reasoning(t) => json!({"reasoning_content": t}),
                Delta::Content(t) => json!({"content": t}),
                Delta::ToolCallStart { index, id, name } => json!({"tool_calls": [{
                    "index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
                Delta::ToolCallArgs { index, fragment } => {
                    json!({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
                }
            };
            let logprobs = self.take_logprobs();
            out.push_back(self.chunk(delta, logprobs, None));
        }
    }
}

impl handlers::Chunks for ChunkStream {
    fn text(&mut self, text: String, logprob: Option<TokenLogprob>, out: &mut VecDeque<Bytes>) {
        if let Some(lp) = logprob {
            self.reply.add_logprob(&lp);
        }
        let deltas = self.reply.parser.push(&text);
        self.send(deltas, out);
    }

    fn finish(&mut self, finish: Finish, out: &mut VecDeque<Bytes>) {
        let deltas = self.reply.parser.finish();
        self.send(deltas, out);
        let logprobs = self.take_logprobs();
        out.push_back(self.chunk(json!({}), logprobs, Some(self.reply.finish_reason(finish))));
    }

    fn usage_chunk(&self, usage: Value) -> Value {
        let r = &self.reply;
        json!({
            "id": r.id, "object": "chat.completion.chunk", "created": r.created, "model": r.app.model_name,
            "choices": [], "usage": usage,
        })
    }
}
