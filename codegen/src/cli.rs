//! The `codegen` command line: `generate` writes the generated code for reading, `snapshot`
//! records each server's tool contract, `docs` writes the reference docs and the editor schema,
//! and `check` reports every spec, SQL, contract and staleness problem, failing when there is one.
//! A project's small `codegen` package calls [`main`] with its own root, so that
//! `cargo run -p codegen -- check` runs there as it does in this repository.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::drift::Contract;
use anyhow::{Context, Result};

const USAGE: &str = "usage: codegen <command> [options]

commands:
  check [--db [SERVER=]PATH|URL] [--format human|json]
                       validate every spec, prepare every SQL statement against the declared
                       schema (and against SERVER's live database, read-only: a SQLite file at
                       PATH, whose tables and columns must match, or a database server at a
                       URL such as postgres://, whose parameter and column types must fit the
                       spec; SERVER= may be left out when there is one spec), compare each tool contract with
                       spec/<server>.lock.json and the committed docs and editor schema with a
                       fresh render
  snapshot             record each server's tool contract in spec/<server>.lock.json; refused
                       when the changes need a larger version step (see docs/guide.md)
  migrate --plan SERVER [--name NAME]
                       write SERVER's next migration from the difference between the schema
                       its migrations give and the declared `database.schema`; steps that may
                       lose data are marked and need acknowledging in the file
  docs                 write docs/<server>.md
  generate --out DIR   write the Rust generated from spec/*.yaml into DIR

options:
  --root DIR           the project to work on: its spec/, docs/ and lock files (default: this
                       project); paths in reports are relative to it
  --spec-dir DIR       where the specs are, relative to the root (default: spec)";

/// [`main`] over the project whose `codegen` package is `up` directories below its root,
/// found when the command runs ([`root`]).
pub fn main_in_project(up: usize) -> ExitCode {
    match root(up) {
        Ok(root) => main(&root),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The root of the project the command runs in, found at run time, never where the binary was
/// built (a checkout moved or copied with its `target/` reuses the binary): the package
/// directory in `CARGO_MANIFEST_DIR`, which `cargo run` sets, `up` levels up; without it, the
/// nearest directory from the current one up that holds `spec/` and a `Cargo.toml`.
pub fn root(up: usize) -> Result<PathBuf> {
    if let Some(package) = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from)
        && package.join("Cargo.toml").is_file()
    {
        let root = (0..up).fold(package, |p, _| p.join(".."));
        return Ok(root.canonicalize().unwrap_or(root));
    }
    let here = std::env::current_dir().context("reading the current directory")?;
    here.ancestors()
        .find(|d| d.join("spec").is_dir() && d.join("Cargo.toml").is_file())
        .map(Path::to_path_buf)
        .with_context(|| {
            format!(
                "no project found from {}: run it with `cargo run -p codegen -- ...` in the project, or pass --root DIR",
                here.display()
            )
        })
}

/// Runs the command line on `std::env::args()`; `root` is the project worked on unless
/// `--root` says otherwise (the directory holding its `spec/`).
pub fn main(root: &Path) -> ExitCode {
    match run(root.to_path_buf()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Writes `text` to `root/rel` unless it is already there, creating directories as needed.
fn write_if_changed(root: &Path, rel: &Path, text: &str) -> Result<()> {
    let target = root.join(rel);
    let wrote = crate::build::write_if_changed(&target, text)
        .with_context(|| format!("writing {}", target.display()))?;
    println!(
        "{} {}",
        if wrote { "wrote" } else { "unchanged" },
        rel.display()
    );
    Ok(())
}

/// The options after the command, as given.
struct Options {
    spec_dir: PathBuf,
    out: Option<PathBuf>,
    /// `--db [SERVER=]PATH`: the live database, and the server it belongs to when named.
    db: Option<(Option<String>, PathBuf)>,
    json: bool,
    plan: Option<String>,
    name: Option<String>,
}

impl Options {
    /// Reads `args`, `--root` changing `root`; `None` when help was asked for (and printed).
    fn parse(mut args: impl Iterator<Item = String>, root: &mut PathBuf) -> Result<Option<Self>> {
        let mut o = Options {
            spec_dir: PathBuf::from("spec"),
            out: None,
            db: None,
            json: false,
            plan: None,
            name: None,
        };
        while let Some(a) = args.next() {
            let mut value =
                |name: &str| args.next().with_context(|| format!("{name} needs a value"));
            match a.as_str() {
                "--spec-dir" => o.spec_dir = PathBuf::from(value("--spec-dir")?),
                "--root" => {
                    let dir = PathBuf::from(value("--root")?);
                    *root = std::path::absolute(&dir)
                        .with_context(|| format!("--root {}", dir.display()))?;
                    anyhow::ensure!(root.is_dir(), "--root {}: no such directory", dir.display());
                }
                "--out" => o.out = Some(PathBuf::from(value("--out")?)),
                "--plan" => o.plan = Some(value("--plan")?),
                "--name" => o.name = Some(value("--name")?),
                "--db" => o.db = Some(live_db(value("--db")?)),
                "--format" => match value("--format")?.as_str() {
                    "human" => o.json = false,
                    "json" => o.json = true,
                    other => anyhow::bail!("unknown format `{other}`; use `human` or `json`"),
                },
                "-h" | "--help" => {
                    println!("{USAGE}");
                    return Ok(None);
                }
                other => anyhow::bail!("unknown argument `{other}`\n\n{USAGE}"),
            }
        }
        Ok(Some(o))
    }
}

/// `--db`'s value: `SERVER=PATH` names the server the live file belongs to, split off before
/// the path is made absolute.
fn live_db(v: String) -> (Option<String>, PathBuf) {
    match v.split_once('=') {
        Some((server, path)) if !server.is_empty() && !server.contains(['/', '\\']) => {
            (Some(server.to_string()), PathBuf::from(path))
        }
        _ => (None, PathBuf::from(v)),
    }
}

fn run(mut root: PathBuf) -> Result<ExitCode> {
    let mut args = std::env::args().skip(1);
    let Some(command) = args.next() else {
        eprintln!("{USAGE}");
        return Ok(ExitCode::from(2));
    };
    let Some(o) = Options::parse(args, &mut root)? else {
        return Ok(ExitCode::SUCCESS);
    };
    // Paths given on the command line are relative to where the command was run.
    let out = o.out.map(std::path::absolute).transpose()?;
    let db = match o.db {
        Some((server, url)) if sqlscan::Dialect::of_url(&url.to_string_lossy()).is_some() => {
            Some((server, url))
        }
        Some((server, path)) => Some((server, std::path::absolute(path)?)),
        None => None,
    };
    // Diagnostics and findings name files relative to the workspace root.
    std::env::set_current_dir(&root).with_context(|| format!("entering {}", root.display()))?;
    if command == "check" {
        // Checking specs writes nothing outside their scratch databases, whoever wrote them.
        #[cfg(feature = "live")]
        mcpspec::__internal::backend::confine_spec_sql();
        return check(&root, &o.spec_dir, db, o.json);
    }
    let specs = match crate::load_dir(&root.join(&o.spec_dir), &o.spec_dir) {
        Ok(s) => s,
        Err(d) => {
            eprint!("{}", d.render());
            return Ok(ExitCode::FAILURE);
        }
    };
    match command.as_str() {
        "generate" => generate(&specs, out.context("generate needs --out DIR")?),
        "migrate" => {
            let server = o.plan.context("migrate needs --plan SERVER")?;
            plan_migration(&root, &specs, &server, o.name.as_deref())
        }
        "docs" => {
            for (path, text) in crate::render_docs(&specs)? {
                write_if_changed(&root, &path, &text)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        "snapshot" => snapshot(&root, &specs),
        other => anyhow::bail!("unknown command `{other}`\n\n{USAGE}"),
    }
}

/// `generate --out DIR`: every generated file written under `out`.
fn generate(specs: &[crate::Spec], out: PathBuf) -> Result<ExitCode> {
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    for (path, text) in crate::render_all(specs) {
        let target = out.join(&path);
        std::fs::write(&target, text).with_context(|| format!("writing {}", target.display()))?;
        println!("wrote {}", target.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `snapshot`: each spec's contract lock written anew where its changes are allowed; the
/// refused changes reported, and nothing of theirs written.
fn snapshot(root: &Path, specs: &[crate::Spec]) -> Result<ExitCode> {
    let mut refused = Vec::new();
    for spec in specs {
        let lock = spec.lock_path();
        let committed = std::fs::read_to_string(root.join(&lock)).ok();
        match crate::drift::contract_outcome(spec, committed.as_deref()) {
            Contract::Same => println!("unchanged {}", lock.display()),
            Contract::Allowed(changes) => {
                for c in &changes {
                    println!("  {c}");
                }
                write_if_changed(root, &lock, &spec.snapshot())?;
            }
            Contract::Refused(f) => refused.push(f),
        }
    }
    if refused.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    let report = crate::drift::Report {
        specs: specs.len(),
        tools: 0,
        findings: refused,
        warnings: Vec::new(),
    };
    eprint!("{}", report.render_with(&read_or_empty));
    Ok(ExitCode::FAILURE)
}

/// `migrate --plan SERVER`: writes the next migration and says what it does.
fn plan_migration(
    root: &Path,
    specs: &[crate::Spec],
    server: &str,
    name: Option<&str>,
) -> Result<ExitCode> {
    if let Some(n) = name {
        anyhow::ensure!(
            !n.is_empty()
                && n.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
            "--name {n:?}: a migration's name is lowercase letters, digits and `_`"
        );
    }
    let spec = specs
        .iter()
        .find(|s| s.name() == server)
        .with_context(|| format!("no spec declares server `{server}`"))?;
    let planned = crate::plan::plan(spec, name).map_err(|e| anyhow::anyhow!(e))?;
    let target = root.join(&planned.file);
    anyhow::ensure!(!target.exists(), "{} already exists", planned.file);
    std::fs::write(&target, &planned.text)
        .with_context(|| format!("writing {}", target.display()))?;
    println!("wrote {}", planned.file);
    for step in &planned.steps {
        println!("  {step}");
    }
    if planned.destructive {
        println!(
            "it has destructive steps: read them, then add the line `-- mcpspec: destructive` to the file"
        );
    }
    println!(
        "next: `cargo run -p codegen -- check`, which asks for the version step the migration needs, then `cargo run -p codegen -- snapshot`"
    );
    Ok(ExitCode::SUCCESS)
}

fn read_or_empty(p: &Path) -> String {
    crate::read_spec(p).unwrap_or_default()
}

fn check(
    root: &Path,
    spec_dir: &Path,
    db: Option<(Option<String>, PathBuf)>,
    json: bool,
) -> Result<ExitCode> {
    let (server, db) = match db {
        None => (None, None),
        Some((Some(server), path)) => (Some(server), Some(path)),
        // Without `SERVER=` the file must belong to the only spec.
        Some((None, path)) => {
            let specs = crate::load_dir(&root.join(spec_dir), spec_dir)
                .map(|s| s.iter().map(|s| s.name().to_string()).collect::<Vec<_>>())
                .unwrap_or_default();
            match specs.as_slice() {
                [one] => (Some(one.clone()), Some(path)),
                _ => anyhow::bail!(
                    "--db needs the server it belongs to: --db SERVER=PATH, with SERVER one of {}",
                    specs.join(", ")
                ),
            }
        }
    };
    let location = db.as_deref().map(live_location).transpose()?;
    let live = server.as_deref().zip(location.as_ref());
    let mut report = crate::check::check_repo(root, spec_dir, live);
    // Examples run after the statement checks, on the same database, each write rolled back.
    if let (Some(server), Some(db)) = (&server, &db) {
        report
            .findings
            .extend(crate::check::check_examples(root, spec_dir, server, db).findings);
    }
    samples(root, spec_dir, &mut report);
    finish(&report, json)
}

/// The live database a check reads: a location of another form is refused as such, never
/// taken as a file name; a file must exist (the check opens it read-only and never creates
/// it).
pub fn live_location(db: &Path) -> Result<mcpspec::backend::Location> {
    let location = mcpspec::backend::Location::parse(db.as_os_str())?;
    if let mcpspec::backend::Location::File(p) = &location
        && !mcpspec::__internal::backend::paths::file_of(p).is_file()
    {
        anyhow::bail!("opening {}: no such file", p.display());
    }
    Ok(location)
}

/// Adds the findings of every spec's examples on a scratch database with its sample rows,
/// when the specs compiled (their problems are the findings then).
fn samples(root: &Path, spec_dir: &Path, report: &mut crate::drift::Report) {
    if report
        .findings
        .iter()
        .all(|f| f.kind != crate::drift::Kind::Spec)
    {
        report
            .findings
            .extend(crate::check::check_examples_on_samples(root, spec_dir).findings);
    }
}

/// Prints the report (to stdout when it is clean, else stderr) and gives the exit code.
pub fn finish(report: &crate::drift::Report, json: bool) -> Result<ExitCode> {
    if json {
        print!("{}", report.to_json());
    } else if report.is_ok() {
        print!("{}", report.render_with(&read_or_empty));
    } else {
        eprint!("{}", report.render_with(&read_or_empty));
    }
    Ok(if report.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
