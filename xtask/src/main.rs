//! `cargo xtask codegen` writes the spec-language reference, the editor schema and the
//! runtime's public API listing; `cargo xtask check` fails when one is stale, showing the
//! difference; `cargo xtask api` prints a crate's public API; `cargo xtask test`
//! installs what the full test tier needs and runs both tiers; `cargo xtask dist npm` makes
//! the npm packages.

mod provision;
mod tiers;

use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};

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
            dist(&root, &args)?;
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

/// `dist npm [--binary FILE] [--target TRIPLE]`.
fn dist(root: &std::path::Path, args: &[String]) -> Result<()> {
    let (mut binary, mut target) = (None, None);
    let mut it = args.iter();
    match it.next().map(String::as_str) {
        Some("npm") => {}
        other => bail!("`dist` makes `npm` packages, not {other:?}\n\n{USAGE}"),
    }
    while let Some(a) = it.next() {
        let value = it.next();
        match (a.as_str(), value) {
            ("--binary", Some(v)) => binary = Some(std::path::PathBuf::from(v)),
            ("--target", Some(v)) => target = Some(v.clone()),
            _ => bail!("`dist npm` takes --binary FILE and --target TRIPLE, not `{a}`"),
        }
    }
    let platform = match &target {
        Some(t) => xtask::dist::Platform::of(t).with_context(|| {
            format!(
                "no npm platform for the target {t}; the release builds these: {}",
                {
                    let all: Vec<&str> = xtask::dist::PLATFORMS.iter().map(|p| p.target).collect();
                    all.join(", ")
                }
            )
        })?,
        None => xtask::dist::Platform::host()
            .context("this machine is no platform the release builds")?,
    };
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), std::path::PathBuf::from);
    let binary = match binary {
        Some(b) => b,
        None => {
            let mut c = std::process::Command::new(
                std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()),
            );
            c.args([
                "build",
                "--locked",
                "--profile",
                "dist",
                "-p",
                "mcpspec-cli",
            ])
            .current_dir(root);
            let mut dir = target_dir.clone();
            if let Some(t) = &target {
                c.args(["--target", t]);
                dir.push(t);
            }
            if !c.status().context("running cargo build")?.success() {
                bail!("cargo build --profile dist -p mcpspec-cli failed");
            }
            dir.join("dist").join(platform.exe())
        }
    };
    let out = target_dir.join("dist");
    for tarball in xtask::dist::npm(platform, env!("CARGO_PKG_VERSION"), &binary, &out)? {
        println!("{}", tarball.display());
    }
    Ok(())
}
