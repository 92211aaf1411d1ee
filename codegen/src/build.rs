//! The build API, for a crate's `build.rs`, like `tonic_build::compile_protos`: compiles every
//! spec of a directory into `$OUT_DIR/generated/`, where `mcpspec::include_specs!()` includes
//! it. Cargo reruns the script when a spec changes; a file is rewritten only when its text
//! changed, so an unrelated rebuild recompiles nothing; an invalid spec fails the build with
//! every problem at file:line:column. With the `sql-check` feature, every statement is also
//! prepared against the schema the spec declares (as `codegen check` does), so a wrong table,
//! column or `RETURNING` fails the build too.
//!
//! ```no_run
//! // build.rs
//! fn main() -> Result<(), mcpspec_codegen::build::Error> {
//!     mcpspec_codegen::compile_specs("spec")
//! }
//! ```

use std::path::{Path, PathBuf};

use crate::Diagnostics;

/// Why the specs did not compile: the rendered diagnostics, or an I/O failure.
pub enum Error {
    /// Every problem of every spec, rendered with source context.
    Specs(String),
    /// Reading a spec or writing the generated code failed.
    Io(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Specs(s) | Error::Io(s) => f.write_str(s),
        }
    }
}

/// Shown as the diagnostics themselves, because a build script returning `Err` prints the
/// error with `Debug`.
impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "\n{self}")
    }
}

impl std::error::Error for Error {}

/// Settings of a compilation; [`compile_specs`] uses the defaults.
#[derive(Debug, Clone)]
pub struct Builder {
    spec_dir: PathBuf,
    display_dir: Option<PathBuf>,
    out_dir: Option<PathBuf>,
}

/// A [`Builder`] for the specs in `dir` (relative to the crate's manifest directory).
pub fn configure(dir: impl AsRef<Path>) -> Builder {
    Builder {
        spec_dir: dir.as_ref().to_path_buf(),
        display_dir: None,
        out_dir: None,
    }
}

/// Compiles every `*.yaml` spec in `dir` into `$OUT_DIR/generated/`.
pub fn compile_specs(dir: impl AsRef<Path>) -> Result<(), Error> {
    configure(dir).compile()
}

impl Builder {
    /// How the spec directory is named in diagnostics and in the generated code (the
    /// definitions' `spec_file`); `dir` itself by default. A crate whose specs sit above it
    /// names them from the project root this way, e.g. `configure("../spec").display_as("spec")`.
    pub fn display_as(mut self, dir: impl AsRef<Path>) -> Builder {
        self.display_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Where the generated files go; `$OUT_DIR/generated` by default.
    pub fn out_dir(mut self, dir: impl AsRef<Path>) -> Builder {
        self.out_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Compiles the specs and writes what changed; prints Cargo's rerun-if-changed lines.
    pub fn compile(self) -> Result<(), Error> {
        let display = self.display_dir.as_ref().unwrap_or(&self.spec_dir);
        println!("cargo:rerun-if-changed={}", self.spec_dir.display());
        if let Ok(entries) = std::fs::read_dir(&self.spec_dir) {
            let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
            paths.sort();
            for p in paths {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
        let specs = crate::load_dir(&self.spec_dir, display).map_err(|d| self.render(&d))?;
        #[cfg(feature = "sql-check")]
        {
            let mut problems = Diagnostics::default();
            for spec in &specs {
                problems.extend(crate::sqlcheck::check_sql(spec));
            }
            if !problems.is_empty() {
                return Err(self.render(&problems));
            }
        }
        let out = match self.out_dir {
            Some(d) => d,
            None => PathBuf::from(std::env::var_os("OUT_DIR").ok_or_else(|| {
                Error::Io("OUT_DIR is not set: call compile_specs from a build script".into())
            })?)
            .join("generated"),
        };
        std::fs::create_dir_all(&out)
            .map_err(|e| Error::Io(format!("cannot create {}: {e}", out.display())))?;
        for (path, text) in crate::render_all(&specs) {
            let target = out.join(path);
            write_if_changed(&target, &text)
                .map_err(|e| Error::Io(format!("cannot write {}: {e}", target.display())))?;
        }
        Ok(())
    }

    /// Renders diagnostics whose files are named by the display directory, reading each from
    /// the spec directory.
    fn render(&self, d: &Diagnostics) -> Error {
        let display = self.display_dir.as_ref().unwrap_or(&self.spec_dir);
        let read = |p: &Path| {
            let real = p
                .strip_prefix(display)
                .map_or_else(|_| p.to_path_buf(), |rel| self.spec_dir.join(rel));
            crate::read_spec(&real).unwrap_or_default()
        };
        Error::Specs(d.render_with(&read))
    }
}

/// Writes `text` to `path` unless it is there already, creating its directory; `true` when it
/// wrote. The build API, `codegen docs` and `codegen snapshot` all write this way, so that an
/// unchanged file keeps its timestamp and Cargo recompiles nothing.
pub fn write_if_changed(path: &Path, text: &str) -> std::io::Result<bool> {
    if std::fs::read_to_string(path).ok().as_deref() == Some(text) {
        return Ok(false);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text)?;
    Ok(true)
}
