//! The `mcpspec` command: serves any spec file (`mcpspec serve --spec x.yaml`), checks it,
//! reloads it on save (`dev`) and scaffolds crates of one's own (`new`). It has no compiled
//! servers of its own; a spec with handler tools is served by the crate `mcpspec new` makes.

fn main() -> std::process::ExitCode {
    mcpspec_cli::main(Vec::new(), Vec::new())
}
