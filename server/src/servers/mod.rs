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

/// The servers the `mcpspec` binary serves: the five of the project's source documents, and
/// every other spec in `spec/` (a server written as YAML alone, as in
/// `docs/getting-started.md`, is served without being listed here), but the test doubles.
pub fn seeds() -> Vec<Server> {
    let mut servers = vec![
        Server::new(&generated::knowledge::SERVER),
        Server::new(&generated::laminark::SERVER),
        Server::with_handlers(
            &generated::lessons::SERVER,
            generated::lessons::dispatcher(lessons::Lessons),
        ),
        Server::with_handlers(&generated::pm::SERVER, generated::pm::dispatcher(pm::Pm)),
        Server::new(&generated::studio::SERVER),
    ];
    for def in generated::SERVERS {
        let listed = servers.iter().any(|s| s.def().name == def.name);
        if !listed && !TEST_DOUBLES.contains(&def.name) {
            // Its handler tools, if any, refuse to start with a message naming the server.
            servers.push(Server::new(def));
        }
    }
    servers
}

/// The servers only `mcpspec-testbed` serves.
const TEST_DOUBLES: &[&str] = &["conformance", "downstream"];

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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every compiled spec is served by one binary or the other, and none by both.
    #[test]
    fn every_compiled_spec_is_served() {
        let mut seeds: Vec<&str> = seeds().iter().map(|s| s.def().name).collect();
        let doubles: Vec<&str> = test_doubles().iter().map(|s| s.def().name).collect();
        assert_eq!(doubles, TEST_DOUBLES);
        seeds.extend(doubles);
        seeds.sort_unstable();
        let mut compiled: Vec<&str> = generated::SERVERS.iter().map(|d| d.name).collect();
        compiled.sort_unstable();
        assert_eq!(seeds, compiled);
    }
}
