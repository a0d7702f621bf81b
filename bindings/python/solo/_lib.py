"""Finding and declaring libsolo (the C ABI of include/solo.h)."""

import ctypes
import ctypes.util
import os
import sys

STATUS = {
    0: "SOLO_OK", 1: "SOLO_DONE", 2: "SOLO_INVALID_ARGUMENT", 3: "SOLO_INVALID_REQUEST",
    4: "SOLO_NOT_FOUND", 5: "SOLO_REFUSED", 6: "SOLO_BUSY", 7: "SOLO_CANCELLED",
    8: "SOLO_LOAD_FAILED", 9: "SOLO_CLOUD", 10: "SOLO_INTERNAL", 11: "SOLO_PENDING",
}
OK, DONE, CANCELLED = 0, 1, 7


class SoloError(Exception):
    """A libsolo call failed: ``status`` (``"SOLO_INVALID_REQUEST"``, …), ``http_status`` (what
    `solo serve` would have answered, 0 if none) and the message."""

    def __init__(self, status, http_status, message):
        super().__init__(f"{STATUS.get(status, status)}: {message}")
        self.status = STATUS.get(status, str(status))
        self.http_status = http_status
        self.message = message


class Cancelled(SoloError):
    """The request was cancelled."""


class Error(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("http_status", ctypes.c_int32), ("message", ctypes.c_void_p)]


EVENT_FN = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_void_p)
PROGRESS_FN = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_double, ctypes.c_void_p)


def _candidates():
    if os.environ.get("SOLO_LIB"):
        yield os.environ["SOLO_LIB"]
    here = os.path.dirname(os.path.abspath(__file__))
    name = "libsolo.dylib" if sys.platform == "darwin" else "libsolo.so"
    yield os.path.join(here, name)
    found = ctypes.util.find_library("solo")
    if found:
        yield found


def _load():
    tried = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise ImportError(
        "libsolo not found: build it with `cargo build -p solo-capi` and set SOLO_LIB to "
        "target/debug/libsolo.so (tried: " + ", ".join(tried or ["nothing"]) + ")"
    )


lib = _load()
P = ctypes.c_void_p
E = ctypes.POINTER(Error)
_sigs = {
    "solo_version": (ctypes.c_char_p, []),
    "solo_engine_open": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, PROGRESS_FN, P, ctypes.POINTER(P), E]),
    "solo_engine_close": (None, [P]),
    "solo_engine_info": (ctypes.c_int, [P, ctypes.POINTER(P), E]),
    "solo_chat": (ctypes.c_int, [P, ctypes.c_char_p, EVENT_FN, P, ctypes.POINTER(P), E]),
    "solo_completion": (ctypes.c_int, [P, ctypes.c_char_p, EVENT_FN, P, ctypes.POINTER(P), E]),
    "solo_next_event": (ctypes.c_int, [P, ctypes.POINTER(P), E]),
    "solo_wait": (ctypes.c_int, [P, E]),
    "solo_cancel": (None, [P]),
    "solo_request_free": (None, [P]),
    "solo_tokenize": (ctypes.c_int, [P, ctypes.c_char_p, ctypes.POINTER(ctypes.POINTER(ctypes.c_uint32)),
                                     ctypes.POINTER(ctypes.c_size_t), E]),
    "solo_tokens_free": (None, [ctypes.POINTER(ctypes.c_uint32), ctypes.c_size_t]),
    "solo_detokenize": (ctypes.c_int, [P, ctypes.POINTER(ctypes.c_uint32), ctypes.c_size_t, ctypes.POINTER(P), E]),
    "solo_gate_check": (ctypes.c_int, [P, ctypes.c_char_p, ctypes.POINTER(P), E]),
    "solo_string_free": (None, [P]),
    "solo_error_free": (None, [E]),
}
for _name, (_res, _args) in _sigs.items():
    _f = getattr(lib, _name)
    _f.restype, _f.argtypes = _res, _args


def take_string(ptr):
    """A string libsolo returned (a c_void_p), decoded and freed."""
    if not ptr:
        return None
    try:
        return ctypes.string_at(ptr).decode("utf-8")
    finally:
        lib.solo_string_free(ptr)


def call(fn, *args):
    """Calls a libsolo function whose last argument is a solo_error; raises on failure."""
    err = Error()
    status = fn(*args, ctypes.byref(err))
    if status in (OK, DONE):
        return status
    message = ctypes.string_at(err.message).decode("utf-8", "replace") if err.message else ""
    http_status = err.http_status
    lib.solo_error_free(ctypes.byref(err))
    raise (Cancelled if status == CANCELLED else SoloError)(status, http_status, message)
