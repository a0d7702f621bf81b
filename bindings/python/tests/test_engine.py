"""The Python binding against the built-in demo checkpoint (libsolo through ctypes)."""

import threading
import time

import pytest

import solo

ASK = [{"role": "user", "content": "What color is the sky?"}]


@pytest.fixture(scope="module")
def engine():
    with solo.Engine(backend="cpu") as e:
        yield e


def test_open_reports_progress_and_info():
    stages = []
    with solo.Engine(backend="cpu", progress=lambda stage, f: stages.append((stage, f))) as e:
        info = e.info
    assert [s for s, _ in stages] == ["checkpoint", "text", "weights", "ready"]
    assert stages[-1][1] == 1.0
    assert info["backend"] == "cpu" and info["vocab"] > 0 and info["max_seq"] > 0


def test_chat_returns_an_openai_shaped_completion(engine):
    reply = engine.chat(ASK, max_tokens=8, temperature=0)
    assert reply.object == "chat.completion"
    assert reply.choices[0].message.role == "assistant"
    assert reply.choices[0].finish_reason in ("stop", "length")
    assert reply.usage.completion_tokens >= 1
    assert reply.usage.prompt_tokens > 5


def test_streaming_gives_chunks_that_add_up_to_the_whole_reply(engine):
    whole = engine.chat(ASK, max_tokens=12, temperature=0)
    text, finish, chunks = "", None, 0
    for chunk in engine.chat(ASK, max_tokens=12, temperature=0, stream=True):
        assert chunk.object == "chat.completion.chunk"
        chunks += 1
        delta = chunk.choices[0].delta
        text += (delta.content or "") + (delta.reasoning_content or "")
        finish = chunk.choices[0].finish_reason or finish
    message = whole.choices[0].message
    assert chunks >= 3
    assert text == (message.reasoning_content or "") + (message.content or "")
    assert finish == whole.choices[0].finish_reason


def test_usage_chunk_when_asked(engine):
    chunks = list(engine.chat(ASK, max_tokens=4, stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens >= 1


def test_cancel_from_another_thread_stops_the_stream(engine):
    # The end-of-text tokens biased away: it would run to max_tokens.
    never = {str(engine.tokenize(t)[0]): -100 for t in ("<|im_end|>", "<|endoftext|>")}
    stream = engine.completion("Once upon a time", max_tokens=2000, logit_bias=never, stream=True)
    got = []
    with stream:
        first = next(stream)
        got.append(first)
        threading.Timer(0.05, stream.cancel).start()
        started = time.monotonic()
        for chunk in stream:
            got.append(chunk)
        elapsed = time.monotonic() - started
    assert stream.cancelled
    assert elapsed < 5.0
    finishes = [c.choices[0].finish_reason for c in got if c.choices]
    assert "length" not in finishes and "stop" not in finishes, "the stream ran to its end"


def test_errors_raise_with_status_and_message(engine):
    with pytest.raises(solo.SoloError) as bad:
        engine.chat([{"role": "wizard", "content": "hi"}])
    assert bad.value.status == "SOLO_INVALID_REQUEST" and bad.value.http_status == 400
    assert "role" in bad.value.message
    with pytest.raises(solo.SoloError) as too_long:
        engine.chat(ASK, max_tokens=10**9)
    assert "maximum context length" in too_long.value.message
    with pytest.raises(solo.SoloError) as options:
        solo.Engine(backend="cpu", colour="blue")
    assert options.value.status == "SOLO_INVALID_ARGUMENT" and "colour" in options.value.message
    with pytest.raises(solo.SoloError) as missing:
        solo.Engine("/nonexistent/checkpoint", backend="cpu")
    assert missing.value.status == "SOLO_LOAD_FAILED" and "/nonexistent/checkpoint" in missing.value.message


def test_two_engines_at_once_answer_alike():
    with solo.Engine(backend="cpu") as a, solo.Engine(backend="cpu") as b:
        results = {}

        def ask(name, e):
            results[name] = e.chat(ASK, max_tokens=8, temperature=0).choices[0].message

        threads = [threading.Thread(target=ask, args=(n, e)) for n, e in (("a", a), ("b", b))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results["a"] == results["b"]


def test_tokenize_round_trips(engine):
    ids = engine.tokenize("Hello, world")
    assert ids and all(isinstance(i, int) for i in ids)
    assert engine.detokenize(ids) == "Hello, world"
    with pytest.raises(solo.SoloError) as bad:
        engine.detokenize([10**8])
    assert "vocabulary" in bad.value.message


def test_gate_finds_an_email():
    report = solo.gate_check("write to jane.doe@example.com")
    assert [s["type"] for s in report["spans"]] == ["EMAIL"]


def test_cloud_routing_options_gate_requests_as_solo_serve_does():
    # A cloud nobody listens on: what the policy lets out falls back to the local engine
    # (on_cloud_error = "local"); a name needs the user's consent first (HTTP 428).
    with solo.Engine(backend="cpu", cloud_url="http://127.0.0.1:9") as e:
        reply = e.chat(ASK, max_tokens=4)
        assert reply.object == "chat.completion" and reply.usage.completion_tokens >= 1
        with pytest.raises(solo.SoloError) as consent:
            e.chat([{"role": "user", "content": "Please write a note to John Smith about the meeting."}], max_tokens=4)
    assert consent.value.status == "SOLO_REFUSED" and consent.value.http_status == 428
    assert "consent" in consent.value.message.lower()
