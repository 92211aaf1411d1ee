//! The hand-written Rust handlers of the servers whose specs bind tools with `handler:`.
//!
//! Each server's handlers live in a module of their own and implement the traits codegen
//! generates from the spec (`crate::generated::<server>::Handlers`); this registry is how the
//! engine finds them at start-up.

pub mod conformance;
pub mod downstream;
pub mod lessons;
pub mod pm;
pub mod sessions;

use crate::handler::Dispatch;

/// The handlers of a compiled server, or `None` for a server without handler tools.
pub fn dispatch_for(server: &str) -> Option<Box<dyn Dispatch>> {
    match server {
        "conformance" => Some(crate::generated::conformance::dispatcher(
            conformance::Conformance,
        )),
        "lessons" => Some(crate::generated::lessons::dispatcher(lessons::Lessons)),
        "downstream" => Some(crate::generated::downstream::dispatcher(
            downstream::Downstream::default(),
        )),
        "pm" => Some(crate::generated::pm::dispatcher(pm::Pm)),
        _ => None,
    }
}
