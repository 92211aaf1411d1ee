//! `cargo xtask codegen` writes the spec-language reference and the editor schema;
//! `cargo xtask check` fails when either is stale, showing the difference.

use std::process::ExitCode;

use anyhow::{Result, bail};

const USAGE: &str = "usage: cargo xtask <codegen|check>

  codegen   write docs/spec-reference.md and codegen/spec.schema.json
  check     fail when either differs from what the compiler and the specs render";

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<ExitCode> {
    let root = xtask::root();
    match std::env::args().nth(1).as_deref() {
        Some("codegen") => {
            for path in xtask::write(&root)? {
                println!("wrote {}", path.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Some("check") => {
            let report = xtask::check(&root);
            let read =
                |p: &std::path::Path| std::fs::read_to_string(root.join(p)).unwrap_or_default();
            if report.is_ok() {
                println!(
                    "ok: {} and {} are fresh",
                    xtask::REFERENCE,
                    xtask::EDITOR_SCHEMA
                );
                Ok(ExitCode::SUCCESS)
            } else {
                eprint!("{}", report.render_with(&read));
                Ok(ExitCode::FAILURE)
            }
        }
        Some("-h" | "--help") | None => {
            println!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        Some(other) => bail!("unknown command `{other}`\n\n{USAGE}"),
    }
}
