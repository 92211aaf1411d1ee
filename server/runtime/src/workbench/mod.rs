//! The workbench (`serve --ui`, `dev --ui`): a page served by the server's own process that
//! shows, live, every request it handles, from any client, the one that started it over
//! stdio included (each tool call with its arguments and answer); that lists its tools,
//! resources and prompts with a form for each, called through the real MCP endpoint; and that
//! runs the spec's examples, every write rolled back (`examples::rehearse`).
//!
//! This module keeps what the page shows: the requests in a bounded ring (the last [`RING`]),
//! as the engine and the protocol layer tell the installed [`Watcher`] of them (the leaf
//! `watch`), each written as JSON when a page reads it (arguments sanitised exactly as the
//! call log's; a success's answer kept while a page is open), and `dev`'s last reload.
//! Nothing is written to disk. `site` answers the page's requests under `/ui/`; the
//! Streamable HTTP gate (`transport::http`) serves it, with `/mcp`, on the workbench's own
//! loopback listener or on the MCP listener behind its token, so the same access rules apply
//! to both. Without the `http` feature nothing serves the page: the ring is never installed,
//! and what would fill and read it is left unused.
#![cfg_attr(not(feature = "http"), allow(dead_code))]

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Instant;

use serde_json::{Value, json};

use smallvec::SmallVec;

use crate::watch::{
    Answer, KEPT_BYTES, Origin, Ran, SeenCall, SeenRequest, SeenStatement, Watcher, omitted,
};

#[cfg(feature = "http")]
mod site;
#[cfg(feature = "http")]
pub(crate) use site::{PREFIX, answer, page_file};

/// How many calls the ring keeps.
pub const RING: usize = 1000;

/// What the workbench shows: the last [`RING`] calls and `dev`'s last reload. A call only
/// joins the ring; the pages open look for new ones every [`PAGE_TICK`] and write them in one
/// go, so that a call costs no wake-up of a page's connection, however many calls a second.
pub struct Calls {
    ring: Mutex<VecDeque<Arc<Record>>>,
    next: AtomicU64,
    /// `dev`'s last reload as the page reads it (for a page opened after it too), and how
    /// many reloads there were.
    status: Mutex<(u64, Option<Arc<str>>)>,
    /// How many pages are reading the calls: while none is, a call's result is not kept.
    pages: AtomicUsize,
    /// The client each session named, so that its calls are shown with it.
    clients: Mutex<Clients>,
}

/// How many sessions' clients are remembered: the oldest is forgotten past it.
const SESSIONS: usize = 1024;

/// The client each session named in the requests rmcp answered (its `initialize` first),
/// for the last [`SESSIONS`] sessions: the calls the lanes answer carry only their session.
/// The stdio session's is kept apart, so that a stdio call's client costs no hashing.
#[derive(Default)]
struct Clients {
    stdio: Option<Arc<str>>,
    by: HashMap<Box<str>, Arc<str>>,
    order: VecDeque<Box<str>>,
}

impl Clients {
    fn remember(&mut self, origin: &Origin, client: &str) {
        let client = crate::watch::kept_name(client);
        let session = match origin {
            Origin::Stdio => {
                if self.stdio.as_deref() != Some(client) {
                    self.stdio = Some(client.into());
                }
                return;
            }
            Origin::Http(session) => session,
            // Named by each request, remembered for none.
            Origin::Named(_) => return,
        };
        if self.by.get(session).is_some_and(|c| &**c == client) {
            return;
        }
        if self.by.insert(session.clone(), client.into()).is_none() {
            self.order.push_back(session.clone());
            if self.order.len() > SESSIONS
                && let Some(oldest) = self.order.pop_front()
            {
                self.by.remove(&oldest);
            }
        }
    }

    /// The client `origin`'s session named.
    fn of(&self, origin: &Origin) -> Option<Arc<str>> {
        match origin {
            Origin::Stdio => self.stdio.clone(),
            Origin::Http(session) => self.by.get(session).cloned(),
            Origin::Named(client) => Some(Arc::from(&**client)),
        }
    }
}

/// How often an open page is sent the calls made since it last was.
pub(crate) const PAGE_TICK: std::time::Duration = std::time::Duration::from_millis(100);

/// The most calls a tick sends a page (2,500 a second): past that the newest are sent and the
/// page told how many were left out, which `GET /ui/calls` has while the ring keeps them. A
/// person reads no faster, and writing every call of a server answering tens of thousands a
/// second would cost it more than the page is worth.
pub(crate) const PAGE_LINES: usize = 250;

/// Whether the database holds the spec's sample rows (`dev`'s scratch database), so that the
/// examples that need them run too.
static SAMPLE_ROWS: AtomicBool = AtomicBool::new(false);

/// An open page, counted while it lives.
pub(crate) struct Page(Arc<Calls>);

impl Drop for Page {
    fn drop(&mut self) {
        self.0.pages.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One call as kept. Its JSON (the arguments sanitised) is written only when a page reads
/// it, so that a call costs little more than a copy of its arguments while no page is open.
pub struct Record {
    seq: u64,
    /// When the call started, on the monotonic clock: the wall-clock time the page shows is
    /// found from it when the record is read ([`wall_ms`]), not read from the system on every
    /// call.
    at: Instant,
    method: &'static str,
    /// The tool of a `tools/call`; a resource's URI, a prompt's name, or nothing for the
    /// other methods. The spec's own name when the tool is one of its (no copy).
    tool: Cow<'static, str>,
    /// The client's name (`initialize`'s `clientInfo`), when its session named it.
    client: Option<Arc<str>>,
    caller: Option<Box<str>>,
    /// `ok`, or the error's code (no copy when the code is the server's own).
    outcome: Cow<'static, str>,
    duration_ms: f64,
    result_bytes: usize,
    /// The arguments as compact JSON text (see [`keep_arguments`]), UTF-8 as serde_json
    /// writes it; bytes, so that keeping them checks nothing it wrote itself.
    arguments: Option<Vec<u8>>,
    /// What the client was answered: kept for every failure, and for a success while a page
    /// is open (a copy of every result would cost each call while nobody looks). Text is valid
    /// JSON by construction (the engine's own), so it is copied into the page's line as it is,
    /// never parsed again; a value is written when a page opens the call.
    response: Option<Answer>,
    /// The statements the call ran (their spec names, operations and durations), kept while a
    /// page is open.
    statements: KeptStatements,
    /// The call's trace, when OpenTelemetry sampled it.
    trace: Option<Box<str>>,
}

impl Record {
    /// A record of nothing yet, to be filled.
    fn blank() -> Record {
        Record {
            seq: 0,
            at: Instant::now(),
            method: "",
            tool: Cow::Borrowed(""),
            client: None,
            caller: None,
            outcome: Cow::Borrowed(""),
            duration_ms: 0.0,
            result_bytes: 0,
            arguments: None,
            response: None,
            statements: KeptStatements::default(),
            trace: None,
        }
    }

    /// Whether a page of `whose` (a caller's subject; `None`: the operator) shows it.
    pub(crate) fn shown_to(&self, whose: Option<&str>) -> bool {
        whose.is_none_or(|sub| self.caller.as_deref() == Some(sub))
    }

    /// The call as the page lists it: one JSON object, without the arguments and the
    /// response, which [`Record::detail`] adds. Written with serde_json's own number and
    /// string writers, its keys as they are, rather than by serializing a struct: a page open
    /// is sent a line for each call (up to [`PAGE_LINES`] a tick), and the derived writer,
    /// which escapes every key, cost the server about 3,300 instructions a line, a
    /// fourteenth of a primary-key call's (callgrind). The test
    /// `a_line_is_the_json_of_its_fields` holds it to serde's output.
    pub(crate) fn line(&self) -> String {
        let mut out = Vec::with_capacity(192);
        self.write_line(&mut out);
        // UTF-8 by construction: the texts written are `str`s, escaped by serde_json.
        String::from_utf8(out).unwrap_or_default()
    }

    /// Writes [`Record::line`] at the end of `out`.
    pub(crate) fn write_line(&self, out: &mut Vec<u8>) {
        use serde_json::ser::{CompactFormatter, Formatter as _};
        let f = &mut CompactFormatter;
        out.reserve(LINE_BYTES);
        out.extend_from_slice(br#"{"seq":"#);
        let _ = f.write_u64(out, self.seq);
        out.extend_from_slice(br#","at_ms":"#);
        let _ = f.write_u64(out, wall_ms(self.at));
        json_text(out, br#","method":"#, Some(self.method));
        json_text(out, br#","tool":"#, Some(&self.tool));
        json_text(out, br#","client":"#, self.client.as_deref());
        json_text(out, br#","caller":"#, self.caller.as_deref());
        json_text(out, br#","outcome":"#, Some(&self.outcome));
        out.extend_from_slice(br#","duration_ms":"#);
        let _ = f.write_f64(out, self.duration_ms);
        out.extend_from_slice(br#","result_bytes":"#);
        let _ = f.write_u64(out, self.result_bytes as u64);
        out.extend_from_slice(br#","answered":"#);
        let _ = f.write_bool(out, self.response.is_some());
        if let Some(trace) = &self.trace {
            json_text(out, br#","trace":"#, Some(trace));
        }
        out.push(b'}');
    }

    /// The call whole, as the page shows one: its line, the arguments (sanitised exactly as
    /// the call log's), the response and the statements.
    pub(crate) fn detail(&self) -> String {
        let arguments = self
            .arguments
            .as_deref()
            .and_then(|text| serde_json::from_slice::<Value>(text).ok())
            .map_or(Value::Null, |a| crate::calllog::sanitize_arguments(&a));
        let mut text = self.line();
        // `{...}` becomes `{...,"arguments":...,"response":...}`, the response as it was kept.
        text.pop();
        text.push_str(r#","arguments":"#);
        text.push_str(&arguments.to_string());
        text.push_str(r#","response":"#);
        match &self.response {
            Some(answer) => text.push_str(&answer.json()),
            None => text.push_str("null"),
        }
        text.push_str(r#","statements":"#);
        text.push_str(&serde_json::to_string(&self.statements).unwrap_or_else(|_| "null".into()));
        text.push('}');
        text
    }
}

/// The statements a call ran, as its record keeps them (see [`crate::watch::Statements`]).
#[derive(Debug, Default, serde::Serialize)]
struct KeptStatements {
    /// Held in place for a call of up to [`INLINE_STATEMENTS`] (nearly every one), so that
    /// keeping them allocates nothing and a record written over frees nothing.
    #[serde(serialize_with = "as_slice")]
    kept: SmallVec<[SeenStatement; INLINE_STATEMENTS]>,
    more: usize,
}

/// How many statements a record holds without allocating.
const INLINE_STATEMENTS: usize = 2;

impl KeptStatements {
    /// Keeps `ran`, written over what was kept.
    fn keep(&mut self, ran: Ran<'_>) {
        self.kept.clear();
        self.kept.extend_from_slice(ran.kept);
        self.more = ran.more;
    }
}

fn as_slice<S: serde::Serializer>(
    kept: &SmallVec<[SeenStatement; INLINE_STATEMENTS]>,
    s: S,
) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(kept.as_slice(), s)
}

/// About how long a call's line is, reserved at once so that writing it grows no buffer.
const LINE_BYTES: usize = 224;

/// Writes `key` then `value` as a JSON string (or `null`). A text with nothing to escape (a
/// tool's, a method's, an outcome's: nearly every one) is copied as it is; only the others
/// go through serde_json's escaping, which looks each byte up in a table and writes through
/// `io::Write` a piece at a time (callgrind: it was a third of a line's cost). Inlined, so
/// that each key, known where it is written, is copied without a call.
#[inline(always)]
fn json_text(out: &mut Vec<u8>, key: &[u8], value: Option<&str>) {
    out.extend_from_slice(key);
    match value {
        None => out.extend_from_slice(b"null"),
        Some(v) if !needs_escape(v.as_bytes()) => {
            out.push(b'"');
            out.extend_from_slice(v.as_bytes());
            out.push(b'"');
        }
        Some(v) => {
            // Writing to a `Vec` cannot fail.
            let _ = serde_json::to_writer(&mut *out, v);
        }
    }
}

/// Whether JSON escapes a byte of `text`: a control byte, `"` or `\\`. Eight bytes at a
/// time, each test a few operations on a `u64` (whether any byte of it is below 0x20, or
/// equal to one of the two), rather than three comparisons for every byte.
fn needs_escape(text: &[u8]) -> bool {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_le_bytes([0x80; 8]);
    // Whether any byte of `x` is below `n` (n <= 0x80): exact for "any", by the classic test.
    let below = |x: u64, n: u8| x.wrapping_sub(ONES * u64::from(n)) & !x & HIGH != 0;
    let has = |x: u64, b: u8| below(x ^ (ONES * u64::from(b)), 1);
    let mut chunks = text.chunks_exact(8);
    for chunk in &mut chunks {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(chunk);
        let x = u64::from_le_bytes(eight);
        if below(x, 0x20) || has(x, b'"') || has(x, b'\\') {
            return true;
        }
    }
    chunks
        .remainder()
        .iter()
        .any(|&b| b < 0x20 || b == b'"' || b == b'\\')
}

static ACTIVE: OnceLock<Arc<Calls>> = OnceLock::new();

/// The process's workbench, when `--ui` started one; the engine records each call there.
pub(crate) fn active() -> Option<&'static Arc<Calls>> {
    ACTIVE.get()
}

/// Milliseconds since the Unix epoch, as the page reads times.
fn now_ms() -> u64 {
    u64::try_from(crate::clock::unix_ms()).unwrap_or(0)
}

/// The wall clock and the monotonic clock read together once, when the workbench starts: a
/// record's wall-clock time is found from its monotonic one when a page reads it, the same at
/// every read, and no call reads the wall clock. (A wall clock set after the start, by NTP
/// say, is not followed: the times shown keep to the clock as it was read then.)
static EPOCH: OnceLock<(u64, Instant)> = OnceLock::new();

/// `at` on the wall clock, in milliseconds since the Unix epoch (see [`EPOCH`]).
fn wall_ms(at: Instant) -> u64 {
    let (wall, then) = *EPOCH.get_or_init(|| (now_ms(), Instant::now()));
    let millis = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    match at.checked_duration_since(then) {
        Some(after) => wall.saturating_add(millis(after)),
        None => wall.saturating_sub(millis(then.duration_since(at))),
    }
}

impl Calls {
    fn new() -> Calls {
        Calls {
            ring: Mutex::new(VecDeque::with_capacity(RING)),
            next: AtomicU64::new(1),
            status: Mutex::new((0, None)),
            pages: AtomicUsize::new(0),
            clients: Mutex::new(Clients::default()),
        }
    }

    /// A record to fill: the oldest in the ring once it is full, taken out to be written
    /// over (its buffers and its allocation used again, rather than a new record made and the
    /// old one freed, which cost a call its most expensive frees: memory last touched a
    /// thousand calls ago), unless a page still holds it; else a new one.
    fn recycled(&self) -> Arc<Record> {
        let oldest = {
            let mut ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
            (ring.len() >= RING).then(|| ring.pop_front()).flatten()
        };
        // Used again when nothing else holds it (no page is writing it out).
        oldest
            .and_then(|mut record| Arc::get_mut(&mut record).is_some().then_some(record))
            .unwrap_or_else(|| Arc::new(Record::blank()))
    }

    /// Fills a record (see [`Calls::recycled`]) and puts it in the ring with the next
    /// number, the oldest out past [`RING`].
    fn keep(&self, fill: impl FnOnce(&mut Record)) {
        let mut record = self.recycled();
        if let Some(r) = Arc::get_mut(&mut record) {
            fill(r);
        }
        let old = {
            let mut ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
            // Numbered under the lock, so that the ring is in order; the record is ours
            // alone until it is in the ring.
            if let Some(r) = Arc::get_mut(&mut record) {
                r.seq = self.next.fetch_add(1, Ordering::Relaxed);
            }
            let old = (ring.len() >= RING).then(|| ring.pop_front()).flatten();
            ring.push_back(record);
            old
        };
        // Freed outside the lock.
        drop(old);
    }

    /// The record numbered `seq`, while the ring keeps it.
    fn numbered(&self, seq: u64) -> Option<Arc<Record>> {
        let ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        let first = ring.front()?.seq;
        ring.get(usize::try_from(seq.checked_sub(first)?).ok()?)
            .cloned()
    }

    /// The records numbered after `seen`, oldest first: the newest `most` of them, and how
    /// many older ones were left out.
    fn since(&self, seen: u64, most: usize) -> (Vec<Arc<Record>>, usize) {
        let ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        let new = ring.iter().rev().take_while(|r| r.seq > seen).count();
        let taken = new.min(most);
        let records = ring.iter().skip(ring.len() - taken).cloned().collect();
        (records, new - taken)
    }

    /// `dev`'s last reload, when it is newer than reload number `seen`; and its number.
    fn status_since(&self, seen: u64) -> (u64, Option<Arc<str>>) {
        let status = self.status.lock().unwrap_or_else(PoisonError::into_inner);
        let newer = (status.0 > seen).then(|| status.1.clone()).flatten();
        (status.0, newer)
    }

    /// A page opens: results are kept while it is.
    fn open_page(self: &Arc<Self>) -> Page {
        self.pages.fetch_add(1, Ordering::Relaxed);
        Page(self.clone())
    }

    /// The client that `origin`'s session named.
    fn client_of(&self, origin: Option<&Origin>) -> Option<Arc<str>> {
        let clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        clients.of(origin?)
    }

    fn reloaded(&self, line: Value) {
        let mut status = self.status.lock().unwrap_or_else(PoisonError::into_inner);
        *status = (status.0 + 1, Some(line.to_string().into()));
    }
}

impl Watcher for Calls {
    fn watched(&self) -> bool {
        self.pages.load(Ordering::Relaxed) > 0
    }

    fn call(&self, seen: SeenCall<'_>) {
        let call = seen.call;
        let client = self.client_of(seen.origin.as_ref());
        self.keep(|r| {
            r.at = seen.started;
            r.method = "tools/call";
            r.tool = seen
                .tool
                .map_or_else(|| Cow::Owned(call.tool.to_string()), Cow::Borrowed);
            r.client = client;
            r.caller = call.sub.map(Into::into);
            r.outcome = seen.outcome;
            r.duration_ms = call.duration_ms;
            r.result_bytes = call.result_bytes;
            match call.arguments {
                Some(arguments) => {
                    keep_arguments(arguments, r.arguments.get_or_insert_with(Vec::new));
                }
                None => r.arguments = None,
            }
            match seen.answer {
                Some(answer) => answer.keep_in(&mut r.response),
                None => r.response = None,
            }
            r.statements.keep(seen.statements);
            r.trace = seen.trace;
        });
    }

    fn named(&self, origin: &Origin, client: &str) {
        self.clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remember(origin, client);
    }

    fn request(&self, r: &SeenRequest<'_>) {
        if let (Some(origin), Some(client)) = (&r.origin, r.client) {
            self.named(origin, client);
        }
        // The client the request's session named when the request itself does not (a
        // session of 2026-07-28 names it in each request's `_meta`, see `watch::named`).
        let client = match r.client {
            Some(c) => Some(crate::watch::kept_name(c).into()),
            None => self.client_of(r.origin.as_ref()),
        };
        self.keep(|record| {
            *record = Record {
                method: r.method,
                tool: Cow::Owned(r.target.unwrap_or_default().to_string()),
                client,
                outcome: Cow::Owned(r.outcome.to_string()),
                duration_ms: r.duration_ms,
                ..Record::blank()
            };
        });
    }
}

/// `dev` serves a new version with `tools` tools: the pages list them again.
pub(crate) fn reloaded(tools: usize) {
    if let Some(calls) = active() {
        calls.reloaded(json!({"ok": true, "tools": tools, "at_ms": now_ms()}));
    }
}

/// `dev` refused the file as saved, for `problems` (each at its file:line:column); the pages
/// show them until a good version is served.
pub(crate) fn refused(problems: &str) {
    if let Some(calls) = active() {
        calls.reloaded(json!({"ok": false, "problems": problems, "at_ms": now_ms()}));
    }
}

/// Tells the workbench that the database holds the spec's sample rows (`dev` without `--db`).
pub(crate) fn on_sample_rows() {
    SAMPLE_ROWS.store(true, Ordering::Relaxed);
}

/// Whether the database holds the spec's sample rows (see [`on_sample_rows`]).
fn sample_rows() -> bool {
    SAMPLE_ROWS.load(Ordering::Relaxed)
}

/// A call's arguments as the ring keeps them, written over `kept` (its buffer used again):
/// compact JSON text within [`KEPT_BYTES`]; larger ones as the call log shows them (long
/// text cut), or else left out with their size.
fn keep_arguments(arguments: &Value, kept: &mut Vec<u8>) {
    // serde_json's writer, not `Display`, which goes through `fmt::Write` a piece at a time.
    kept.clear();
    let _ = serde_json::to_writer(&mut *kept, arguments);
    let size = kept.len();
    if size <= KEPT_BYTES {
        return;
    }
    let shown = crate::calllog::sanitize_arguments(arguments).to_string();
    *kept = if shown.len() <= KEPT_BYTES {
        shown.into_bytes()
    } else {
        omitted(size, "arguments").to_string().into_bytes()
    };
}

/// Binds `addr` (loopback only) for a workbench of its own, and starts recording calls.
#[cfg(feature = "http")]
pub(crate) async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, UiError> {
    on_this_machine(addr)?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| UiError::Bind { addr, source })?;
    install();
    Ok(listener)
}

/// Starts recording calls, for a workbench about to serve them.
pub(crate) fn install() {
    wall_ms(Instant::now());
    let calls = ACTIVE.get_or_init(|| Arc::new(Calls::new()));
    crate::watch::install(calls.clone());
}

/// Why the workbench did not start.
#[derive(Debug, thiserror::Error)]
pub enum UiError {
    #[error(
        "--ui {0} is not a loopback address: on a listener of its own the workbench asks for no token, so it listens on this machine only (127.0.0.1 or [::1]); beside --http, `--ui` without an address serves it at /ui/ on the MCP listener, behind its token"
    )]
    NotLoopback(SocketAddr),
    #[error("cannot listen on {addr} for the workbench: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Refuses a workbench address that is not on this machine, before anything is opened.
pub(crate) fn on_this_machine(addr: SocketAddr) -> Result<(), UiError> {
    if addr.ip().to_canonical().is_loopback() {
        Ok(())
    } else {
        Err(UiError::NotLoopback(addr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_keeps_large_arguments_within_its_bound() {
        let kept_arguments = |v: &Value| {
            // Over the arguments of an earlier call, as a recycled record's are.
            let mut kept = br#"{"earlier":"call"}"#.to_vec();
            keep_arguments(v, &mut kept);
            kept
        };
        let kept =
            |v: &Value| -> Value { serde_json::from_slice(&kept_arguments(v)).expect("JSON") };
        let small = json!({"id": 7, "tags": ["a", "b"]});
        assert_eq!(kept(&small), small);
        // Long text: kept as the call log shows it.
        let text = json!({"content": "x".repeat(1_000_000)});
        let cut = kept(&text);
        let content = cut["content"].as_str().expect("text, cut");
        assert!(
            content.len() < 1000 && content.starts_with("xxx"),
            "{content}"
        );
        // A long list of short values: left out, saying how large it was.
        let list = json!({"ids": (0..100_000).collect::<Vec<_>>()});
        assert!(kept_arguments(&list).len() <= KEPT_BYTES);
        let left_out = kept(&list);
        assert!(
            left_out["omitted"]
                .as_str()
                .is_some_and(|o| o.ends_with("bytes of arguments, more than the workbench keeps")),
            "{left_out}"
        );
    }

    #[test]
    fn the_clients_of_the_last_sessions_are_remembered() {
        let mut clients = Clients::default();
        let http = |i: usize| Origin::Http(format!("s{i}").into());
        let client = |c: &Clients, o: &Origin| c.of(o).map(|c| c.to_string());
        clients.remember(&Origin::Stdio, "claude-code");
        for i in 0..SESSIONS + 10 {
            clients.remember(&http(i), "page");
        }
        assert_eq!(clients.by.len(), SESSIONS);
        assert_eq!(clients.order.len(), SESSIONS);
        // The ten oldest HTTP sessions are forgotten; the one stdio session is kept apart.
        assert_eq!(
            client(&clients, &Origin::Stdio).as_deref(),
            Some("claude-code")
        );
        assert_eq!(client(&clients, &http(9)), None);
        assert_eq!(client(&clients, &http(10)).as_deref(), Some("page"));
        // A name is kept to its first 128 characters, whatever the client sent.
        clients.remember(&Origin::Stdio, &"é".repeat(1_000_000));
        assert_eq!(
            client(&clients, &Origin::Stdio).map(|c| c.chars().count()),
            Some(crate::watch::KEPT_NAME_CHARS)
        );
        // A session that names another client is renamed in place, not queued twice.
        clients.remember(&http(SESSIONS + 9), "inspector");
        assert_eq!(clients.order.len(), SESSIONS);
        assert_eq!(
            client(&clients, &http(SESSIONS + 9)).as_deref(),
            Some("inspector")
        );
    }

    /// A call of `caller` as the ring keeps one.
    fn record(caller: Option<&str>) -> Record {
        Record {
            method: "tools/call",
            tool: Cow::Borrowed("t"),
            caller: caller.map(Into::into),
            outcome: "ok".into(),
            ..Record::blank()
        }
    }

    #[test]
    fn a_line_is_the_json_of_its_fields() {
        let mut r = record(Some("al\"ice\\\n"));
        r.seq = 42;
        r.tool = Cow::Owned("kb_\u{e9}\u{1}list".into());
        r.client = Some("claude-code".into());
        r.outcome = "NOT_FOUND".into();
        r.duration_ms = 0.194;
        r.result_bytes = 422;
        let expected = |r: &Record| {
            let mut v = json!({
                "seq": r.seq, "at_ms": wall_ms(r.at), "method": r.method, "tool": &*r.tool,
                "client": r.client.as_deref(), "caller": r.caller.as_deref(),
                "outcome": &*r.outcome, "duration_ms": r.duration_ms,
                "result_bytes": r.result_bytes, "answered": r.response.is_some(),
            });
            if let Some(trace) = &r.trace {
                v["trace"] = json!(&**trace);
            }
            v
        };
        let parsed = |r: &Record| -> Value { serde_json::from_str(&r.line()).expect("JSON") };
        assert_eq!(parsed(&r), expected(&r));
        r.duration_ms = 12.0;
        r.trace = Some("4bf92f3577b34da6a3ce929d0e0e4736".into());
        r.response = Some(Answer::Text("{}".into()));
        assert_eq!(parsed(&r), expected(&r));
        assert_eq!(parsed(&r)["duration_ms"].as_f64(), Some(12.0));
    }

    #[test]
    fn a_text_needs_escaping_exactly_when_serde_json_escapes_it() {
        let mut texts: Vec<String> = vec![
            String::new(),
            "get_learning".into(),
            "tools/call".into(),
            "é 中 \u{7f} ~".into(),
            "0123456789abcdef01234".into(),
        ];
        // Each byte serde_json escapes, and its neighbours, at each place of a 17-byte text
        // (two whole words of eight and a remainder).
        for b in [
            0x00u8, 0x1f, 0x20, b'"', b'\\', b'!', b'#', b'[', b']', 0x7f,
        ] {
            for at in 0..17 {
                let mut t = vec![b'a'; 17];
                t[at] = b;
                texts.push(String::from_utf8(t).expect("ASCII"));
            }
        }
        for text in texts {
            let escaped = serde_json::to_string(&text).expect("JSON");
            let plain = escaped.len() == text.len() + 2;
            assert_eq!(needs_escape(text.as_bytes()), !plain, "{text:?}");
            let mut out = Vec::new();
            json_text(&mut out, b"", Some(&text));
            assert_eq!(String::from_utf8(out).expect("UTF-8"), escaped);
        }
    }

    #[test]
    fn a_page_is_sent_the_newest_calls_and_told_how_many_it_missed() {
        let calls = Calls::new();
        for _ in 0..600 {
            calls.keep(|r| *r = record(None));
        }
        let seqs = |(records, skipped): (Vec<Arc<Record>>, usize)| {
            (records.iter().map(|r| r.seq).collect::<Vec<_>>(), skipped)
        };
        let newest = 600 - PAGE_LINES as u64;
        let (sent, skipped) = seqs(calls.since(100, PAGE_LINES));
        assert_eq!(skipped, 500 - PAGE_LINES);
        assert_eq!(sent, (newest + 1..=600).collect::<Vec<u64>>());
        assert_eq!(
            seqs(calls.since(590, PAGE_LINES)),
            ((591..=600).collect::<Vec<u64>>(), 0)
        );
        assert_eq!(seqs(calls.since(600, PAGE_LINES)), (vec![], 0));
    }

    #[test]
    fn an_oauth_caller_is_shown_its_own_calls_only() {
        let (alices, operators) = (record(Some("alice")), record(None));
        assert!(alices.shown_to(None) && operators.shown_to(None));
        assert!(alices.shown_to(Some("alice")));
        assert!(!alices.shown_to(Some("bob")));
        assert!(!operators.shown_to(Some("alice")));
    }
}
