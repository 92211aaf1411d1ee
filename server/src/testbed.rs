//! `mcpspec-testbed`: the `mcpspec` command with the test doubles (`downstream`,
//! `conformance`) beside the seed servers, for the e2e tests, the conformance suite and the
//! benchmarks. Not a server for users: the `mcpspec` binary does not list these.

fn main() -> std::process::ExitCode {
    let mut servers = server::servers::seeds();
    servers.extend(server::servers::test_doubles());
    mcpspec::cli::main(servers)
}
