//! The `mcpspec` command: the runtime's command line over the five seed servers, plus `dev`,
//! which serves a spec straight from its YAML and reloads it on save, `new`, which scaffolds a
//! crate of one's own, and `setup`, which puts the lessons proxy in front of
//! Claude Desktop's servers.

fn main() -> std::process::ExitCode {
    mcpspec::cli::main_with(
        server::servers::seeds(),
        vec![
            codegen::live::dev_command(),
            mcpspec::cli::Extra {
                command: server::new::command(),
                run: server::new::run,
                serves: false,
            },
            mcpspec::cli::Extra {
                command: server::setup::command(),
                run: server::setup::run,
                serves: false,
            },
        ],
    )
}
