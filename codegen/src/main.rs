//! The `codegen` command line: `generate` writes the generated code for reading, `check`
//! validates every spec and prepares every statement, failing with readable findings.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};

const USAGE: &str = "usage: codegen <command> [options]

commands:
  generate --out DIR   write the Rust generated from spec/*.yaml into DIR
  check [--db PATH]    validate every spec, prepare every SQL statement against the declared
                       schema (and against the live database at PATH, if given)

options:
  --spec-dir DIR       where the specs are (default: spec/ at the workspace root)";

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn run() -> Result<ExitCode> {
    let mut args = std::env::args().skip(1);
    let Some(command) = args.next() else {
        eprintln!("{USAGE}");
        return Ok(ExitCode::from(2));
    };
    let root = workspace_root();
    let mut spec_dir = root.join("spec");
    let mut out: Option<PathBuf> = None;
    let mut db: Option<PathBuf> = None;
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().with_context(|| format!("{name} needs a value"));
        match a.as_str() {
            "--spec-dir" => spec_dir = PathBuf::from(value("--spec-dir")?),
            "--out" => out = Some(PathBuf::from(value("--out")?)),
            "--db" => db = Some(PathBuf::from(value("--db")?)),
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(ExitCode::SUCCESS);
            }
            other => anyhow::bail!("unknown argument `{other}`\n\n{USAGE}"),
        }
    }
    let display = spec_dir
        .strip_prefix(&root)
        .map_or_else(|_| spec_dir.clone(), Path::to_path_buf);
    let specs = match codegen::load_dir(&spec_dir, &display) {
        Ok(s) => s,
        Err(d) => {
            // Diagnostics name files relative to the workspace root; render from there.
            let _ = std::env::set_current_dir(&root);
            eprint!("{}", d.render());
            return Ok(ExitCode::FAILURE);
        }
    };
    match command.as_str() {
        "generate" => {
            let out = out.context("generate needs --out DIR")?;
            std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
            for (path, text) in codegen::render_all(&specs) {
                let target = out.join(&path);
                std::fs::write(&target, text)
                    .with_context(|| format!("writing {}", target.display()))?;
                println!("wrote {}", target.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        "check" => {
            let live = match &db {
                Some(p) => Some(
                    rusqlite::Connection::open_with_flags(
                        p,
                        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
                    )
                    .with_context(|| format!("opening {}", p.display()))?,
                ),
                None => None,
            };
            let mut problems = codegen::Diagnostics::default();
            for spec in &specs {
                problems
                    .items
                    .extend(codegen::check::check_schemas(spec).items);
                problems
                    .items
                    .extend(codegen::check::check_sql(spec, live.as_ref()).items);
            }
            if problems.is_empty() {
                let tools: usize = specs.iter().map(|s| s.tool_names().len()).sum();
                println!(
                    "ok: {} specs, {tools} tools, every statement prepared",
                    specs.len()
                );
                Ok(ExitCode::SUCCESS)
            } else {
                let _ = std::env::set_current_dir(&root);
                eprint!("{}", problems.render());
                Ok(ExitCode::FAILURE)
            }
        }
        other => anyhow::bail!("unknown command `{other}`\n\n{USAGE}"),
    }
}
