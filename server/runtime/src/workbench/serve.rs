//! The workbench's HTTP side: the loopback listener, the Host and Origin checks, the page's
//! files and the event stream.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use tokio::net::TcpListener;
use tokio::sync::broadcast;

use super::{Calls, UiError};

const PAGE: &str = include_str!("page.html");
const SCRIPT: &str = include_str!("page.js");
const STYLE: &str = include_str!("page.css");

/// Nothing but the page's own files and its own event stream.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

type Body = BoxBody<Bytes, Infallible>;

/// The most connections the workbench holds open at once (pages, their event streams).
const MAX_CONNECTIONS: usize = 32;

/// Binds `addr` (loopback only) and starts recording calls; `serve` then answers the page.
pub async fn bind(addr: SocketAddr) -> Result<(TcpListener, SocketAddr), UiError> {
    super::on_this_machine(addr)?;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| UiError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| UiError::Bind { addr, source })?;
    super::install();
    Ok((listener, bound))
}

/// Answers the workbench's requests on `listener` until the process ends.
pub async fn serve(listener: TcpListener, bound: SocketAddr) {
    let Some(calls) = super::active().cloned() else {
        return;
    };
    let open = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            // Out of file descriptors, say: wait a little rather than spin.
            Err(_) => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        // Past the cap a connection is closed at once.
        let Ok(permit) = open.clone().try_acquire_owned() else {
            continue;
        };
        let calls = calls.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let service = hyper::service::service_fn(move |req| {
                let calls = calls.clone();
                async move { Ok::<_, Infallible>(answer(&calls, bound, &req)) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            // The timer bounds how long a client may take to send its headers (hyper's 30 s),
            // so that connections that send nothing do not hold the workbench's places.
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .serve_connection(io, service)
                .await;
        });
    }
}

/// The answer to one request.
fn answer(calls: &Calls, bound: SocketAddr, req: &Request<Incoming>) -> Response<Body> {
    if let Some(refused) = foreign(bound, req) {
        return refused;
    }
    if req.method() != Method::GET {
        return plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "the workbench answers GET only",
        );
    }
    match req.uri().path() {
        "/" => file(PAGE, "text/html; charset=utf-8"),
        "/page.js" => file(SCRIPT, "text/javascript; charset=utf-8"),
        "/page.css" => file(STYLE, "text/css; charset=utf-8"),
        "/calls" => {
            let lines: Vec<String> = calls.snapshot().iter().map(|r| r.line()).collect();
            let text = format!("[{}]", lines.join(","));
            with_headers(Response::builder(), "application/json")
                .body(Full::new(Bytes::from(text)).boxed())
                .unwrap_or_else(|_| plain(StatusCode::INTERNAL_SERVER_ERROR, "error"))
        }
        "/events" => events(calls),
        _ => plain(StatusCode::NOT_FOUND, "no such page"),
    }
}

/// 403 for a request whose Host is not the workbench's own address (a DNS-rebound name) or
/// whose Origin is another site's.
fn foreign(bound: SocketAddr, req: &Request<Incoming>) -> Option<Response<Body>> {
    let port = bound.port();
    let own = [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ];
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok());
    let Some(host) = host.filter(|h| own.iter().any(|o| o == h)) else {
        return Some(plain(
            StatusCode::FORBIDDEN,
            "the workbench answers only at its own address",
        ));
    };
    let origin = req.headers().get(header::ORIGIN).map(|o| o.to_str());
    match origin {
        None => None,
        Some(Ok(o)) if o == format!("http://{host}") => None,
        Some(_) => Some(plain(
            StatusCode::FORBIDDEN,
            "the workbench answers only its own page",
        )),
    }
}

fn with_headers(b: http::response::Builder, content_type: &str) -> http::response::Builder {
    b.header(header::CONTENT_TYPE, content_type)
        .header(header::CONTENT_SECURITY_POLICY, CSP)
        .header(header::X_CONTENT_TYPE_OPTIONS, "nosniff")
        .header(header::REFERRER_POLICY, "no-referrer")
        .header(header::CACHE_CONTROL, "no-store")
}

fn file(text: &'static str, content_type: &str) -> Response<Body> {
    with_headers(Response::builder(), content_type)
        .body(Full::new(Bytes::from_static(text.as_bytes())).boxed())
        .unwrap_or_else(|_| plain(StatusCode::INTERNAL_SERVER_ERROR, "error"))
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// The event stream: the calls in the ring, then each new one, one `data:` line each. A task
/// forwards them to the response; it ends with the page's connection.
fn events(calls: &Calls) -> Response<Body> {
    // Subscribed before the snapshot: a call recorded in between comes twice at worst, and
    // the page keeps one of each `seq`.
    let mut live = calls.live.subscribe();
    let backlog = calls.snapshot();
    let (tx, rx) = tokio::sync::mpsc::channel::<String>(64);
    tokio::spawn(async move {
        for record in backlog {
            if tx.send(record.line()).await.is_err() {
                return;
            }
        }
        loop {
            match live.recv().await {
                Ok(record) => {
                    if tx.send(record.line()).await.is_err() {
                        return;
                    }
                }
                // A page that fell behind by more than the ring skips what it missed.
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    });
    with_headers(Response::builder(), "text/event-stream")
        .body(BodyExt::boxed(Events(rx)))
        .unwrap_or_else(|_| plain(StatusCode::INTERNAL_SERVER_ERROR, "error"))
}

/// The body of `GET /events`.
struct Events(tokio::sync::mpsc::Receiver<String>);

impl http_body::Body for Events {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|line| line.map(|l| Ok(Frame::data(Bytes::from(format!("data: {l}\n\n"))))))
    }
}
