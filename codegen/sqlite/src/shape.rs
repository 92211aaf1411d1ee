//! A SQLite schema as facts that can be compared: each table's columns (name, declared type,
//! NOT NULL, default, primary-key position), its keys (primary, unique, foreign), each index's
//! table, uniqueness, columns and condition, and each trigger's and view's text. Two databases
//! made by different DDL (a migration's `ALTER TABLE ... ADD COLUMN` and a `CREATE TABLE` that
//! lists the column) have the same shape when they hold the same structures; `codegen check`
//! compares a spec's migrations with its schema this way, `codegen migrate --plan` writes the
//! difference as DDL, and `mcpspec migrate` finds the version a database without a migrations
//! table is at. CHECK constraints are not compared (SQLite does not list them apart from the
//! table's text).

use std::collections::BTreeMap;

use rusqlite::Connection;

/// What a schema object is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Table,
    Index,
    Trigger,
    View,
}

impl Kind {
    /// The word SQL uses for it.
    pub fn word(self) -> &'static str {
        match self {
            Kind::Table => "table",
            Kind::Index => "index",
            Kind::Trigger => "trigger",
            Kind::View => "view",
        }
    }
}

/// One table, index, trigger or view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    pub kind: Kind,
    pub name: String,
    /// The table an index or trigger is on (the table itself for a table).
    pub table: String,
    /// What is compared: one line per column and key of a table, the definition of an index,
    /// the normalised text of a trigger, view or virtual table.
    pub facts: Vec<String>,
    /// The object's text as SQLite keeps it (empty for an index a constraint made).
    pub sql: String,
}

/// A table's column, for DDL that adds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    pub ty: String,
    pub not_null: bool,
    pub default: Option<String>,
    /// Its place in the primary key (0 when not in it).
    pub pk: i64,
}

/// A schema: its objects by kind and name, the tables' columns by table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shape {
    pub objects: BTreeMap<(Kind, String), Object>,
    pub columns: BTreeMap<String, Vec<Column>>,
}

/// The shape of `conn`'s main database, leaving out SQLite's own objects, the tables of
/// virtual tables (which their `CREATE VIRTUAL TABLE` stands for) and those named in
/// `ignore` (mcpspec's own migrations table).
pub fn shape(conn: &Connection, ignore: &[&str]) -> rusqlite::Result<Shape> {
    let mut out = Shape::default();
    let rows: Vec<(String, String, String, Option<String>)> = conn
        .prepare(
            "SELECT type, name, tbl_name, sql FROM sqlite_schema \
             WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY type, name",
        )?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let shadows = shadow_tables(&rows);
    for (ty, name, table, sql) in rows {
        if ignore.iter().any(|i| i.eq_ignore_ascii_case(&table)) || shadows.contains(&name) {
            continue;
        }
        let sql = sql.unwrap_or_default();
        let (kind, facts) = match ty.as_str() {
            "table" if is_virtual(&sql) => (Kind::Table, vec![normalized(&sql)]),
            "table" => {
                let (facts, columns) = table_facts(conn, &name)?;
                out.columns.insert(name.clone(), columns);
                (Kind::Table, facts)
            }
            // An index a constraint made is a fact of its table.
            "index" if sql.is_empty() => continue,
            "index" => (Kind::Index, index_facts(conn, &name, &table, &sql)?),
            "trigger" => (Kind::Trigger, vec![normalized(&sql)]),
            "view" => (Kind::View, vec![normalized(&sql)]),
            _ => continue,
        };
        out.objects.insert(
            (kind, name.clone()),
            Object {
                kind,
                name,
                table,
                facts,
                sql,
            },
        );
    }
    Ok(out)
}

fn is_virtual(sql: &str) -> bool {
    sqlscan::words(sql).get(1).is_some_and(|w| w == "VIRTUAL")
}

/// The tables a virtual table keeps its data in (`lessons_fts_data`, ...): named after it.
fn shadow_tables(rows: &[(String, String, String, Option<String>)]) -> Vec<String> {
    let virtuals: Vec<&str> = rows
        .iter()
        .filter(|(ty, _, _, sql)| ty == "table" && sql.as_deref().is_some_and(is_virtual))
        .map(|(_, name, _, _)| name.as_str())
        .collect();
    rows.iter()
        .filter(|(ty, name, _, _)| {
            ty == "table"
                && virtuals.iter().any(|v| {
                    name.len() > v.len() + 1
                        && name.starts_with(v)
                        && name.as_bytes()[v.len()] == b'_'
                })
        })
        .map(|(_, name, _, _)| name.clone())
        .collect()
}

/// A table's facts (columns, keys) and its columns.
fn table_facts(conn: &Connection, table: &str) -> rusqlite::Result<(Vec<String>, Vec<Column>)> {
    let mut facts = Vec::new();
    let q = quoted(table);
    let columns: Vec<Column> = conn
        .prepare(&format!("PRAGMA table_xinfo({q})"))?
        .query_map([], |r| {
            Ok(Column {
                name: r.get(1)?,
                ty: r.get(2)?,
                not_null: r.get::<_, i64>(3)? != 0,
                default: r.get(4)?,
                pk: r.get(5)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    for c in &columns {
        facts.push(column_fact(c));
    }
    let keys: Vec<(String, i64, String)> = conn
        .prepare(&format!("PRAGMA index_list({q})"))?
        .query_map([], |r| Ok((r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (index, unique, origin) in keys {
        if origin != "c" && unique != 0 {
            facts.push(format!(
                "unique ({})",
                index_columns(conn, &index)?.join(", ")
            ));
        }
    }
    let fks: Vec<(i64, String, String, Option<String>, String, String)> = conn
        .prepare(&format!("PRAGMA foreign_key_list({q})"))?
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
            ))
        })?
        .collect::<rusqlite::Result<_>>()?;
    for (_, to, from, target, on_update, on_delete) in fks {
        facts.push(format!(
            "foreign key ({from}) references {to}({}) on update {on_update} on delete {on_delete}",
            target.unwrap_or_default()
        ));
    }
    let options: Option<(i64, i64)> = conn
        .query_row(
            "SELECT wr, strict FROM pragma_table_list WHERE schema = 'main' AND name = ?1",
            [table],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .ok();
    if let Some((without_rowid, strict)) = options {
        if without_rowid != 0 {
            facts.push("without rowid".into());
        }
        if strict != 0 {
            facts.push("strict".into());
        }
    }
    facts.sort();
    Ok((facts, columns))
}

/// A column as one comparable line.
pub fn column_fact(c: &Column) -> String {
    let mut s = format!("column {} {}", c.name, c.ty.to_ascii_uppercase());
    if c.not_null {
        s.push_str(" NOT NULL");
    }
    if let Some(d) = &c.default {
        s.push_str(" DEFAULT ");
        s.push_str(&normalized(d));
    }
    if c.pk > 0 {
        s.push_str(&format!(" primary key #{}", c.pk));
    }
    s
}

/// The key columns of an index, each with its order and collation.
fn index_columns(conn: &Connection, index: &str) -> rusqlite::Result<Vec<String>> {
    conn.prepare(&format!("PRAGMA index_xinfo({})", quoted(index)))?
        .query_map([], |r| {
            let name: Option<String> = r.get(2)?;
            let desc: i64 = r.get(3)?;
            let coll: String = r.get(4)?;
            let key: i64 = r.get(5)?;
            Ok((name, desc, coll, key))
        })?
        .filter_map(|row| match row {
            Ok((_, _, _, 0)) => None,
            Ok((name, desc, coll, _)) => Some(Ok(format!(
                "{}{}{}",
                name.unwrap_or_else(|| "<expression>".into()),
                if desc != 0 { " DESC" } else { "" },
                if coll == "BINARY" {
                    String::new()
                } else {
                    format!(" COLLATE {coll}")
                }
            ))),
            Err(e) => Some(Err(e)),
        })
        .collect()
}

/// An index's definition: its table, uniqueness, key columns and condition.
fn index_facts(
    conn: &Connection,
    index: &str,
    table: &str,
    sql: &str,
) -> rusqlite::Result<Vec<String>> {
    let unique = sqlscan::words(sql).get(1).is_some_and(|w| w == "UNIQUE");
    let mut fact = format!(
        "{}index on {table} ({})",
        if unique { "unique " } else { "" },
        index_columns(conn, index)?.join(", ")
    );
    let text = normalized(sql);
    if let Some(at) = text.find(" where ") {
        fact.push_str(&text[at..]);
    }
    Ok(vec![fact])
}

/// `sql` with its code lowercased and its whitespace collapsed (none beside punctuation), its
/// literals and quoted names kept as written, its comments dropped and `IF NOT EXISTS` left
/// out: how two spellings of one definition compare equal.
pub fn normalized(sql: &str) -> String {
    let mut out = String::new();
    let mut at = 0;
    let mut pending_space = false;
    let push_code = |out: &mut String, part: &str, pending_space: &mut bool| {
        for c in part.chars() {
            if c.is_whitespace() {
                *pending_space = true;
                continue;
            }
            let word_char = |c: char| c.is_alphanumeric() || c == '_';
            if *pending_space && out.chars().last().is_some_and(word_char) && word_char(c) {
                out.push(' ');
            }
            *pending_space = false;
            out.push(c.to_ascii_lowercase());
        }
    };
    for range in sqlscan::code(sql) {
        // Between two ranges of code lies a literal, a quoted name or a comment.
        let between = &sql[at..range.start];
        if !between.starts_with("--") && !between.starts_with("/*") {
            if pending_space
                && out
                    .chars()
                    .last()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_')
            {
                out.push(' ');
            }
            pending_space = false;
            out.push_str(between);
        } else {
            pending_space = true;
        }
        push_code(&mut out, &sql[range.clone()], &mut pending_space);
        at = range.end;
    }
    let tail = &sql[at..];
    if !tail.starts_with("--") && !tail.starts_with("/*") {
        out.push_str(tail);
    }
    let out = out.trim().trim_end_matches(';').to_string();
    out.replace(" if not exists ", " ")
}

/// An identifier quoted for SQLite.
pub fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The shape of the database `ddl` makes in a scratch database in memory (confined, with
/// `regexp()`), leaving out the tables named in `ignore` as [`shape`] does; SQLite's words
/// when it does not run.
pub fn of_ddl(ddl: &str, ignore: &[&str]) -> Result<Shape, String> {
    let conn = crate::confine::scratch().map_err(|e| e.to_string())?;
    crate::regexp::register(&conn).map_err(|e| e.to_string())?;
    conn.execute_batch(ddl)
        .map_err(|e| crate::confine::message(&e))?;
    shape(&conn, ignore).map_err(|e| e.to_string())
}

/// The lines of `a` and `b` that differ, each as `- object: fact` (only in `a`) or
/// `+ object: fact` (only in `b`), in schema order.
pub fn differences(a: &Shape, b: &Shape) -> Vec<String> {
    let mut out = Vec::new();
    let keys: std::collections::BTreeSet<&(Kind, String)> =
        a.objects.keys().chain(b.objects.keys()).collect();
    for key in keys {
        let label = format!("{} {}", key.0.word(), key.1);
        match (a.objects.get(key), b.objects.get(key)) {
            (Some(_), None) => out.push(format!("- {label}")),
            (None, Some(_)) => out.push(format!("+ {label}")),
            (Some(x), Some(y)) if x.facts != y.facts => {
                for f in x.facts.iter().filter(|f| !y.facts.contains(f)) {
                    out.push(format!("- {label}: {f}"));
                }
                for f in y.facts.iter().filter(|f| !x.facts.contains(f)) {
                    out.push(format!("+ {label}: {f}"));
                }
                if x.facts.iter().collect::<std::collections::BTreeSet<_>>()
                    == y.facts.iter().collect()
                {
                    out.push(format!("~ {label}: its columns are in another order"));
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_added_column_compares_equal_to_a_declared_one() {
        let declared = of_ddl(
            "CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, a TEXT NOT NULL, b INTEGER NOT NULL DEFAULT 0);\n\
             CREATE INDEX t_a ON t(a);",
            &[],
        )
        .unwrap();
        let migrated = of_ddl(
            "CREATE TABLE t (\n  id INTEGER PRIMARY KEY,\n  a TEXT NOT NULL\n);\n\
             CREATE INDEX IF NOT EXISTS t_a ON t (a);\n\
             ALTER TABLE t ADD COLUMN b INTEGER NOT NULL DEFAULT 0;",
            &[],
        )
        .unwrap();
        assert_eq!(differences(&declared, &migrated), Vec::<String>::new());
        let older = of_ddl("CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT);", &[]).unwrap();
        assert_eq!(
            differences(&declared, &older),
            [
                "- table t: column a TEXT NOT NULL",
                "- table t: column b INTEGER NOT NULL DEFAULT 0",
                "+ table t: column a TEXT",
                "- index t_a",
            ]
        );
    }

    #[test]
    fn normalising_keeps_literals_and_drops_comments() {
        assert_eq!(
            normalized(
                "CREATE TRIGGER x AFTER INSERT ON t BEGIN -- note\n  INSERT INTO u VALUES ('A  B');\nEND"
            ),
            "create trigger x after insert on t begin insert into u values('A  B');end"
        );
    }
}
