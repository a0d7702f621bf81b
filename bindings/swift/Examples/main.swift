// swift run SoloChat: one streamed answer from the built-in demo checkpoint.
import Solo

let engine = try Engine(options: #"{"backend": "cpu"}"#)
let request = #"{"messages": [{"role": "user", "content": "What color is the sky?"}], "stream": true, "max_tokens": 64}"#
try engine.chat(request) { chunk in print(chunk) }
print(try engine.gateCheck("mail jane.doe@example.com"))
