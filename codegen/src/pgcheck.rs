//! Statement checks against a live PostgreSQL server (`check --db SERVER=postgres://...`):
//! every statement's PostgreSQL text is prepared there, and PostgreSQL's own parameter and
//! result column types are compared with the spec's input schema and declared columns: a wrong
//! table or column, a column of another type, a nullable column declared non-null, a parameter
//! whose type the argument cannot bind to, and an INSERT that leaves a NOT NULL column without a
//! default unset are findings at file:line:column.

use postgres::Client;
use postgres::types::Type;
use serde_json::Value;

use crate::Spec;
use crate::diag::{Diagnostics, Pos};
use crate::ir::{ColumnKind, DialectSql, Mode, Statement};
use crate::sqlcheck::finding;

/// Every statement of `spec` prepared on the live server `client`.
pub fn check_live(spec: &Spec, client: &mut Client) -> Diagnostics {
    let mut out = Diagnostics::default();
    let ir = &spec.ir;
    if ir
        .database
        .as_ref()
        .and_then(|d| d.engine(&sqlscan::POSTGRES))
        .is_none()
    {
        out.items.push(finding(
            spec,
            Pos::default(),
            format!(
                "--db gives a PostgreSQL URL, but `{}` runs on SQLite only",
                ir.name
            ),
            "declare `database.postgres` with its schema, or pass a SQLite file",
        ));
        return out;
    }
    for tool in &ir.tools {
        for st in tool.binding.statements() {
            let subject = format!("tool `{}`: statement `{}`", tool.name, st.name);
            check_statement(
                spec,
                client,
                st,
                Some(&tool.input_schema),
                &subject,
                &mut out,
            );
        }
    }
    let content = ir.content_statements();
    for (owner, st) in content {
        let subject = format!("{owner}: the statement");
        check_statement(spec, client, st, None, &subject, &mut out);
    }
    out
}

/// One statement: it prepares, returns its declared columns with compatible types and
/// nullability, binds its arguments, and (an INSERT) sets every NOT NULL column without default.
fn check_statement(
    spec: &Spec,
    client: &mut Client,
    st: &Statement,
    input: Option<&Value>,
    subject: &str,
    out: &mut Diagnostics,
) {
    let Some(pg) = st.texts.iter().find(|t| t.dialect == &sqlscan::POSTGRES) else {
        return;
    };
    let prepared = match client.prepare(&pg.sql) {
        Ok(p) => p,
        Err(e) => {
            out.items.push(finding(
                spec,
                pg.pos,
                format!(
                    "{subject} does not prepare on the live PostgreSQL database: {}",
                    describe(&e)
                ),
                "fix the `postgres:` text, or migrate the database",
            ));
            return;
        }
    };
    if st.mode != Mode::Execute {
        check_columns(spec, client, &prepared, st, pg, subject, out);
    }
    if let Some(input) = input {
        check_params(spec, &prepared, pg, input, subject, out);
    }
    if crate::sqltext::inserts(&pg.sql) {
        check_insert(spec, client, pg, subject, out);
    }
}

/// The server's words for a driver error.
fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => db.message().to_string(),
        None => e.to_string(),
    }
}

/// Result columns: the declared names, of compatible types, nullable where the table says so.
fn check_columns(
    spec: &Spec,
    client: &mut Client,
    prepared: &postgres::Statement,
    st: &Statement,
    pg: &DialectSql,
    subject: &str,
    out: &mut Diagnostics,
) {
    let mut actual: Vec<&str> = prepared.columns().iter().map(|c| c.name()).collect();
    let mut wanted: Vec<&str> = st.columns.iter().map(|c| c.name.as_str()).collect();
    actual.sort_unstable();
    wanted.sort_unstable();
    if actual != wanted {
        out.items.push(finding(
            spec,
            pg.pos,
            format!(
                "{subject} returns columns [{}] on PostgreSQL but declares [{}]",
                actual.join(", "),
                wanted.join(", ")
            ),
            "make the `postgres:` text select exactly the declared columns (use `AS` to rename)",
        ));
    }
    for col in prepared.columns() {
        let Some(declared) = st.columns.iter().find(|c| c.name == col.name()) else {
            continue;
        };
        if !column_fits(declared.kind, col.type_()) {
            out.items.push(finding(
                spec,
                pg.pos,
                format!(
                    "{subject}: column `{}` is declared {} but PostgreSQL returns {}",
                    col.name(),
                    kind_name(declared.kind),
                    col.type_().name()
                ),
                &format!(
                    "cast it in the `postgres:` text ({}), or declare the column's type",
                    cast_hint(declared.kind)
                ),
            ));
        }
        if !declared.nullable
            && let (Some(table), Some(attnum)) = (col.table_oid(), col.column_id())
            && let Some(source) = nullable_source(client, table, attnum)
        {
            out.items.push(finding(
                spec,
                pg.pos,
                format!(
                    "{subject}: column `{}` is declared non-null but comes from `{source}`, which may be NULL",
                    col.name()
                ),
                &format!(
                    "declare it `{}?`, or make `{source}` NOT NULL in the database",
                    kind_name(declared.kind)
                ),
            ));
        }
    }
}

/// `table.column` when that column of the live table may be NULL. A view's columns always
/// say they may be, whatever they read, so only tables count.
fn nullable_source(client: &mut Client, table: u32, attnum: i16) -> Option<String> {
    let row = client
        .query_opt(
            "SELECT c.relname::text, a.attname::text, a.attnotnull
             FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
             WHERE a.attrelid = $1 AND a.attnum = $2 AND c.relkind IN ('r', 'p')",
            &[&table, &attnum],
        )
        .ok()??;
    let not_null: bool = row.get(2);
    (!not_null).then(|| format!("{}.{}", row.get::<_, String>(0), row.get::<_, String>(1)))
}

/// Whether a result column of PostgreSQL type `ty` reads as a declared `kind`, as the runtime
/// reads it.
fn column_fits(kind: ColumnKind, ty: &Type) -> bool {
    sqlscan::reads_as(ty.name()).contains(&kind_name(kind))
}

fn kind_name(kind: ColumnKind) -> &'static str {
    match kind {
        ColumnKind::Text => "text",
        ColumnKind::Integer => "integer",
        ColumnKind::Real => "real",
        ColumnKind::Boolean => "boolean",
        ColumnKind::Json => "json",
    }
}

fn cast_hint(kind: ColumnKind) -> &'static str {
    match kind {
        ColumnKind::Text => "`x::text`, or `to_char(...)` for a timestamp",
        ColumnKind::Integer => "`x::bigint`",
        ColumnKind::Real => "`x::float8`",
        ColumnKind::Boolean => "`x::boolean`",
        ColumnKind::Json => "`to_jsonb(x)`",
    }
}

/// Each parameter PostgreSQL inferred, against the JSON type of the argument bound to it.
fn check_params(
    spec: &Spec,
    prepared: &postgres::Statement,
    pg: &DialectSql,
    input: &Value,
    subject: &str,
    out: &mut Diagnostics,
) {
    for (name, ty) in pg.params.iter().zip(prepared.params()) {
        let Some(types) = input["properties"]
            .get(name)
            .map(|p| json_types(&p["type"]))
        else {
            // Bound from an earlier row, derived, or the reserved `arguments` (JSON text).
            continue;
        };
        let fits = types.iter().all(|t| match t.as_str() {
            "null" => true,
            "string" => is_text(ty) || matches!(*ty, Type::JSON | Type::JSONB),
            "integer" => {
                matches!(
                    *ty,
                    Type::INT2 | Type::INT4 | Type::INT8 | Type::FLOAT4 | Type::FLOAT8 | Type::BOOL
                ) || is_text(ty)
            }
            "number" => matches!(*ty, Type::FLOAT4 | Type::FLOAT8) || is_text(ty),
            "boolean" => matches!(*ty, Type::BOOL | Type::INT2 | Type::INT4 | Type::INT8),
            "array" | "object" => matches!(*ty, Type::JSON | Type::JSONB) || is_text(ty),
            _ => true,
        });
        if !fits {
            out.items.push(finding(
                spec,
                pg.pos,
                format!(
                    "{subject}: parameter `:{name}` is {} on PostgreSQL, which a {} argument cannot bind to",
                    ty.name(),
                    types.join(" or ")
                ),
                &format!(
                    "cast the parameter in the `postgres:` text (`:{name}::text`, `:{name}::jsonb`, `:{name}::bigint`) so its type is what the argument is"
                ),
            ));
        }
    }
}

fn is_text(ty: &Type) -> bool {
    matches!(
        *ty,
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN
    )
}

/// The JSON Schema `type` as a list.
fn json_types(ty: &Value) -> Vec<String> {
    match ty {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .filter_map(|t| t.as_str().map(String::from))
            .collect(),
        _ => Vec::new(),
    }
}

/// An INSERT must set every NOT NULL column of its table that has no default.
fn check_insert(
    spec: &Spec,
    client: &mut Client,
    pg: &DialectSql,
    subject: &str,
    out: &mut Diagnostics,
) {
    let re = regex::Regex::new(r#"(?is)\bINSERT\s+INTO\s+([A-Za-z0-9_."]+)\s*\(([^)]*)\)"#)
        .expect("a valid pattern");
    let Some(caps) = re.captures(&pg.sql) else {
        return;
    };
    let table = caps[1].replace('"', "");
    let given: Vec<String> = caps[2]
        .split(',')
        .map(|c| c.trim().trim_matches('"').to_ascii_lowercase())
        .collect();
    let Ok(rows) = client.query(
        "SELECT a.attname::text FROM pg_attribute a
         WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
           AND a.attnotnull AND NOT a.atthasdef AND a.attidentity = '' AND a.attgenerated = ''
         ORDER BY a.attnum",
        &[&table],
    ) else {
        return;
    };
    for row in rows {
        let column: String = row.get(0);
        if !given.contains(&column.to_ascii_lowercase()) {
            out.items.push(finding(
                spec,
                pg.pos,
                format!(
                    "{subject}: the INSERT leaves `{table}.{column}` unset, which is NOT NULL without a default in the live database"
                ),
                "set the column in the INSERT, or give it a default in the database",
            ));
        }
    }
}
