// A thin Swift wrapper over libsolo's C calls (include/solo.h): open, chat with a callback per
// chunk, cancel, tokenize, the privacy gate. Chunks are the JSON text of OpenAI's
// chat.completion.chunk; decode them with JSONDecoder or JSONSerialization.
import CSolo
import Foundation

public struct SoloError: Error, CustomStringConvertible {
    public let status: solo_status
    public let httpStatus: Int32
    public let message: String
    public var description: String { "solo status \(status.rawValue): \(message)" }
}

/// Turns a failed status into a SoloError (freeing the C message).
private func check(_ status: solo_status, _ err: inout solo_error) throws {
    if status == SOLO_OK || status == SOLO_DONE { return }
    let message = err.message.map { String(cString: $0) } ?? ""
    let e = SoloError(status: status, httpStatus: err.http_status, message: message)
    solo_error_free(&err)
    throw e
}

private func take(_ p: UnsafeMutablePointer<CChar>?) -> String {
    guard let p = p else { return "" }
    defer { solo_string_free(p) }
    return String(cString: p)
}

public final class Engine {
    private let ptr: OpaquePointer

    /// `model`: a checkpoint directory, nil for the built-in demo; `options`: libsolo's options JSON.
    public init(model: String? = nil, options: String = "{}") throws {
        var err = solo_error()
        var out: OpaquePointer?
        try check(solo_engine_open(model, options, nil, nil, &out, &err), &err)
        ptr = out!
    }

    deinit { solo_engine_close(ptr) }

    /// Runs a chat request (the JSON of /v1/chat/completions, `"stream": true` for chunks) and
    /// returns its events in order, reading them with solo_next_event on this thread.
    public func chat(_ requestJSON: String, onChunk: (String) -> Void) throws {
        var err = solo_error()
        var req: OpaquePointer?
        try check(solo_chat(ptr, requestJSON, nil, nil, &req, &err), &err)
        defer { solo_request_free(req) }
        while true {
            var chunk: UnsafeMutablePointer<CChar>?
            let status = solo_next_event(req, &chunk, &err)
            if status == SOLO_DONE { return }
            try check(status, &err)
            onChunk(take(chunk))
        }
    }

    public func tokenize(_ text: String) throws -> [UInt32] {
        var err = solo_error()
        var ids: UnsafeMutablePointer<UInt32>?
        var n = 0
        try check(solo_tokenize(ptr, text, &ids, &n, &err), &err)
        defer { solo_tokens_free(ids, n) }
        return n == 0 ? [] : Array(UnsafeBufferPointer(start: ids, count: n))
    }

    /// The privacy gate's report (JSON) under this engine's policy.
    public func gateCheck(_ text: String) throws -> String {
        var err = solo_error()
        var out: UnsafeMutablePointer<CChar>?
        try check(solo_gate_check(ptr, text, &out, &err), &err)
        return take(out)
    }
}
