"""Drives a running solo server with the official `openai` package, unmodified.

    python openai_client.py http://127.0.0.1:PORT/v1

The server must run the scripted test backend of `openai_client.rs` (its replies are fixed)
with API key `test-key`. Checks: the model list, a chat (reasoning split), streaming with usage,
a tools round trip (plain and streamed), and that errors surface as the SDK's exceptions.
"""

import json
import sys

import openai
from openai import OpenAI

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather forecast for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}


def extra(obj, name):
    """A field the SDK's types do not declare (pydantic keeps it as an extra)."""
    return (obj.model_extra or {}).get(name)


def main(base_url):
    client = OpenAI(base_url=base_url, api_key="test-key", max_retries=0)

    models = client.models.list()
    ids = [m.id for m in models.data]
    assert ids == ["tiny-a"], ids
    model = ids[0]

    # Chat: thinking on by default; the reasoning comes separately.
    r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "ADD please"}])
    msg = r.choices[0].message
    assert msg.content == "The answer is 4.", msg
    assert extra(msg, "reasoning_content") == "Two plus two.", msg
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens

    # Streaming with usage.
    stream = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "ADD please"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    content, reasoning, usage, finish = "", "", None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            content += choice.delta.content or ""
            reasoning += extra(choice.delta, "reasoning_content") or ""
            finish = choice.finish_reason or finish
    assert (reasoning, content, finish) == ("Two plus two.", "The answer is 4.", "stop"), (reasoning, content)
    assert usage is not None and usage.completion_tokens == r.usage.completion_tokens, usage
    assert usage.prompt_tokens_details.cached_tokens == usage.prompt_tokens, usage  # same prompt again

    # Tools round trip.
    messages = [{"role": "user", "content": "What is the WEATHER in Paris?"}]
    r = client.chat.completions.create(model=model, messages=messages, tools=[WEATHER])
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    call = choice.message.tool_calls[0]
    assert call.type == "function" and call.function.name == "get_weather", call
    assert json.loads(call.function.arguments) == {"city": "Paris", "days": 3}, call
    messages.append(choice.message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "FORECAST: sunny, 24 C"})
    r = client.chat.completions.create(model=model, messages=messages, tools=[WEATHER])
    assert r.choices[0].message.content == "It is sunny in Paris.", r
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.prompt_tokens_details.cached_tokens > 0, r.usage

    # The same call, streamed: the SDK's deltas reassemble into one call.
    stream = client.chat.completions.create(
        model=model, messages=messages[:1], tools=[WEATHER], tool_choice="auto", stream=True
    )
    calls = {}
    finish = None
    for chunk in stream:
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            for d in choice.delta.tool_calls or []:
                entry = calls.setdefault(d.index, {"id": d.id, "name": d.function.name, "arguments": ""})
                entry["arguments"] += d.function.arguments or ""
    assert finish == "tool_calls" and len(calls) == 1, calls
    assert calls[0]["name"] == "get_weather" and calls[0]["id"].startswith("call_"), calls
    assert json.loads(calls[0]["arguments"]) == {"city": "Paris", "days": 3}, calls

    # Legacy completions.
    r = client.completions.create(model=model, prompt="ADD", max_tokens=3)
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 3, r

    # Errors arrive as the SDK's exceptions.
    try:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
        raise AssertionError("unknown model accepted")
    except openai.NotFoundError as e:
        assert e.status_code == 404
    try:
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": "x"}], n=2)
        raise AssertionError("n=2 accepted")
    except openai.BadRequestError as e:
        assert "not supported" in str(e), e
    try:
        OpenAI(base_url=base_url, api_key="wrong", max_retries=0).models.list()
        raise AssertionError("wrong key accepted")
    except openai.AuthenticationError:
        pass

    print(f"openai {openai.__version__}: models, chat, streaming with usage, tools round trip: ok")


if __name__ == "__main__":
    main(sys.argv[1])
