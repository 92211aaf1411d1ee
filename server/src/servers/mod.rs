//! The hand-written Rust handlers of the servers whose specs bind tools with `handler:`, and the
//! registries the binaries serve.
//!
//! Each server's handlers live in a module of their own and implement the traits codegen
//! generates from the spec (`crate::generated::<server>::Handlers`); [`seeds`] and
//! [`test_doubles`] pair each definition with its handlers through the runtime's public API.

pub mod conformance;
pub mod downstream;
pub mod lessons;
pub mod pm;
pub mod sessions;

use crate::generated;
use mcpspec::Server;

/// The five servers of the project's source documents, as the `mcpspec` binary serves them.
pub fn seeds() -> Vec<Server> {
    vec![
        Server::new(&generated::knowledge::SERVER),
        Server::new(&generated::laminark::SERVER),
        Server::with_handlers(
            &generated::lessons::SERVER,
            generated::lessons::dispatcher(lessons::Lessons),
        ),
        Server::with_handlers(&generated::pm::SERVER, generated::pm::dispatcher(pm::Pm)),
        Server::new(&generated::studio::SERVER),
    ]
}

/// The servers the tests, the conformance suite and the benchmarks drive besides the seeds: a
/// downstream for the proxy and the conformance suite's reference tools. Only the
/// `mcpspec-testbed` binary serves them.
pub fn test_doubles() -> Vec<Server> {
    vec![
        Server::with_handlers(
            &generated::conformance::SERVER,
            generated::conformance::dispatcher(conformance::Conformance),
        ),
        Server::with_handlers(
            &generated::downstream::SERVER,
            generated::downstream::dispatcher(downstream::Downstream::default()),
        ),
    ]
}
