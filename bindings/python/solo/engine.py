"""Engine, Stream and the OpenAI-shaped answers."""

import ctypes
import json
import threading

from ._lib import PROGRESS_FN, EVENT_FN, DONE, Cancelled, call, lib, take_string


class OpenAIObject(dict):
    """A JSON object of the OpenAI API with attribute access, as the `openai` package's types
    give it: ``chunk.choices[0].delta.content``; a field that is absent reads as None."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self.get(name)

    def model_dump(self):
        return json.loads(json.dumps(self))


def _parse(text):
    return json.loads(text, object_hook=OpenAIObject)


class Engine:
    """One engine: a model loaded in this process, with `solo serve`'s scheduler (several
    requests at once are batched), chat template, tool-call parser, privacy gate and router.

    ``model``: a checkpoint directory; None: the built-in demo checkpoint. ``progress``: called
    with (stage, fraction) while loading. Other keywords are libsolo's options (``backend``,
    ``max_seq``, ``max_batch``, ``cloud_url``, ``policy``, …; see include/solo.h).
    Thread-safe: requests may come from several threads at once.
    """

    def __init__(self, model=None, *, progress=None, **options):
        self._ptr = None
        handle = ctypes.c_void_p()
        if progress is not None:
            cb = PROGRESS_FN(lambda stage, fraction, _ud: progress(stage.decode(), fraction))
        else:
            cb = PROGRESS_FN()
        call(lib.solo_engine_open, model.encode() if model is not None else None,
             json.dumps(options).encode(), cb, None, ctypes.byref(handle))
        self._ptr = handle

    def close(self):
        """Cancels running requests and frees the model (also at ``with`` exit)."""
        if self._ptr:
            ptr, self._ptr = self._ptr, None
            lib.solo_engine_close(ptr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def _engine(self):
        if not self._ptr:
            raise ValueError("the engine is closed")
        return self._ptr

    @property
    def info(self):
        """model, model_dir, max_seq, vocab, backend, precision, version."""
        out = ctypes.c_void_p()
        call(lib.solo_engine_info, self._engine(), ctypes.byref(out))
        return json.loads(take_string(out))

    def chat(self, messages, *, stream=False, **fields):
        """A chat completion: ``messages`` and any field of the chat completions API (tools,
        temperature, max_tokens, stop, logprobs, chat_template_kwargs, …). Returns the
        ``chat.completion`` object, or with ``stream=True`` a :class:`Stream` of
        ``chat.completion.chunk`` objects."""
        body = dict(fields, messages=messages, stream=stream)
        return self._request(lib.solo_chat, body, stream)

    def completion(self, prompt, *, stream=False, **fields):
        """A text completion (raw ``prompt``, no chat template), as :meth:`chat`."""
        body = dict(fields, prompt=prompt, stream=stream)
        return self._request(lib.solo_completion, body, stream)

    def _request(self, fn, body, stream):
        handle = ctypes.c_void_p()
        call(fn, self._engine(), json.dumps(body).encode(), EVENT_FN(), None, ctypes.byref(handle))
        s = Stream(handle)
        if stream:
            return s
        with s:
            return next(iter(s))

    def tokenize(self, text):
        ids = ctypes.POINTER(ctypes.c_uint32)()
        n = ctypes.c_size_t()
        call(lib.solo_tokenize, self._engine(), text.encode(), ctypes.byref(ids), ctypes.byref(n))
        try:
            return [ids[i] for i in range(n.value)]
        finally:
            lib.solo_tokens_free(ids, n)

    def detokenize(self, ids):
        arr = (ctypes.c_uint32 * len(ids))(*ids)
        out = ctypes.c_void_p()
        call(lib.solo_detokenize, self._engine(), arr, len(ids), ctypes.byref(out))
        return take_string(out)

    def gate_check(self, text):
        """The privacy gate under this engine's policy: outcome, spans, categories."""
        return _gate(self._engine(), text)


def gate_check(text):
    """The privacy gate under the shipped policy (no engine needed)."""
    return _gate(None, text)


def _gate(engine, text):
    out = ctypes.c_void_p()
    call(lib.solo_gate_check, engine, text.encode(), ctypes.byref(out))
    return _parse(take_string(out))


class Stream:
    """A request's answer as it comes: iterate for the chunks (OpenAI-shaped objects).
    ``cancel()`` may be called from any thread: the iteration then ends (``cancelled`` is True).
    Closing it (or leaving ``with``) cancels what is left and frees the request; close it from
    the thread that iterates (or once no thread does)."""

    def __init__(self, handle):
        self._ptr = handle
        self._lock = threading.Lock()
        self.cancelled = False

    def __iter__(self):
        return self

    def __next__(self):
        ptr = self._ptr
        if not ptr:
            raise StopIteration
        out = ctypes.c_void_p()
        try:
            status = call(lib.solo_next_event, ptr, ctypes.byref(out))
        except Cancelled:
            if self.cancelled:
                raise StopIteration from None
            raise
        if status == DONE:
            raise StopIteration
        return _parse(take_string(out))

    def cancel(self):
        with self._lock:
            if self._ptr:
                self.cancelled = True
                lib.solo_cancel(self._ptr)

    def close(self):
        with self._lock:
            ptr, self._ptr = self._ptr, None
        if ptr:
            lib.solo_request_free(ptr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()
