//! `mcpspec-seeds`: the `mcpspec` command line (`mcpspec_cli`) with this repository's five seed
//! servers and test doubles compiled in, plus `setup`, which puts the lessons proxy in front of
//! Claude Desktop's servers. The published `mcpspec` binary is the same command line with no
//! compiled servers.

/// The same allocator as the `mcpspec` binary's (ARCHITECTURE.md, "Allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    mcpspec_cli::main(
        server::servers::seeds(),
        vec![mcpspec::cli::Extra {
            command: server::setup::command(),
            run: server::setup::run,
            serves: false,
        }],
    )
}
