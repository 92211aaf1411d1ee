//! Drift findings: what `codegen check` reports, and the pure comparisons behind them.
//!
//! A [`Finding`] is a spec diagnostic, a SQL or database problem, a tool contract that moved
//! away from its snapshot, or a committed generated file that no longer matches a fresh render.
//! The comparisons here take the committed text as an argument and do no I/O, so tests can feed
//! them anything; `check::check_repo` reads the files. A [`Report`] renders for people (with
//! source lines, change lists and unified diffs) or as JSON for machines.

use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::Spec;
use crate::contract::{self, Change, Level};
use crate::diag::{Diagnostic, Diagnostics};
use crate::textdiff;

/// What kind of problem a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The spec itself is wrong: it does not parse or breaks a rule of the spec language.
    Spec,
    /// A statement or schema disagrees with the declared or the live database.
    Sql,
    /// The tool contract differs from the committed snapshot.
    Contract,
    /// A committed generated file differs from a fresh render.
    Stale,
    /// An example did not return what it says, run on a live database.
    Example,
    /// A warning, not a problem: a tool list costs more than the spec's `token_budget`.
    Budget,
}

/// One problem `check` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub kind: Kind,
    /// The file the finding is about, relative to the workspace root.
    pub file: String,
    /// Where in the file, when the finding points at a line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
    /// What is wrong, lowercase and without a trailing period.
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// How to fix it, usually with the command to run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
    /// For contract findings: every change, classified.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<Change>,
    /// A unified diff from the committed file to a fresh render.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
}

impl Finding {
    fn file_level(kind: Kind, file: &str, message: String, help: String) -> Finding {
        Finding {
            kind,
            file: file.to_string(),
            line: None,
            column: None,
            message,
            label: None,
            help: Some(help),
            changes: Vec::new(),
            diff: None,
        }
    }

    /// A spec or SQL diagnostic as a finding.
    pub fn from_diagnostic(kind: Kind, d: &Diagnostic) -> Finding {
        Finding {
            kind,
            file: d.file.to_string_lossy().replace('\\', "/"),
            line: Some(d.pos.line),
            column: Some(d.pos.column),
            message: d.message.clone(),
            label: d.label.clone(),
            help: d.help.clone(),
            changes: Vec::new(),
            diff: None,
        }
    }

    fn diagnostic(&self) -> Diagnostic {
        Diagnostic {
            file: self.file.clone().into(),
            pos: crate::Pos {
                line: self.line.unwrap_or(0),
                column: self.column.unwrap_or(0),
            },
            message: self.message.clone(),
            label: self.label.clone(),
            help: self.help.clone(),
        }
    }

    /// Renders the finding for a terminal; `source` is the text of its file, for findings that
    /// point at a line.
    pub fn render(&self, source: &str) -> String {
        if self.line.is_some() {
            return self.diagnostic().render(source);
        }
        let mut out = format!("error: {}\n  --> {}\n", self.message, self.file);
        for c in &self.changes {
            out.push_str(&format!("   | {c}\n"));
        }
        if let Some(help) = &self.help {
            out.push_str(&format!("   = help: {help}\n"));
        }
        if let Some(diff) = &self.diff {
            out.push_str(diff);
        }
        out
    }
}

/// Everything one `check` run found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// How many specs and tools were checked.
    pub specs: usize,
    pub tools: usize,
    pub findings: Vec<Finding>,
    /// What is worth knowing but fails nothing (a tool list past its token budget).
    pub warnings: Vec<Finding>,
}

impl Report {
    pub fn is_ok(&self) -> bool {
        self.findings.is_empty()
    }

    /// Adds every diagnostic as a finding of `kind`.
    pub fn extend(&mut self, kind: Kind, d: &Diagnostics) {
        self.findings
            .extend(d.items.iter().map(|d| Finding::from_diagnostic(kind, d)));
    }

    fn sorted(&self) -> Vec<&Finding> {
        let mut items: Vec<&Finding> = self.findings.iter().collect();
        items.sort_by(|a, b| {
            (a.kind, &a.file, a.line, a.column, &a.message)
                .cmp(&(b.kind, &b.file, b.line, b.column, &b.message))
        });
        items
    }

    /// Renders every finding for a terminal, ending in a one-line summary; `read` maps a file
    /// named in a finding to its text.
    pub fn render_with(&self, read: &dyn Fn(&Path) -> String) -> String {
        let mut out = String::new();
        for w in &self.warnings {
            let source = if w.line.is_some() {
                read(Path::new(&w.file))
            } else {
                String::new()
            };
            // A finding renders as an error; a warning says what it is.
            out.push_str(&w.render(&source).replacen("error:", "warning:", 1));
            out.push('\n');
        }
        if self.is_ok() {
            out.push_str(&format!(
                "ok: {} spec{}, {} tool{}; every statement prepared, contracts match their snapshots, generated files are fresh\n",
                self.specs,
                if self.specs == 1 { "" } else { "s" },
                self.tools,
                if self.tools == 1 { "" } else { "s" }
            ));
            return out;
        }
        for f in self.sorted() {
            let source = if f.line.is_some() {
                read(Path::new(&f.file))
            } else {
                String::new()
            };
            out.push_str(&f.render(&source));
            out.push('\n');
        }
        let n = self.findings.len();
        out.push_str(&format!(
            "error: check found {n} problem{}\n",
            if n == 1 { "" } else { "s" }
        ));
        out
    }

    /// The findings as pretty JSON: `{"ok", "specs", "tools", "findings": [...], "warnings":
    /// [...]}`.
    pub fn to_json(&self) -> String {
        let mut v = serde_json::json!({
            "ok": self.is_ok(),
            "specs": self.specs,
            "tools": self.tools,
            "findings": self.sorted(),
            "warnings": self.warnings,
        });
        // Keep field order stable whatever serde_json's map does.
        v = contract::canonical(&v);
        serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
    }
}

/// Compares a committed generated file with a fresh render. `command` is what rewrites it.
pub fn stale(path: &str, committed: Option<&str>, fresh: &str, command: &str) -> Option<Finding> {
    match committed {
        Some(text) if text == fresh => None,
        Some(text) => {
            let mut f = Finding::file_level(
                Kind::Stale,
                path,
                format!("{path} is stale: it differs from what the specs generate"),
                format!("run `{command}` and commit the result"),
            );
            f.diff = Some(textdiff::unified(
                &format!("{path} (committed)"),
                &format!("{path} (generated)"),
                text,
                fresh,
            ));
            Some(f)
        }
        None => Some(Finding::file_level(
            Kind::Stale,
            path,
            format!("{path} is missing"),
            format!("run `{command}` and commit the result"),
        )),
    }
}

/// The outcome of comparing a server's contract with its snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Contract {
    /// The snapshot matches.
    Same,
    /// The contract changed (or only the recorded version did) and the version step allows it:
    /// `snapshot` may record it.
    Allowed(Vec<Change>),
    /// The changes need a larger version step than the spec makes; `snapshot` refuses.
    Refused(Finding),
}

/// Compares `spec`'s contract with the committed snapshot text. Returns `None` when they
/// match and a finding otherwise; see [`contract_outcome`] for the decision `snapshot` uses.
pub fn contract_drift(spec: &Spec, committed: Option<&str>) -> Option<Finding> {
    match contract_outcome(spec, committed) {
        Contract::Same => None,
        Contract::Refused(f) => Some(f),
        Contract::Allowed(changes) => {
            let lock = crate::docs::lock_path(&spec.ir);
            let fresh = contract::snapshot_text(&spec.ir);
            let message = if changes.is_empty() {
                match committed {
                    None => format!("server `{}` has no contract snapshot", spec.ir.name),
                    Some(_) => format!(
                        "{lock} does not record version {} of server `{}`",
                        spec.ir.version, spec.ir.name
                    ),
                }
            } else {
                format!(
                    "the tool contract of `{}` changed ({}) and {lock} does not record it",
                    spec.ir.name,
                    summary(&changes)
                )
            };
            let mut f = Finding::file_level(
                Kind::Contract,
                &lock,
                message,
                format!(
                    "review the changes, then run `{}` and commit {lock}",
                    contract::SNAPSHOT_COMMAND
                ),
            );
            if let Some(text) = committed {
                f.diff = Some(textdiff::unified(
                    &format!("{lock} (committed)"),
                    &format!("{lock} (from {})", spec.ir.file),
                    text,
                    &fresh,
                ));
            }
            f.changes = changes;
            Some(f)
        }
    }
}

fn summary(changes: &[Change]) -> String {
    let mut parts = Vec::new();
    for level in [Level::Major, Level::Minor, Level::Patch] {
        let n = changes.iter().filter(|c| c.level == level).count();
        if n > 0 {
            parts.push(format!("{n} {}", level.word()));
        }
    }
    parts.join(", ")
}

/// Decides whether `spec`'s contract may replace the committed snapshot under docs/guide.md's
/// SemVer policy: a breaking change needs a major version step, a compatible one at least a
/// minor step, a description change at least a patch step.
pub fn contract_outcome(spec: &Spec, committed: Option<&str>) -> Contract {
    let fresh = contract::snapshot(&spec.ir);
    let fresh_text = contract::to_pretty(&fresh);
    let lock = crate::docs::lock_path(&spec.ir);
    let Some(text) = committed else {
        return Contract::Allowed(Vec::new());
    };
    if text == fresh_text {
        return Contract::Same;
    }
    let old: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            return Contract::Refused(Finding::file_level(
                Kind::Contract,
                &lock,
                format!("{lock} is not valid JSON: {e}"),
                format!(
                    "restore it from version control, or delete it and run `{}`",
                    contract::SNAPSHOT_COMMAND
                ),
            ));
        }
    };
    let edited = contract::edited_migrations(&old, &fresh);
    if !edited.is_empty() {
        let mut f = Finding::file_level(
            Kind::Contract,
            &lock,
            format!(
                "a migration that {lock} records changed: {}; a database may have applied it as it was",
                edited.join(", ")
            ),
            "restore the migration as recorded (from version control) and put the change in a new migration; `codegen migrate --plan` writes one".to_string(),
        );
        f.diff = Some(textdiff::unified(
            &format!("{lock} (committed)"),
            &format!("{lock} (from {})", spec.ir.file),
            text,
            &fresh_text,
        ));
        return Contract::Refused(f);
    }
    let changes = contract::compare(&old, &fresh);
    let Some(level) = changes.iter().map(|c| c.level).max() else {
        return Contract::Allowed(changes);
    };
    let recorded = old["version"].as_str().unwrap_or("0.0.0");
    let now = &spec.ir.version;
    let step = contract::bump_level(recorded, now);
    if step.is_some_and(|s| s >= level) {
        return Contract::Allowed(changes);
    }
    let needed = match level {
        Level::Major => "a breaking change needs a major version step",
        Level::Minor => "a compatible change needs at least a minor version step",
        Level::Patch => "a description change needs at least a patch version step",
    };
    let message = match step {
        None => format!(
            "the tool contract of `{}` changed ({}) but `server.version` is {now}, not past the snapshot's {recorded}",
            spec.ir.name,
            summary(&changes)
        ),
        Some(_) => format!(
            "the tool contract of `{}` changed ({}) but {recorded} to {now} is too small a version step",
            spec.ir.name,
            summary(&changes)
        ),
    };
    let mut f = Finding::file_level(
        Kind::Contract,
        &spec.ir.file,
        message,
        format!(
            "{needed}: set `server.version: {}` in {}, then run `{}`",
            contract::required_version(recorded, level),
            spec.ir.file,
            contract::SNAPSHOT_COMMAND
        ),
    );
    f.diff = Some(textdiff::unified(
        &format!("{lock} (committed)"),
        &format!("{lock} (from {})", spec.ir.file),
        text,
        &fresh_text,
    ));
    f.changes = changes;
    Contract::Refused(f)
}
