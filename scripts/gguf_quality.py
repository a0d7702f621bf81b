#!/usr/bin/env python3
"""Logits of one GGUF file from several engines, compared (issue #48's quality check; run by
`scripts/gpu_run.sh gguf-quality`, not part of CI). Its functions serve
scripts/gguf_slice_quality.py too.

    gguf_quality.py REFERENCE OTHER [OTHER ...]

Each argument is NAME=PATH: a `solo logits --out` safetensors file (tensor `logits`, F32
[tokens, vocab]) or llama-logits' raw f32 rows (`.f32`, row i predicting token i + 1). Prints, for
each OTHER against REFERENCE: top-1 agreement, mean KL(reference ‖ other) over the rows, and the
largest |Δlogit| relative to the largest |logit|; one JSON line each.
"""
import json
import sys

import numpy as np


def load(path, vocab=None):
    if path.endswith(".f32"):
        raw = np.fromfile(path, dtype="<f4")
        assert vocab and raw.size % vocab == 0, f"{path}: {raw.size} floats is not rows of {vocab}"
        return raw.reshape(-1, vocab)
    from safetensors.numpy import load_file

    return load_file(path)["logits"].astype(np.float32)


def log_softmax(x):
    x = x - x.max(axis=1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=1, keepdims=True))


def compare(ref, x):
    """ref, x: [rows, vocab] logits. Top-1 agreement, mean and max KL(ref ‖ x) in nats over the
    rows, the largest |Δlogit| relative to the largest |logit| of ref, and the RMS of Δlogit."""
    assert x.shape == ref.shape, f"{x.shape} against the reference's {ref.shape}"
    lp, lq = log_softmax(ref.astype(np.float64)), log_softmax(x.astype(np.float64))
    kl = (np.exp(lp) * (lp - lq)).sum(axis=1)
    return {"rows": ref.shape[0], "top1": float((ref.argmax(axis=1) == x.argmax(axis=1)).mean()),
            "mean_kl": float(kl.mean()), "max_kl": float(kl.max()),
            "max_rel_dlogit": float(np.abs(x - ref).max() / np.abs(ref).max()),
            "rms_dlogit": float(np.sqrt(((x - ref).astype(np.float64) ** 2).mean()))}  # fmt: skip


def margins(x):
    """Per row: the top-1 logit minus the runner-up, in units of the row's standard deviation (a
    tie is 0: any rounding can flip it), and the top-1 probability."""
    top2 = np.partition(x, -2, axis=1)[:, -2:]
    gap = (top2[:, 1] - top2[:, 0]) / x.std(axis=1)
    return gap, np.exp(log_softmax(x.astype(np.float64)).max(axis=1))


def main():
    named = [a.split("=", 1) for a in sys.argv[1:]]
    assert len(named) >= 2, __doc__
    tables = [(n, p) for n, p in named if not p.endswith(".f32")]
    vocab = load(tables[0][1]).shape[1] if tables else None
    (ref_name, ref_path), others = named[0], named[1:]
    ref = load(ref_path, vocab)
    for name, path in others:
        m = compare(ref, load(path, vocab))
        print(json.dumps({"reference": ref_name, "other": name, "rows": m["rows"], "top1": m["top1"],
                          "mean_kl": m["mean_kl"], "max_rel_dlogit": m["max_rel_dlogit"]}))


if __name__ == "__main__":
    main()
