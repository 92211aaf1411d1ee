//! `cargo run -p codegen -- check`: the spec compiler's command line over this checkout (the
//! directory two levels up, which holds `spec/`), found when the command runs. A crate made by
//! `mcpspec new` has the same small package, so the command is the same in every mcpspec
//! project.

fn main() -> std::process::ExitCode {
    codegen::cli::main_in_project(2)
}
