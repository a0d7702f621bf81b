#!/usr/bin/env python3
"""Concurrent streaming clients against a running `solo serve`: TTFT and decode rate per client.

Standard library only. Each client sends one streaming /v1/completions request at the same
moment (a prompt of --prompt-tokens random ids, greedy, --max-tokens) and times its first text
chunk (TTFT) and its last; the report gives, per client, TTFT and its decode rate, then TTFT p50 /
p99 over the clients and the aggregate decode rate (all tokens after the first ones, over the
time from the first client's first token to the last client's last). One short request goes
first, untimed; the prompts are fresh each run, so the prefix cache answers none of them.

    python3 scripts/serve_load.py --url http://127.0.0.1:8000 --clients 8 --prompt-tokens 4096

A checkpoint of random weights has no tokenizer of its vocabulary: `--make-tokenizer DIR` writes
DIR/tokenizer.json, a word-level tokenizer whose every id of the real vocabulary (248,320) is a
word ("w17"), the special tokens at the checkpoint's ids, so that every generated token is text.
"""
import argparse, http.client, json, random, threading, time, urllib.parse

VOCAB = 248320
# The Qwen3.6 ids the server and the chat template look for.
SPECIAL = {248044: "<|endoftext|>", 248045: "<|im_start|>", 248046: "<|im_end|>"}


def make_tokenizer(directory):
    vocab = {f"w{i}": i for i in range(VOCAB) if i not in SPECIAL}
    added = [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, c in SPECIAL.items()]
    for i, c in SPECIAL.items():
        vocab[c] = i
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
           "normalizer": None, "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None,
           "decoder": None, "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<|endoftext|>"}}
    with open(f"{directory}/tokenizer.json", "w") as f:
        json.dump(tok, f)


def client(url, prompt, max_tokens, start, out):
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=600)
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                       "stream": True, "stream_options": {"include_usage": True}})
    start.wait()
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        out.update(error=f"HTTP {resp.status}: {resp.read()[:200]!r}")
        return
    first = last = None
    chunks = tokens = 0
    for line in resp:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        event = json.loads(line[6:])
        if event.get("usage"):
            tokens = event["usage"]["completion_tokens"]
        if event.get("choices") and event["choices"][0].get("text"):
            now = time.perf_counter()
            first = first or now
            last = now
            chunks += 1
    out.update(t0=t0, first=first, last=last, tokens=tokens or chunks)


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--prompt-tokens", type=int, default=4096)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--ids-below", type=int, default=200000, help="prompt ids are drawn below this")
    ap.add_argument("--seed", type=int, help="of the prompts (default: fresh ones)")
    ap.add_argument("--json", help="write the report here")
    ap.add_argument("--make-tokenizer", metavar="DIR", help="write DIR/tokenizer.json and exit")
    a = ap.parse_args()
    if a.make_tokenizer:
        make_tokenizer(a.make_tokenizer)
        return
    # fresh prompts each run (--seed to repeat one), so that no prefix-cache entry answers them
    rng = random.Random(a.seed)
    # one short request first: what a server does once (kernel modules, the first state) is
    # not a client's time to first token
    client(a.url, [rng.randrange(a.ids_below) for _ in range(16)], 2, threading.Barrier(1), {})
    results = [{} for _ in range(a.clients)]
    start = threading.Barrier(a.clients)
    threads = [threading.Thread(target=client, args=(a.url, [rng.randrange(a.ids_below) for _ in range(a.prompt_tokens)],
                                                     a.max_tokens, start, r)) for r in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bad = [r["error"] for r in results if "error" in r or not r.get("first")]
    if bad:
        raise SystemExit(f"{len(bad)} clients failed: {bad[:3]}")
    rows = []
    for i, r in enumerate(results):
        rate = (r["tokens"] - 1) / (r["last"] - r["first"]) if r["last"] > r["first"] else 0.0
        rows.append({"client": i, "ttft_ms": 1e3 * (r["first"] - r["t0"]), "tokens": r["tokens"], "decode_tok_s": rate})
    window = max(r["last"] for r in results) - min(r["first"] for r in results)
    aggregate = sum(r["tokens"] - 1 for r in results) / window
    ttfts = [row["ttft_ms"] for row in rows]
    report = {"clients": a.clients, "prompt_tokens": a.prompt_tokens, "max_tokens": a.max_tokens,
              "ttft_p50_ms": percentile(ttfts, 50), "ttft_p99_ms": percentile(ttfts, 99),
              "aggregate_decode_tok_s": aggregate, "per_client": rows}
    print(f"{a.clients} clients, prompts of {a.prompt_tokens} tokens, {a.max_tokens} tokens each:")
    print(f"{'client':>6} | {'TTFT ms':>9} | {'tokens':>6} | {'decode tok/s':>12}")
    for row in rows:
        print(f"{row['client']:>6} | {row['ttft_ms']:>9.1f} | {row['tokens']:>6} | {row['decode_tok_s']:>12.1f}")
    print(f"TTFT p50 {report['ttft_p50_ms']:.1f} ms, p99 {report['ttft_p99_ms']:.1f} ms; "
          f"aggregate decode {aggregate:.1f} tok/s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
