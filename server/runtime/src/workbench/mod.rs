//! The workbench (`serve --ui`, `dev --ui`): a page served by the server's own process that
//! shows, live, every request it handles, from any client, the one that started it over
//! stdio included (each tool call with its arguments and answer); that lists its tools,
//! resources and prompts with a form for each, called through the real MCP endpoint; and that
//! runs the spec's examples, every write rolled back (`examples::rehearse`).
//!
//! This module keeps what the page shows: the requests in a bounded ring (the last [`RING`]),
//! as the engine and the protocol layer tell the installed [`Watcher`] of them (the leaf
//! `watch`) while a page is open, or always with `--ui-history` ([`HISTORY`]), each written
//! as JSON when a page reads it (arguments sanitised exactly as the call log's; a success's
//! answer and statements kept while a page is open, for at most [`PAGE_LINES`] calls a
//! tick), and `dev`'s last reload.
//! Nothing is written to disk. `site` answers the page's requests under `/ui/`; the
//! Streamable HTTP gate (`transport::http`) serves it, with `/mcp`, on the workbench's own
//! loopback listener or on the MCP listener behind its token, so the same access rules apply
//! to both. Without the `http` feature nothing serves the page: the ring is never installed,
//! and what would fill and read it is left unused.
#![cfg_attr(not(feature = "http"), allow(dead_code))]

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Instant;

use serde_json::{Value, json};

use smallvec::SmallVec;

use crate::watch::{
    Answer, Answered, KEPT_BYTES, Origin, Ran, SeenCall, SeenRequest, SeenStatement, Watcher,
    omitted,
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
///
/// The ring is [`RING`] records made once and written in place, call number `n` in slot
/// `n % RING`, each behind a lock of its own: a call takes the next number (one atomic
/// addition) and writes its slot, which nobody else holds unless a page is reading that very
/// call, so calls never wait for one another, and no record is allocated or freed. A call
/// whose answer and statements are kept ([`Calls::detailed`]) writes them in the same way in
/// a second ring, apart, so that a call that keeps none writes only its record.
pub struct Calls {
    records: Box<[Mutex<Record>; RING]>,
    details: Box<[Mutex<Detail>; RING]>,
    /// The number the next call takes: the calls numbered below it were kept (or are being
    /// written).
    next: AtomicU64,
    /// `dev`'s last reload as the page reads it (for a page opened after it too), and how
    /// many reloads there were.
    status: Mutex<(u64, Option<Arc<str>>)>,
    /// How many pages are reading the calls: while none is, a call is not kept at all (unless
    /// [`HISTORY`]), and never its result.
    pages: AtomicUsize,
    /// How many more calls keep their answer and statements before a page next looks: each
    /// look (a tick, [`PAGE_TICK`]) sets it to [`PAGE_LINES`], as many calls as a tick sends
    /// a page, the first made since. So a page is sent calls it can open whole, at most
    /// [`PAGE_LINES`] a tick, and past that a call keeps its record only: a server answering
    /// tens of thousands of calls a second spends on the page what a person can look at, not
    /// a copy of every answer and a clock read around every statement (which cost such a
    /// server's calls about 3.4 % more CPU each, `bench/workbench`), and a call of a server
    /// answering fewer keeps them all. Read and counted down without a lock: two calls at
    /// once may both take the last one.
    detailed: AtomicIsize,
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

/// The most calls a tick sends a page (1,000 a second): past that the first made since the
/// page last looked are sent (those that kept their answers, see [`Calls::detailed`]) and the
/// page told how many were left out, which `GET /ui/calls` has while the ring keeps them. A
/// person reads no faster, and writing every call of a server answering tens of thousands a
/// second would cost it more than the page is worth: at 2,500 a second, the lines cost a
/// server answering 50,000 calls a second about 0.7 % more CPU per call (`bench/workbench`,
/// the lines switched off).
pub(crate) const PAGE_LINES: usize = 100;

/// Whether the database holds the spec's sample rows (`dev`'s scratch database), so that the
/// examples that need them run too.
static SAMPLE_ROWS: AtomicBool = AtomicBool::new(false);

/// Whether calls are kept while no page is open (`--ui-history`), for a page opened later.
/// Without it a call made while no page reads the calls is not kept at all: it costs the
/// server one look at [`Calls::pages`], where keeping it cost a primary-key call about 3 %
/// more CPU (`bench/workbench`).
static HISTORY: AtomicBool = AtomicBool::new(false);

/// Keeps the last [`RING`] calls while no page is open too (`--ui-history`).
pub(crate) fn keep_history() {
    HISTORY.store(true, Ordering::Relaxed);
}

/// Whether calls are kept while no page is open (see [`HISTORY`]).
fn history() -> bool {
    HISTORY.load(Ordering::Relaxed)
}

/// An open page, counted while it lives.
pub(crate) struct Page(Arc<Calls>);

impl Drop for Page {
    fn drop(&mut self) {
        self.0.pages.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One call as kept. Its JSON (the arguments sanitised) is written only when a page reads
/// it, so that a call that keeps no answer (one past a page's lines, or made with
/// `--ui-history` while no page is open) costs little more than a copy of its arguments.
pub struct Record {
    /// The call's number; 0 while the slot has held none.
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
    client: Client,
    caller: Option<Box<str>>,
    /// `ok`, or the error's code (no copy when the code is the server's own).
    outcome: Cow<'static, str>,
    duration_ms: f64,
    result_bytes: usize,
    /// The arguments as compact JSON text (see [`keep_arguments`]), UTF-8 as serde_json
    /// writes it; empty when the call had none. In the record itself when they are short (a
    /// tool's few fields), so that keeping them writes no memory elsewhere.
    arguments: SmallVec<[u8; INLINE_ARGUMENTS]>,
    /// A failure's answer, kept with its call while the ring keeps it (a success's is kept in
    /// the [`Detail`] while a page is open). Text is valid JSON by construction (the engine's
    /// own), so it is copied into the page's line as it is, never parsed again; a value is
    /// written when a page opens the call.
    failure: Option<Answer>,
    /// The call's trace, when OpenTelemetry sampled it.
    trace: Option<Box<str>>,
}

/// How many bytes of arguments a record holds in place.
const INLINE_ARGUMENTS: usize = 64;

/// What a call keeps besides its record while a page is open (see [`Calls::detailed`]): a
/// success's answer, and its statements.
struct Detail {
    /// The call's number; 0 while the slot has held none.
    seq: u64,
    /// A success's answer (copied into the buffer the slot held, see [`Answered::keep_in`]).
    answer: Option<Answer>,
    /// The statements the call ran (their spec names, operations and durations).
    statements: KeptStatements,
}

impl Record {
    /// A record of nothing yet, to be filled.
    fn blank() -> Record {
        Record {
            seq: 0,
            at: Instant::now(),
            method: "",
            tool: Cow::Borrowed(""),
            client: Client::Unnamed,
            caller: None,
            outcome: Cow::Borrowed(""),
            duration_ms: 0.0,
            result_bytes: 0,
            arguments: SmallVec::new(),
            failure: None,
            trace: None,
        }
    }
}

/// Whose client a record names.
enum Client {
    /// A session that named none (or a request of 2026-07-28 without a session or a name).
    Unnamed,
    /// The stdio session's: found when the record is read, as the session named it. A stdio
    /// server serves one session, whose client is the one it named; so a stdio call, the
    /// workbench's usual one, takes no lock and counts no reference to keep its client.
    Stdio,
    /// As its session (or the request itself) named it when the call was made.
    Named(Arc<str>),
}

/// A call as a page reads it: its record, its detail while the ring of details keeps it, and
/// the client the stdio session named.
#[derive(Clone, Copy)]
pub(crate) struct Kept<'a> {
    record: &'a Record,
    detail: Option<&'a Detail>,
    stdio: Option<&'a str>,
}

impl Kept<'_> {
    /// Whether a page of `whose` (a caller's subject; `None`: the operator) shows it.
    pub(crate) fn shown_to(&self, whose: Option<&str>) -> bool {
        whose.is_none_or(|sub| self.record.caller.as_deref() == Some(sub))
    }

    /// The call as the page lists it: one JSON object, without the arguments and the
    /// response, which [`Kept::whole`] adds. Written with serde_json's own number and
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

    /// Writes [`Kept::line`] at the end of `out`.
    pub(crate) fn write_line(&self, out: &mut Vec<u8>) {
        use serde_json::ser::{CompactFormatter, Formatter as _};
        let (r, f) = (self.record, &mut CompactFormatter);
        out.reserve(LINE_BYTES);
        out.extend_from_slice(br#"{"seq":"#);
        let _ = f.write_u64(out, r.seq);
        out.extend_from_slice(br#","at_ms":"#);
        let _ = f.write_u64(out, wall_ms(r.at));
        json_text(out, br#","method":"#, Some(r.method));
        json_text(out, br#","tool":"#, Some(&r.tool));
        json_text(out, br#","client":"#, self.client());
        json_text(out, br#","caller":"#, r.caller.as_deref());
        json_text(out, br#","outcome":"#, Some(&r.outcome));
        out.extend_from_slice(br#","duration_ms":"#);
        let _ = f.write_f64(out, r.duration_ms);
        out.extend_from_slice(br#","result_bytes":"#);
        let _ = f.write_u64(out, r.result_bytes as u64);
        out.extend_from_slice(br#","answered":"#);
        let _ = f.write_bool(out, self.answered());
        if let Some(trace) = &r.trace {
            json_text(out, br#","trace":"#, Some(trace));
        }
        out.push(b'}');
    }

    /// The client's name, when its session named it.
    fn client(&self) -> Option<&str> {
        match &self.record.client {
            Client::Unnamed => None,
            Client::Stdio => self.stdio,
            Client::Named(name) => Some(name),
        }
    }

    /// Whether the call's answer is kept: a failure's always, a success's in its detail.
    fn answered(&self) -> bool {
        self.record.failure.is_some() || self.detail.is_some_and(|d| d.answer.is_some())
    }

    /// The call whole, as the page shows one: its line, the arguments (sanitised exactly as
    /// the call log's), the response and the statements.
    pub(crate) fn whole(&self) -> String {
        let (record, detail) = (self.record, self.detail);
        let arguments = serde_json::from_slice::<Value>(&record.arguments)
            .ok()
            .map_or(Value::Null, |a| crate::calllog::sanitize_arguments(&a));
        let mut text = self.line();
        // `{...}` becomes `{...,"arguments":...,"response":...}`, the response as it was kept.
        text.pop();
        text.push_str(r#","arguments":"#);
        text.push_str(&arguments.to_string());
        text.push_str(r#","response":"#);
        match record
            .failure
            .as_ref()
            .or(detail.and_then(|d| d.answer.as_ref()))
        {
            Some(answer) => text.push_str(&answer.json()),
            // A success's answer not kept: made while no page was open, or past the calls a
            // page is sent (see `Calls::detailed`).
            None if record.method == "tools/call" => {
                let note = format!(
                    "not kept: a call keeps its answer while a page is open, for the first {PAGE_LINES} calls of each tenth of a second"
                );
                text.push_str(r#"null,"response_note":"#);
                text.push_str(&Value::from(note).to_string());
            }
            None => text.push_str("null"),
        }
        text.push_str(r#","statements":"#);
        let none = KeptStatements::default();
        let statements = detail.map_or(&none, |d| &d.statements);
        text.push_str(&serde_json::to_string(statements).unwrap_or_else(|_| "null".into()));
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
    let escapes = |x: u64| below(x, 0x20) || has(x, b'"') || has(x, b'\\');
    let mut chunks = text.chunks_exact(8);
    for chunk in &mut chunks {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(chunk);
        if escapes(u64::from_le_bytes(eight)) {
            return true;
        }
    }
    // The last bytes (a short text's all) as a word too, padded with spaces, which need no
    // escaping.
    let rest = chunks.remainder();
    let mut eight = [b' '; 8];
    eight[..rest.len()].copy_from_slice(rest);
    escapes(u64::from_le_bytes(eight))
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

/// `LEN` slots made by `blank`, on the heap (a ring is too large for the stack).
fn ring<T, const LEN: usize>(blank: impl Fn() -> T) -> Box<[Mutex<T>; LEN]> {
    let slots: Box<[Mutex<T>]> = (0..LEN).map(|_| Mutex::new(blank())).collect();
    // `LEN` slots were made.
    slots.try_into().unwrap_or_else(|_| unreachable!())
}

impl Calls {
    fn new() -> Calls {
        Calls {
            records: ring(Record::blank),
            details: ring(|| Detail {
                seq: 0,
                answer: None,
                statements: KeptStatements::default(),
            }),
            next: AtomicU64::new(1),
            status: Mutex::new((0, None)),
            pages: AtomicUsize::new(0),
            detailed: AtomicIsize::new(0),
            clients: Mutex::new(Clients::default()),
        }
    }

    /// The slot of call number `seq` in `ring` (of `LEN` slots), locked.
    fn slot<T, const LEN: usize>(ring: &[Mutex<T>; LEN], seq: u64) -> MutexGuard<'_, T> {
        // Below `LEN`, a `usize`; by a constant, so a multiplication rather than a division
        // (which cost a call some forty cycles).
        let at = (seq % LEN as u64) as usize;
        ring[at].lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the next call's number.
    fn number(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Writes call number `seq` over the oldest record (see [`Calls`]): its buffers are
    /// used again, nothing is freed. A slot a later call already wrote (a thousand calls
    /// made while this one was between its number and its slot) is left to it.
    fn keep(&self, seq: u64, fill: impl FnOnce(&mut Record)) {
        let mut record = Self::slot(&self.records, seq);
        if record.seq < seq {
            fill(&mut record);
            record.seq = seq;
        }
    }

    /// Writes what call number `seq` keeps besides its record; before the record, so that
    /// a page that reads the record finds its detail too.
    fn keep_detail(&self, seq: u64, answer: Option<Answered<'_>>, statements: Ran<'_>) {
        let mut detail = Self::slot(&self.details, seq);
        if detail.seq < seq {
            match answer {
                Some(answer) => answer.keep_in(&mut detail.answer),
                None => detail.answer = None,
            }
            detail.statements.keep(statements);
            detail.seq = seq;
        }
    }

    /// Runs `f` on call number `seq`, when the ring still keeps it.
    fn numbered<T>(&self, seq: u64, f: impl FnOnce(Kept<'_>) -> T) -> Option<T> {
        if seq == 0 {
            return None;
        }
        let stdio = self.stdio_client();
        let record = Self::slot(&self.records, seq);
        (record.seq == seq).then(|| self.with_detail(&record, stdio.as_deref(), f))
    }

    /// Runs `f` on `record` (locked) and its detail, while the ring of details keeps it. A
    /// record's lock, then its detail's: a call holds one at a time, so this order meets no
    /// other.
    fn with_detail<T>(
        &self,
        record: &Record,
        stdio: Option<&str>,
        f: impl FnOnce(Kept<'_>) -> T,
    ) -> T {
        let detail = Self::slot(&self.details, record.seq);
        f(Kept {
            record,
            detail: (detail.seq == record.seq).then_some(&*detail),
            stdio,
        })
    }

    /// Runs `each` on the calls numbered after `seen` that the ring keeps, the first `most`
    /// of them, oldest first (those whose answers were kept, see [`Calls::detailed`]);
    /// returns the number to read on from (the newest call's, the ones past `most` left
    /// out) and how many were left out. A call still being written ends the reading, to be
    /// read on from at the next look; one written over since it was numbered is left out.
    fn since(&self, seen: u64, most: usize, mut each: impl FnMut(Kept<'_>)) -> (u64, usize) {
        let newest = self.next.load(Ordering::Relaxed) - 1;
        // The oldest call the ring still keeps: the ones before it are not counted.
        let first = (seen + 1).max((newest + 1).saturating_sub(RING as u64));
        if first > newest {
            return (seen, 0);
        }
        // Below `first` when `most` is 0: then every new call is left out.
        let end = newest.min(first + most as u64 - 1);
        let mut skipped = newest - end;
        let stdio = self.stdio_client();
        for seq in first..=end {
            let record = Self::slot(&self.records, seq);
            match record.seq.cmp(&seq) {
                // Read on from here, the ones after it not left out.
                std::cmp::Ordering::Less => return (seq - 1, count(skipped - (newest - end))),
                std::cmp::Ordering::Equal => self.with_detail(&record, stdio.as_deref(), &mut each),
                std::cmp::Ordering::Greater => skipped += 1,
            }
        }
        (newest, count(skipped))
    }

    /// A page looks at the calls (it opens, or a tick passed): the next [`PAGE_LINES`] calls
    /// keep their answers and statements (see [`Calls::detailed`]).
    fn looked(&self) {
        self.detailed.store(PAGE_LINES as isize, Ordering::Relaxed);
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
        self.looked();
        Page(self.clone())
    }

    /// The client that `origin`'s session named, as a record keeps it: the stdio session's
    /// found when the record is read (see [`Client::Stdio`]).
    fn client_of(&self, origin: Option<&Origin>) -> Client {
        match origin {
            None => Client::Unnamed,
            Some(Origin::Stdio) => Client::Stdio,
            Some(origin) => {
                let clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
                clients.of(origin).map_or(Client::Unnamed, Client::Named)
            }
        }
    }

    /// The client the stdio session named.
    fn stdio_client(&self) -> Option<Arc<str>> {
        let clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        clients.stdio.clone()
    }

    fn reloaded(&self, line: Value) {
        let mut status = self.status.lock().unwrap_or_else(PoisonError::into_inner);
        *status = (status.0 + 1, Some(line.to_string().into()));
    }
}

impl Watcher for Calls {
    fn recording(&self) -> bool {
        self.pages.load(Ordering::Relaxed) > 0 || history()
    }

    fn watched(&self) -> bool {
        self.pages.load(Ordering::Relaxed) > 0 && self.detailed.load(Ordering::Relaxed) > 0
    }

    fn call(&self, seen: SeenCall<'_>) {
        let call = seen.call;
        let client = self.client_of(seen.origin.as_ref());
        let seq = self.number();
        let failed = seen.outcome != "ok";
        let (failure, answer) = match seen.answer {
            Some(answer) if failed => (Some(answer), None),
            answer => (None, answer),
        };
        if seen.watched {
            self.detailed.fetch_sub(1, Ordering::Relaxed);
            self.keep_detail(seq, answer, seen.statements);
        }
        self.keep(seq, |r| {
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
                Some(arguments) => keep_arguments(arguments, &mut r.arguments),
                None => r.arguments.clear(),
            }
            match failure {
                Some(answer) => answer.keep_in(&mut r.failure),
                None => r.failure = None,
            }
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
            Some(c) => Client::Named(crate::watch::kept_name(c).into()),
            None => self.client_of(r.origin.as_ref()),
        };
        let seq = self.number();
        self.keep(seq, |record| {
            record.at = Instant::now();
            record.method = r.method;
            record.tool = Cow::Owned(r.target.unwrap_or_default().to_string());
            record.client = client;
            record.caller = None;
            record.outcome = Cow::Owned(r.outcome.to_string());
            record.duration_ms = r.duration_ms;
            record.result_bytes = 0;
            record.arguments.clear();
            record.failure = None;
            record.trace = None;
        });
    }
}

/// A count of calls as a `usize` (it is at most [`RING`]).
fn count(calls: u64) -> usize {
    usize::try_from(calls).unwrap_or(usize::MAX)
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

/// A call's arguments as the ring keeps them, written over `kept`: compact JSON text within
/// [`KEPT_BYTES`]; larger ones as the call log shows them (long text cut), or else left out
/// with their size.
fn keep_arguments(arguments: &Value, kept: &mut SmallVec<[u8; INLINE_ARGUMENTS]>) {
    thread_local! {
        /// Where a thread writes a call's arguments before they are copied into its record,
        /// a `Vec` (written into, a `SmallVec` checks its capacity in a call for each piece).
        static TEXT: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    TEXT.with_borrow_mut(|text| {
        text.clear();
        write_json(text, arguments);
        kept.clear();
        let size = text.len();
        if size <= KEPT_BYTES {
            kept.extend_from_slice(text);
        } else {
            let shown = crate::calllog::sanitize_arguments(arguments).to_string();
            *kept = SmallVec::from_vec(if shown.len() <= KEPT_BYTES {
                shown.into_bytes()
            } else {
                omitted(size, "arguments").to_string().into_bytes()
            });
        }
        // A thread keeps no more than a record would.
        if text.capacity() > KEPT_BYTES {
            *text = Vec::new();
        }
    });
}

/// Writes `value` as compact JSON, exactly as `serde_json::to_writer` does (the test
/// `arguments_are_written_as_serde_json_writes_them` holds it to that), but with texts
/// copied as they are when nothing in them needs escaping ([`json_text`]) rather than
/// looked up a byte at a time: a call's arguments are written for every call the ring
/// keeps, watched or not, and serde_json's writer cost it about 390 instructions of the
/// 1,300 the workbench then added to a kept call that no page watched (callgrind, a
/// primary-key call).
fn write_json(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        // Writing to a `Vec` cannot fail.
        Value::Number(n) => {
            let _ = serde_json::to_writer(&mut *out, n);
        }
        Value::String(text) => json_text(out, b"", Some(text)),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json(out, item);
            }
            out.push(b']');
        }
        Value::Object(fields) => {
            out.push(b'{');
            for (i, (key, item)) in fields.iter().enumerate() {
                json_text(out, if i > 0 { b"," } else { b"" }, Some(key));
                out.push(b':');
                write_json(out, item);
            }
            out.push(b'}');
        }
    }
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
            let mut kept = SmallVec::from_slice(br#"{"earlier":"call"}"#);
            keep_arguments(v, &mut kept);
            kept.into_vec()
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
    fn arguments_are_written_as_serde_json_writes_them() {
        for value in [
            json!(null),
            json!({}),
            json!([]),
            json!({"id": "L-00042"}),
            json!({"a": true, "b": false, "c": null, "d": [1, -2, 3.5, 1e300, u64::MAX]}),
            json!({"nested": {"deeper": [{"x": "é \" \\ \n \u{1}"}, []]}, "": ""}),
            json!([{"k\"ey": 0.1}, "x".repeat(40), -0.0]),
        ] {
            let mut out = Vec::new();
            write_json(&mut out, &value);
            let expected = serde_json::to_vec(&value).expect("JSON");
            assert_eq!(
                String::from_utf8(out),
                String::from_utf8(expected),
                "{value}"
            );
        }
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
        r.client = Client::Named("claude-code".into());
        r.outcome = "NOT_FOUND".into();
        r.duration_ms = 0.194;
        r.result_bytes = 422;
        let expected = |r: &Record| {
            let mut v = json!({
                "seq": r.seq, "at_ms": wall_ms(r.at), "method": r.method, "tool": &*r.tool,
                "client": "claude-code", "caller": r.caller.as_deref(),
                "outcome": &*r.outcome, "duration_ms": r.duration_ms,
                "result_bytes": r.result_bytes, "answered": r.failure.is_some(),
            });
            if let Some(trace) = &r.trace {
                v["trace"] = json!(&**trace);
            }
            v
        };
        let parsed = |r: &Record| -> Value {
            let kept = Kept {
                record: r,
                detail: None,
                stdio: None,
            };
            serde_json::from_str(&kept.line()).expect("JSON")
        };
        assert_eq!(parsed(&r), expected(&r));
        r.duration_ms = 12.0;
        r.trace = Some("4bf92f3577b34da6a3ce929d0e0e4736".into());
        r.failure = Some(Answer::Text("{}".into()));
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
        // Each byte serde_json escapes, and its neighbours, at each place of a text of each
        // length up to 17 (two whole words of eight and a remainder).
        for b in [
            0x00u8, 0x1f, 0x20, b'"', b'\\', b'!', b'#', b'[', b']', 0x7f,
        ] {
            for len in 1..=17 {
                for at in 0..len {
                    let mut t = vec![b'a'; len];
                    t[at] = b;
                    texts.push(String::from_utf8(t).expect("ASCII"));
                }
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

    /// Keeps a call of nobody's, numbered as the ring numbers them.
    fn call(calls: &Calls) -> u64 {
        let seq = calls.number();
        calls.keep(seq, |r| *r = record(None));
        seq
    }

    /// The numbers of the calls after `seen` a page is sent (at most `most`), the last
    /// one read, and how many it missed.
    fn read(calls: &Calls, seen: u64, most: usize) -> (Vec<u64>, u64, usize) {
        let mut seqs = Vec::new();
        let (last, skipped) = calls.since(seen, most, |call| seqs.push(call.record.seq));
        (seqs, last, skipped)
    }

    #[test]
    fn a_page_is_sent_the_first_calls_since_it_looked_and_told_how_many_it_missed() {
        let calls = Calls::new();
        assert_eq!(read(&calls, 0, RING), (vec![], 0, 0));
        for _ in 0..600 {
            call(&calls);
        }
        // The first ones (those that kept their answers), the rest counted; read on from the
        // newest.
        assert_eq!(
            read(&calls, 100, PAGE_LINES),
            (
                (101..=100 + PAGE_LINES as u64).collect(),
                600,
                500 - PAGE_LINES
            )
        );
        assert_eq!(
            read(&calls, 590, PAGE_LINES),
            ((591..=600).collect(), 600, 0)
        );
        assert_eq!(read(&calls, 600, PAGE_LINES), (vec![], 600, 0));
        assert_eq!(read(&calls, 100, 0), (vec![], 600, 500));
        // Past the ring, the oldest are written over: the ring's last thousand are read, and
        // the calls older than the ring are not counted as missed.
        for _ in 0..RING {
            call(&calls);
        }
        let (seqs, last, skipped) = read(&calls, 0, RING);
        assert_eq!(seqs, (601..=1600).collect::<Vec<u64>>());
        assert_eq!((last, skipped), (1600, 0));
        let (seqs, last, skipped) = read(&calls, 0, PAGE_LINES);
        assert_eq!(seqs, (601..=600 + PAGE_LINES as u64).collect::<Vec<u64>>());
        assert_eq!((last, skipped), (1600, RING - PAGE_LINES));
    }

    #[test]
    fn a_call_still_being_written_is_read_at_the_next_look() {
        let calls = Calls::new();
        call(&calls);
        // Call 2 has its number but is not written yet; call 3 is.
        let two = calls.number();
        call(&calls);
        assert_eq!(read(&calls, 0, RING), (vec![1], 1, 0));
        calls.keep(two, |r| *r = record(None));
        assert_eq!(read(&calls, 1, RING), (vec![2, 3], 3, 0));
        // A call whose slot a later call wrote first (a thousand calls made while it was
        // between its number and its slot) is not written, and is counted as missed.
        let late = calls.number();
        for _ in 0..RING {
            call(&calls);
        }
        calls.keep(late, |r| *r = record(Some("late")));
        assert!(calls.numbered(late, |_| ()).is_none());
        let lapped = late + RING as u64;
        assert_eq!(
            calls.numbered(lapped, |call| call.record.caller.is_none()),
            Some(true)
        );
        let (seqs, last, skipped) = read(&calls, 3, 2 * RING);
        assert_eq!(seqs, (late + 1..=lapped).collect::<Vec<u64>>());
        assert_eq!((last, skipped), (lapped, 0));
    }

    /// Tells `calls` of a call of `tool` as the engine does (reading first whether it keeps
    /// its answer and statements), answered `answer`: a failure's when `outcome` is not
    /// `ok`. Returns its number.
    fn called(calls: &Calls, outcome: &'static str, answer: &str) -> u64 {
        let watched = calls.watched();
        let statement = SeenStatement {
            name: "get",
            operation: Some("SELECT"),
            took: std::time::Duration::from_micros(1500),
            failed: None,
        };
        let arguments = json!({"id": "L-001"});
        let call = crate::calllog::Call {
            request: 0,
            sub: None,
            tool: "get",
            outcome,
            duration_ms: 0.25,
            result_bytes: answer.len(),
            arguments: Some(&arguments),
        };
        let ran = Ran {
            kept: if watched {
                std::slice::from_ref(&statement)
            } else {
                &[]
            },
            more: 0,
        };
        calls.call(SeenCall {
            tool: Some("get"),
            call: &call,
            started: Instant::now(),
            watched,
            outcome: Cow::Borrowed(outcome),
            answer: (watched || outcome != "ok").then_some(Answered::Text(answer)),
            statements: ran,
            trace: None,
            origin: Some(Origin::Stdio),
        });
        calls.next.load(Ordering::Relaxed) - 1
    }

    #[test]
    fn a_call_keeps_its_answer_while_a_page_can_open_it() {
        let calls = Arc::new(Calls::new());
        let opened = |seq: u64| -> Value {
            let text = calls.numbered(seq, |call| call.whole()).expect("kept");
            serde_json::from_str(&text).expect("JSON")
        };
        let listed = |seq: u64| -> Value {
            let mut line = None;
            calls.since(seq - 1, RING, |call| {
                line.get_or_insert_with(|| call.line());
            });
            serde_json::from_str(&line.expect("listed")).expect("JSON")
        };
        // No page: a success keeps its record only, a failure its answer too.
        assert!(!calls.watched());
        let unwatched = called(&calls, "ok", r#"{"id":0}"#);
        let failed = called(&calls, "NOT_FOUND", r#"{"isError":true}"#);
        // A page opens: the next calls keep their answers and statements, as many as a tick
        // sends it.
        let page = calls.open_page();
        assert!(calls.watched());
        let first = called(&calls, "ok", r#"{"id":1}"#);
        for _ in 1..PAGE_LINES {
            called(&calls, "ok", r#"{"id":2}"#);
        }
        assert!(!calls.watched(), "past a tick's worth");
        let past = called(&calls, "ok", r#"{"id":3}"#);
        assert_eq!(opened(first)["response"], json!({"id": 1}));
        assert_eq!(opened(first)["answered"], true);
        assert_eq!(opened(first)["arguments"], json!({"id": "L-001"}));
        assert_eq!(opened(first)["statements"]["kept"][0]["duration_ms"], 1.5);
        assert_eq!(listed(first), {
            let mut line = opened(first);
            for whole in ["arguments", "response", "statements"] {
                line.as_object_mut().expect("an object").remove(whole);
            }
            line
        });
        for kept_none in [unwatched, past] {
            let call = opened(kept_none);
            assert_eq!(call["response"], Value::Null, "{call}");
            assert_eq!(call["answered"], false, "{call}");
            assert_eq!(listed(kept_none)["answered"], false);
            assert!(
                call["response_note"]
                    .as_str()
                    .is_some_and(|n| n.starts_with(
                        "not kept: a call keeps its answer while a page is open, for the first 100"
                    )),
                "{call}"
            );
            assert_eq!(call["statements"]["kept"], json!([]), "{call}");
            assert_eq!(call["outcome"], "ok");
        }
        // A failure's answer is kept with its call, watched or not.
        assert_eq!(opened(failed)["response"], json!({"isError": true}));
        assert_eq!(opened(failed).get("response_note"), None);
        assert_eq!(listed(failed)["answered"], true);
        // The page looks again: the next calls keep theirs; it closes: none does.
        calls.looked();
        assert!(calls.watched());
        drop(page);
        assert!(!calls.watched());
        // A call the ring wrote over is gone, with its answer.
        for _ in 0..RING {
            called(&calls, "ok", "{}");
        }
        assert!(calls.numbered(first, |_| ()).is_none());
        assert!(calls.numbered(0, |_| ()).is_none());
    }

    #[test]
    fn an_oauth_caller_is_shown_its_own_calls_only() {
        let (alice, operator) = (record(Some("alice")), record(None));
        let kept = |record| Kept {
            record,
            detail: None,
            stdio: None,
        };
        let (alices, operators) = (kept(&alice), kept(&operator));
        assert!(alices.shown_to(None) && operators.shown_to(None));
        assert!(alices.shown_to(Some("alice")));
        assert!(!alices.shown_to(Some("bob")));
        assert!(!operators.shown_to(Some("alice")));
    }
}
