//! Specs served straight from YAML by the runtime: the `dev` subcommand a binary adds, and
//! the compile step it runs on each save, through the one builder ([`crate::defs`]).

/// `dev`: the subcommand a binary adds to serve specs straight from YAML, with the handlers
/// of its own compiled servers:
/// `mcpspec::cli::main_with(servers, vec![codegen::live::dev_command()])`.
pub fn dev_command() -> mcpspec::cli::Extra {
    let command = clap::Command::new("dev")
        .about("Serve a spec straight from its YAML over stdio, reloading it on every save")
        .arg(
            clap::Arg::new("spec")
                .required(true)
                .value_name("SPEC")
                .value_parser(clap::value_parser!(std::path::PathBuf))
                .help("The spec file, e.g. spec/notes.yaml"),
        )
        .arg(
            clap::Arg::new("db")
                .long("db")
                .value_name("PATH|URL")
                .value_parser(clap::value_parser!(std::path::PathBuf))
                .help("A database file or postgres:// URL to serve instead of a scratch database with the sample rows"),
        )
        .arg(
            clap::Arg::new("toolset")
                .long("toolset")
                .value_name("NAME")
                .action(clap::ArgAction::Append)
                .help("Offer only the tools of this toolset of the spec's (repeatable), in every version served"),
        )
        .arg(
            clap::Arg::new("ui")
                .long("ui")
                .value_name("ADDR")
                .value_parser(clap::value_parser!(std::net::SocketAddr))
                .help("Serve the workbench at http://ADDR/ (a loopback address): a page that shows, live, every call the server handles"),
        )
        .arg(
            clap::Arg::new("ui-history")
                .long("ui-history")
                .requires("ui")
                .action(clap::ArgAction::SetTrue)
                .help("Keep the last 1,000 calls while no workbench page is open too, for a page opened later (about 3 % more CPU a call at worst); without it a page shows the calls made while a page was open"),
        )
        .arg(
            clap::Arg::new("derive-in-place")
                .long("derive-in-place")
                .action(clap::ArgAction::SetTrue)
                .help("Build the spec's derived structures in a --db database mcpspec did not create, instead of in a mirror under the cache directory"),
        );
    mcpspec::cli::Extra {
        command,
        run: run_dev,
        serves: true,
    }
}

fn run_dev(
    m: &clap::ArgMatches,
    servers: Vec<mcpspec::Server>,
) -> anyhow::Result<std::process::ExitCode> {
    let spec = m
        .get_one::<std::path::PathBuf>("spec")
        .expect("clap requires the spec");
    let db = m.get_one::<std::path::PathBuf>("db");
    let toolsets: Vec<String> = m
        .get_many::<String>("toolset")
        .map(|v| v.cloned().collect())
        .unwrap_or_default();
    mcpspec::cli::dev::run(
        spec,
        db.map(std::path::PathBuf::as_path),
        m.get_flag("derive-in-place"),
        &toolsets,
        m.get_one::<std::net::SocketAddr>("ui")
            .map(|&addr| mcpspec::cli::dev::Ui {
                addr,
                history: m.get_flag("ui-history"),
            }),
        servers,
        COMPILE,
    )
}

/// The spec compiler as the runtime's command line takes it, for `serve --spec`, `dev` and
/// the other commands on a spec file.
pub const COMPILE: mcpspec::cli::dev::Compile = mcpspec::cli::dev::Compile {
    read: crate::read_spec,
    compile: compile_text,
};

/// Compiles the text of one spec file into the runtime's tables; its problems rendered as
/// `codegen check` shows them.
pub fn compile_text(
    path: &std::path::Path,
    text: &str,
) -> Result<&'static mcpspec::def::ServerDef, String> {
    crate::compile(path, text)
        .map(|spec| crate::defs::server_def(&spec))
        .map_err(|d| d.render_with(&|_| text.to_string()))
}
