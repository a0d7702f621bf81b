//! `GET /`: the chat page, from files compiled into the binary (`assets/`); nothing is fetched
//! from anywhere else, and the Content-Security-Policy says so to the browser. The page talks to
//! this server's own `/v1/chat/completions`.

use axum::extract::Path;
use axum::http::header;
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("../assets/index.html");

/// (name under `/ui/`, content type, bytes).
const ASSETS: &[(&str, &str, &str)] = &[
    ("chat.js", "text/javascript; charset=utf-8", include_str!("../assets/chat.js")),
    ("markdown.js", "text/javascript; charset=utf-8", include_str!("../assets/markdown.js")),
    ("chat.css", "text/css; charset=utf-8", include_str!("../assets/chat.css")),
    ("icon.svg", "image/svg+xml", include_str!("../assets/icon.svg")),
];

/// Scripts, styles and requests: this origin only.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

pub async fn index() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        INDEX,
    )
        .into_response()
}

pub async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, kind, body)) => (
            [
                (header::CONTENT_TYPE, *kind),
                (header::CACHE_CONTROL, "no-cache"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            *body,
        )
            .into_response(),
        None => crate::error::ApiError::unknown_route("GET", &format!("/ui/{name}")).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_only_assets_it_serves() {
        for src in INDEX.split("src=\"").chain(INDEX.split("href=\"")).skip(1) {
            let path = src.split('"').next().unwrap();
            if let Some(name) = path.strip_prefix("/ui/") {
                assert!(ASSETS.iter().any(|(n, _, _)| *n == name), "index.html names /ui/{name}, which is not served");
            }
        }
        // Nothing from another origin.
        for (name, _, body) in ASSETS {
            assert!(!body.contains("https://") || *name == "markdown.js", "{name} names another origin");
        }
        assert!(!INDEX.contains("http://") && !INDEX.contains("https://"));
    }
}
