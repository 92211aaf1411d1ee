//! `mcpspec new <dir> [--name NAME]`: scaffolds a crate of one's own outside this repository, a
//! server written as YAML and served by the mcpspec runtime. The files come from
//! `templates/new/`, rendered with minijinja; the crate depends on this checkout's runtime and
//! codegen by path and starts from the dependency versions this checkout was tested with.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Arg, ArgMatches, Command};

/// This checkout, where the scaffold's path dependencies point.
const CHECKOUT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// The files of a new crate: (path in the crate, template).
const FILES: &[(&str, &str)] = &[
    (
        "Cargo.toml",
        include_str!("../../templates/new/Cargo.toml.j2"),
    ),
    ("build.rs", include_str!("../../templates/new/build.rs.j2")),
    (
        "spec/{name}.yaml",
        include_str!("../../templates/new/spec.yaml.j2"),
    ),
    (
        "src/main.rs",
        include_str!("../../templates/new/main.rs.j2"),
    ),
    (
        "tests/stdio.rs",
        include_str!("../../templates/new/stdio.rs.j2"),
    ),
    (".mcp.json", include_str!("../../templates/new/mcp.json.j2")),
    (
        "README.md",
        include_str!("../../templates/new/README.md.j2"),
    ),
    (
        ".gitignore",
        include_str!("../../templates/new/gitignore.j2"),
    ),
];

/// The dependency versions this checkout builds and tests with, so a new crate resolves the
/// same ones (Cargo drops the entries it does not need).
const LOCK: &str = include_str!("../../Cargo.lock");

/// The `new` subcommand, for the `mcpspec` binary's command line.
pub fn command() -> Command {
    Command::new("new")
        .about("Create a crate of your own with a server spec, a handler and a test, outside this repository")
        .arg(Arg::new("dir").required(true).value_name("DIR").help("The directory to create (must not exist, or be empty)"))
        .arg(
            Arg::new("name")
                .long("name")
                .value_name("NAME")
                .help("The server's and the crate's name (default: the directory's name)"),
        )
}

/// Runs `mcpspec new`.
pub fn run(m: &ArgMatches, _servers: Vec<mcpspec::Server>) -> Result<ExitCode> {
    let dir = PathBuf::from(m.get_one::<String>("dir").expect("dir is required"));
    let name = match m.get_one::<String>("name") {
        Some(n) => n.clone(),
        None => dir
            .file_name()
            .map(|f| f.to_string_lossy().to_lowercase().replace(' ', "-"))
            .unwrap_or_default(),
    };
    check_name(&name)?;
    if dir.exists()
        && std::fs::read_dir(&dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        bail!(
            "{} already exists and is not empty; choose a new directory",
            dir.display()
        );
    }
    let dir = std::path::absolute(&dir)?;
    for (path, text) in render(&name, &dir)? {
        let target = dir.join(&path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&target, text).with_context(|| format!("writing {}", target.display()))?;
    }
    println!("created {} (server `{name}`)\n", dir.display());
    println!("  cd {}", dir.display());
    println!("  cargo test                      # builds it and calls both tools over stdio");
    println!("  cargo run -- init {name} --db {name}.db --sample");
    println!("  cargo run -- serve {name} --db {name}.db");
    println!("\nREADME.md says how to register it in Claude Code and check its spec.");
    Ok(ExitCode::SUCCESS)
}

/// A name usable as the server's, the crate's and the binary's.
fn check_name(name: &str) -> Result<()> {
    let ok = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        && !matches!(
            name,
            "test" | "build" | "deps" | "examples" | "incremental" | "mcpspec" | "codegen"
        );
    if ok {
        Ok(())
    } else {
        bail!(
            "`{name}` cannot name a server and its crate; pass --name with lowercase letters, digits, `_` and `-`, starting with a letter"
        )
    }
}

/// The new crate's files by path; pure, so a test can look at them without writing.
pub fn render(name: &str, dir: &Path) -> Result<Vec<(PathBuf, String)>> {
    let checkout = std::path::absolute(CHECKOUT)?;
    let checkout = checkout.canonicalize().unwrap_or(checkout);
    let shown = |p: PathBuf| p.display().to_string();
    let env = minijinja::Environment::new();
    let vars = minijinja::context! {
        name,
        module => name.replace('-', "_"),
        title => title(name),
        env => format!("{}_DB_PATH", name.to_uppercase().replace('-', "_")),
        runtime => shown(checkout.join("server/runtime")),
        codegen => shown(checkout.join("codegen")),
        editor_schema => shown(checkout.join("codegen/spec.schema.json")),
        binary => shown(dir.join("target/release").join(name)),
        db => shown(dir.join(format!("{name}.db"))),
    };
    let mut out = Vec::new();
    for (path, template) in FILES {
        // The template engine drops a file's last newline; every file here ends with one.
        let text = env
            .render_str(template, &vars)
            .with_context(|| format!("rendering {path}"))?
            + "\n";
        out.push((PathBuf::from(path.replace("{name}", name)), text));
    }
    out.push((PathBuf::from("Cargo.lock"), LOCK.to_string()));
    Ok(out)
}

/// `my-notes` -> `My notes`.
fn title(name: &str) -> String {
    let words = name.replace(['-', '_'], " ");
    let mut chars = words.chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}
