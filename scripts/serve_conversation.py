#!/usr/bin/env python3
"""A long multi-turn conversation through a running `solo serve` with the stock `openai` client
(issue #43: "the 24 GiB run works end to end through `solo serve` with the stock `openai` client").

Each turn appends a user message of about --turn-tokens tokens of random words ("w123 w456 ...":
under serve_load.py's word-level tokenizer word wN is id N, so one word is one token; any other
tokenizer reads them too, and a probe before the conversation measures its tokens per word) and
streams a greedy reply of --max-tokens (chat.completions, stream_options include_usage); the
reply joins the history. Turns go on until the prompt holds --target-tokens. Per turn one line:
prompt tokens (and how many the prefix cache answered), TTFT, decode tok/s, reply length.

Then a request that cannot fit (a prompt longer than the server's context, /v1/models'
max_model_len) must get an OpenAI-style error (400 or 503) and one more small request must still
succeed. Exits non-zero on any failure: an HTTP error, a missing usage, a short conversation.

    python3 scripts/serve_conversation.py --url http://127.0.0.1:8000/v1 --target-tokens 32768
"""
import argparse, json, random, sys, time

import openai

SPECIAL = range(248044, 248047)  # <|endoftext|>, <|im_start|>, <|im_end|> in the word tokenizer


def words(rng, n):
    """n random words wN, N < 248000 (never a special id of the word tokenizer)."""
    out = []
    while len(out) < n:
        i = rng.randrange(248000)
        if i not in SPECIAL:
            out.append(f"w{i}")
    return " ".join(out)


def extra(obj, key):
    """A field the openai types do not declare (solo's reasoning_content, max_model_len)."""
    v = getattr(obj, key, None)
    if v is None and getattr(obj, "model_extra", None):
        v = obj.model_extra.get(key)
    return v


class Chat:
    def __init__(self, a):
        self.client = openai.OpenAI(base_url=a.url, api_key=a.api_key, max_retries=0, timeout=a.timeout)
        self.a = a
        self.body = {} if a.thinking else {"chat_template_kwargs": {"enable_thinking": False}}

    def once(self, messages, max_tokens):
        """Non-streamed: (reply text, usage)."""
        r = self.client.chat.completions.create(model=self.a.model, messages=messages, max_tokens=max_tokens,
                                                temperature=0, extra_body=self.body)
        if r.usage is None:
            raise SystemExit("FAIL: a non-streamed reply without usage")
        m = r.choices[0].message
        return (m.content or extra(m, "reasoning_content") or ""), r.usage

    def stream(self, messages, max_tokens):
        """Streamed with usage: (reply text, usage, t0, first token time, last token time)."""
        t0 = time.perf_counter()
        s = self.client.chat.completions.create(model=self.a.model, messages=messages, max_tokens=max_tokens,
                                                temperature=0, stream=True, stream_options={"include_usage": True},
                                                extra_body=self.body)
        text, usage, first, last, any_chunk = [], None, None, None, None
        for chunk in s:
            now = time.perf_counter()
            any_chunk = any_chunk or now
            if chunk.usage is not None:
                usage = chunk.usage
            for c in chunk.choices:
                piece = c.delta.content or extra(c.delta, "reasoning_content")
                if piece:
                    first = first or now
                    last = now
                    text.append(piece)
        if usage is None:
            raise SystemExit("FAIL: the stream ended without a usage chunk (stream_options include_usage)")
        if any_chunk is None:
            raise SystemExit("FAIL: the stream sent no chunk")
        return "".join(text), usage, t0, first or any_chunk, last or any_chunk


def cached(usage):
    d = usage.prompt_tokens_details
    return (d.cached_tokens or 0) if d is not None else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8000/v1", help="the server's OpenAI base URL")
    ap.add_argument("--api-key", default="solo", help="sent as the bearer token (solo serve --api-key)")
    ap.add_argument("--model", help="the model id (default: the first /v1/models lists)")
    ap.add_argument("--turn-tokens", type=int, default=7680, help="tokens each user turn adds (about)")
    ap.add_argument("--target-tokens", type=int, default=32768, help="the last turn's prompt holds at least this")
    ap.add_argument("--max-tokens", type=int, default=32, help="of each reply")
    ap.add_argument("--max-turns", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=600, help="seconds per request")
    ap.add_argument("--thinking", action="store_true", help="leave the template's thinking on (default: off)")
    ap.add_argument("--json", help="write the per-turn report here")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    chat = Chat(a)

    models = chat.client.models.list().data
    if not models:
        raise SystemExit("FAIL: /v1/models lists no model")
    m = next((x for x in models if x.id == a.model), models[0])
    a.model = m.id
    context = extra(m, "max_model_len")
    print(f"model {a.model}: context {context} tokens (max_model_len), precision {extra(m, 'precision')}", flush=True)
    if context is not None and context < a.target_tokens + a.max_tokens:
        raise SystemExit(f"FAIL: the server's context ({context}) is shorter than --target-tokens "
                         f"{a.target_tokens} + --max-tokens {a.max_tokens}")

    # tokens per word under this server's tokenizer (1 under the word tokenizer); also the
    # first request, which pays what a server does once
    _, u1 = chat.once([{"role": "user", "content": words(rng, 1)}], 1)
    _, u2 = chat.once([{"role": "user", "content": words(rng, 257)}], 1)
    per_word = (u2.prompt_tokens - u1.prompt_tokens) / 256
    print(f"probe: {per_word:.2f} tokens a word, {u1.prompt_tokens - 1} tokens of template", flush=True)

    messages, rows = [], []
    for turn in range(1, a.max_turns + 1):
        messages.append({"role": "user", "content": words(rng, max(1, round(a.turn_tokens / per_word)))})
        reply, usage, t0, first, last = chat.stream(messages, a.max_tokens)
        n = usage.completion_tokens
        rate = (n - 1) / (last - first) if n > 1 and last > first else float("nan")
        row = {"turn": turn, "prompt_tokens": usage.prompt_tokens, "cached_tokens": cached(usage),
               "ttft_s": first - t0, "decode_tok_s": rate, "completion_tokens": n, "reply_chars": len(reply)}
        rows.append(row)
        print(f"turn {turn}: prompt {usage.prompt_tokens} tokens ({row['cached_tokens']} cached), "
              f"TTFT {row['ttft_s']:.3f} s, decode {rate:.1f} tok/s, reply {n} tokens ({len(reply)} chars)", flush=True)
        messages.append({"role": "assistant", "content": reply})
        if usage.prompt_tokens >= a.target_tokens:
            break
    final = rows[-1]["prompt_tokens"]
    ok = final >= a.target_tokens
    print(f"conversation: {len(rows)} turns, final prompt {final} tokens (target {a.target_tokens}): "
          + ("PASS" if ok else "FAIL"), flush=True)

    # a request that cannot fit: more words than the context has tokens (every word is ≥ 1 token)
    limit = context if context is not None else 4 * a.target_tokens
    refused = None
    try:
        chat.once([{"role": "user", "content": words(rng, limit + 64)}], 8)
    except openai.APIStatusError as e:
        body = e.body if isinstance(e.body, dict) else {}
        err = body.get("error", body) if isinstance(body, dict) else {}
        refused = {"status": e.status_code, "type": err.get("type"), "code": err.get("code"),
                   "message": err.get("message")}
    if refused is None:
        print(f"FAIL: a prompt of {limit + 64} words (context {limit}) was answered", flush=True)
        ok = False
    else:
        good = refused["status"] in (400, 503) and bool(refused["message"])
        print(f"too long ({limit + 64} words, context {limit}): HTTP {refused['status']} {refused['type']} "
              f"{refused['code']}: {refused['message']!r}: " + ("PASS" if good else "FAIL"), flush=True)
        ok = ok and good

    # the server is still there
    reply, u = chat.once([{"role": "user", "content": words(rng, 64)}], 4)
    alive = u.prompt_tokens > 0
    print(f"after it: a small request answered ({u.prompt_tokens} prompt tokens, {u.completion_tokens} tokens, "
          f"{reply!r:.60}): " + ("PASS" if alive else "FAIL"), flush=True)
    ok = ok and alive
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": a.model, "context": context, "turns": rows, "refused": refused, "pass": ok}, f, indent=1)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    try:
        main()
    except openai.APIError as e:
        status = getattr(e, "status_code", None)
        raise SystemExit(f"FAIL: {type(e).__name__}{f' (HTTP {status})' if status else ''}: {e}")
