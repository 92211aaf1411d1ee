//! The five seed servers (`studio`, `laminark`, `knowledge`, `pm`, `lessons`) and two test
//! doubles as one user of the `mcpspec` runtime: `build.rs` compiles `spec/*.yaml` with
//! [`codegen::compile_specs`](../codegen/fn.compile_specs.html), [`generated`] includes the
//! result, and [`servers`] holds the handlers and the registries the binaries serve.

pub mod servers;
pub mod setup;

/// The servers compiled from `spec/` at build time.
#[allow(clippy::all, missing_docs)]
pub mod generated {
    mcpspec::include_specs!();
}

/// Finds a compiled definition by name, test doubles included.
pub fn server(name: &str) -> Option<&'static mcpspec::def::ServerDef> {
    generated::SERVERS.iter().copied().find(|s| s.name == name)
}
