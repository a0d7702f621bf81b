"""Golden chat-template renderings and token ids from Hugging Face, for solo-text's tests.

    python scripts/template_cases.py [TOKENIZER_DIR] [OUT_JSON]
    (defaults: fixtures/tiny-a fixtures/chat_template_cases.json)

Renders each case with transformers' own `AutoTokenizer.apply_chat_template(tokenize=False)`
using the tokenizer directory's chat template (the real Qwen3.6 one), and encodes texts with
the same tokenizer (`add_special_tokens=False`). Output:

    {"chat": [{"name", "messages", "tools", "add_generation_prompt",
               "enable_thinking"?, "preserve_thinking"?, "expected" | "error", "expected_ids"?}],
     "encode": [{"name", "text", "expected_ids"}]}

`messages` are stored as an OpenAI client sends them (tool-call arguments may be JSON strings);
before calling HF they get vLLM's clean-up (`vllm_postprocess`), because the Qwen3.6 template
iterates `arguments|items` and HF alone cannot render a string there. The Rust side must
reproduce HF + that clean-up.
"""

import copy
import json
import re
import sys

from transformers import AutoTokenizer

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city. Returns temp < 0 & > 40 as 'extreme'.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. 東京 or Zürich"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
                "days": {"type": "integer", "minimum": 1, "maximum": 7.5},
                "precision": {"type": "number", "minimum": 1e-06, "default": 0.5},
            },
            "required": ["city"],
        },
    },
}

SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search_docs",
        "description": "Search the docs. Use \"quotes\" for phrases; <b>html</b> is stripped.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "filters": {
                    "type": "object",
                    "properties": {
                        "tags": {"type": "array", "items": {"type": "string"}},
                        "since": {"type": ["string", "null"], "description": "ISO date\tor null"},
                    },
                },
            },
            "required": ["query", "filters"],
        },
    },
}

USER = {"role": "user", "content": "Name the two colors of a chessboard."}


def _call(name, args, as_string=False):
    return {
        "id": f"call_{name}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False) if as_string else args},
    }


def cases():
    """(name, messages, tools, add_generation_prompt, template kwargs, record token ids)."""
    weather_call = _call("get_weather", {"city": "Paris", "unit": "celsius"})
    tool_loop = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Paris and Tokyo, then search docs for umbrellas?"},
        {"role": "assistant", "content": "", "reasoning_content": "Need both cities.",
         "tool_calls": [weather_call, _call("get_weather", {"city": "東京", "days": 2}, as_string=True)]},
        {"role": "tool", "tool_call_id": "call_get_weather", "content": "{\"temp\": 18}"},
        {"role": "tool", "tool_call_id": "call_get_weather", "content": "{\"temp\": 22, \"sky\": \"晴れ\"}"},
        {"role": "assistant", "content": "Now the docs.", "reasoning_content": "Both mild.",
         "tool_calls": [_call("search_docs", {"query": "umbrella <rain> & \"wind\"",
                                              "filters": {"tags": ["gear"], "since": None}})]},
        {"role": "tool", "content": "No results."},
    ]
    history = [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4", "reasoning_content": "Simple arithmetic."},
        {"role": "user", "content": "And 3+3?"},
    ]
    return [
        ("single_user", [USER], None, True, {}, True),
        ("system_prompt", [{"role": "system", "content": "You are a helpful assistant."}, USER], None, True, {}, True),
        ("thinking_off", [USER], None, True, {"enable_thinking": False}, True),
        ("history_reasoning_content", history, None, True, {}, True),
        ("history_inline_think",
         [history[0], {"role": "assistant", "content": "<think>\nAdd them.\n</think>\n\n4"}, history[2],
          {"role": "assistant", "content": "<think>Double 3.</think>6"}],
         None, False, {}, False),
        ("preserve_thinking", history, None, True, {"preserve_thinking": True}, True),
        ("reasoning_field_alias",
         [history[0], {"role": "assistant", "content": "4", "reasoning": "Via the `reasoning` key."}],
         None, True, {"preserve_thinking": True}, False),
        ("tools_defined", [{"role": "system", "content": "Be careful & precise."}, USER],
         [WEATHER_TOOL, SEARCH_TOOL], True, {}, True),
        ("tool_call_object_args",
         [{"role": "user", "content": "Weather in Paris?"},
          {"role": "assistant", "content": "Let me check.", "tool_calls": [weather_call]}],
         [WEATHER_TOOL], False, {}, False),
        ("tool_call_string_args",
         [{"role": "user", "content": "Weather in Paris?"},
          {"role": "assistant", "content": None,
           "tool_calls": [_call("get_weather", {"city": "Paris", "days": 3}, as_string=True)]}],
         [WEATHER_TOOL], False, {}, False),
        ("multiple_tool_calls_and_results", tool_loop[1:5], [WEATHER_TOOL], True, {}, True),
        ("one_tool_result",
         [{"role": "user", "content": "Weather in Paris?"},
          {"role": "assistant", "content": "", "tool_calls": [weather_call]},
          {"role": "tool", "content": "{\"temp\": 18, \"unit\": \"celsius\"}"}],
         [WEATHER_TOOL], True, {"enable_thinking": False}, False),
        ("multi_step_tool_loop", tool_loop, [WEATHER_TOOL, SEARCH_TOOL], True, {}, True),
        ("content_parts",
         [{"role": "system", "content": [{"type": "text", "text": "  Sys part.  "}]},
          {"role": "user", "content": [{"type": "text", "text": "Hello "}, {"type": "text", "text": "world!"}]}],
         None, True, {}, False),
        ("no_generation_prompt", history[:2], None, False, {}, False),
        ("thinking_off_old_turn_empty_reasoning",
         [history[0], {"role": "assistant", "content": "4", "reasoning_content": ""}, history[2]],
         None, True, {"enable_thinking": False}, True),
        ("error_no_user_query", [{"role": "system", "content": "Only a system prompt."}], None, True, {}, False),
    ]


def vllm_postprocess(messages):
    """vLLM's `_postprocess_messages`: tool-call arguments become a dict (JSON strings parsed;
    empty, invalid or non-object ones become {}) and an empty `tool_calls` list is dropped."""
    messages = copy.deepcopy(messages)
    for m in messages:
        calls = m.get("tool_calls")
        if m.get("role") != "assistant" or not isinstance(calls, list):
            continue
        if not calls:
            m.pop("tool_calls")
            continue
        for call in calls:
            fn = call.get("function", call)
            args = fn.get("arguments")
            if isinstance(args, str) and args:
                try:
                    args = json.loads(args)
                except json.JSONDecodeError:
                    args = None
            fn["arguments"] = args if isinstance(args, dict) else {}
    return messages


ENCODE_TEXTS = [
    ("english", "The quick brown fox jumps over the lazy dog. It's 3:45pm, isn't it?"),
    ("code", "def f(x):\n    return {\"a\": x ** 2}  # comment\n\tif x != 0: print(x)\n"),
    ("non_ascii", "naïve café 東京 🙂 Ünïcödé — ñ and 한국어"),
    ("whitespace", "a  b   c\n\n\nd \t\te\r\n   \n  end  "),
    ("specials_inline", "<|im_start|>user\nhi<|im_end|>\n<think>\n</think>\n<tool_call>"),
    ("digits", "1234567890 3.14159 1e-10 0x1F"),
]


def write_template_cases(tokenizer_dir, out_path):
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    chat = []
    for name, messages, tools, add_gen, kwargs, record_ids in cases():
        case = {"name": name, "messages": messages, "tools": tools, "add_generation_prompt": add_gen}
        case.update(kwargs)
        try:
            text = tok.apply_chat_template(vllm_postprocess(messages), tools=tools, tokenize=False,
                                           add_generation_prompt=add_gen, **kwargs)
        except Exception as e:  # jinja2 TemplateError from raise_exception
            case["error"] = str(e)
        else:
            case["expected"] = text
            if record_ids:
                case["expected_ids"] = tok(text, add_special_tokens=False).input_ids
        chat.append(case)
    encode = [{"name": n, "text": t, "expected_ids": tok(t, add_special_tokens=False).input_ids}
              for n, t in ENCODE_TEXTS]
    text = json.dumps({"chat": chat, "encode": encode}, ensure_ascii=False, indent=1)
    # Keep id lists on one line so the file stays readable.
    text = re.sub(r"\[\s*(-?\d+(?:,\s*-?\d+)*)\s*\]",
                  lambda m: "[" + ", ".join(x.strip() for x in m[1].split(",")) + "]", text)
    with open(out_path, "w", encoding="utf-8") as f:
        f.write(text + "\n")
    print(f"wrote {len(chat)} chat and {len(encode)} encode cases to {out_path}")


if __name__ == "__main__":
    args = sys.argv[1:] + ["fixtures/tiny-a", "fixtures/chat_template_cases.json"][len(sys.argv[1:]):]
    write_template_cases(args[0], args[1])
