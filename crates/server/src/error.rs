//! OpenAI's error object, `{"error": {"message", "type", "param", "code"}}`, with the HTTP status
//! that goes with it. Internal failures are logged here and answered without their details.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// OpenAI's `type`: `invalid_request_error`, `authentication_error`, `server_error`.
    pub kind: &'static str,
    pub code: Option<&'static str>,
    pub param: Option<String>,
    /// Seconds for the `Retry-After` header (503).
    pub retry_after: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, message: message.into(), kind, code: None, param: None, retry_after: None }
    }

    /// 400: the request is malformed or asks for something impossible.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
    }

    /// 400 naming the offending field.
    pub fn invalid_param(param: &str, message: impl Into<String>) -> Self {
        ApiError { param: Some(param.to_string()), ..Self::invalid(message) }
    }

    /// 400 for a feature solo does not offer, said plainly.
    pub fn unsupported(param: &str, what: &str) -> Self {
        ApiError {
            code: Some("unsupported_parameter"),
            ..Self::invalid_param(param, format!("{what} is not supported by this server (solo)."))
        }
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        ApiError {
            code: Some("invalid_api_key"),
            ..Self::new(StatusCode::UNAUTHORIZED, "invalid_request_error", message)
        }
    }

    pub fn model_not_found(model: &str) -> Self {
        ApiError {
            code: Some("model_not_found"),
            param: Some("model".into()),
            ..Self::new(
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                format!("The model `{model}` does not exist or you do not have access to it."),
            )
        }
    }

    /// 404 for a named thing that does not exist (an adapter to unload).
    pub fn not_found(param: &str, message: impl Into<String>) -> Self {
        ApiError {
            param: Some(param.to_string()),
            ..Self::new(StatusCode::NOT_FOUND, "invalid_request_error", message)
        }
    }

    pub fn unknown_route(method: &str, path: &str) -> Self {
        ApiError {
            code: Some("unknown_url"),
            ..Self::new(
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                format!("Unknown request URL: {method} {path}."),
            )
        }
    }

    pub fn method_not_allowed(method: &str, path: &str) -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "invalid_request_error",
            format!("Method {method} is not allowed for {path}."),
        )
    }

    pub fn body_too_large(limit: usize) -> Self {
        ApiError {
            code: Some("request_too_large"),
            ..Self::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_request_error",
                format!("The request body is larger than this server accepts ({limit} bytes)."),
            )
        }
    }

    /// 408: the request body did not arrive within `limit` of its headers.
    pub fn body_timeout(limit: std::time::Duration) -> Self {
        ApiError {
            code: Some("request_timeout"),
            ..Self::new(
                StatusCode::REQUEST_TIMEOUT,
                "invalid_request_error",
                format!("The request body did not arrive within {:.1} s.", limit.as_secs_f64()),
            )
        }
    }

    /// 503 with `Retry-After`: the queue is full, a request waited in it past its timeout, or the
    /// server has as many connections open as it takes.
    pub fn overloaded(message: impl Into<String>, retry_after: u64) -> Self {
        ApiError {
            code: Some("server_overloaded"),
            retry_after: Some(retry_after),
            ..Self::new(StatusCode::SERVICE_UNAVAILABLE, "server_error", message)
        }
    }

    /// 500: the cause goes to the log, never to the client.
    pub fn internal(cause: &dyn std::fmt::Display) -> Self {
        eprintln!("solo serve: internal error: {cause:#}");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "The server had an error while processing your request.",
        )
    }

    /// The JSON error object (also what a stream sends when it fails after its headers).
    pub fn body(&self) -> serde_json::Value {
        json!({"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}})
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.status, self.message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body())).into_response();
        if let Some(secs) = self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}
