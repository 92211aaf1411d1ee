//! The `mcpspec` command: the runtime's command line over the five seed servers.

fn main() -> std::process::ExitCode {
    mcpspec::cli::main(server::servers::seeds())
}
