# %% [markdown]
# # solo inside a Python program (notebook-style: each `# %%` is a cell)
# No server: the engine runs in this process through libsolo. Install the binding's wheel (or
# set SOLO_LIB to target/debug/libsolo.so and PYTHONPATH to bindings/python), then run the cells.

# %%
import threading
import time

import solo

engine = solo.Engine(backend="cpu")  # no path: the built-in demo checkpoint
print(engine.info)

# %% A whole answer, OpenAI-shaped.
reply = engine.chat([{"role": "user", "content": "What color is the sky?"}], max_tokens=64)
print(reply.choices[0].message.content, "|", reply.usage)

# %% Streaming: chunks as they come.
for chunk in engine.chat([{"role": "user", "content": "Name an animal."}], stream=True, max_tokens=64):
    print(chunk.choices[0].delta.content or "", end="", flush=True)
print()

# %% Cancelling from another thread.
stream = engine.completion("Once upon a time", max_tokens=500, stream=True)
threading.Timer(0.2, stream.cancel).start()
started = time.monotonic()
pieces = [c.choices[0].text for c in stream]
print(f"cancelled after {len(pieces)} chunks, {time.monotonic() - started:.2f} s")

# %% The tokenizer and the privacy gate.
ids = engine.tokenize("Hello, world")
print(ids, repr(engine.detokenize(ids)))
print(engine.gate_check("Call me on +44 20 7946 0958"))
engine.close()
