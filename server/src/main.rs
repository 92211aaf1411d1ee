//! The `mcpspec` command: the runtime's command line over the five seed servers, plus `new`,
//! which scaffolds a crate of one's own.

fn main() -> std::process::ExitCode {
    mcpspec::cli::main_with(
        server::servers::seeds(),
        vec![mcpspec::cli::Extra {
            command: server::new::command(),
            run: server::new::run,
        }],
    )
}
