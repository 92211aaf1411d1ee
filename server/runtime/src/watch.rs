//! The seam between what answers requests (the engine, the protocol layer) and what watches
//! them (the workbench, `--ui`): a leaf. The engine and the protocol layer tell the watcher,
//! when one is installed, of each call and request as plain text; the workbench installs one
//! and reads the engine and the protocol layer for the rest, so that neither side names the
//! other's module and the layers stay without cycles.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};

use crate::calllog::Call;

/// The most bytes of a call's arguments, or of its answer, a watcher keeps as they came (as
/// JSON); larger ones are cut or left out with their size ([`omitted`]).
pub(crate) const KEPT_BYTES: usize = 16 * 1024;

/// What is kept in place of arguments or an answer larger than [`KEPT_BYTES`].
pub(crate) fn omitted(size: usize, what: &str) -> Value {
    json!({ "omitted": format!("{size} bytes of {what}, more than the workbench keeps") })
}

/// A `tools/call` as the engine tells of it.
pub(crate) struct SeenCall<'a> {
    /// The spec's tool (`None`: a name the spec does not have).
    pub tool: Option<&'static str>,
    pub call: &'a Call<'a>,
    /// `ok`, or the error's code (borrowed when it is the server's own).
    pub outcome: Cow<'static, str>,
    /// The answer as JSON text: every failure, a success's result while [`Watcher::watched`].
    pub answer: Option<Box<str>>,
}

/// A request other than `tools/call`, as the protocol layer tells of it.
pub(crate) struct SeenRequest<'a> {
    pub method: &'static str,
    /// A resource's URI, a prompt's name...
    pub target: Option<&'a str>,
    pub client: Option<&'a str>,
    /// `ok`, or the JSON-RPC error's code.
    pub outcome: &'a str,
    pub duration_ms: f64,
}

/// What watches the requests.
pub(crate) trait Watcher: Send + Sync {
    /// Whether someone reads the calls now: only then is a success's result worth keeping.
    fn watched(&self) -> bool;
    fn call(&self, seen: SeenCall<'_>);
    fn request(&self, seen: &SeenRequest<'_>);
}

static WATCHER: OnceLock<Arc<dyn Watcher>> = OnceLock::new();

/// The process's watcher, when `--ui` installed one.
pub(crate) fn watcher() -> Option<&'static Arc<dyn Watcher>> {
    WATCHER.get()
}

/// Installs the process's watcher; a second is ignored.
pub(crate) fn install(watcher: Arc<dyn Watcher>) {
    let _ = WATCHER.set(watcher);
}
