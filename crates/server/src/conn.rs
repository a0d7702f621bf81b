//! Connections: the accept loop in front of the router. hyper's HTTP/1 server with a header read
//! timeout (a client that has not sent its headers in time is disconnected; this also closes
//! keep-alive connections left idle that long), a cap on open connections (beyond it a
//! connection gets one 503 + `Retry-After` and is closed), a deadline for each request body (408,
//! see [`body_deadline`]), and graceful shutdown: stop accepting, let open requests finish.

use crate::error::ApiError;
use crate::metrics::Metrics;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use http_body::{Frame, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// The limits on clients; a zero timeout turns that timeout off.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// From the start of a request (or of a keep-alive connection's wait for the next one) to the
    /// end of its headers.
    pub header_timeout: Duration,
    /// From the end of the headers to the end of the body.
    pub body_timeout: Duration,
    /// Connections served at once; at least 1.
    pub max_connections: usize,
}

/// Connections beyond the cap that may wait for their 503 at once; more are closed unanswered.
const MAX_REJECTING: usize = 64;

/// Seconds a client turned away at the cap is told to wait (`Retry-After`).
const RETRY_AFTER_SECS: u64 = 1;

/// Serves `router` on `listener` until `stop` resolves, then waits for open connections to finish
/// their requests (idle ones close at once).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    metrics: Arc<Metrics>,
    stop: impl Future<Output = ()>,
) {
    let open = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let rejecting = Arc::new(Semaphore::new(MAX_REJECTING));
    let graceful = GracefulShutdown::new();
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new());
    http.header_read_timeout((!limits.header_timeout.is_zero()).then_some(limits.header_timeout));
    let mut refuse = http.clone();
    refuse.keep_alive(false);
    tokio::pin!(stop);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    accept_failed(e).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(stream);
        if let Ok(permit) = open.clone().try_acquire_owned() {
            let conn = graceful.watch(http.serve_connection(io, TowerToHyperService::new(router.clone())));
            let metrics = metrics.clone();
            metrics.connections_open.fetch_add(1, Relaxed);
            tokio::spawn(async move {
                if conn.await.is_err_and(|e| e.is_timeout()) {
                    metrics.connections_timed_out.fetch_add(1, Relaxed);
                }
                metrics.connections_open.fetch_sub(1, Relaxed);
                drop(permit);
            });
        } else if let Ok(permit) = rejecting.clone().try_acquire_owned() {
            metrics.connections_refused.fetch_add(1, Relaxed);
            let conn = graceful.watch(refuse.serve_connection(io, hyper::service::service_fn(too_many)));
            tokio::spawn(async move {
                let _ = conn.await;
                drop(permit);
            });
        } else {
            metrics.connections_refused.fetch_add(1, Relaxed);
        }
    }
    drop(listener);
    graceful.shutdown().await;
}

/// The answer to every request on a connection beyond the cap.
async fn too_many<B>(_: axum::http::Request<B>) -> Result<Response, Infallible> {
    let error = ApiError::overloaded(
        "The server has too many open connections; please retry after a short wait.",
        RETRY_AFTER_SECS,
    );
    Ok(closing(error.into_response()))
}

fn closing(mut response: Response) -> Response {
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// As `axum::serve` does: a failed handshake is the client's problem; anything else (out of file
/// descriptors) gets a second's pause so the loop does not spin.
async fn accept_failed(e: std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if !matches!(e.kind(), ConnectionAborted | ConnectionRefused | ConnectionReset) {
        eprintln!("solo serve: accept failed: {e}");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Middleware: the request body must arrive within `limit` of the headers; past it the body
/// reads fail and the reply is a 408 (the connection closes, its body unread). Only reading the
/// request is timed, so a long streamed reply is not cut.
pub async fn body_deadline(State(limit): State<Duration>, request: Request, next: Next) -> Response {
    if limit.is_zero() {
        return next.run(request).await;
    }
    let expired = Arc::new(AtomicBool::new(false));
    let flag = expired.clone();
    let request =
        request.map(|inner| Body::new(Deadline { inner, sleep: Box::pin(tokio::time::sleep(limit)), expired: flag }));
    let response = next.run(request).await;
    if expired.load(Relaxed) {
        return closing(ApiError::body_timeout(limit).into_response());
    }
    response
}

/// A request body that fails once its deadline passes, and says so in `expired`.
struct Deadline {
    inner: Body,
    sleep: Pin<Box<tokio::time::Sleep>>,
    expired: Arc<AtomicBool>,
}

#[derive(Debug)]
struct BodyTimedOut;

impl std::fmt::Display for BodyTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request body did not arrive in time")
    }
}

impl std::error::Error for BodyTimedOut {}

impl http_body::Body for Deadline {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        if this.sleep.as_mut().poll(cx).is_ready() {
            this.expired.store(true, Relaxed);
            return Poll::Ready(Some(Err(axum::Error::new(BodyTimedOut))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
