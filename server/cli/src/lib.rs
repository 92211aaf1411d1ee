//! The `mcpspec` command line: the runtime's commands (`serve`, `call`, `init`, `test`, `list`,
//! `demo`) on compiled servers or on a spec file (`--spec FILE`), plus the commands that need
//! the spec compiler: `check`, `doctor`, `dev`, `new` and `bundle`. The published binary has no compiled servers;
//! a binary that has some (this repository's seed servers) passes them to [`main`].

pub mod bundle;
pub mod check;
pub mod doctor;
pub mod new;

use std::process::ExitCode;

use mcpspec::cli::Extra;

/// Runs the command line over `servers`, with `extras` beside the commands of this crate.
pub fn main(servers: Vec<mcpspec::Server>, extras: Vec<Extra>) -> ExitCode {
    let mut commands = vec![
        bundle::command(),
        check::command(),
        doctor::command(),
        codegen::live::dev_command(),
        Extra {
            command: new::command(),
            run: new::run,
            serves: false,
        },
    ];
    commands.extend(extras);
    mcpspec::cli::main_with_specs(servers, commands, codegen::live::COMPILE)
}
