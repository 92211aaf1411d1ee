//! SQL and schema checks that need SQLite and a JSON Schema validator (`codegen check`).
//!
//! Every statement is prepared against an in-memory database built from the spec's own DDL,
//! and the declared result columns and read/write classification are compared with what
//! SQLite reports. Input schemas are checked against the JSON Schema meta-schema and their
//! defaults against the schemas themselves.

use std::path::PathBuf;

use rusqlite::Connection;

use crate::Spec;
use crate::diag::{Diagnostic, Diagnostics, Pos};
use crate::ir::Mode;

fn finding(spec: &Spec, pos: Pos, message: String, help: &str) -> Diagnostic {
    Diagnostic {
        file: PathBuf::from(&spec.ir.file),
        pos,
        message,
        label: None,
        help: (!help.is_empty()).then(|| help.to_string()),
    }
}

/// Prepares every statement of `spec` against its declared schema, and, when `live` is given,
/// against that database file too.
pub fn check_sql(spec: &Spec, live: Option<&Connection>) -> Diagnostics {
    let mut out = Diagnostics::default();
    let declared = match Connection::open_in_memory() {
        Ok(c) => c,
        Err(e) => {
            out.items.push(finding(
                spec,
                Pos::default(),
                format!("cannot open sqlite: {e}"),
                "",
            ));
            return out;
        }
    };
    if let Err(e) = declared.execute_batch(&spec.ir.database.schema) {
        out.items.push(finding(
            spec,
            Pos::default(),
            format!(
                "the database schema does not run: {}",
                lower(&e.to_string())
            ),
            "fix the DDL under `database.schema`",
        ));
        return out;
    }
    if let Some(sample) = &spec.ir.database.sample
        && let Err(e) = declared.execute_batch(sample)
    {
        out.items.push(finding(
            spec,
            Pos::default(),
            format!("the sample rows do not load: {}", lower(&e.to_string())),
            "fix the SQL under `database.sample`",
        ));
    }
    let targets: Vec<(&str, &Connection)> = std::iter::once(("the declared schema", &declared))
        .chain(live.map(|c| ("the live database", c)))
        .collect();
    for tool in &spec.ir.tools {
        for st in tool.binding.statements() {
            for (what, conn) in &targets {
                let stmt = match conn.prepare(&st.sql) {
                    Ok(s) => s,
                    Err(e) => {
                        out.items.push(finding(
                            spec,
                            st.pos,
                            format!(
                                "tool `{}`: statement `{}` does not prepare against {what}: {}",
                                tool.name,
                                st.name,
                                lower(&sqlite_message(&e))
                            ),
                            "fix the query or the schema so they agree",
                        ));
                        continue;
                    }
                };
                if st.mode != Mode::Execute {
                    let mut actual: Vec<String> = stmt.column_names().map(str::to_string).collect();
                    let mut wanted: Vec<String> =
                        st.columns.iter().map(|c| c.name.clone()).collect();
                    actual.sort();
                    wanted.sort();
                    if actual != wanted {
                        out.items.push(finding(
                            spec,
                            st.pos,
                            format!(
                                "tool `{}`: statement `{}` returns columns [{}] but declares [{}]",
                                tool.name,
                                st.name,
                                actual.join(", "),
                                wanted.join(", ")
                            ),
                            "make `columns` list exactly what the query selects (use `AS` to rename)",
                        ));
                    }
                }
                if stmt.readonly() == tool.writes && *what == "the declared schema" {
                    out.items.push(finding(
                        spec,
                        st.pos,
                        format!(
                            "tool `{}`: SQLite says statement `{}` {} the database, but codegen derived otherwise",
                            tool.name,
                            st.name,
                            if stmt.readonly() { "does not change" } else { "changes" }
                        ),
                        "report this spec; set `annotations` explicitly meanwhile",
                    ));
                }
            }
        }
    }
    out
}

/// Checks every input schema against the meta-schema, and every default against its property.
pub fn check_schemas(spec: &Spec) -> Diagnostics {
    let mut out = Diagnostics::default();
    for tool in &spec.ir.tools {
        if let Err(e) = jsonschema::meta::validate(&tool.input_schema) {
            out.items.push(finding(
                spec,
                tool.pos,
                format!(
                    "tool `{}`: the input schema is not valid JSON Schema: {e}",
                    tool.name
                ),
                "fix the schema under `input`",
            ));
            continue;
        }
        for (name, default) in &tool.defaults {
            let Some(prop) = tool.input_schema["properties"].get(name) else {
                continue;
            };
            match jsonschema::validator_for(prop) {
                Ok(v) => {
                    if let Some(err) = v.iter_errors(default).next() {
                        out.items.push(finding(
                            spec,
                            tool.pos,
                            format!(
                                "tool `{}`: the default of `{name}` violates its own schema: {err}",
                                tool.name
                            ),
                            "change the default or the constraint so they agree",
                        ));
                    }
                }
                Err(e) => out.items.push(finding(
                    spec,
                    tool.pos,
                    format!(
                        "tool `{}`: property `{name}` is not valid JSON Schema: {e}",
                        tool.name
                    ),
                    "",
                )),
            }
        }
    }
    out
}

fn sqlite_message(e: &rusqlite::Error) -> String {
    match e {
        rusqlite::Error::SqlInputError { msg, .. } => msg.clone(),
        rusqlite::Error::SqliteFailure(_, Some(m)) => m.clone(),
        other => other.to_string(),
    }
}

fn lower(s: &str) -> String {
    let s = s.trim_end_matches('.');
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}
