//! libsolo: the C ABI over `solo::Engine` (include/solo.h is generated from this file by
//! cbindgen; the doc comments below are the header's). Every entry point catches panics, checks
//! its pointers, and reports failures through a status code and a `solo_error`.

#![allow(non_camel_case_types)]

use ::solo_engine::{Canceller, Engine, Error, ErrorKind, Options, Poll, Stream};
use std::ffi::{c_char, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Mutex;
use std::thread::JoinHandle;

/// What a call returned.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum solo_status {
    SOLO_OK = 0,
    /// solo_next_event: the stream has ended (not an error).
    SOLO_DONE = 1,
    /// A NULL pointer, text that is not UTF-8, options JSON that is wrong, a bad token id.
    SOLO_INVALID_ARGUMENT = 2,
    /// The request was refused as the HTTP endpoint refuses it with a 4xx: not JSON, a field out
    /// of range, a prompt longer than the context.
    SOLO_INVALID_REQUEST = 3,
    /// An unknown model id or LoRA adapter.
    SOLO_NOT_FOUND = 4,
    /// The privacy gate refused the request (HTTP 403), or needs consent (428: the message is
    /// the whole error object with its consent token).
    SOLO_REFUSED = 5,
    /// The queue is full, or the request timed out before it started (HTTP 503).
    SOLO_BUSY = 6,
    /// The request was cancelled (solo_cancel, solo_request_free).
    SOLO_CANCELLED = 7,
    /// The checkpoint could not be loaded.
    SOLO_LOAD_FAILED = 8,
    /// The cloud route failed (HTTP 502).
    SOLO_CLOUD = 9,
    /// The engine failed, the engine was closed under the request, or a panic was caught.
    SOLO_INTERNAL = 10,
    /// solo_poll_event: no event is waiting yet (not an error).
    SOLO_PENDING = 11,
}

use solo_status::*;

/// A failure's details. Initialise with `solo_error err = {0};`; libsolo fills it only when a
/// call fails, freeing a message it wrote there before. Free `message` with solo_error_free().
#[repr(C)]
pub struct solo_error {
    pub code: solo_status,
    /// The HTTP status `solo serve` would have answered with; 0 where there is none.
    pub http_status: i32,
    /// One line (for SOLO_REFUSED with http_status 428: a JSON error object); owned by the
    /// caller, freed with solo_error_free().
    pub message: *mut c_char,
}

/// An open engine (a loaded model). Opaque.
pub struct solo_engine {
    engine: Engine,
}

/// One running request (solo_chat, solo_completion). Opaque.
pub struct solo_request {
    cancel: Canceller,
    /// Pull mode: the stream solo_next_event reads.
    stream: Mutex<Option<Stream>>,
    /// Callback mode: the thread that calls on_event.
    thread: Mutex<Option<JoinHandle<Result<(), Error>>>>,
    /// How it ended, once it has.
    end: Mutex<Option<Result<(), Error>>>,
}

/// Called with each event of a request: one chunk of the answer, as the JSON text of one
/// server-sent event of the HTTP stream (`chat.completion.chunk` or `text_completion`), or with a
/// non-streaming request the one JSON answer. `chunk_json` is valid only during the call. Runs on
/// a thread libsolo started for the request, one call at a time, in order.
pub type solo_event_fn = Option<unsafe extern "C" fn(chunk_json: *const c_char, user_data: *mut c_void)>;

/// Called while an engine loads: `stage` is "checkpoint", "text", "weights" or "ready";
/// `fraction` of the whole load, 0 to 1. On the thread that called solo_engine_open.
pub type solo_progress_fn = Option<unsafe extern "C" fn(stage: *const c_char, fraction: f64, user_data: *mut c_void)>;

fn status_of(kind: ErrorKind) -> solo_status {
    match kind {
        ErrorKind::InvalidArgument => SOLO_INVALID_ARGUMENT,
        ErrorKind::InvalidRequest => SOLO_INVALID_REQUEST,
        ErrorKind::NotFound => SOLO_NOT_FOUND,
        ErrorKind::Refused => SOLO_REFUSED,
        ErrorKind::Busy => SOLO_BUSY,
        ErrorKind::Cancelled => SOLO_CANCELLED,
        ErrorKind::LoadFailed => SOLO_LOAD_FAILED,
        ErrorKind::Cloud => SOLO_CLOUD,
        ErrorKind::Internal => SOLO_INTERNAL,
    }
}

fn c_string(s: String) -> *mut c_char {
    CString::new(s)
        .unwrap_or_else(|e| {
            let mut bytes = e.into_vec();
            bytes.retain(|&b| b != 0);
            CString::new(bytes).unwrap_or_default()
        })
        .into_raw()
}

/// Writes `e` into `err` (if not NULL) and returns its status.
unsafe fn fail(err: *mut solo_error, e: &Error) -> solo_status {
    let code = status_of(e.kind);
    if let Some(err) = err.as_mut() {
        if !err.message.is_null() {
            drop(CString::from_raw(err.message));
        }
        *err = solo_error { code, http_status: e.http_status as i32, message: c_string(e.message.clone()) };
    }
    code
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidArgument, message)
}

/// Runs `f`, turning its error or a panic into a status and `err`.
unsafe fn guard(err: *mut solo_error, what: &str, f: impl FnOnce() -> Result<solo_status, Error>) -> solo_status {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(status)) => status,
        Ok(Err(e)) => fail(err, &e),
        Err(panic) => {
            let detail = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            fail(err, &Error::new(ErrorKind::Internal, format!("libsolo: a panic in {what}: {detail}")))
        }
    }
}

unsafe fn text<'a>(p: *const c_char, what: &str) -> Result<&'a str, Error> {
    if p.is_null() {
        return Err(invalid(format!("{what} is NULL")));
    }
    CStr::from_ptr(p).to_str().map_err(|_| invalid(format!("{what} is not UTF-8")))
}

unsafe fn out<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T, Error> {
    p.as_mut().ok_or_else(|| invalid(format!("{what} is NULL")))
}

/// The library's version ("0.1.0"). Static: do not free. Any thread.
#[no_mangle]
pub extern "C" fn solo_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// Loads a model and starts its engine.
///
/// - `model_dir`: a checkpoint directory (safetensors or GGUF); NULL: the built-in demo
///   checkpoint (a tiny model, written to the cache directory on first use).
/// - `options_json`: NULL, "" or a JSON object: `backend` ("auto", "cpu", "cuda"), `max_seq`,
///   `max_batch`, `max_queue`, `cache_mb`, `request_timeout_s`, `speculate`, `model_name`,
///   `lora` ({"id": "adapter dir"}), `threads`, and the hybrid router's `cloud_url`,
///   `cloud_model`, `cloud_key_env`, `cloud_timeout_s`, `policy` (a TOML file), `audit_log`. An
///   unknown name is SOLO_INVALID_ARGUMENT naming it.
/// - `on_progress` (may be NULL) is called during the load with `user_data`.
/// - On success `*engine_out` is the engine, the caller's to close with solo_engine_close().
///
/// Thread safety: any thread; engines are independent of each other.
///
/// # Safety
/// Pointers are NULL or valid for the call; `engine_out` must be writable.
#[no_mangle]
pub unsafe extern "C" fn solo_engine_open(
    model_dir: *const c_char,
    options_json: *const c_char,
    on_progress: solo_progress_fn,
    user_data: *mut c_void,
    engine_out: *mut *mut solo_engine,
    error: *mut solo_error,
) -> solo_status {
    guard(error, "solo_engine_open", || {
        let engine_out = out(engine_out, "engine_out")?;
        *engine_out = std::ptr::null_mut();
        let dir = if model_dir.is_null() { None } else { Some(Path::new(text(model_dir, "model_dir")?)) };
        let options = if options_json.is_null() {
            Options::default()
        } else {
            Options::from_json(text(options_json, "options_json")?)?
        };
        let engine = Engine::open_with_progress(dir, options, |stage, fraction| {
            if let Some(f) = on_progress {
                let stage = CString::new(stage).unwrap_or_default();
                f(stage.as_ptr(), fraction, user_data);
            }
        })?;
        *engine_out = Box::into_raw(Box::new(solo_engine { engine }));
        Ok(SOLO_OK)
    })
}

/// Closes an engine: cancels its running requests (their streams end with SOLO_INTERNAL), stops
/// its threads and frees the model before returning. NULL is ignored. Requests of this engine
/// stay valid until solo_request_free().
///
/// Thread safety: not while another call uses this engine.
///
/// # Safety
/// `engine` is NULL or from solo_engine_open, and not used after this.
#[no_mangle]
pub unsafe extern "C" fn solo_engine_close(engine: *mut solo_engine) {
    if !engine.is_null() {
        let _ = catch_unwind(AssertUnwindSafe(|| drop(Box::from_raw(engine))));
    }
}

/// What the engine runs, as a JSON object: `model`, `model_dir`, `max_seq`, `vocab`, `backend`,
/// `precision`, `version`. `*json_out` is the caller's, freed with solo_string_free().
///
/// Thread safety: any thread.
///
/// # Safety
/// `engine` is an open engine; `json_out` is writable.
#[no_mangle]
pub unsafe extern "C" fn solo_engine_info(
    engine: *const solo_engine,
    json_out: *mut *mut c_char,
    error: *mut solo_error,
) -> solo_status {
    guard(error, "solo_engine_info", || {
        let engine = engine.as_ref().ok_or_else(|| invalid("engine is NULL"))?;
        *out(json_out, "json_out")? = c_string(engine.engine.info().to_string());
        Ok(SOLO_OK)
    })
}

unsafe fn start(
    engine: *const solo_engine,
    request_json: *const c_char,
    on_event: solo_event_fn,
    user_data: *mut c_void,
    request_out: *mut *mut solo_request,
    chat: bool,
) -> Result<solo_status, Error> {
    let request_out = out(request_out, "request_out")?;
    *request_out = std::ptr::null_mut();
    let engine = &engine.as_ref().ok_or_else(|| invalid("engine is NULL"))?.engine;
    let body = text(request_json, "request_json")?;
    let stream = if chat { engine.chat(body)? } else { engine.completion(body)? };
    let cancel = stream.canceller();
    let (stream, thread) = match on_event {
        None => (Some(stream), None),
        Some(f) => {
            struct UserData(*mut c_void);
            // SAFETY: the caller promises user_data may be used from libsolo's thread.
            unsafe impl Send for UserData {}
            let user = UserData(user_data);
            let thread = std::thread::Builder::new()
                .name("solo-events".into())
                .spawn(move || {
                    let user = user;
                    for chunk in stream {
                        let chunk = CString::new(chunk?).unwrap_or_default();
                        f(chunk.as_ptr(), user.0);
                    }
                    Ok(())
                })
                .map_err(|e| Error::new(ErrorKind::Internal, format!("cannot start the event thread: {e}")))?;
            (None, Some(thread))
        }
    };
    let request =
        solo_request { cancel, stream: Mutex::new(stream), thread: Mutex::new(thread), end: Mutex::new(None) };
    *request_out = Box::into_raw(Box::new(request));
    Ok(SOLO_OK)
}

/// Starts a chat request: `request_json` is the body of `POST /v1/chat/completions` (messages,
/// tools, tool_choice, sampling fields, `chat_template_kwargs`/thinking, stop, logprobs,
/// `stream`, `stream_options`), through the privacy gate and hybrid router when the engine has
/// them. Returns once the prompt is in: errors up to then are this call's (the request is not
/// created). The answer's JSON then comes as events: each `chat.completion.chunk` with
/// `"stream": true`, else one `chat.completion` object.
///
/// - `on_event` not NULL: called for each event, with `user_data`, on a thread of the request's
///   own; solo_wait() then waits for the last call and says how the request ended.
/// - `on_event` NULL: read the events with solo_next_event().
///
/// `*request_out` is the caller's, freed with solo_request_free(). Several requests at once are
/// batched by the engine's scheduler.
///
/// Thread safety: any thread, concurrently with other requests of the same engine. Do not call
/// it from an on_event callback of the same engine while that engine is at `max_batch`.
///
/// # Safety
/// `engine` is an open engine; `request_json` a string; `request_out` writable; `user_data` may
/// be used from another thread until the request's last callback has returned.
#[no_mangle]
pub unsafe extern "C" fn solo_chat(
    engine: *const solo_engine,
    request_json: *const c_char,
    on_event: solo_event_fn,
    user_data: *mut c_void,
    request_out: *mut *mut solo_request,
    error: *mut solo_error,
) -> solo_status {
    guard(error, "solo_chat", || start(engine, request_json, on_event, user_data, request_out, true))
}

/// As solo_chat(), for a text completion: `request_json` is the body of `POST /v1/completions`
/// (a raw `prompt`, no chat template); events are `text_completion` chunks (or the one object).
///
/// # Safety
/// As solo_chat().
#[no_mangle]
pub unsafe extern "C" fn solo_completion(
    engine: *const solo_engine,
    request_json: *const c_char,
    on_event: solo_event_fn,
    user_data: *mut c_void,
    request_out: *mut *mut solo_request,
    error: *mut solo_error,
) -> solo_status {
    guard(error, "solo_completion", || start(engine, request_json, on_event, user_data, request_out, false))
}

/// The next event of a request started without a callback: SOLO_OK with `*chunk_json_out` (the
/// caller's, freed with solo_string_free()); SOLO_DONE at the end (`*chunk_json_out` NULL); else
/// how it failed (SOLO_CANCELLED after solo_cancel). Blocks until there is one.
///
/// Thread safety: one reader at a time per request; solo_cancel() may be called meanwhile.
///
/// # Safety
/// `request` is from solo_chat/solo_completion and not freed; `chunk_json_out` is writable.
#[no_mangle]
pub unsafe extern "C" fn solo_next_event(
    request: *const solo_request,
    chunk_json_out: *mut *mut c_char,
    error: *mut solo_error,
) -> solo_status {
    guard(error, "solo_next_event", || read_event(request, chunk_json_out, true))
}

/// As solo_next_event(), without blocking: SOLO_PENDING (`*chunk_json_out` NULL) when no event
/// is waiting yet. (What an event loop calls first, before handing a blocking solo_next_event
/// to a worker thread.)
///
/// Thread safety: as solo_next_event().
///
/// # Safety
/// As solo_next_event().
#[no_mangle]
pub unsafe extern "C" fn solo_poll_event(
    request: *const solo_request,
    chunk_json_out: *mut *mut c_char,
    error: *mut solo_error,
) -> solo_status {
    guard(error, "solo_poll_event", || read_event(request, chunk_json_out, false))
}

unsafe fn read_event(
    request: *const solo_request,
    chunk_json_out: *mut *mut c_char,
    block: bool,
) -> Result<solo_status, Error> {
    let request = request.as_ref().ok_or_else(|| invalid("request is NULL"))?;
    let chunk_out = out(chunk_json_out, "chunk_json_out")?;
    *chunk_out = std::ptr::null_mut();
    let mut stream = request.stream.lock().unwrap_or_else(|e| e.into_inner());
    let Some(stream) = stream.as_mut() else {
        return Err(invalid("this request gives its events to its on_event callback: use solo_wait"));
    };
    let next = if block { stream.next_chunk().map(|c| c.map_or(Poll::End, Poll::Chunk)) } else { stream.poll_chunk() };
    let ended = |end: Result<(), Error>| *request.end.lock().unwrap_or_else(|e| e.into_inner()) = Some(end);
    match next {
        Ok(Poll::Chunk(chunk)) => {
            *chunk_out = c_string(chunk);
            Ok(SOLO_OK)
        }
        Ok(Poll::Pending) => Ok(SOLO_PENDING),
        Ok(Poll::End) => {
            ended(Ok(()));
            Ok(SOLO_DONE)
        }
        Err(e) => {
            ended(Err(e.clone()));
            Err(e)
        }
    }
}

/// Waits until the request has ended and returns how: SOLO_OK when it finished, else its error
/// (SOLO_CANCELLED after solo_cancel). With a callback, every call of it has returned by then;
/// without, events not yet read are dropped. Calling it again returns the same.
///
/// Thread safety: any thread, but not from the request's own on_event callback.
///
/// # Safety
/// `request` is from solo_chat/solo_completion and not freed.
#[no_mangle]
pub unsafe extern "C" fn solo_wait(request: *const solo_request, error: *mut solo_error) -> solo_status {
    guard(error, "solo_wait", || {
        let request = request.as_ref().ok_or_else(|| invalid("request is NULL"))?;
        let end = finish(request);
        end.map(|()| SOLO_OK)
    })
}

fn finish(request: &solo_request) -> Result<(), Error> {
    let mut end = request.end.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(end) = end.as_ref() {
        return end.clone();
    }
    let result = if let Some(thread) = request.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
        thread.join().unwrap_or_else(|_| Err(Error::new(ErrorKind::Internal, "libsolo: the event thread panicked")))
    } else if let Some(stream) = request.stream.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        loop {
            match stream.next_chunk() {
                Ok(Some(_)) => continue,
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
        }
    } else {
        Ok(())
    };
    *end = Some(result.clone());
    result
}

/// Cancels a request: generation stops at the engine's next step and the request ends with
/// SOLO_CANCELLED (unless it had already ended). NULL is ignored; twice does nothing more.
///
/// Thread safety: any thread, at any time until solo_request_free(), including from on_event.
///
/// # Safety
/// `request` is NULL or from solo_chat/solo_completion and not freed.
#[no_mangle]
pub unsafe extern "C" fn solo_cancel(request: *const solo_request) {
    if let Some(request) = request.as_ref() {
        let _ = catch_unwind(AssertUnwindSafe(|| request.cancel.cancel()));
    }
}

/// Frees a request, cancelling it first if it is still running and waiting for its callback to
/// return. NULL is ignored.
///
/// Thread safety: not concurrently with other calls on this request, nor from its own on_event.
///
/// # Safety
/// `request` is NULL or from solo_chat/solo_completion, and not used after this.
#[no_mangle]
pub unsafe extern "C" fn solo_request_free(request: *mut solo_request) {
    if request.is_null() {
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let request = Box::from_raw(request);
        let ended = request.end.lock().unwrap_or_else(|e| e.into_inner()).is_some();
        if !ended {
            request.cancel.cancel();
            let _ = finish(&request);
        }
    }));
}

/// Token ids of `text` (no chat template; special tokens written in it, such as `<|im_start|>`,
/// count as such). `*ids_out` (NULL when `*len_out` is 0) is the caller's, freed with
/// solo_tokens_free(ids, len).
///
/// Thread safety: any thread.
///
/// # Safety
/// `engine` is an open engine; `text` a string; `ids_out` and `len_out` writable.
#[no_mangle]
pub unsafe extern "C" fn solo_tokenize(
    engine: *const solo_engine,
    text_in: *const c_char,
    ids_out: *mut *mut u32,
    len_out: *mut usize,
    error: *mut solo_error,
) -> solo_status {
    guard(error, "solo_tokenize", || {
        let engine = &engine.as_ref().ok_or_else(|| invalid("engine is NULL"))?.engine;
        let (ids_out, len_out) = (out(ids_out, "ids_out")?, out(len_out, "len_out")?);
        let ids = engine.tokenize(text(text_in, "text")?)?;
        *len_out = ids.len();
        *ids_out =
            if ids.is_empty() { std::ptr::null_mut() } else { Box::into_raw(ids.into_boxed_slice()).cast::<u32>() };
        Ok(SOLO_OK)
    })
}

/// Frees ids from solo_tokenize (`len` as it returned). NULL is ignored. Any thread.
///
/// # Safety
/// `ids` and `len` are exactly as solo_tokenize returned them, freed once.
#[no_mangle]
pub unsafe extern "C" fn solo_tokens_free(ids: *mut u32, len: usize) {
    if !ids.is_null() {
        drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(ids, len)));
    }
}

/// The text of `len` token ids (special tokens included). `*text_out` is the caller's, freed
/// with solo_string_free(). An id past the vocabulary is SOLO_INVALID_ARGUMENT.
///
/// Thread safety: any thread.
///
/// # Safety
/// `engine` is an open engine; `ids` points to `len` ids (or is NULL with `len` 0); `text_out`
/// writable.
#[no_mangle]
pub unsafe extern "C" fn solo_detokenize(
    engine: *const solo_engine,
    ids: *const u32,
    len: usize,
    text_out: *mut *mut c_char,
    error: *mut solo_error,
) -> solo_status {
    guard(error, "solo_detokenize", || {
        let engine = &engine.as_ref().ok_or_else(|| invalid("engine is NULL"))?.engine;
        let text_out = out(text_out, "text_out")?;
        let ids = match (ids.is_null(), len) {
            (_, 0) => &[][..],
            (true, _) => return Err(invalid("ids is NULL")),
            (false, n) => std::slice::from_raw_parts(ids, n),
        };
        *text_out = c_string(engine.detokenize(ids)?);
        Ok(SOLO_OK)
    })
}

/// The privacy gate on `text`, as `solo gate` reports it: a JSON object with the `outcome` for
/// the cloud, `spans` (start, end in characters, type, text), `categories` and `unsure`.
/// `engine` NULL: the shipped policy; else the engine's (`policy` option). `*report_json_out`
/// is the caller's, freed with solo_string_free().
///
/// Thread safety: any thread.
///
/// # Safety
/// `engine` is NULL or an open engine; `text` a string; `report_json_out` writable.
#[no_mangle]
pub unsafe extern "C" fn solo_gate_check(
    engine: *const solo_engine,
    text_in: *const c_char,
    report_json_out: *mut *mut c_char,
    error: *mut solo_error,
) -> solo_status {
    guard(error, "solo_gate_check", || {
        let report_out = out(report_json_out, "report_json_out")?;
        let text = text(text_in, "text")?;
        let report = match engine.as_ref() {
            Some(e) => e.engine.gate_check(text)?,
            None => ::solo_engine::gate_check(text)?,
        };
        *report_out = c_string(report);
        Ok(SOLO_OK)
    })
}

/// Frees a string libsolo returned. NULL is ignored. Any thread.
///
/// # Safety
/// `s` is NULL or a string from libsolo, freed once.
#[no_mangle]
pub unsafe extern "C" fn solo_string_free(s: *mut c_char) {
    if !s.is_null() {
        drop(CString::from_raw(s));
    }
}

/// Frees the message of an error libsolo filled and resets it (code SOLO_OK). NULL is ignored.
///
/// # Safety
/// `error` is NULL or a solo_error initialised as the header says.
#[no_mangle]
pub unsafe extern "C" fn solo_error_free(error: *mut solo_error) {
    if let Some(e) = error.as_mut() {
        if !e.message.is_null() {
            drop(CString::from_raw(e.message));
        }
        *e = solo_error { code: SOLO_OK, http_status: 0, message: std::ptr::null_mut() };
    }
}
