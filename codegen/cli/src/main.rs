//! `cargo run -p codegen -- check`: the spec compiler's command line over this checkout (the
//! directory two levels up, which holds `spec/`). A crate made by `mcpspec new` has the same
//! small package, so the command is the same in every mcpspec project.

fn main() -> std::process::ExitCode {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    codegen::cli::main(&root.canonicalize().unwrap_or(root))
}
