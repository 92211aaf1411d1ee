//! Statement checks that need only SQLite: every statement prepared against an in-memory
//! database built from the spec's own DDL, declared result columns and read/write
//! classification compared with what SQLite reports. The build API runs [`check_sql`] at
//! `cargo build` (feature `sql-check`); `codegen check` runs it with the rest of
//! [`crate::check`], and the checks against a live database in `livecheck`.

use std::path::PathBuf;

use rusqlite::Connection;

use crate::Spec;
use crate::diag::{Diagnostic, Diagnostics, Pos};
use crate::ir::Mode;

pub(crate) fn finding(spec: &Spec, pos: Pos, message: String, help: &str) -> Diagnostic {
    Diagnostic {
        file: PathBuf::from(&spec.ir.file),
        pos,
        message,
        label: None,
        help: (!help.is_empty()).then(|| help.to_string()),
    }
}

/// Prepares every statement of `spec` against its declared schema.
pub fn check_sql(spec: &Spec) -> Diagnostics {
    let mut out = Diagnostics::default();
    // A spec's DDL may come from anyone: it writes nothing outside this scratch database.
    let declared = match mcpspec_sqlite::confine::scratch() {
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
    // A server without a database runs no SQL: there is nothing to prepare.
    let Some(db) = &spec.ir.database else {
        return out;
    };
    if !load_declared(spec, db, &declared, &mut out) {
        return out;
    }
    let targets = [("the declared schema", &declared)];
    check_tools(spec, &targets, &mut out);
    if let Some(q) = spec.ir.proxy.as_ref().and_then(|p| p.sql.as_ref()) {
        check_intercept(spec, q, &targets, &mut out);
    }
    check_content(spec, &targets, &mut out);
    out
}

/// A table's name and its columns' names and declared types, in order.
#[cfg(feature = "sqlite")]
pub(crate) type TableShape = (String, Vec<(String, String)>);

/// The tables `schema` makes (in SQLite) and their columns with declared types, in order.
#[cfg(feature = "sqlite")]
pub(crate) fn declared_tables(schema: &str) -> rusqlite::Result<Vec<TableShape>> {
    let conn = mcpspec_sqlite::confine::scratch()?;
    mcpspec_sqlite::regexp::register(&conn)?;
    conn.execute_batch(schema)?;
    tables(&conn)?
        .into_iter()
        .map(|t| {
            let columns = table_info(&conn, &t)?
                .into_iter()
                .map(|c| (c.name, c.ty))
                .collect();
            Ok((t, columns))
        })
        .collect()
}

/// Registers `regexp()` and loads the declared schema, the derived structures and the sample
/// rows into `declared`; `false` when the schema does not run, which leaves nothing to prepare
/// against.
fn load_declared(
    spec: &Spec,
    db: &crate::ir::Database,
    declared: &Connection,
    out: &mut Diagnostics,
) -> bool {
    // The runtime registers `regexp(pattern, text)` on every connection; an interceptor query
    // that uses it must prepare here too.
    if let Err(e) = mcpspec_sqlite::regexp::register(declared) {
        out.items.push(finding(
            spec,
            Pos::default(),
            format!("cannot register regexp(): {e}"),
            "",
        ));
    }
    if let Err(e) = declared.execute_batch(db.schema) {
        out.items.push(finding(
            spec,
            Pos::default(),
            format!(
                "the database schema does not run: {}",
                lower(&sqlite_message(&e))
            ),
            "fix the DDL under `database.schema`",
        ));
        return false;
    }
    if let Err(e) = declared.execute_batch(db.derived) {
        out.items.push(finding(
            spec,
            Pos::default(),
            format!(
                "the derived structures do not build: {}",
                lower(&sqlite_message(&e))
            ),
            "fix the DDL under `database.derived` or `database.fts`",
        ));
        return false;
    }
    if let Some(sample) = &db.sample
        && let Err(e) = declared.execute_batch(sample)
    {
        out.items.push(finding(
            spec,
            Pos::default(),
            format!(
                "the sample rows do not load: {}",
                lower(&sqlite_message(&e))
            ),
            "fix the SQL under `database.sample`",
        ));
    }
    true
}

/// Every tool statement, prepared on each target: its declared columns, its INSERTs' NOT NULL
/// columns, and whether it writes as codegen derived.
fn check_tools(spec: &Spec, targets: &[(&str, &Connection)], out: &mut Diagnostics) {
    for tool in &spec.ir.tools {
        for st in tool.binding.statements() {
            for (what, conn) in targets {
                let subject = format!("tool `{}`: statement `{}`", tool.name, st.name);
                let Some(stmt) = prepare(spec, conn, st.sql, st.pos, &subject, what, out) else {
                    continue;
                };
                if st.mode != Mode::Execute {
                    check_columns(spec, &stmt, st, &subject, out);
                }
                check_insert(spec, conn, st, &subject, what, out);
                // A backfill reads (`pending`, `remaining`) and writes (`store`) in turn.
                let writes = match &tool.binding {
                    crate::ir::Binding::Backfill { .. } => st.mode == Mode::Execute,
                    _ => tool.writes,
                };
                if stmt.readonly() == writes && *what == "the declared schema" {
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
}

/// The interceptor query, prepared on each target: the columns the proxy reads, and no writes.
fn check_intercept(
    spec: &Spec,
    q: &crate::ir::InterceptSql,
    targets: &[(&str, &Connection)],
    out: &mut Diagnostics,
) {
    for (what, conn) in targets {
        let Some(stmt) = prepare(spec, conn, &q.sql, q.pos, "`intercept.sql`", what, out) else {
            continue;
        };
        let actual: Vec<&str> = stmt.column_names().collect();
        let missing: Vec<&str> = crate::ir::INTERCEPT_COLUMNS
            .iter()
            .copied()
            .filter(|c| !actual.contains(c))
            .collect();
        if !missing.is_empty() {
            out.items.push(finding(
                spec,
                q.pos,
                format!(
                    "`intercept.sql` returns columns [{}] but needs {}",
                    actual.join(", "),
                    missing
                        .iter()
                        .map(|c| format!("`{c}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                "select `key`, `action` ('guard' or 'hint') and `message` (use `AS` to rename)",
            ));
        }
        if !stmt.readonly() && *what == "the declared schema" {
            out.items.push(finding(
                spec,
                q.pos,
                "`intercept.sql` changes the database".into(),
                "the interceptor runs on a read-only connection; select only",
            ));
        }
    }
}

/// Prepares `sql` on `conn` (`what` names it in the message), or reports why it does not
/// prepare, as `{subject} does not prepare against {what}`.
fn prepare<'c>(
    spec: &Spec,
    conn: &'c Connection,
    sql: &str,
    pos: Pos,
    subject: &str,
    what: &str,
    out: &mut Diagnostics,
) -> Option<rusqlite::Statement<'c>> {
    match conn.prepare(sql) {
        Ok(stmt) => Some(stmt),
        Err(e) => {
            out.items.push(finding(
                spec,
                pos,
                format!(
                    "{subject} does not prepare against {what}: {}",
                    lower(&sqlite_message(&e))
                ),
                "fix the query or the schema so they agree",
            ));
            None
        }
    }
}

/// Reports a statement whose result columns differ from the ones it declares.
fn check_columns(
    spec: &Spec,
    stmt: &rusqlite::Statement<'_>,
    st: &crate::ir::Statement,
    subject: &str,
    out: &mut Diagnostics,
) {
    let mut actual: Vec<String> = stmt.column_names().map(str::to_string).collect();
    let mut wanted: Vec<String> = st
        .result_columns()
        .into_iter()
        .map(str::to_string)
        .collect();
    actual.sort();
    wanted.sort();
    if actual != wanted {
        out.items.push(finding(
            spec,
            st.pos,
            format!(
                "{subject} returns columns [{}] but declares [{}]",
                actual.join(", "),
                wanted.join(", ")
            ),
            "make `columns` list exactly what the query selects (use `AS` to rename)",
        ));
    }
}

/// Prepares the statements and completion queries of resources and prompts: each must
/// prepare, return its declared columns and only read.
fn check_content(spec: &Spec, targets: &[(&str, &Connection)], out: &mut Diagnostics) {
    let ir = &spec.ir;
    let statements = ir.content_statements();
    for (owner, st) in statements {
        for (what, conn) in targets {
            let subject = format!("{owner}: the statement");
            let Some(stmt) = prepare(spec, conn, st.sql, st.pos, &subject, what, out) else {
                continue;
            };
            check_columns(spec, &stmt, st, &subject, out);
            if !stmt.readonly() {
                out.items.push(finding(
                    spec,
                    st.pos,
                    format!("{owner}: the statement changes the database"),
                    "resources and prompts only read; use a tool for writes",
                ));
            }
        }
    }
    let completions = ir
        .resources
        .iter()
        .flat_map(|r| {
            r.complete
                .iter()
                .map(move |(v, sql)| (format!("resource `{}` variable `{v}`", r.name), sql))
        })
        .chain(ir.prompts.iter().flat_map(|p| {
            p.arguments.iter().filter_map(move |a| {
                Some((
                    format!("prompt `{}` argument `{}`", p.name, a.name),
                    a.complete.as_ref()?,
                ))
            })
        }));
    for (owner, sql) in completions {
        for (what, conn) in targets {
            let subject = format!("{owner}: the completion query");
            let Some(stmt) = prepare(spec, conn, sql, Pos::default(), &subject, what, out) else {
                continue;
            };
            if !stmt.readonly() || stmt.column_count() == 0 {
                out.items.push(finding(
                    spec,
                    Pos::default(),
                    format!("{owner}: the completion query must read and return a column"),
                    "select the candidates as the first column",
                ));
            }
        }
    }
}

/// One column as `PRAGMA table_info` reports it.
#[cfg(feature = "sqlite")]
struct ColumnInfo {
    name: String,
    ty: String,
}

/// An INSERT with a column list must set every column that is NOT NULL without a default in
/// the database it runs on: SQLite would refuse every call (`CONSTRAINT_VIOLATION`) on a
/// database made elsewhere, whose columns have no defaults the declared schema gives them.
fn check_insert(
    spec: &Spec,
    conn: &Connection,
    st: &crate::ir::Statement,
    subject: &str,
    what: &str,
    out: &mut Diagnostics,
) {
    static INSERT: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r#"(?is)\bINSERT\s+(?:OR\s+\w+\s+)?INTO\s+(?:\w+\.)?"?(\w+)"?\s*\(([^)]*)\)"#,
        )
        .unwrap_or_else(|_| unreachable!())
    });
    let Some(m) = INSERT.captures(st.sql) else {
        return;
    };
    let table = &m[1];
    let given: Vec<String> = m[2]
        .split(',')
        .map(|c| c.trim().trim_matches('"').to_ascii_lowercase())
        .collect();
    let Ok(mut q) = conn.prepare(
        "SELECT name, \"notnull\", dflt_value IS NULL, pk, type FROM pragma_table_xinfo(?1) WHERE hidden = 0",
    ) else {
        return;
    };
    let Ok(rows) = q.query_map([table], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, bool>(1)?,
            r.get::<_, bool>(2)?,
            r.get::<_, i64>(3)?,
            r.get::<_, String>(4)?,
        ))
    }) else {
        return;
    };
    let pks = rows_pk_count(conn, table);
    for (name, not_null, no_default, pk, ty) in rows.flatten() {
        // An INTEGER PRIMARY KEY alone is the rowid, which SQLite assigns.
        let rowid = pk == 1 && pks == 1 && ty.eq_ignore_ascii_case("integer");
        if not_null && no_default && !rowid && !given.contains(&name.to_ascii_lowercase()) {
            out.items.push(finding(
                spec,
                st.pos,
                format!(
                    "{subject} leaves `{table}.{name}` unset, which is NOT NULL without a default in {what}"
                ),
                "set the column in the INSERT (a timestamp with strftime('%Y-%m-%dT%H:%M:%SZ', 'now'), say), so the tool works on databases made without the declared defaults",
            ));
        }
    }
}

/// How many columns make up `table`'s primary key.
fn rows_pk_count(conn: &Connection, table: &str) -> i64 {
    conn.query_row(
        "SELECT count(*) FROM pragma_table_info(?1) WHERE pk > 0",
        [table],
        |r| r.get(0),
    )
    .unwrap_or(0)
}

#[cfg(feature = "sqlite")]
fn tables(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut st = conn.prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
    )?;
    st.query_map([], |r| r.get(0))?.collect()
}

#[cfg(feature = "sqlite")]
fn table_info(conn: &Connection, table: &str) -> rusqlite::Result<Vec<ColumnInfo>> {
    let mut st = conn.prepare("SELECT name, type FROM pragma_table_info(?1) ORDER BY cid")?;
    st.query_map([table], |r| {
        Ok(ColumnInfo {
            name: r.get(0)?,
            ty: r.get(1)?,
        })
    })?
    .collect()
}

fn sqlite_message(e: &rusqlite::Error) -> String {
    mcpspec_sqlite::confine::message(e)
}

/// A database's message as a finding quotes it: lower case first, no trailing period.
pub(crate) fn lower(s: &str) -> String {
    let s = s.trim_end_matches('.');
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}
