"""solo's engine inside a Python program: ctypes over libsolo (include/solo.h), no server.

    import solo
    with solo.Engine() as engine:                    # no path: the built-in demo checkpoint
        for chunk in engine.chat([{"role": "user", "content": "Hi"}], stream=True):
            print(chunk.choices[0].delta.content or "", end="")

Requests take the fields of OpenAI's chat completions API (the same JSON `solo serve` takes);
answers are OpenAI-shaped objects (attribute access: ``reply.choices[0].message.content``).
"""

from ._lib import SoloError, Cancelled
from .engine import Engine, Stream, OpenAIObject, gate_check

__all__ = ["Engine", "Stream", "OpenAIObject", "SoloError", "Cancelled", "gate_check"]
__version__ = "0.1.0"
