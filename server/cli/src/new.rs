//! `mcpspec new <dir> [--name NAME] [--path CHECKOUT]`: scaffolds a crate of one's own, a server
//! written as YAML and served by the mcpspec runtime. The files come from `templates/new/`,
//! rendered with minijinja. The crate depends on the published `mcpspec` and `mcpspec-codegen`
//! of this release (or on a checkout's sources with `--path`), holds a small `codegen` package
//! so that `cargo run -p codegen -- check` works in it as in mcpspec's own repository, and
//! starts from the dependency versions this release was tested with.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Arg, ArgMatches, Command};

/// The files of a new crate: (path in the crate, template).
const FILES: &[(&str, &str)] = &[
    ("Cargo.toml", include_str!("../templates/new/Cargo.toml.j2")),
    ("build.rs", include_str!("../templates/new/build.rs.j2")),
    (
        "spec/{name}.yaml",
        include_str!("../templates/new/spec.yaml.j2"),
    ),
    (
        "spec/migrations/{name}/0001_init.sql",
        include_str!("../templates/new/migration.sql.j2"),
    ),
    ("src/main.rs", include_str!("../templates/new/main.rs.j2")),
    (
        "tests/stdio.rs",
        include_str!("../templates/new/stdio.rs.j2"),
    ),
    (".mcp.json", include_str!("../templates/new/mcp.json.j2")),
    ("README.md", include_str!("../templates/new/README.md.j2")),
    (".gitignore", include_str!("../templates/new/gitignore.j2")),
    (
        "codegen/Cargo.toml",
        include_str!("../templates/new/codegen.Cargo.toml.j2"),
    ),
    (
        "codegen/src/main.rs",
        include_str!("../templates/new/codegen.main.rs.j2"),
    ),
    (
        ".github/workflows/ci.yml",
        include_str!("../templates/new/ci.yml.j2"),
    ),
];

/// The dependency versions this release was built and tested with, so a new crate resolves the
/// same ones (Cargo drops the entries it does not need). A link to the workspace's lock file.
const LOCK: &str = include_str!("../templates/new/lock.txt");

/// The `new` subcommand, for the `mcpspec` binary's command line.
pub fn command() -> Command {
    Command::new("new")
        .about("Create a crate of your own with a server spec, a handler, a test and a CI workflow")
        .arg(
            Arg::new("dir")
                .required(true)
                .value_name("DIR")
                .help("The directory to create (must not exist, or be empty)"),
        )
        .arg(
            Arg::new("name")
                .long("name")
                .value_name("NAME")
                .help("The server's and the crate's name (default: the directory's name)"),
        )
        .arg(
            Arg::new("path")
                .long("path")
                .value_name("CHECKOUT")
                .value_parser(clap::value_parser!(PathBuf))
                .help("Depend on the crates of this mcpspec checkout instead of crates.io"),
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
    let source = match m.get_one::<PathBuf>("path") {
        Some(checkout) => Source::checkout(checkout)?,
        None => Source::Release,
    };
    for (path, text) in render(&name, &dir, &source)? {
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
    println!(
        "  cargo run -p codegen -- check   # the spec's SQL, contract and docs, as its CI runs it"
    );
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

/// Where the new crate's mcpspec crates come from.
pub enum Source {
    /// crates.io, at this release's minor version.
    Release,
    /// A checkout of mcpspec's repository (its runtime and codegen by path).
    Checkout(PathBuf),
}

impl Source {
    /// A checkout, refused unless it holds mcpspec's crates.
    fn checkout(dir: &Path) -> Result<Source> {
        let dir = std::path::absolute(dir)?;
        let dir = dir.canonicalize().unwrap_or(dir);
        for member in ["server/runtime/Cargo.toml", "codegen/Cargo.toml"] {
            if !dir.join(member).is_file() {
                bail!(
                    "--path {}: not a checkout of mcpspec (no {member})",
                    dir.display()
                );
            }
        }
        Ok(Source::Checkout(dir))
    }

    /// The TOML keys that locate `crate_dir` of the checkout, or this release's version.
    fn locate(&self, crate_dir: &str) -> String {
        match self {
            Source::Release => {
                let mut v = env!("CARGO_PKG_VERSION").split('.');
                let (major, minor) = (v.next().unwrap_or("0"), v.next().unwrap_or("1"));
                format!("version = \"{major}.{minor}\"")
            }
            Source::Checkout(dir) => {
                let path = dir.join(crate_dir).display().to_string();
                format!("path = {}", toml_string(&path))
            }
        }
    }
}

/// `text` as a TOML basic string.
fn toml_string(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// The new crate's files by path; pure, so a test can look at them without writing.
pub fn render(name: &str, dir: &Path, source: &Source) -> Result<Vec<(PathBuf, String)>> {
    let shown = |p: PathBuf| p.display().to_string();
    let env = minijinja::Environment::new();
    let vars = minijinja::context! {
        name,
        module => name.replace('-', "_"),
        title => title(name),
        env => format!("{}_DB_PATH", name.to_uppercase().replace('-', "_")),
        runtime => source.locate("server/runtime"),
        codegen => source.locate("codegen"),
        version => env!("CARGO_PKG_VERSION"),
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
    out.push((
        PathBuf::from("spec/spec.schema.json"),
        codegen::editor_schema("mcpspec new"),
    ));
    out.extend(contract_and_docs(name, &out)?);
    Ok(out)
}

/// The spec's tool contract and reference page, so that `cargo run -p codegen -- check`
/// passes in a new crate before anything is changed.
fn contract_and_docs(name: &str, files: &[(PathBuf, String)]) -> Result<Vec<(PathBuf, String)>> {
    let path = PathBuf::from(format!("spec/{name}.yaml"));
    let (_, text) = files
        .iter()
        .find(|(p, _)| *p == path)
        .context("the template set has a spec")?;
    // The spec reads its migrations beside it: compiled from a copy of the spec directory.
    let scratch = tempfile::tempdir().context("a scratch directory")?;
    for (p, body) in files.iter().filter(|(p, _)| p.starts_with("spec")) {
        let target = scratch.path().join(p);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&target, body)?;
    }
    let spec = codegen::compile_in(&scratch.path().join("spec"), &path, text).map_err(|d| {
        anyhow::anyhow!(
            "the new spec does not compile:\n{}",
            d.render_with(&|_| text.clone())
        )
    })?;
    let mut out = vec![(spec.lock_path(), spec.snapshot())];
    out.extend(codegen::render_docs(std::slice::from_ref(&spec))?);
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
