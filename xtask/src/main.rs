//! `cargo xtask codegen` writes the spec-language reference and the editor schema;
//! `cargo xtask check` fails when either is stale, showing the difference; `cargo xtask test`
//! installs what the full test tier needs and runs both tiers.

mod provision;
mod tiers;

use std::process::ExitCode;

use anyhow::{Result, bail};

const USAGE: &str = "usage: cargo xtask <codegen|check|test [CARGO_ARGS...]>

  codegen   write docs/spec-reference.md and codegen/spec.schema.json
  check     fail when either differs from what the compiler and the specs render
  test      install what the full test tier needs (apt-get or brew), then run the quick tier
            (`cargo test --workspace`) and the tests only the full tier has; CARGO_ARGS (say
            --locked) go to every cargo command";

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
        Some("test") => {
            let cargo_args: Vec<String> = std::env::args().skip(2).collect();
            tiers::test(&root, &cargo_args)?;
            Ok(ExitCode::SUCCESS)
        }
        Some("-h" | "--help") | None => {
            println!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        Some(other) => bail!("unknown command `{other}`\n\n{USAGE}"),
    }
}
