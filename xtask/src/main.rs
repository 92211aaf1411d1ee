//! `cargo xtask codegen` writes the spec-language reference, the editor schema and the
//! runtime's public API listing; `cargo xtask check` fails when one is stale, showing the
//! difference; `cargo xtask api` prints a crate's public API; `cargo xtask test`
//! installs what the full test tier needs and runs both tiers; `cargo xtask dist npm` makes
//! the npm packages.

mod provision;
mod tiers;

use std::process::ExitCode;

use anyhow::{Result, bail};

const USAGE: &str =
    "usage: cargo xtask <codegen|check|api [LIB_RS]|modules [SRC...]|test [CARGO_ARGS...]>

  codegen   write docs/spec-reference.md, codegen/spec.schema.json and the runtime's public
            API listing (server/runtime/public-api.txt)
  check     fail when any of them differs from what the compiler, the specs and the runtime's
            sources render
  api       print the public API of the crate whose root is LIB_RS (default: the runtime's)
  modules   print the module graph's cycles of each crate source directory given (default:
            server/runtime/src and codegen/src), between files and between top-level modules
  dist npm [--binary FILE] [--target TRIPLE]
            the npm packages (a launcher, and the binary's package for the platform) under
            target/dist/npm/, packed into target/dist/; the binary is FILE, or the `dist`
            profile's build of mcpspec-cli (for TRIPLE, else this machine)
  dist pypi [--profile PROFILE] [--target TRIPLE] [--manifest CARGO_TOML]
            the PyPI wheel carrying the binary, built by maturin (installed from PyPI under
            target/dist/maturin/) in PROFILE (default: dist) from server/cli (or the cli crate
            at CARGO_TOML, e.g. unpacked from its tarball), into target/dist/
  dist server-json
            the MCP registry's server.json listing the npm, PyPI and OCI packages
            (target/dist/server.json)
  dist oci --binary FILE
            the OCI image of FILE (umoci: a layout in target/dist/oci/ and an archive of it,
            target/dist/mcpspec-oci.tar)
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
                    "ok: {}, {} and {} are fresh",
                    xtask::REFERENCE,
                    xtask::EDITOR_SCHEMA,
                    xtask::PUBLIC_API
                );
                Ok(ExitCode::SUCCESS)
            } else {
                eprint!("{}", report.render_with(&read));
                Ok(ExitCode::FAILURE)
            }
        }
        Some("api") => {
            let lib = std::env::args()
                .nth(2)
                .map_or_else(|| root.join("server/runtime/src/lib.rs"), Into::into);
            print!(
                "{}",
                xtask::api::list(&lib, "mcpspec")?.render("mcpspec", "cargo xtask api")
            );
            Ok(ExitCode::SUCCESS)
        }
        Some("modules") => {
            let mut dirs: Vec<std::path::PathBuf> =
                std::env::args().skip(2).map(Into::into).collect();
            if dirs.is_empty() {
                dirs = ["server/runtime/src", "codegen/src"]
                    .map(|d| root.join(d))
                    .to_vec();
            }
            let mut clean = true;
            for dir in &dirs {
                for top in [false, true] {
                    let graph = xtask::modules::graph(dir, top)?;
                    let cycles = xtask::modules::cycles(&graph);
                    let edges: usize = graph.values().map(|e| e.len()).sum();
                    println!(
                        "{}{}: {} modules, {edges} edges, {} cycles",
                        dir.display(),
                        if top { " (top-level)" } else { "" },
                        graph.len(),
                        cycles.len()
                    );
                    for c in &cycles {
                        println!("  {}", c.join(" <-> "));
                    }
                    clean &= cycles.is_empty();
                }
            }
            Ok(if clean {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Some("dist") => {
            let args: Vec<String> = std::env::args().skip(2).collect();
            xtask::dist::run(&root, &args)?;
            Ok(ExitCode::SUCCESS)
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
