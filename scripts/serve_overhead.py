#!/usr/bin/env python3
"""What a request costs around the engine: N one-token requests, one after another, over one
kept-alive connection to a running `solo serve`, per endpoint and streaming or not.

Standard library only. For each mode (/v1/chat/completions and /v1/completions, JSON and SSE)
it sends --warmup untimed requests, then --requests timed ones (`max_tokens: 1`, greedy), each
timed from the first byte sent to the last byte of the reply read, and reports p50 / p99 of
that wall time. /metrics is read before and after each mode: the engine's own share of the
requests (`solo_prefill_seconds`: the backend's prefill calls; `solo_engine_step_seconds`: the
whole engine steps; `solo_queue_wait_seconds`: arrival in the handler to the engine's start),
per request (read after every request, untimed), so that a request's overhead, its wall time
less its own prefill time, is what the server spends around the model (template, tokenizer, hand-offs, HTTP). A GET /health round trip on the same
connection comes first: the floor of HTTP and of this client.

By default every request's prompt is new (a counter in the text), so the prefix cache never
holds the whole prompt and each request prefills it (as a new conversation would); --same
repeats one prompt (then the cache answers it: no prefill at all).

    solo serve --backend cpu --model fixtures/tiny-a --port 8000 &
    python3 scripts/serve_overhead.py --url http://127.0.0.1:8000 --requests 300
"""
import argparse, http.client, json, re, time, urllib.parse

MODES = [("chat", False), ("chat", True), ("completions", False), ("completions", True)]


def metrics(conn):
    conn.request("GET", "/metrics")
    resp = conn.getresponse()
    text = resp.read().decode()
    out = {}
    for name in ("solo_prefill_seconds", "solo_engine_step_seconds", "solo_queue_wait_seconds"):
        for part in ("sum", "count"):
            m = re.search(rf"^{name}_{part} (\S+)$", text, re.M)
            out[f"{name}_{part}"] = float(m.group(1)) if m else None
    return out


def body(endpoint, stream, i, same, words):
    tag = "" if same else f" (request {i})"
    text = " ".join(["hello"] * words) + tag
    b = {"max_tokens": 1, "temperature": 0, "stream": stream}
    if endpoint == "chat":
        b["messages"] = [{"role": "system", "content": "You are a helpful assistant."},
                         {"role": "user", "content": text}]
    else:
        b["prompt"] = text
    return json.dumps(b).encode()


def one(conn, endpoint, stream, payload):
    path = "/v1/chat/completions" if endpoint == "chat" else "/v1/completions"
    t0 = time.perf_counter()
    conn.request("POST", path, payload, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()  # SSE: chunked, to its last chunk after `data: [DONE]`
    t1 = time.perf_counter()
    if resp.status != 200:
        raise SystemExit(f"{path}: HTTP {resp.status}: {data[:300]!r}")
    if stream and not data.rstrip().endswith(b"data: [DONE]"):
        raise SystemExit(f"{path}: the stream did not end with [DONE]: {data[-200:]!r}")
    if resp.getheader("Connection", "").lower() == "close":
        raise SystemExit(f"{path}: the server closed the connection")
    return t1 - t0


def health(conn):
    """The HTTP floor: a GET /health round trip on the same connection."""
    t0 = time.perf_counter()
    conn.request("GET", "/health")
    resp = conn.getresponse()
    resp.read()
    return time.perf_counter() - t0


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


def per_request(before, after, name, n):
    s0, s1 = before[f"{name}_sum"], after[f"{name}_sum"]
    if s0 is None or s1 is None:
        return None
    return 1e3 * (s1 - s0) / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--requests", type=int, default=200, help="timed requests per mode")
    ap.add_argument("--warmup", type=int, default=20, help="untimed requests per mode first")
    ap.add_argument("--words", type=int, default=8, help="words in the user message / prompt")
    ap.add_argument("--same", action="store_true", help="one prompt for all (prefix-cache hits)")
    ap.add_argument("--modes", default="all", help="comma list of chat,chat-sse,completions,completions-sse")
    ap.add_argument("--json", help="write the report here")
    a = ap.parse_args()
    u = urllib.parse.urlparse(a.url)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=60)
    names = {m: f"{m[0]}{'-sse' if m[1] else ''}" for m in MODES}
    wanted = [m for m in MODES if a.modes == "all" or names[m] in a.modes.split(",")]
    rows, counter = [], 0
    for _ in range(a.warmup):
        health(conn)
    floor = [health(conn) for _ in range(a.requests)]
    rows.append({"mode": "GET /health", "requests": a.requests, "wall_p50_ms": 1e3 * percentile(floor, 50),
                 "wall_p99_ms": 1e3 * percentile(floor, 99), "prefill_ms": None, "engine_step_ms": None,
                 "queue_wait_ms": None, "overhead_p50_ms": None, "overhead_p99_ms": None})
    for endpoint, stream in wanted:
        for _ in range(a.warmup):
            counter += 1
            one(conn, endpoint, stream, body(endpoint, stream, counter, a.same, a.words))
        walls, prefills, steps, queues = [], [], [], []
        before = metrics(conn)
        for _ in range(a.requests):
            counter += 1
            walls.append(1e3 * one(conn, endpoint, stream, body(endpoint, stream, counter, a.same, a.words)))
            # untimed: this request's own share of the engine's histograms
            after = metrics(conn)
            prefills.append(per_request(before, after, "solo_prefill_seconds", 1) or 0.0)
            steps.append(per_request(before, after, "solo_engine_step_seconds", 1) or 0.0)
            queues.append(per_request(before, after, "solo_queue_wait_seconds", 1) or 0.0)
            before = after
        over = [w - p for w, p in zip(walls, prefills)]
        p50 = lambda v: percentile(v, 50)
        rows.append({"mode": names[(endpoint, stream)], "requests": a.requests,
                     "wall_p50_ms": p50(walls), "wall_p99_ms": percentile(walls, 99),
                     "prefill_ms": p50(prefills), "engine_step_ms": p50(steps), "queue_wait_ms": p50(queues),
                     "overhead_p50_ms": p50(over), "overhead_p99_ms": percentile(over, 99)})
    fmt = lambda v: "-" if v is None else f"{v:.2f}"
    print(f"{a.requests} sequential one-token requests per mode, one kept-alive connection, "
          f"{'one repeated prompt' if a.same else 'a new prompt each'}:")
    print(f"{'mode':>15} | {'wall p50':>8} | {'wall p99':>8} | {'prefill':>7} | {'step':>6} | {'queue':>6} | "
          f"{'overhead p50':>12} | {'p99':>6}")
    for r in rows:
        print(f"{r['mode']:>15} | {fmt(r['wall_p50_ms']):>8} | {fmt(r['wall_p99_ms']):>8} | "
              f"{fmt(r['prefill_ms']):>7} | {fmt(r['engine_step_ms']):>6} | {fmt(r['queue_wait_ms']):>6} | "
              f"{fmt(r['overhead_p50_ms']):>12} | {fmt(r['overhead_p99_ms']):>6}")
    print("ms; prefill, step, queue: medians of each request's own (the backend's prefill calls, the engine "
          "steps, arrival to the engine's start); overhead: each request's wall time less its prefill")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"requests": a.requests, "same_prompt": a.same, "words": a.words, "modes": rows}, f, indent=1)


if __name__ == "__main__":
    main()
