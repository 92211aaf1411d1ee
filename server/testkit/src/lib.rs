//! The one client kit of mcpspec's end-to-end tests and bench (never published): the runtime's
//! [`StdioClient`] for stdio, and [`HttpClient`] for Streamable HTTP. Tests and the bench drive
//! the built binaries with these, the way MCP clients do: real JSON-RPC over real pipes and
//! sockets.

mod http;

pub use http::{
    HttpClient, HttpResponse, OpenStream, announced_addr, get, get_with_token, sse_events,
};
pub use mcpspec::client::{
    ClientError, PER_REQUEST_VERSION, PROTOCOL_VERSION, RESPONSE_TIMEOUT, StdioClient,
};

/// The guard of the full test tier, at each place a test starts a server (PostgreSQL, MariaDB,
/// Prometheus, an OpenID provider), fetches from PyPI or npm, or runs a nested cargo build.
/// Expanded in the test crate, it reads that crate's `full` feature: in the quick tier (plain
/// `cargo test`) such a test fails at once, naming what it reached for and how to move it,
/// instead of failing later on a service a machine with only a Rust toolchain lacks.
#[macro_export]
macro_rules! full_tier {
    ($what:expr) => {
        if !cfg!(feature = "full") {
            panic!(
                "this test needs {} and so belongs to the full tier: mark it \
                 #[cfg(feature = \"full\")] (run the full tier with `cargo xtask test`)",
                $what
            );
        }
    };
}
