//! The mcpspec runtime: everything the generated tables need to become a running MCP server.
//!
//! `build.rs` compiles `spec/*.yaml` into [`generated`]; [`def`] declares the table types it
//! fills; [`engine`] executes calls; [`mcp`] and [`transport`] put the engine on stdio with
//! rmcp and [`http`] on Streamable HTTP; [`confine`] keeps handlers' paths inside their
//! project; [`confirm`] asks the person before destructive calls; [`db`] opens and creates databases; [`client`] and
//! [`demo`] drive a server as a client; [`jsonrpc`] answers messages that do not parse and
//! bounds what is quoted back; [`numbers`] refuses integer arguments that do not fit `i64`;
//! [`handler`] is what Rust handlers receive and return,
//! and [`handlers`] holds them; [`proxy`] runs the downstream servers (each over a
//! [`downlink`]) and the interceptor of a spec's `proxy:` section, and [`setup`] puts a proxy server in front of the servers of a
//! Claude Desktop config; [`startup`] runs a spec's start-up jobs in the background.

// Generated code names this crate as `::server` so that it compiles both here and in tests.
extern crate self as server;

pub mod client;
pub mod confine;
pub mod confirm;
pub mod content;
pub mod db;
pub mod def;
pub mod demo;
pub mod downlink;
pub mod engine;
pub mod handler;
pub mod handlers;
pub mod http;
pub mod jsonrpc;
pub mod mcp;
pub mod numbers;
pub mod proxy;
pub mod setup;
pub mod startup;
pub mod transform;
pub mod transport;

/// The servers compiled from `spec/` at build time.
#[allow(clippy::all, missing_docs)]
pub mod generated {
    include!(concat!(env!("OUT_DIR"), "/generated/mod.rs"));
}

/// Crates the generated code refers to through this crate, so users need not depend on them.
#[doc(hidden)]
pub mod __private {
    pub use serde;
    pub use serde_json;
}

/// Finds a compiled server by name.
pub fn server(name: &str) -> Option<&'static def::ServerDef> {
    generated::SERVERS.iter().copied().find(|s| s.name == name)
}
