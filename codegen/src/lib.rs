//! mcpspec's spec compiler: YAML tool specs in, Rust tables and glue out.
//!
//! The pipeline runs one stage per module: `spec` parses YAML with positions,
//! `validate` collects every problem, `lower` builds the IR, and `emit` writes Rust. [`render`]
//! is pure and is what the server's build script, `codegen generate` and `codegen check` call.

mod apps;
#[cfg(feature = "emit")]
pub mod build;
#[cfg(feature = "sqlite")]
pub mod check;
#[cfg(all(
    feature = "emit",
    feature = "sqlite",
    feature = "editor-schema",
    feature = "live"
))]
pub mod cli;
pub mod contract;
pub mod defs;
mod diag;
mod docs;
pub mod drift;
#[cfg(feature = "emit")]
mod emit;
mod fields;
mod intern;
mod ir;
#[cfg(feature = "live")]
pub mod live;
#[cfg(feature = "sqlite")]
mod livecheck;
mod lower;
#[cfg(feature = "sqlite")]
mod migcheck;
mod migrations;
mod names;
#[cfg(feature = "sqlite")]
pub mod plan;
#[cfg(feature = "editor-schema")]
pub mod reference;
mod skills;
mod spec;
#[cfg(feature = "sql-check")]
mod sqlcheck;
mod sqltext;
pub mod textdiff;
mod validate;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[cfg(feature = "emit")]
pub use build::compile_specs;
pub use diag::{Diagnostic, Diagnostics, Pos};

/// A spec that parsed and validated, lowered to the IR.
#[derive(Debug, Clone)]
pub struct Spec {
    pub(crate) ir: ir::Server,
}

impl Spec {
    /// The server's name as written in the spec.
    pub fn name(&self) -> &str {
        &self.ir.name
    }

    /// The server's version as written in the spec.
    pub fn version(&self) -> &str {
        &self.ir.version
    }

    /// The spec file as named in messages, e.g. `spec/studio.yaml`.
    pub fn file(&self) -> &str {
        &self.ir.file
    }

    /// Where the server's contract snapshot lives, relative to the workspace root: beside the
    /// spec, e.g. `spec/studio.lock.json`.
    pub fn lock_path(&self) -> PathBuf {
        PathBuf::from(docs::lock_path(&self.ir))
    }

    /// The server's contract snapshot: tool names, titles, descriptions, input and output
    /// schemas and annotations, as sorted pretty JSON. Pure, like [`render`].
    pub fn snapshot(&self) -> String {
        contract::snapshot_text(&self.ir)
    }

    /// The spec's migration files, each with its path relative to the spec file's directory
    /// (under the directory `database.migrations` names) and its text: what a copy of the
    /// spec elsewhere (a bundle) must carry beside it.
    pub fn migration_files(&self) -> Vec<(PathBuf, &str)> {
        let Some(db) = &self.ir.database else {
            return Vec::new();
        };
        let Some((_, _, dir)) = &db.migrations_at else {
            return Vec::new();
        };
        let mut seen = std::collections::BTreeSet::new();
        db.migrations
            .iter()
            .flat_map(|m| &m.texts)
            .filter(|t| seen.insert(t.file.clone()))
            .filter_map(|t| {
                let name = Path::new(&t.file).file_name()?;
                Some((Path::new(dir).join(name), t.sql.as_str()))
            })
            .collect()
    }

    /// The files of the spec's skills, each with its path relative to the spec file's
    /// directory (under the directory `skills:` names) and its bytes: what a copy of the spec
    /// elsewhere (a bundle) must carry beside it.
    pub fn skill_files(&self) -> Vec<(PathBuf, Vec<u8>)> {
        use base64::Engine as _;
        let mut out = Vec::new();
        for skill in &self.ir.skills {
            for f in &skill.files {
                let bytes = if f.base64 {
                    base64::engine::general_purpose::STANDARD
                        .decode(&f.content)
                        .unwrap_or_default()
                } else {
                    f.content.clone().into_bytes()
                };
                out.push((Path::new(&skill.dir).join(&f.path), bytes));
            }
        }
        out
    }

    /// The HTML files of the tools' apps of the author's own, each with its path relative to
    /// the spec file's directory and its text: what a bundle carries beside the spec too.
    pub fn app_files(&self) -> Vec<(PathBuf, &str)> {
        self.ir
            .tools
            .iter()
            .filter_map(|t| match t.app {
                Some(mcpspec_def::AppDef::Html { file, html }) => Some((PathBuf::from(file), html)),
                _ => None,
            })
            .collect()
    }

    /// The names of the server's tools, in spec order.
    pub fn tool_names(&self) -> Vec<&str> {
        self.ir.tools.iter().map(|t| t.name).collect()
    }
}

/// Parses, validates and lowers one spec from its text. `display_path` names the file in
/// diagnostics and in generated headers, e.g. `spec/studio.yaml`, and is where the spec's
/// migrations directory is read from (see [`compile_in`]).
pub fn compile(display_path: &Path, text: &str) -> Result<Spec, Diagnostics> {
    let dir = display_path.parent().unwrap_or(Path::new(""));
    compile_in(dir, display_path, text)
}

/// Like [`compile`] for a spec file that lies in `dir` on disk while messages name it
/// `display_path`: the spec's `database.migrations` and `skills:` directories are read
/// relative to `dir`.
pub fn compile_in(dir: &Path, display_path: &Path, text: &str) -> Result<Spec, Diagnostics> {
    let raw = spec::parse(display_path, text)?;
    let mut problems = validate::validate(display_path, text, &raw);
    let mut read = None;
    if let Some(db) = &raw.database
        && let Some(key) = &db.value.migrations
    {
        let shown = display_path
            .parent()
            .unwrap_or(Path::new(""))
            .join(&key.value);
        let place = migrations::Place {
            spec_file: display_path,
            pos: spec::pos(key),
            dir: &dir.join(&key.value),
            shown: &shown,
        };
        let mut dialects = vec![&sqlscan::SQLITE];
        dialects.extend(db.value.by_dialect().map(|(d, _)| d));
        match migrations::read(&place, &dialects) {
            Ok(m) => {
                let shown = shown.to_string_lossy().replace('\\', "/");
                read = Some((m, (place.pos, shown, key.value.clone())));
            }
            Err(d) => problems.extend(d),
        }
    }
    let place = skills::Place {
        spec_file: display_path,
        dir,
    };
    let skills = skills::read(&place, &raw.skills).unwrap_or_else(|d| {
        problems.extend(d);
        Vec::new()
    });
    let mut views = apps::read(dir, display_path, &raw.tools).unwrap_or_else(|d| {
        problems.extend(d);
        BTreeMap::new()
    });
    if !problems.is_empty() {
        return Err(problems);
    }
    let shown = display_path.to_string_lossy().replace('\\', "/");
    let mut ir = lower::lower(&shown, &raw);
    ir.skills = skills;
    for tool in &mut ir.tools {
        if let Some(mcpspec_def::AppDef::Html { html, .. }) = &mut tool.def.app {
            *html = intern::text(&views.remove(tool.def.name).unwrap_or_default());
        }
    }
    if let (Some(db), Some((migrations, at))) = (&mut ir.database, read) {
        db.def.migrations = lower::migration_defs(&migrations);
        db.migrations = migrations;
        db.migrations_at = Some(at);
    }
    Ok(Spec { ir })
}

/// Reads and compiles every `*.yaml` file in `dir`, in file name order. Problems from all files
/// are returned together; a server name used by two files is a problem too.
pub fn load_dir(dir: &Path, display_dir: &Path) -> Result<Vec<Spec>, Diagnostics> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| io_problem(dir, &e))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    let mut specs = Vec::new();
    let mut problems = Diagnostics::default();
    for path in files {
        let shown = display_dir.join(path.file_name().unwrap_or_default());
        match read_spec(&path) {
            Ok(text) => match compile_in(dir, &shown, &text) {
                Ok(spec) => specs.push(spec),
                Err(d) => problems.extend(d),
            },
            Err(e) => problems.extend(io_problem(&shown, &e)),
        }
    }
    for s in &specs {
        // `mcpspec serve NAME` and the generated file names use the server's name; a spec
        // file named otherwise is hard to find from either.
        let stem = Path::new(&s.ir.file)
            .file_stem()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        if stem != s.ir.name {
            problems.items.push(Diagnostic {
                file: PathBuf::from(&s.ir.file),
                pos: s.ir.name_pos,
                message: format!(
                    "the spec file is named `{stem}` but declares server `{}`",
                    s.ir.name
                ),
                label: Some("the server's name".into()),
                help: Some(format!(
                    "rename the file to `{}.yaml`, or the server to `{stem}`",
                    s.ir.name
                )),
            });
        }
    }
    let mut seen = BTreeMap::new();
    for s in &specs {
        if let Some(first) = seen.insert(s.ir.module.clone(), s.ir.file.clone()) {
            problems.items.push(Diagnostic {
                file: PathBuf::from(&s.ir.file),
                pos: Pos { line: 1, column: 1 },
                message: format!("server `{}` is also declared in {first}", s.ir.name),
                label: None,
                help: Some("give each spec file its own server name".into()),
            });
        }
    }
    if problems.is_empty() {
        specs.sort_by(|a, b| a.ir.name.cmp(&b.ir.name));
        Ok(specs)
    } else {
        Err(problems)
    }
}

/// The largest spec file read, in bytes (the largest seed spec is about 40 KiB).
pub const MAX_SPEC_BYTES: u64 = 4 * 1024 * 1024;

/// The text of the spec file at `path`: a regular file (a link is followed and judged by
/// where it leads) of at most [`MAX_SPEC_BYTES`]. A FIFO, a device (`/dev/zero`) or a
/// directory is refused before it is opened, so that reading never blocks or runs without
/// end, and a file that grows past the limit while it is read is refused too.
pub fn read_spec(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(std::io::Error::other(
            "not a regular file (a spec must be a file, not a pipe, device or directory)",
        ));
    }
    let too_large = |size: u64| {
        std::io::Error::other(format!(
            "the file is {size} bytes; a spec may be at most {MAX_SPEC_BYTES} bytes"
        ))
    };
    if meta.len() > MAX_SPEC_BYTES {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    std::fs::File::open(path)?
        .take(MAX_SPEC_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_SPEC_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    String::from_utf8(bytes)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "the file is not UTF-8"))
}

fn io_problem(path: &Path, e: &std::io::Error) -> Diagnostics {
    Diagnostics {
        items: vec![Diagnostic {
            file: path.to_path_buf(),
            pos: Pos::default(),
            message: format!("cannot read: {}", e.to_string().to_lowercase()),
            label: None,
            help: None,
        }],
    }
}

/// Renders one server's generated files, keyed by path relative to the output directory.
/// Pure: no I/O, no time, no version stamps.
#[cfg(feature = "emit")]
pub fn render(spec: &Spec) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    out.insert(
        PathBuf::from(format!("{}.rs", spec.ir.module)),
        emit::server_file(&spec.ir),
    );
    out
}

/// A reference page that failed to render: a defect in the embedded template.
#[derive(Debug, thiserror::Error)]
#[error("rendering the docs of `{server}` failed: {source:#}")]
pub struct DocsError {
    server: String,
    #[source]
    source: minijinja::Error,
}

/// Renders the committed reference material, keyed by path relative to the workspace root:
/// `docs/<server>.md` for every server. Pure: no I/O, no time, no version stamps.
pub fn render_docs(specs: &[Spec]) -> Result<BTreeMap<PathBuf, String>, DocsError> {
    let mut out = BTreeMap::new();
    for s in specs {
        let text = docs::render(&s.ir).map_err(|source| DocsError {
            server: s.ir.name.clone(),
            source,
        })?;
        out.insert(PathBuf::from(docs::path(&s.ir)), text);
    }
    Ok(out)
}

/// The JSON Schema of the spec language, for editors (completion and checks while a spec is
/// written), with a `$comment` naming `made_by`, the command that writes it. Pure.
#[cfg(feature = "editor-schema")]
pub fn editor_schema(made_by: &str) -> String {
    spec::editor_schema(made_by)
}

/// The command that rewrites what [`render_docs`] renders.
pub const DOCS_COMMAND: &str = docs::DOCS_COMMAND;

/// The command that rewrites contract snapshots.
pub const SNAPSHOT_COMMAND: &str = contract::SNAPSHOT_COMMAND;

/// Renders every server plus the index module that lists them.
#[cfg(feature = "emit")]
pub fn render_all(specs: &[Spec]) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    for s in specs {
        out.extend(render(s));
    }
    let servers: Vec<&ir::Server> = specs.iter().map(|s| &s.ir).collect();
    out.insert(PathBuf::from("mod.rs"), emit::index_file(&servers));
    out
}
