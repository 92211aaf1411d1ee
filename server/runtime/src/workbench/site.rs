//! The workbench's HTTP side, served by the Streamable HTTP gate (`transport::http`) under
//! [`PREFIX`]: the page's static files (open to any request the gate's Host and Origin checks
//! admit, since the page must load to ask for a token), and its data (the calls, their event
//! stream, the examples), for requests the gate has admitted as it admits `/mcp`'s. The
//! operator (the static token, or no protection) sees every call and runs the examples; a
//! caller an OAuth access token names sees its own calls only, so that the page never shows
//! one caller another's arguments.
//! A request that runs something (the examples) must carry [`WRITE_HEADER`], which a page of
//! another site cannot send without a CORS preflight that nothing here answers.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::{Frame, Incoming};

use super::Calls;
use crate::auth::Identity;
use crate::protocol::Live;

/// Where the workbench is, on whichever listener serves it.
pub(crate) const PREFIX: &str = "/ui/";

/// The header a request that runs something must carry, with the value `1`.
pub(crate) const WRITE_HEADER: &str = "mcpspec-workbench";

const PAGE: &str = include_str!("page.html");
const SCRIPT: &str = include_str!("page.js");
const STYLE: &str = include_str!("page.css");

/// Nothing but the page's own files, and requests to its own origin.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

type Body = BoxBody<Bytes, Infallible>;

/// The page's own files, for a GET of one of them; `/` goes to the page.
pub(crate) fn page_file<B>(req: &Request<B>) -> Option<Response<Body>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return None;
    }
    Some(match req.uri().path() {
        "/" => {
            let mut r = plain(StatusCode::SEE_OTHER, "the workbench is at /ui/");
            r.headers_mut()
                .insert(header::LOCATION, http::HeaderValue::from_static(PREFIX));
            r
        }
        "/ui/" => file(PAGE, "text/html; charset=utf-8"),
        "/ui/page.js" => file(SCRIPT, "text/javascript; charset=utf-8"),
        "/ui/page.css" => file(STYLE, "text/css; charset=utf-8"),
        _ => return None,
    })
}

/// The answer to a request under [`PREFIX`] that the gate admitted, from `caller` (`None`:
/// the operator).
pub(crate) async fn answer(
    req: Request<Incoming>,
    live: &Arc<Live>,
    caller: Option<&Identity>,
) -> Response<Body> {
    let Some(calls) = super::active().cloned() else {
        return plain(StatusCode::NOT_FOUND, "the workbench is off (--ui)");
    };
    let whose: Option<Arc<str>> = caller.map(|c| c.sub.as_str().into());
    let path = req.uri().path().strip_prefix(PREFIX).unwrap_or_default();
    match (req.method().clone(), path) {
        (Method::GET, "calls") => {
            let mut lines = vec![b'['];
            calls.since(0, super::RING, |r| {
                if r.shown_to(whose.as_deref()) {
                    r.write_line(&mut lines);
                    lines.push(b',');
                }
            });
            if lines.len() > 1 {
                lines.pop();
            }
            lines.push(b']');
            // UTF-8: each line is (see `Record::line`).
            json_text(StatusCode::OK, String::from_utf8(lines).unwrap_or_default())
        }
        (Method::GET, "events") => events(&calls, whose),
        (Method::GET, one) if one.starts_with("calls/") => {
            let detail = one["calls/".len()..]
                .parse()
                .ok()
                .and_then(|seq| {
                    calls.numbered(seq, |call| {
                        call.shown_to(whose.as_deref()).then(|| call.whole())
                    })
                })
                .flatten();
            match detail {
                Some(text) => json_text(StatusCode::OK, text),
                None => plain(StatusCode::NOT_FOUND, "no such call, or no longer kept"),
            }
        }
        (Method::GET, "examples") => {
            let listed = crate::examples::listing(&live.now().engine, super::sample_rows());
            json_text(StatusCode::OK, listed.to_string())
        }
        (Method::POST, run) if run == "examples" || run.starts_with("examples/") => {
            if whose.is_some() {
                return plain(
                    StatusCode::FORBIDDEN,
                    "the examples run as the operator: use the server's static token",
                );
            }
            if req
                .headers()
                .get(WRITE_HEADER)
                .map(http::HeaderValue::as_bytes)
                != Some(b"1")
            {
                return plain(
                    StatusCode::FORBIDDEN,
                    "running examples needs the header Mcpspec-Workbench: 1",
                );
            }
            let which = match run.strip_prefix("examples/").map(str::parse::<usize>) {
                None => None,
                Some(Ok(n)) => Some(n),
                Some(Err(_)) => return plain(StatusCode::NOT_FOUND, "no such example"),
            };
            run_examples(live, which).await
        }
        (_, "calls" | "events" | "examples") => {
            plain(StatusCode::METHOD_NOT_ALLOWED, "not with this method")
        }
        _ => plain(StatusCode::NOT_FOUND, "no such page"),
    }
}

/// Runs examples on a blocking thread (they run statements), against the version served now.
async fn run_examples(live: &Arc<Live>, which: Option<usize>) -> Response<Body> {
    let engine = live.now().engine.clone();
    let sample_rows = super::sample_rows();
    let ran =
        tokio::task::spawn_blocking(move || crate::examples::rehearse(&engine, which, sample_rows))
            .await;
    match ran {
        Ok(Ok(v)) => json_text(StatusCode::OK, v.to_string()),
        Ok(Err(why)) => json_text(
            StatusCode::CONFLICT,
            serde_json::json!({ "error": why }).to_string(),
        ),
        Err(_) => plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            "running the examples failed inside the server; the log says why",
        ),
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

fn json_text(status: StatusCode, text: String) -> Response<Body> {
    with_headers(Response::builder().status(status), "application/json")
        .body(Full::new(Bytes::from(text)).boxed())
        .unwrap_or_else(|_| plain(StatusCode::INTERNAL_SERVER_ERROR, "error"))
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    with_headers(
        Response::builder().status(status),
        "text/plain; charset=utf-8",
    )
    .body(Full::new(Bytes::from_static(text.as_bytes())).boxed())
    .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
}

/// The event stream (of `whose` calls, or every call when `None`): whether calls are kept
/// while no page is open (an `event: keeping`), `dev`'s last reload (an `event: reload`), the
/// calls in the ring, then every [`super::PAGE_TICK`] the calls made
/// and the reload done since, in one write, one `data:` line each; past
/// [`super::PAGE_LINES`] calls in a tick, the first made since the last (the ones whose
/// answers were kept), then an `event: skipped` saying how many were left out.
fn events(calls: &Arc<Calls>, whose: Option<Arc<str>>) -> Response<Body> {
    let mut tick = tokio::time::interval(super::PAGE_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let body = Events {
        _page: calls.open_page(),
        calls: calls.clone(),
        opened: true,
        seen: 0,
        reloads_seen: 0,
        tick,
        whose,
    };
    with_headers(Response::builder(), "text/event-stream")
        .body(BodyExt::boxed(body))
        .unwrap_or_else(|_| plain(StatusCode::INTERNAL_SERVER_ERROR, "error"))
}

/// The body of `GET /ui/events`, polled by the connection itself (no task or channel
/// between): on each tick, what is new since the last.
struct Events {
    calls: Arc<Calls>,
    /// Counted among the open pages while the stream lives.
    _page: super::Page,
    /// Whether nothing was written yet: the page is first told whether the server keeps
    /// calls while no page is open (`event: keeping`).
    opened: bool,
    /// The number of the last record sent.
    seen: u64,
    /// The number of the last reload sent.
    reloads_seen: u64,
    tick: tokio::time::Interval,
    whose: Option<Arc<str>>,
}

impl Events {
    /// What happened since the last write, as event-stream text (empty when nothing did).
    fn news(&mut self) -> Vec<u8> {
        let mut text = Vec::new();
        if std::mem::take(&mut self.opened) {
            let history = super::history();
            text.extend_from_slice(
                format!("event: keeping\ndata: {{\"history\":{history}}}\n\n").as_bytes(),
            );
        }
        let (reloads, status) = self.calls.status_since(self.reloads_seen);
        self.reloads_seen = reloads;
        if let Some(status) = status {
            text.extend_from_slice(format!("event: reload\ndata: {status}\n\n").as_bytes());
        }
        // The ring whole when the page opens; then at most a tick's worth.
        let most = if self.seen == 0 {
            super::RING
        } else {
            super::PAGE_LINES
        };
        // Each line written in place, under its record's lock only.
        let whose = self.whose.as_deref();
        let (last, skipped) = self.calls.since(self.seen, most, |r| {
            if r.shown_to(whose) {
                text.extend_from_slice(b"data: ");
                r.write_line(&mut text);
                text.extend_from_slice(b"\n\n");
            }
        });
        self.seen = last;
        // The next calls keep their answers, for this page's next look.
        self.calls.looked();
        if skipped > 0 {
            text.extend_from_slice(
                format!("event: skipped\ndata: {{\"skipped\":{skipped}}}\n\n").as_bytes(),
            );
        }
        text
    }
}

impl http_body::Body for Events {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        loop {
            std::task::ready!(self.tick.poll_tick(cx));
            let text = self.news();
            if !text.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(Bytes::from(text)))));
            }
        }
    }
}
