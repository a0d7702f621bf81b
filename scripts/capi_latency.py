#!/usr/bin/env python3
"""How long a streamed token takes from libsolo to a Python loop body (the binding's delivery
delay; target: every one within 1 ms). With SOLO_STAMP_CHUNKS=1 libsolo writes into each chunk
the CLOCK_MONOTONIC time it took it from the server's handler (`solo_relayed_ns`); this reads
time.monotonic_ns() (the same clock) as each chunk reaches the loop and prints percentiles.

    cargo build --release -p solo-capi
    SOLO_LIB=target/release/libsolo.so PYTHONPATH=bindings/python python3 scripts/capi_latency.py [REQUESTS]
"""
import os
import sys
import time

os.environ["SOLO_STAMP_CHUNKS"] = "1"
import solo  # noqa: E402  (after the variable: libsolo reads it once)

requests = int(sys.argv[1]) if len(sys.argv) > 1 else 20
delays = []
with solo.Engine(backend="cpu") as engine:
    never = {str(engine.tokenize(t)[0]): -100 for t in ("<|im_end|>", "<|endoftext|>")}
    for _ in range(requests):
        for chunk in engine.completion("Once upon a time", max_tokens=64, logit_bias=never, stream=True):
            now = time.monotonic_ns()
            if chunk.solo_relayed_ns:
                delays.append((now - chunk.solo_relayed_ns) / 1000)
delays.sort()
pct = lambda q: delays[min(len(delays) - 1, int(q * len(delays)))]
print(f"python: {len(delays)} chunks, delay from libsolo to the loop body: p50 {pct(0.5):.1f} µs, "
      f"p99 {pct(0.99):.1f} µs, max {delays[-1]:.1f} µs; over 1 ms: {sum(d > 1000 for d in delays)}")
