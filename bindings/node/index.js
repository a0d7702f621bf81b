'use strict';
// solo's engine inside a Node program: koffi over libsolo (include/solo.h), no server.
//
//   const { Engine } = require('solo-engine');
//   const engine = await Engine.open();                  // no path: the built-in demo checkpoint
//   for await (const chunk of await engine.chat([{ role: 'user', content: 'Hi' }], { stream: true }))
//     process.stdout.write(chunk.choices[0].delta.content ?? '');
//   engine.close();
//
// Requests take the fields of OpenAI's chat completions API; answers are its JSON objects.
// Every call that waits on the engine runs on libuv's thread pool (koffi's async calls): the
// event loop stays free while a request is prefilled or a token awaited.

const koffi = require('koffi');
const path = require('node:path');
const fs = require('node:fs');

const STATUS = ['SOLO_OK', 'SOLO_DONE', 'SOLO_INVALID_ARGUMENT', 'SOLO_INVALID_REQUEST', 'SOLO_NOT_FOUND',
  'SOLO_REFUSED', 'SOLO_BUSY', 'SOLO_CANCELLED', 'SOLO_LOAD_FAILED', 'SOLO_CLOUD', 'SOLO_INTERNAL', 'SOLO_PENDING'];
const OK = 0;
const DONE = 1;
const CANCELLED = 7;
const PENDING = 11;

/** A libsolo call failed: `status` ('SOLO_INVALID_REQUEST', …), `httpStatus` and the message. */
class SoloError extends Error {
  constructor(code, httpStatus, message) {
    super(`${STATUS[code] ?? code}: ${message}`);
    this.status = STATUS[code] ?? String(code);
    this.httpStatus = httpStatus;
    this.detail = message;
  }
}

function libraryPath() {
  const name = process.platform === 'darwin' ? 'libsolo.dylib' : 'libsolo.so';
  const candidates = [process.env.SOLO_LIB, path.join(__dirname, name)].filter(Boolean);
  for (const c of candidates) if (fs.existsSync(c)) return c;
  throw new Error(`libsolo not found: build it with \`cargo build -p solo-capi\` and set SOLO_LIB to its path (tried ${candidates.join(', ')})`);
}

const lib = koffi.load(libraryPath());
const SoloErr = koffi.struct('solo_error', { code: 'int', http_status: 'int32_t', message: 'void *' });
const c = {
  version: lib.func('const char *solo_version()'),
  open: lib.func('int solo_engine_open(const char *model, const char *options, void *cb, void *ud, _Out_ void **engine, _Inout_ solo_error *err)'),
  close: lib.func('void solo_engine_close(void *engine)'),
  info: lib.func('int solo_engine_info(void *engine, _Out_ void **json, _Inout_ solo_error *err)'),
  chat: lib.func('int solo_chat(void *engine, const char *request, void *cb, void *ud, _Out_ void **req, _Inout_ solo_error *err)'),
  completion: lib.func('int solo_completion(void *engine, const char *request, void *cb, void *ud, _Out_ void **req, _Inout_ solo_error *err)'),
  next: lib.func('int solo_next_event(void *req, _Out_ void **chunk, _Inout_ solo_error *err)'),
  poll: lib.func('int solo_poll_event(void *req, _Out_ void **chunk, _Inout_ solo_error *err)'),
  cancel: lib.func('void solo_cancel(void *req)'),
  requestFree: lib.func('void solo_request_free(void *req)'),
  tokenize: lib.func('int solo_tokenize(void *engine, const char *text, _Out_ void **ids, _Out_ size_t *len, _Inout_ solo_error *err)'),
  tokensFree: lib.func('void solo_tokens_free(void *ids, size_t len)'),
  detokenize: lib.func('int solo_detokenize(void *engine, const uint32_t *ids, size_t len, _Out_ void **text, _Inout_ solo_error *err)'),
  gate: lib.func('int solo_gate_check(void *engine, const char *text, _Out_ void **report, _Inout_ solo_error *err)'),
  stringFree: lib.func('void solo_string_free(void *s)'),
  errorFree: lib.func('void solo_error_free(_Inout_ solo_error *err)'),
};

function newError() {
  return { code: 0, http_status: 0, message: null };
}

/** Throws the SoloError `err` holds (freeing its message) unless `status` is OK or DONE. */
function check(status, err) {
  if (status === OK || status === DONE) return status;
  const message = err.message ? koffi.decode(err.message, 'char', -1) : '';
  const e = new SoloError(status, err.http_status, message);
  c.errorFree(err);
  throw e;
}

function takeString(ptr) {
  if (!ptr) return null;
  const s = koffi.decode(ptr, 'char', -1);
  c.stringFree(ptr);
  return s;
}

/** `fn.async(...)` as a promise. */
function callAsync(fn, ...args) {
  return new Promise((resolve, reject) => fn.async(...args, (e, r) => (e ? reject(e) : resolve(r))));
}

// A stream dropped without being read to its end still frees its request.
const unfreed = new FinalizationRegistry((ptr) => c.requestFree(ptr));

/**
 * A request's answer as it comes: `for await (const chunk of stream)`. `cancel()` works at any
 * time (the iteration then ends; `cancelled` is true); leaving the loop early frees the request.
 */
class Stream {
  constructor(ptr) {
    this.ptr = ptr;
    this.cancelled = false;
    this.reading = false;
    unfreed.register(this, ptr, this);
  }

  cancel() {
    if (this.ptr) {
      this.cancelled = true;
      c.cancel(this.ptr);
    }
  }

  /** The next chunk (an object), or null at the end. */
  async next() {
    if (!this.ptr) return null;
    const out = [null];
    const err = newError();
    // An event already waiting is taken here; only an empty queue costs a trip to the pool.
    let status = c.poll(this.ptr, out, err);
    if (status === PENDING) {
      this.reading = true;
      status = await callAsync(c.next, this.ptr, out, err);
      this.reading = false;
    }
    if (status === DONE || (status === CANCELLED && this.cancelled)) {
      this.free();
      return null;
    }
    try {
      check(status, err);
    } catch (e) {
      this.free();
      throw e;
    }
    return JSON.parse(takeString(out[0]));
  }

  free() {
    if (this.ptr && !this.reading) {
      const p = this.ptr;
      this.ptr = null;
      unfreed.unregister(this);
      c.requestFree(p);
    }
  }

  async *[Symbol.asyncIterator]() {
    try {
      for (;;) {
        const chunk = await this.next();
        if (chunk === null) return;
        yield chunk;
      }
    } finally {
      this.free();
    }
  }
}

/** One engine: a model loaded in this process, with `solo serve`'s scheduler, template and gate. */
class Engine {
  constructor(ptr) {
    this.ptr = ptr;
  }

  /**
   * Loads `model` (a checkpoint directory; null: the built-in demo checkpoint) with libsolo's
   * options (`backend`, `max_seq`, `max_batch`, `cloud_url`, `policy`, …).
   */
  static async open(model = null, options = {}) {
    const out = [null];
    const err = newError();
    check(await callAsync(c.open, model, JSON.stringify(options), null, null, out, err), err);
    return new Engine(out[0]);
  }

  close() {
    if (this.ptr) {
      const p = this.ptr;
      this.ptr = null;
      c.close(p);
    }
  }

  engine() {
    if (!this.ptr) throw new Error('the engine is closed');
    return this.ptr;
  }

  info() {
    const out = [null];
    const err = newError();
    check(c.info(this.engine(), out, err), err);
    return JSON.parse(takeString(out[0]));
  }

  /**
   * A chat completion: `messages` and any field of the chat completions API in `fields`.
   * Resolves to the `chat.completion` object, or with `stream: true` to a Stream of chunks.
   */
  chat(messages, fields = {}) {
    return this.request(c.chat, { ...fields, messages });
  }

  /** A text completion (raw `prompt`), as chat(). */
  completion(prompt, fields = {}) {
    return this.request(c.completion, { ...fields, prompt });
  }

  async request(fn, body) {
    const out = [null];
    const err = newError();
    check(await callAsync(fn, this.engine(), JSON.stringify(body), null, null, out, err), err);
    const stream = new Stream(out[0]);
    if (body.stream) return stream;
    try {
      return await stream.next();
    } finally {
      stream.free();
    }
  }

  tokenize(text) {
    const ids = [null];
    const len = [0];
    const err = newError();
    check(c.tokenize(this.engine(), text, ids, len, err), err);
    const n = Number(len[0]);
    if (n === 0) return [];
    const result = koffi.decode(ids[0], 'uint32_t', n);
    c.tokensFree(ids[0], n);
    return Array.from(result);
  }

  detokenize(ids) {
    const out = [null];
    const err = newError();
    check(c.detokenize(this.engine(), Uint32Array.from(ids), ids.length, out, err), err);
    return takeString(out[0]);
  }

  /** The privacy gate under this engine's policy: outcome, spans, categories. */
  gateCheck(text) {
    return gateCheckWith(this.engine(), text);
  }
}

function gateCheckWith(engine, text) {
  const out = [null];
  const err = newError();
  check(c.gate(engine, text, out, err), err);
  return JSON.parse(takeString(out[0]));
}

/** The privacy gate under the shipped policy (no engine needed). */
function gateCheck(text) {
  return gateCheckWith(null, text);
}

module.exports = { Engine, Stream, SoloError, gateCheck, version: () => c.version() };
