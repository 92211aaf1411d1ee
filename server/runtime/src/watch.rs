//! The seam between what answers requests (the engine, the protocol layer) and what watches
//! them (the workbench, `--ui`): a leaf. The engine and the protocol layer tell the watcher,
//! when one is installed and records ([`Watcher::recording`]), of each call and request as
//! plain text; the workbench installs one and reads the engine and the protocol layer for the
//! rest, so that neither side names the other's module and the layers stay without cycles.

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::{Arc, OnceLock};
use std::thread::LocalKey;
use std::time::Instant;

use serde_json::{Value, json};

use crate::calllog::Call;

/// The most bytes of a call's arguments, or of its answer, a watcher keeps as they came (as
/// JSON); larger ones are cut or left out with their size ([`omitted`]).
pub(crate) const KEPT_BYTES: usize = 16 * 1024;

/// What is kept in place of arguments or an answer larger than [`KEPT_BYTES`].
pub(crate) fn omitted(size: usize, what: &str) -> Value {
    json!({ "omitted": format!("{size} bytes of {what}, more than the workbench keeps") })
}

/// Which session a request came in, as far as the workbench names its client: the stdio
/// session, or a Streamable HTTP session by its id. A request over HTTP without a session (a
/// stateless one of 2026-07-28) has none.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Origin {
    Stdio,
    Http(Box<str>),
    /// A request over HTTP without a session that names its client itself (one of
    /// 2026-07-28, in its `_meta`): its own client, never another session's.
    Named(Box<str>),
}

impl Origin {
    /// The origin of a request on `transport` (`pipe` or `tcp`, as the spans name it) in
    /// HTTP session `session`, which named its client `client` in its own `_meta` if it did.
    pub(crate) fn of(
        transport: &str,
        session: Option<&str>,
        client: Option<&str>,
    ) -> Option<Origin> {
        match (transport, session, client) {
            ("pipe", _, _) => Some(Origin::Stdio),
            (_, Some(id), _) => Some(Origin::Http(id.into())),
            (_, None, Some(client)) => Some(Origin::Named(kept_name(client).into())),
            _ => None,
        }
    }
}

thread_local! {
    /// The origin of the request this thread serves, while a watcher is installed.
    static ORIGIN: RefCell<Option<Origin>> = const { RefCell::new(None) };
}

/// A value of the request this thread serves, kept in the thread-local `key` while the guard
/// lives; the value before is restored when it ends (a nested call restores its caller's). A
/// scope that was never set (nothing watches) costs nothing and restores nothing.
struct Scope<T: 'static> {
    key: &'static LocalKey<RefCell<Option<T>>>,
    previous: Option<Option<T>>,
}

impl<T> Scope<T> {
    fn set(key: &'static LocalKey<RefCell<Option<T>>>, value: Option<T>) -> Scope<T> {
        let previous = Some(key.with(|k| k.replace(value)));
        Scope { key, previous }
    }

    fn unset(key: &'static LocalKey<RefCell<Option<T>>>) -> Scope<T> {
        Scope {
            key,
            previous: None,
        }
    }
}

impl<T> Drop for Scope<T> {
    fn drop(&mut self) {
        if let Some(previous) = self.previous.take() {
            let _ = self.key.try_with(|k| k.replace(previous));
        }
    }
}

/// While alive, the origin given to [`serving`] is that of the request this thread serves.
pub(crate) struct Serving {
    _scope: Scope<Origin>,
}

/// Notes that this thread serves a request from `origin`, when a watcher records it.
pub(crate) fn serving(origin: impl FnOnce() -> Option<Origin>) -> Serving {
    let _scope = match recorder() {
        Some(_) => Scope::set(&ORIGIN, origin()),
        None => Scope::unset(&ORIGIN),
    };
    Serving { _scope }
}

/// The origin of the request this thread serves (see [`serving`]).
pub(crate) fn origin() -> Option<Origin> {
    ORIGIN.with(|o| o.borrow().clone())
}

/// A `tools/call` as the engine tells of it.
pub(crate) struct SeenCall<'a> {
    /// The spec's tool (`None`: a name the spec does not have).
    pub tool: Option<&'static str>,
    pub call: &'a Call<'a>,
    /// When it started.
    pub started: Instant,
    /// Whether a page watched it ([`Watcher::watched`], read when it started): its
    /// statements were collected, and a success's answer is given.
    pub watched: bool,
    /// `ok`, or the error's code (borrowed when it is the server's own).
    pub outcome: Cow<'static, str>,
    /// The answer: every failure, a success's result while [`Watcher::watched`].
    pub answer: Option<Answered<'a>>,
    /// The statements the call ran, while [`Watcher::watched`] (see [`Statements`]).
    pub statements: Ran<'a>,
    /// The call's trace (32 hex digits), when OpenTelemetry sampled it.
    pub trace: Option<Box<str>>,
    /// The session it came in, so that the watcher can name its client.
    pub origin: Option<Origin>,
}

/// A call's answer as a watcher keeps it: JSON text, or a result's value, written as JSON
/// only when someone reads it (a page opens the call), not on every call a page watches.
#[derive(Debug)]
pub(crate) enum Answer {
    Text(String),
    Value(Value),
}

/// A call's answer as the engine tells of it: JSON text the result already is (borrowed, for
/// the watcher to copy where it keeps it), or an answer made for the watcher.
pub(crate) enum Answered<'a> {
    Text(&'a str),
    Made(Answer),
}

impl Answered<'_> {
    /// Keeps the answer in `slot`, in the text the slot held before when it can (a copy
    /// into a buffer already there, rather than a new one and the old one freed).
    pub(crate) fn keep_in(self, slot: &mut Option<Answer>) {
        match (self, slot) {
            (Answered::Text(text), Some(Answer::Text(kept))) => {
                kept.clear();
                kept.push_str(text);
            }
            (Answered::Text(text), slot) => *slot = Some(Answer::Text(text.to_owned())),
            (Answered::Made(answer), slot) => *slot = Some(answer),
        }
    }
}

impl Answer {
    /// The answer as JSON text.
    pub(crate) fn json(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Answer::Text(text) => std::borrow::Cow::Borrowed(text),
            Answer::Value(v) => std::borrow::Cow::Owned(v.to_string()),
        }
    }
}

/// A statement a watched call ran, as the backend tells of it: never its text or arguments.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub(crate) struct SeenStatement {
    /// The spec's name for it (a tool's, or a composite's field); empty for SQL a handler
    /// wrote itself.
    pub name: &'static str,
    /// Its first word (`SELECT`, `INSERT`...), when it is one the traces name.
    pub operation: Option<&'static str>,
    /// How long it took, as the page shows it: in milliseconds to the microsecond, worked
    /// out when a page reads it rather than for every statement.
    #[serde(rename = "duration_ms", serialize_with = "in_millis")]
    pub took: std::time::Duration,
    /// The failure's kind, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<&'static str>,
}

/// A duration as a number of milliseconds rounded to the microsecond, as the call log writes
/// a call's.
fn in_millis<S: serde::Serializer>(took: &std::time::Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((took.as_secs_f64() * 1e6).round() / 1e3)
}

/// The statements a call ran, as the engine tells a watcher of them: borrowed from the
/// thread's collection (see [`Statements`]) while the watcher keeps a copy.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Ran<'a> {
    /// The first [`KEPT_STATEMENTS`], in the order they ran.
    pub kept: &'a [SeenStatement],
    /// How many more ran.
    pub more: usize,
}

/// The most statements a call's record keeps; a call that runs more (a backfill, a loop in a
/// handler) keeps the first ones and counts the rest.
pub(crate) const KEPT_STATEMENTS: usize = 64;

/// What a thread collects of the statements it runs for the watched calls it serves: one
/// buffer per thread, used again by every call (a call's statements are those past its
/// mark), so that collecting allocates nothing after a thread's first watched call and
/// nothing is moved from call to call.
struct Collected {
    /// Whether the call this thread serves now is watched.
    on: bool,
    /// Where its statements start in `statements`.
    mark: usize,
    statements: Vec<SeenStatement>,
    /// How many more than [`KEPT_STATEMENTS`] the current call ran.
    more: usize,
}

thread_local! {
    static COLLECTED: RefCell<Collected> = const {
        RefCell::new(Collected { on: false, mark: 0, statements: Vec::new(), more: 0 })
    };
}

/// While alive, the statements this thread runs are collected for the call it serves (a
/// watched one). A call inside another (a handler's) collects its own, from a mark in the
/// same buffer; when it ends, the outer call's collection goes on as before it.
pub(crate) struct Statements {
    /// Where this call's statements start, and what the collection was before it; `None`
    /// when this call does not collect (nothing was changed).
    outer: Option<Outer>,
}

#[derive(Clone, Copy)]
struct Outer {
    mark: usize,
    on: bool,
    more: usize,
}

impl Statements {
    /// Collects when `on` (a page watches); otherwise costs nothing.
    pub(crate) fn collect(on: bool) -> Statements {
        let outer = on.then(|| {
            COLLECTED.with_borrow_mut(|c| {
                let outer = Outer {
                    mark: c.mark,
                    on: c.on,
                    more: c.more,
                };
                c.on = true;
                c.mark = c.statements.len();
                c.more = 0;
                outer
            })
        });
        Statements { outer }
    }

    /// Runs `f` on the statements collected (none when this call does not collect).
    pub(crate) fn seen<T>(&self, f: impl FnOnce(Ran<'_>) -> T) -> T {
        match self.outer {
            Some(_) => COLLECTED.with_borrow(|c| {
                f(Ran {
                    kept: c.statements.get(c.mark..).unwrap_or_default(),
                    more: c.more,
                })
            }),
            None => f(Ran::default()),
        }
    }
}

impl Drop for Statements {
    fn drop(&mut self) {
        if let Some(outer) = self.outer {
            let _ = COLLECTED.try_with(|c| {
                if let Ok(mut c) = c.try_borrow_mut() {
                    let mark = c.mark;
                    c.statements.truncate(mark);
                    c.mark = outer.mark;
                    c.on = outer.on;
                    c.more = outer.more;
                }
            });
        }
    }
}

/// Whether this thread collects the statements it runs (see [`Statements`]).
pub(crate) fn collecting() -> bool {
    COLLECTED.with_borrow(|c| c.on)
}

/// Adds a statement that started at `started` to this thread's collection, when there is one.
pub(crate) fn ran(
    name: &'static str,
    operation: Option<&'static str>,
    started: Instant,
    failed: Option<&'static str>,
) {
    let took = started.elapsed();
    COLLECTED.with_borrow_mut(|c| {
        if !c.on {
            return;
        }
        // This call's statements are those past its mark (an outer call's come first).
        if c.statements.len() - c.mark < KEPT_STATEMENTS {
            c.statements.push(SeenStatement {
                name,
                operation,
                took,
                failed,
            });
        } else {
            c.more += 1;
        }
    });
}

/// A request other than `tools/call`, as the protocol layer tells of it.
pub(crate) struct SeenRequest<'a> {
    pub method: &'static str,
    /// A resource's URI, a prompt's name...
    pub target: Option<&'a str>,
    pub client: Option<&'a str>,
    /// The session it came in: a watcher names the client of that session's calls by it.
    pub origin: Option<Origin>,
    /// `ok`, or the JSON-RPC error's code.
    pub outcome: &'a str,
    pub duration_ms: f64,
}

/// What watches the requests.
pub(crate) trait Watcher: Send + Sync {
    /// Whether the request starting now is to be told of at all: while someone reads the
    /// calls, or always when the watcher keeps calls for a reader to come (the workbench's
    /// `--ui-history`). Otherwise a request costs the watcher nothing but this question.
    fn recording(&self) -> bool;
    /// Whether the call starting now keeps its answer and statements: someone reads the
    /// calls, and can open this one (the workbench keeps them for as many calls as a page is
    /// sent). Only then is a success's result worth keeping and are statements timed.
    fn watched(&self) -> bool;
    fn call(&self, seen: SeenCall<'_>);
    fn request(&self, seen: &SeenRequest<'_>);
    /// `origin`'s session named its client `client`.
    fn named(&self, origin: &Origin, client: &str);
}

/// The most characters of a client's name (`initialize`'s `clientInfo.name`, the client's
/// own text) a watcher keeps: a name is a label, and a client could send megabytes of one.
pub(crate) const KEPT_NAME_CHARS: usize = 128;

/// `name` within [`KEPT_NAME_CHARS`].
pub(crate) fn kept_name(name: &str) -> &str {
    name.char_indices()
        .nth(KEPT_NAME_CHARS)
        .map_or(name, |(end, _)| &name[..end])
}

/// Tells the watcher, when one is installed, that `origin`'s session named its client
/// `client` in its `initialize`. The transport tells it as the request passes, before rmcp
/// answers it, so that the session's first call, which a lane may answer before rmcp's
/// handler hears of `notifications/initialized`, is shown with its client too.
pub(crate) fn named(origin: impl FnOnce() -> Option<Origin>, client: &str) {
    if let Some(watcher) = watcher()
        && let Some(origin) = origin()
    {
        watcher.named(&origin, client);
    }
}

static WATCHER: OnceLock<Arc<dyn Watcher>> = OnceLock::new();

/// The process's watcher, when `--ui` installed one.
pub(crate) fn watcher() -> Option<&'static Arc<dyn Watcher>> {
    WATCHER.get()
}

/// The process's watcher when it records the request starting now ([`Watcher::recording`]):
/// what the engine and the protocol layer tell of calls and requests.
pub(crate) fn recorder() -> Option<&'static Arc<dyn Watcher>> {
    watcher().filter(|w| w.recording())
}

/// Installs the process's watcher; a second is ignored.
pub(crate) fn install(watcher: Arc<dyn Watcher>) {
    let _ = WATCHER.set(watcher);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &'static str) {
        ran(name, Some("SELECT"), Instant::now(), None);
    }

    fn names(s: &Statements) -> (Vec<&'static str>, usize) {
        s.seen(|r| (r.kept.iter().map(|st| st.name).collect(), r.more))
    }

    #[test]
    fn a_call_collects_its_own_statements_and_an_inner_call_its_own() {
        assert!(!collecting());
        run("before");
        let outer = Statements::collect(true);
        assert!(collecting());
        run("a");
        {
            let inner = Statements::collect(true);
            run("inner");
            assert_eq!(names(&inner), (vec!["inner"], 0));
        }
        run("b");
        {
            // A call that is not watched changes nothing: its statements are the outer's.
            let _unwatched = Statements::collect(false);
            run("unwatched");
        }
        assert_eq!(names(&outer), (vec!["a", "b", "unwatched"], 0));
        drop(outer);
        assert!(!collecting());
        // Nothing collected outside a call.
        assert_eq!(names(&Statements::collect(true)), (vec![], 0));
        assert_eq!(names(&Statements::collect(false)), (vec![], 0));
    }

    #[test]
    fn a_call_keeps_its_first_statements_and_counts_the_rest() {
        let outer = Statements::collect(true);
        run("outer");
        let inner = Statements::collect(true);
        for _ in 0..KEPT_STATEMENTS + 6 {
            run("many");
        }
        let (kept, more) = names(&inner);
        assert_eq!((kept.len(), more), (KEPT_STATEMENTS, 6));
        drop(inner);
        assert_eq!(names(&outer), (vec!["outer"], 0));
    }
}
