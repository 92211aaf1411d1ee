//! The `mcpspec` command: serves any spec file (`mcpspec serve --spec x.yaml`), checks it,
//! reloads it on save (`dev`) and scaffolds crates of one's own (`new`). It has no compiled
//! servers of its own; a spec with handler tools is served by the crate `mcpspec new` makes.

/// mimalloc: a server's allocations are many and small (see ARCHITECTURE.md, "Allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    mcpspec_cli::main(Vec::new(), Vec::new())
}
