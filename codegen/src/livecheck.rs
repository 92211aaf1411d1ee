//! Statement checks against a live database (`check --db SERVER=PATH|URL`), one checker for
//! every engine: the database is opened through the runtime's [`Backend`] trait, read-only
//! and with derived structures in a scratch place (so nothing is written), and what it tells
//! of each statement ([`Backend::describe`]) and of its tables ([`Backend::table_columns`])
//! is compared with the spec. Each finding points at the statement's text for that engine:
//! a statement that does not prepare; other result columns than declared; a column of a type
//! that does not read as declared, or that may be NULL where the spec says it may not; a
//! parameter an argument cannot bind to; an INSERT that leaves a NOT NULL column without a
//! default unset; and, on SQLite, a declared table or column the file lacks or types
//! otherwise. What the database cannot tell (SQLite infers no types) is not checked.
//!
//! [`Backend`]: mcpspec::backend::Backend
//! [`Backend::describe`]: mcpspec::backend::Backend::describe
//! [`Backend::table_columns`]: mcpspec::backend::Backend::table_columns

use std::time::Duration;

use mcpspec::backend::{Database, Described, Dialect, Location, Placing, Sql};
use mcpspec::def::ServerDef;
use serde_json::Value;

use crate::Spec;
use crate::diag::{Diagnostics, Pos};
use crate::ir::{ColumnKind, Mode, Statement};
use crate::sqlcheck::{finding, lower};

/// How long a check waits for one statement on the live database.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Opens the live database of the server `def` at `location` for checking: read-only, derived
/// structures (if the file lacks them) built in a temporary place, never in it.
pub fn open(def: &'static ServerDef, location: &Location) -> Result<Database, String> {
    let Some(database) = &def.database else {
        return Err(format!(
            "the `{}` server has no database; run `check` without --db",
            def.name
        ));
    };
    let how = Placing {
        read_only: true,
        in_place: false,
        scratch: true,
    };
    Database::open(location, def.name, database, how, TIMEOUT).map_err(|e| e.to_string())
}

/// Every statement of `spec` against the live database `db`.
pub fn check_live(spec: &Spec, db: &Database) -> Diagnostics {
    let mut out = Diagnostics::default();
    let ir = &spec.ir;
    let Some(declared) = &ir.database else {
        return out;
    };
    let dialect = db.dialect();
    let served = dialect.schemes.is_empty() || declared.engine(dialect.name).is_some();
    if !served {
        out.items.push(finding(
            spec,
            Pos::default(),
            format!(
                "--db gives a {} URL, but `{}` runs on SQLite only",
                dialect.title, ir.name
            ),
            &format!(
                "declare `database.{}` with its schema, or pass a SQLite file",
                dialect.name
            ),
        ));
        return out;
    }
    if let Some(why) = db.derive_in_place() {
        out.items.push(finding(
            spec,
            declared.schema_pos,
            format!("the derived structures do not build on the live database: {why}"),
            "match the database to `database.schema`: the server builds them over its tables",
        ));
    }
    if dialect == &sqlscan::SQLITE {
        compare_tables(spec, db, &mut out);
    }
    check_vectors(spec, db, &mut out);
    let live = Live { spec, db, dialect };
    for tool in &ir.tools {
        for st in tool.binding.statements() {
            let subject = format!("tool `{}`: statement `{}`", tool.name, st.name);
            live.statement(st, Some(&tool.input_schema), &subject, &mut out);
        }
    }
    for (owner, st) in ir.content_statements() {
        live.statement(st, None, &format!("{owner}: the statement"), &mut out);
    }
    if let Some(q) = ir.proxy.as_ref().and_then(|p| p.sql.as_ref()) {
        live.intercept(q, &mut out);
    }
    out
}

/// The columns that hold each provider's vectors (`stored_in`) in the live database: one the
/// database has must have the provider's dimensions; one this engine's schema declares must be
/// there (SQLite's own table comparison says so there; a MariaDB before 11.7, which has no
/// vector type, is said as such). Whether a provider is set does not matter here: the columns
/// are the spec's.
fn check_vectors(spec: &Spec, db: &Database, out: &mut Diagnostics) {
    let Some(declared) = &spec.ir.database else {
        return;
    };
    let dialect = db.dialect();
    let schema = match declared.engine(dialect.name) {
        Some(side) => side.schema,
        None => declared.schema,
    };
    for e in &spec.ir.embeddings {
        for (&place, pos) in e.stored_in.iter().zip(&e.stored_in_at) {
            let (table, column) = place.rsplit_once('.').unwrap_or(("", place));
            let Ok(columns) = db.table_columns(table) else {
                continue;
            };
            let name = &e.name;
            let dims = e.dimensions;
            match columns.iter().find(|c| c.name.eq_ignore_ascii_case(column)) {
                Some(c) => match sqlscan::vectors::dimensions(&c.ty) {
                    Some(n) if n == dims => {}
                    Some(n) => out.items.push(finding(
                        spec,
                        *pos,
                        format!("the live database's {place} holds vectors of {n} dimensions, and `{name}` makes {dims}"),
                        "write a migration that changes the column to the provider's dimensions, migrate, then rebuild the vectors",
                    )),
                    None => out.items.push(finding(
                        spec,
                        *pos,
                        format!("the live database's {place} is `{}`, not a vector of {dims} dimensions", c.ty),
                        "migrate the database, or fix `stored_in`",
                    )),
                },
                None if dialect != &sqlscan::SQLITE
                    && !sqlscan::vectors::declared(schema, table, column).is_empty() =>
                {
                    let why = mcpspec::__internal::no_vectors_here(db)
                        .unwrap_or_else(|| "the live database lacks it".to_string());
                    out.items.push(finding(
                        spec,
                        *pos,
                        format!("`{name}` stores its vectors in {place}: {why}"),
                        &format!("migrate the database, or serve this spec on an engine with vectors; its `{}:` schema declares the column", dialect.name),
                    ));
                }
                None => {}
            }
        }
    }
}

/// The live database and what its findings say of it.
struct Live<'a> {
    spec: &'a Spec,
    db: &'a Database,
    dialect: &'static Dialect,
}

impl Live<'_> {
    /// The help for a text that does not fit the live database: the spec's text for this
    /// engine, or the schema.
    fn fix_text(&self, what: &str) -> String {
        if self.dialect == &sqlscan::SQLITE {
            "fix the query or the schema so they agree".to_string()
        } else {
            format!(
                "fix the `{}:` {what}, or migrate the database",
                self.dialect.name
            )
        }
    }

    /// One statement: it prepares, returns its declared columns with compatible types and
    /// nullability, binds its arguments, and (an INSERT) sets every NOT NULL column without
    /// default.
    fn statement(
        &self,
        st: &Statement,
        input: Option<&Value>,
        subject: &str,
        out: &mut Diagnostics,
    ) {
        let own = st
            .texts
            .iter()
            .zip(&st.text_pos)
            .find(|(t, _)| t.dialect == self.dialect.name);
        let (text, pos) = match own {
            Some((t, pos)) => (t.sql, *pos),
            None => (st.sql, st.pos),
        };
        let sql = Sql {
            text,
            params: own.map(|(t, _)| t.params),
            name: "",
        };
        let described = match self.db.describe(sql) {
            Ok(d) => d,
            Err(e) => {
                out.items.push(finding(
                    self.spec,
                    pos,
                    format!(
                        "{subject} does not prepare against the live database: {}",
                        lower(&e)
                    ),
                    &self.fix_text("text"),
                ));
                return;
            }
        };
        if st.mode != Mode::Execute {
            self.columns(st, &described, pos, subject, out);
        }
        if let Some(input) = input {
            let names: &[&str] = own.map_or(&[], |(t, _)| t.params);
            self.params(&described, names, input, pos, subject, out);
        }
        self.insert(text, pos, subject, out);
    }

    /// Result columns: the declared names, of compatible types, nullable where the table says
    /// so.
    fn columns(
        &self,
        st: &Statement,
        d: &Described,
        pos: Pos,
        subject: &str,
        out: &mut Diagnostics,
    ) {
        let mut actual: Vec<&str> = d.columns.iter().map(|c| c.name.as_str()).collect();
        let mut wanted: Vec<&str> = st.result_columns();
        actual.sort_unstable();
        wanted.sort_unstable();
        if actual != wanted {
            out.items.push(finding(
                self.spec,
                pos,
                format!(
                    "{subject} returns columns [{}] on the live database but declares [{}]",
                    actual.join(", "),
                    wanted.join(", ")
                ),
                "make the statement select exactly the declared columns (use `AS` to rename)",
            ));
        }
        for col in &d.columns {
            let Some(declared) = st.columns.iter().find(|c| c.name == col.name) else {
                continue;
            };
            let kind = declared.kind.name();
            if let Some((ty, kinds)) = &col.typed
                && !kinds.contains(&kind)
            {
                out.items.push(finding(
                    self.spec,
                    pos,
                    format!(
                        "{subject}: column `{}` is declared {kind} but {} returns {ty}",
                        col.name, self.dialect.title
                    ),
                    &format!(
                        "cast it in the `{}:` text ({}), or declare the column's type",
                        self.dialect.name,
                        cast_hint(self.dialect, declared.kind)
                    ),
                ));
            }
            if !declared.nullable
                && let Some(source) = &col.nullable_from
            {
                out.items.push(finding(
                    self.spec,
                    pos,
                    format!(
                        "{subject}: column `{}` is declared non-null but comes from `{source}`, which may be NULL",
                        col.name
                    ),
                    &format!("declare it `{kind}?`, or make `{source}` NOT NULL in the database"),
                ));
            }
        }
    }

    /// Each parameter whose type the database inferred, against the JSON types of the
    /// argument bound to it.
    fn params(
        &self,
        d: &Described,
        names: &[&str],
        input: &Value,
        pos: Pos,
        subject: &str,
        out: &mut Diagnostics,
    ) {
        for (name, ty) in names.iter().zip(&d.params) {
            let Some(types) = input["properties"]
                .get(*name)
                .map(|p| json_types(&p["type"]))
            else {
                // Bound from an earlier row, derived, or the reserved `arguments` (JSON text).
                continue;
            };
            let fits = types
                .iter()
                .all(|t| ty.binds.contains(&t.as_str()) || !JSON_TYPES.contains(&t.as_str()));
            if !fits {
                out.items.push(finding(
                    self.spec,
                    pos,
                    format!(
                        "{subject}: parameter `:{name}` is {} on {}, which a {} argument cannot bind to",
                        ty.name,
                        self.dialect.title,
                        types.join(" or ")
                    ),
                    &format!(
                        "cast the parameter in the `{}:` text so its type is what the argument is",
                        self.dialect.name
                    ),
                ));
            }
        }
    }

    /// An INSERT with a column list must set every column that is NOT NULL without a default
    /// in the live database: it would refuse every call (`CONSTRAINT_VIOLATION`) otherwise,
    /// as on a database made elsewhere, whose columns lack the defaults the spec declares.
    fn insert(&self, text: &str, pos: Pos, subject: &str, out: &mut Diagnostics) {
        static INSERT: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
            regex::Regex::new(
                r#"(?is)\bINSERT\s+(?:OR\s+\w+\s+)?INTO\s+(?:[`"]?\w+[`"]?\.)?[`"]?(\w+)[`"]?\s*\(([^)]*)\)"#,
            )
            .unwrap_or_else(|_| unreachable!())
        });
        let Some(m) = INSERT.captures(text) else {
            return;
        };
        let table = &m[1];
        let given: Vec<String> = m[2]
            .split(',')
            .map(|c| c.trim().trim_matches(['"', '`']).to_ascii_lowercase())
            .collect();
        let Ok(columns) = self.db.table_columns(table) else {
            return;
        };
        for c in columns.iter().filter(|c| c.required) {
            if !given.contains(&c.name.to_ascii_lowercase()) {
                out.items.push(finding(
                    self.spec,
                    pos,
                    format!(
                        "{subject} leaves `{table}.{}` unset, which is NOT NULL without a default in the live database",
                        c.name
                    ),
                    "set the column in the INSERT (a timestamp, say), so the tool works on databases made without the declared defaults",
                ));
            }
        }
    }

    /// The interceptor query prepares and returns the columns the proxy reads.
    fn intercept(&self, q: &crate::ir::InterceptSql, out: &mut Diagnostics) {
        let described = match self.db.describe(Sql::from(q.sql.as_str())) {
            Ok(d) => d,
            Err(e) => {
                out.items.push(finding(
                    self.spec,
                    q.pos,
                    format!(
                        "`intercept.sql` does not prepare against the live database: {}",
                        lower(&e)
                    ),
                    &self.fix_text("text"),
                ));
                return;
            }
        };
        let actual: Vec<&str> = described.columns.iter().map(|c| c.name.as_str()).collect();
        let missing: Vec<String> = crate::ir::INTERCEPT_COLUMNS
            .iter()
            .filter(|c| !actual.contains(c))
            .map(|c| format!("`{c}`"))
            .collect();
        if !missing.is_empty() {
            out.items.push(finding(
                self.spec,
                q.pos,
                format!(
                    "`intercept.sql` returns columns [{}] on the live database but needs {}",
                    actual.join(", "),
                    missing.join(", ")
                ),
                "select `key`, `action` ('guard' or 'hint') and `message` (use `AS` to rename)",
            ));
        }
    }
}

/// The JSON Schema types an argument may declare.
const JSON_TYPES: &[&str] = &[
    "null", "string", "integer", "number", "boolean", "array", "object",
];

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

/// How `dialect` casts a value to what a declared kind reads as, for a help line.
fn cast_hint(dialect: &Dialect, kind: ColumnKind) -> &'static str {
    dialect
        .casts
        .iter()
        .find(|(k, _)| *k == kind.name())
        .map_or("to a type that reads as the declared one", |(_, hint)| hint)
}

/// Every table the declared schema makes that the live file lacks, or has without a declared
/// column or with a column of another declared type. Extra tables and columns in the live file
/// are fine: the tools do not read them. SQLite only, whose declared types the spec's schema
/// is written in.
fn compare_tables(spec: &Spec, db: &Database, out: &mut Diagnostics) {
    let Some(declared) = &spec.ir.database else {
        return;
    };
    let at = declared.schema_pos;
    let help = "migrate the database, or change `database.schema` and the queries to match it";
    let schema = match crate::sqlcheck::declared_tables(declared.schema) {
        Ok(s) => s,
        // The declared-schema checks report a schema that does not run.
        Err(_) => return,
    };
    let live = match db.tables() {
        Ok(t) => t,
        Err(e) => {
            let message = format!("cannot read the live database's tables: {}", lower(&e));
            out.items.push(finding(spec, at, message, ""));
            return;
        }
    };
    for (table, columns) in schema {
        let Some(live_name) = live.iter().find(|t| t.eq_ignore_ascii_case(&table)) else {
            let message = format!("the live database has no table `{table}`");
            out.items.push(finding(spec, at, message, help));
            continue;
        };
        let have = db.table_columns(live_name).unwrap_or_default();
        for (name, ty) in columns {
            let message = match have.iter().find(|c| c.name.eq_ignore_ascii_case(&name)) {
                None => format!("the live database's table `{table}` has no column `{name}`"),
                Some(c) if !c.ty.eq_ignore_ascii_case(&ty) => format!(
                    "column `{table}.{name}` is declared {} but is {} in the live database",
                    shown_type(&ty),
                    shown_type(&c.ty)
                ),
                Some(_) => continue,
            };
            out.items.push(finding(spec, at, message, help));
        }
    }
}

fn shown_type(t: &str) -> String {
    if t.is_empty() {
        "without a type".into()
    } else {
        format!("`{t}`")
    }
}
