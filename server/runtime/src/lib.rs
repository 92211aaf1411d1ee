//! The mcpspec runtime: everything a server compiled from a YAML spec needs to run as an MCP
//! server. It knows no particular server: a binary hands it the generated definitions
//! ([`def::ServerDef`]) and its handlers, and [`cli::main`] serves them.
//!
//! - [`def`]: the table types the generated code fills; [`params`]: how arguments become the
//!   values statements bind; [`handler`]: what Rust handlers receive and return.
//! - [`engine`]: validates arguments and runs calls; [`content`] reads resources and renders
//!   prompts; `templates` names and registers their templates; [`transform`] shapes derived
//!   parameters; [`startup`] runs a spec's start-up jobs; [`examples`] runs and judges a
//!   spec's examples; [`embed`] turns text into the vectors statements store and search.
//! - [`backend`]: the database seam; [`backend::sqlite`] is its embedded implementation.
//! - `protocol` (internal): the MCP surface on rmcp, with `protocol::jsonrpc` for messages
//!   that do not parse; `transport::stdio` and `transport::http` carry it.
//! - [`proxy`]: downstream servers (each over a `proxy::downlink`) and a spec's interceptor.
//! - `calllog` (internal) writes the line each call leaves in the log; `logsafe` (internal)
//!   quotes what a caller sent that reaches a log and escapes control characters inside every
//!   log line; `shutdown` carries a
//!   transport's shutdown to the calls it is answering.
//! - [`confine`] keeps handlers' paths inside their project; [`confirm`] asks the person before
//!   destructive calls; `numbers` refuses integers that do not fit `i64`.
//! - [`client`]: a small MCP client over stdio, for demos, tests and benchmarks.
//! - [`cli`]: the command line a server binary runs (`serve`, `call`, `init`, `test`, `demo`,
//!   `list`, and `--spec` when the binary has a spec compiler), with the registry of
//!   [`Server`]s it serves.

// Generated code names this crate as `::mcpspec` so that it compiles both here and in users'
// crates.
extern crate self as mcpspec;

pub mod auth;
pub mod backend;
pub(crate) mod calllog;
pub mod cli;
pub mod client;
pub mod confine;
pub mod confirm;
pub mod content;
pub mod embed;
pub mod engine;
pub mod examples;
pub mod handler;
pub(crate) mod logsafe;
#[cfg(feature = "http")]
pub(crate) mod metrics;
pub(crate) mod numbers;
pub mod params;
pub(crate) mod pool_use;
pub(crate) mod protocol;
pub mod proxy;
pub(crate) mod questions;
#[cfg(any(feature = "otel", feature = "embeddings"))]
pub(crate) mod roots;
mod rows;
pub(crate) mod shutdown;
pub mod startup;
pub mod telemetry;
pub(crate) mod templates;
pub(crate) mod tool_error;
pub mod transform;
pub(crate) mod transport;
pub(crate) mod uri_template;

pub use cli::Server;

/// The definition tables (the `mcpspec-def` crate): what the generated code and the spec
/// compiler's builder fill in, and the runtime interprets.
pub use mcpspec_def as def;

/// Includes what [`codegen::compile_specs`](../codegen/fn.compile_specs.html) generated in a
/// build script: one module per spec and `SERVERS`, the list of every definition.
///
/// ```text
/// mod generated {
///     mcpspec::include_specs!();
/// }
/// ```
#[macro_export]
macro_rules! include_specs {
    () => {
        include!(concat!(env!("OUT_DIR"), "/generated/mod.rs"));
    };
}

/// Crates the generated code refers to through this crate, so users need not depend on them.
#[doc(hidden)]
pub mod __private {
    pub use serde;
    pub use serde_json;
}

/// The `basic` golden, a server this crate's tests can start without knowing any seed.
#[cfg(test)]
#[allow(clippy::all, dead_code)]
mod basic {
    include!("../../../tests/fixtures/basic/expected/basic.rs");
}
