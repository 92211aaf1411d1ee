//! mcpspec's spec compiler: YAML tool specs in, Rust tables and glue out.
//!
//! The pipeline runs one stage per module: [`spec`](crate::spec) parses YAML with positions,
//! `validate` collects every problem, `lower` builds the IR, and `emit` writes Rust. [`render`]
//! is pure and is what the server's build script, `codegen generate` and `codegen check` call.

#[cfg(feature = "sqlite")]
pub mod check;
mod diag;
mod emit;
mod ir;
mod lower;
mod names;
mod spec;
mod sqltext;
mod validate;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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

    /// The names of the server's tools, in spec order.
    pub fn tool_names(&self) -> Vec<&str> {
        self.ir.tools.iter().map(|t| t.name.as_str()).collect()
    }
}

/// Parses, validates and lowers one spec from its text. `display_path` names the file in
/// diagnostics and in generated headers, e.g. `spec/studio.yaml`.
pub fn compile(display_path: &Path, text: &str) -> Result<Spec, Diagnostics> {
    let raw = spec::parse(display_path, text)?;
    let problems = validate::validate(display_path, text, &raw);
    if !problems.is_empty() {
        return Err(problems);
    }
    let shown = display_path.to_string_lossy().replace('\\', "/");
    Ok(Spec {
        ir: lower::lower(&shown, &raw),
    })
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
        match std::fs::read_to_string(&path) {
            Ok(text) => match compile(&shown, &text) {
                Ok(spec) => specs.push(spec),
                Err(d) => problems.extend(d),
            },
            Err(e) => problems.extend(io_problem(&shown, &e)),
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
pub fn render(spec: &Spec) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    out.insert(
        PathBuf::from(format!("{}.rs", spec.ir.module)),
        emit::server_file(&spec.ir),
    );
    out
}

/// Renders every server plus the index module that lists them.
pub fn render_all(specs: &[Spec]) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    for s in specs {
        out.extend(render(s));
    }
    let servers: Vec<&ir::Server> = specs.iter().map(|s| &s.ir).collect();
    out.insert(PathBuf::from("mod.rs"), emit::index_file(&servers));
    out
}
