//! SQL and schema checks that need SQLite and a JSON Schema validator (`codegen check`).
//!
//! Every statement is prepared against an in-memory database built from the spec's own DDL,
//! and the declared result columns and read/write classification are compared with what
//! SQLite reports. Input schemas are checked against the JSON Schema meta-schema and their
//! defaults against the schemas themselves. With a live database, its tables and columns are
//! compared with the declared ones. [`check_repo`] is the whole of `codegen check`: it adds the
//! contract and staleness comparisons of [`drift`](crate::drift) and reads the committed files.

use std::path::{Path, PathBuf};

use rusqlite::Connection;

use crate::Spec;
use crate::diag::{Diagnostic, Diagnostics, Pos};
use crate::drift::{self, Kind, Report};
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
    // A server without a database runs no SQL: there is nothing to prepare.
    let Some(db) = &spec.ir.database else {
        return out;
    };
    // The runtime registers `regexp(pattern, text)` on every connection; an interceptor query
    // that uses it must prepare here too.
    for conn in std::iter::once(&declared).chain(live) {
        if let Err(e) = register_regexp(conn) {
            out.items.push(finding(
                spec,
                Pos::default(),
                format!("cannot register regexp(): {e}"),
                "",
            ));
        }
    }
    if let Err(e) = declared.execute_batch(&db.schema) {
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
    if let Some(sample) = &db.sample
        && let Err(e) = declared.execute_batch(sample)
    {
        out.items.push(finding(
            spec,
            Pos::default(),
            format!("the sample rows do not load: {}", lower(&e.to_string())),
            "fix the SQL under `database.sample`",
        ));
    }
    if let Some(live) = live {
        out.extend(compare_tables(spec, &declared, live));
    }
    let targets: Vec<(&str, &Connection)> = std::iter::once(("the declared schema", &declared))
        .chain(live.map(|c| ("the live database", c)))
        .collect();
    for tool in &spec.ir.tools {
        for st in tool.binding.statements() {
            for (what, conn) in &targets {
                let subject = format!("tool `{}`: statement `{}`", tool.name, st.name);
                let Some(stmt) = prepare(spec, conn, &st.sql, st.pos, &subject, what, &mut out)
                else {
                    continue;
                };
                if st.mode != Mode::Execute {
                    check_columns(spec, &stmt, st, &subject, &mut out);
                }
                check_insert(spec, conn, st, &subject, what, &mut out);
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
    if let Some(q) = spec.ir.proxy.as_ref().and_then(|p| p.sql.as_ref()) {
        for (what, conn) in &targets {
            let Some(stmt) = prepare(spec, conn, &q.sql, q.pos, "`intercept.sql`", what, &mut out)
            else {
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
    check_content(spec, &targets, &mut out);
    out
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
    let mut wanted: Vec<String> = st.columns.iter().map(|c| c.name.clone()).collect();
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
    let statements = ir
        .resources
        .iter()
        .filter_map(|r| {
            Some((
                format!("resource `{}`", r.name),
                r.content.statement.as_ref()?,
            ))
        })
        .chain(
            ir.prompts
                .iter()
                .filter_map(|p| Some((format!("prompt `{}`", p.name), p.statement.as_ref()?))),
        );
    for (owner, st) in statements {
        for (what, conn) in targets {
            let subject = format!("{owner}: the statement");
            let Some(stmt) = prepare(spec, conn, &st.sql, st.pos, &subject, what, out) else {
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

/// Registers `regexp(pattern, text)` as the runtime does: NULL when either is NULL, false for
/// a pattern that does not compile.
fn register_regexp(conn: &Connection) -> rusqlite::Result<()> {
    use rusqlite::functions::FunctionFlags;
    conn.create_scalar_function(
        "regexp",
        2,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            let (Some(p), Some(t)) = (ctx.get::<Option<String>>(0)?, ctx.get::<Option<String>>(1)?)
            else {
                return Ok(None);
            };
            Ok(Some(regex::Regex::new(&p).is_ok_and(|re| re.is_match(&t))))
        },
    )
}

/// One column as `PRAGMA table_info` reports it.
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
    let Some(m) = INSERT.captures(&st.sql) else {
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

fn tables(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut st = conn.prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
    )?;
    st.query_map([], |r| r.get(0))?.collect()
}

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

/// Reports every declared table or column the live database lacks or has with another type.
/// Extra tables and columns in the live file are fine: the tools do not read them.
fn compare_tables(spec: &Spec, declared: &Connection, live: &Connection) -> Diagnostics {
    let mut out = Diagnostics::default();
    let at = spec
        .ir
        .database
        .as_ref()
        .map_or_else(Pos::default, |d| d.schema_pos);
    let help = "migrate the database, or change `database.schema` and the queries to match it";
    let result = (|| -> rusqlite::Result<()> {
        let live_tables = tables(live)?;
        for table in tables(declared)? {
            let Some(live_name) = live_tables.iter().find(|t| t.eq_ignore_ascii_case(&table))
            else {
                out.items.push(finding(
                    spec,
                    at,
                    format!("the live database has no table `{table}`"),
                    help,
                ));
                continue;
            };
            let have = table_info(live, live_name)?;
            for col in table_info(declared, &table)? {
                match have.iter().find(|c| c.name.eq_ignore_ascii_case(&col.name)) {
                    None => out.items.push(finding(
                        spec,
                        at,
                        format!(
                            "the live database's table `{table}` has no column `{}`",
                            col.name
                        ),
                        help,
                    )),
                    Some(c) if !c.ty.eq_ignore_ascii_case(&col.ty) => out.items.push(finding(
                        spec,
                        at,
                        format!(
                            "column `{table}.{}` is declared {} but is {} in the live database",
                            col.name,
                            shown_type(&col.ty),
                            shown_type(&c.ty)
                        ),
                        help,
                    )),
                    Some(_) => {}
                }
            }
        }
        Ok(())
    })();
    if let Err(e) = result {
        out.items.push(finding(
            spec,
            at,
            format!(
                "cannot read the live database's tables: {}",
                lower(&sqlite_message(&e))
            ),
            "",
        ));
    }
    out
}

fn shown_type(t: &str) -> String {
    if t.is_empty() {
        "without a type".into()
    } else {
        format!("`{t}`")
    }
}

/// Everything `codegen check` does, over the workspace at `root` with its specs in `spec_dir`
/// (relative to `root`): every spec compiles, every input schema and default is valid, every
/// statement prepares (against `live` too, whose tables must match the declared ones), every
/// contract matches its snapshot, and the committed docs and editor schema are fresh.
/// Runs every check of `codegen check`. `live` is a server's name and its live database, whose
/// tables and columns are compared with that server's declared schema.
pub fn check_repo(root: &Path, spec_dir: &Path, live: Option<(&str, &Connection)>) -> Report {
    let mut report = Report::default();
    let read = |rel: &Path| std::fs::read_to_string(root.join(rel)).ok();
    let specs = match crate::load_dir(&root.join(spec_dir), spec_dir) {
        Ok(s) => s,
        Err(d) => {
            report.extend(Kind::Spec, &d);
            Vec::new()
        }
    };
    report.specs = specs.len();
    if let Some((name, _)) = live
        && !specs.iter().any(|s| s.name() == name)
    {
        let names: Vec<&str> = specs.iter().map(crate::Spec::name).collect();
        report.findings.push(drift::Finding::from_diagnostic(
            Kind::Sql,
            &Diagnostic {
                file: spec_dir.to_path_buf(),
                pos: Pos { line: 1, column: 1 },
                message: format!("--db names server `{name}`, which no spec declares"),
                label: None,
                help: Some(format!("use one of {}", names.join(", "))),
            },
        ));
    }
    report.tools = specs.iter().map(|s| s.ir.tools.len()).sum();
    for spec in &specs {
        report.extend(Kind::Sql, &check_schemas(spec));
        let conn = live
            .filter(|(name, _)| *name == spec.name())
            .map(|(_, c)| c);
        report.extend(Kind::Sql, &check_sql(spec, conn));
        let lock = spec.lock_path();
        if let Some(f) = drift::contract_drift(spec, read(&lock).as_deref()) {
            report.findings.push(f);
        }
    }
    // The docs describe every server, so they are compared only when every spec compiled; the
    // editor schema does not depend on the specs.
    let rendered = match crate::render_docs(&specs) {
        Ok(r) => r,
        Err(e) => {
            report.findings.push(drift::Finding::from_diagnostic(
                Kind::Stale,
                &Diagnostic {
                    file: PathBuf::from("templates/server.md.j2"),
                    pos: Pos { line: 1, column: 1 },
                    message: e.to_string(),
                    label: None,
                    help: Some("fix the template".into()),
                },
            ));
            return report;
        }
    };
    let all_compiled = report.findings.iter().all(|f| f.kind != Kind::Spec);
    for (path, fresh) in rendered {
        if (!all_compiled && path.starts_with("docs")) || !owns(root, &path) {
            continue;
        }
        let shown = path.to_string_lossy().replace('\\', "/");
        if let Some(f) = drift::stale(&shown, read(&path).as_deref(), &fresh, crate::DOCS_COMMAND) {
            report.findings.push(f);
        }
    }
    report
}

/// Whether the project at `root` keeps the rendered file `path`: every project keeps its
/// servers' docs; only mcpspec's own checkout (where `codegen/` is) keeps the editor schema.
pub fn owns(root: &Path, path: &Path) -> bool {
    path != Path::new(crate::EDITOR_SCHEMA_PATH) || root.join("codegen").is_dir()
}

/// Checks every input schema against the meta-schema, and every default against its property.
pub fn check_schemas(spec: &Spec) -> Diagnostics {
    let mut out = Diagnostics::default();
    check_fixed_calls(spec, &mut out);
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

/// The arguments of demo calls and start-up jobs must pass the tool's input schema, as they
/// will when the calls run (with the schema's defaults filled in first, as the runtime does).
fn check_fixed_calls(spec: &Spec, out: &mut Diagnostics) {
    let calls = spec
        .ir
        .demo
        .iter()
        .filter(|d| d.error.as_deref() != Some("INVALID_ARGUMENTS"))
        .map(|d| ("demo call", &d.tool, &d.arguments, d.pos))
        .chain(
            spec.ir
                .startup
                .iter()
                .map(|j| ("start-up job", &j.tool, &j.arguments, j.pos)),
        );
    for (what, tool_name, arguments, pos) in calls {
        let Some(tool) = spec.ir.tools.iter().find(|t| &t.name == tool_name) else {
            continue;
        };
        let Ok(validator) = jsonschema::validator_for(&tool.input_schema) else {
            continue;
        };
        let mut args = arguments.clone();
        if let Some(o) = args.as_object_mut() {
            for (k, v) in &tool.defaults {
                o.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        let errors: Vec<String> = validator
            .iter_errors(&args)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("`{}` {e}", at.trim_start_matches('/').replace('/', "."))
                }
            })
            .collect();
        if !errors.is_empty() {
            out.items.push(finding(
                spec,
                pos,
                format!(
                    "the {what} of `{tool_name}` has arguments its input schema refuses: {}",
                    errors.join("; ")
                ),
                "fix the arguments, or the call fails with INVALID_ARGUMENTS when it runs",
            ));
        }
    }
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
