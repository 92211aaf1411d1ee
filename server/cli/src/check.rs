//! `mcpspec check --spec FILE [--db PATH|URL]`: the spec compiler's checks on one spec file,
//! outside any project: every problem of the spec at its file:line:column, every statement
//! prepared against the declared schema (and against a live database, read-only), and the
//! examples run on the sample rows. In a project, `cargo run -p codegen -- check` adds the
//! contract snapshot and the docs.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Arg, ArgAction, ArgMatches, Command};

/// The `check` subcommand.
pub fn command() -> mcpspec::cli::Extra {
    let command = Command::new("check")
        .about("Check a spec file: its problems, its SQL against its schema (and a live database), its examples")
        .arg(
            Arg::new("spec")
                .long("spec")
                .required(true)
                .value_name("FILE")
                .value_parser(clap::value_parser!(PathBuf))
                .help("The spec file, e.g. spec/notes.yaml"),
        )
        .arg(
            Arg::new("db")
                .long("db")
                .value_name("PATH|URL")
                .value_parser(clap::value_parser!(PathBuf))
                .help("A live database to prepare every statement against, opened read-only"),
        )
        .arg(
            Arg::new("json")
                .long("json")
                .action(ArgAction::SetTrue)
                .help("Print the findings as JSON"),
        );
    mcpspec::cli::Extra {
        command,
        run,
        serves: false,
    }
}

fn run(m: &ArgMatches, _servers: Vec<mcpspec::Server>) -> Result<ExitCode> {
    // Checking a spec writes nothing outside its scratch databases, whoever wrote it.
    mcpspec::__internal::backend::confine_spec_sql();
    let spec = m.get_one::<PathBuf>("spec").expect("clap requires --spec");
    let live = m
        .get_one::<PathBuf>("db")
        .map(|db| codegen::cli::live_location(db))
        .transpose()?;
    let report = codegen::check::check_file(spec, live.as_ref());
    codegen::cli::finish(&report, m.get_flag("json"))
}
