//! `codegen migrate --plan SERVER`: the next migration, written from the difference between
//! the schema the migrations give and the declared `database.schema` (both as SQLite
//! [`shape`](mcpspec_sqlite::shape)s). What SQLite's `ALTER TABLE` can do is written
//! as such (a new table, a new column with a default or NULL, an index, a trigger, a view);
//! what it cannot (a dropped or changed column, a new key) rebuilds the table, copying its
//! rows. Steps that may lose data are marked and the file is left unacknowledged, so that
//! `check` refuses it until a person has read it. A table that disappears while another
//! appears is never taken for a rename: the plan says so and drops and creates.

use std::collections::BTreeSet;

use mcpspec_sqlite::shape::{Column, Kind, Object, Shape, quoted};

use crate::Spec;
use crate::ir;

/// A planned migration.
#[derive(Debug)]
pub struct Planned {
    /// Where it goes, relative to the project root (e.g. `spec/migrations/notes/0002_add_notes_due.sql`).
    pub file: String,
    pub text: String,
    /// One line per step, for the command's output.
    pub steps: Vec<String>,
    /// Whether a step may lose data (the file then needs acknowledging).
    pub destructive: bool,
}

/// Plans the next migration of `spec`; why not, when there is nothing to plan or the
/// migrations do not run.
pub fn plan(spec: &Spec, name: Option<&str>) -> Result<Planned, String> {
    let db = spec
        .ir
        .database
        .as_ref()
        .filter(|d| !d.migrations.is_empty())
        .ok_or_else(|| {
            format!(
                "`{}` declares no migrations: add `migrations: DIR` under `database` and a first migration holding the schema",
                spec.ir.name
            )
        })?;
    let (declared, migrated) = crate::migcheck::shapes(db).map_err(|d| d.to_string())?;
    let mut steps = Steps::default();
    tables(&declared, &migrated, &mut steps);
    others(&declared, &migrated, &mut steps);
    if steps.sql.is_empty() {
        return Err(format!(
            "the migrations of `{}` already give its declared schema: nothing to plan",
            spec.ir.name
        ));
    }
    let version = db.migrations.len() + 1;
    let name = match name {
        Some(n) => n.to_string(),
        None => steps
            .name
            .clone()
            .unwrap_or_else(|| "schema_changes".into()),
    };
    let (_, dir, _) = db.migrations_at.clone().unwrap_or_default();
    let stem = format!("{version:04}_{name}");
    Ok(Planned {
        file: format!("{dir}/{stem}.sql"),
        text: render(spec, db, &stem, &steps),
        steps: steps.said,
        destructive: steps.destructive,
    })
}

/// The statements planned so far.
#[derive(Default)]
struct Steps {
    sql: Vec<String>,
    said: Vec<String>,
    destructive: bool,
    /// A name for the file from the first step.
    name: Option<String>,
    /// The tables rebuilt, whose indexes and triggers the rebuild makes.
    rebuilt: BTreeSet<String>,
}

impl Steps {
    fn push(&mut self, said: String, name: String, sql: String, destructive: bool) {
        self.name.get_or_insert_with(|| file_word(&name));
        let mark = if destructive {
            "-- destructive: "
        } else {
            "-- "
        };
        self.sql.push(format!("{mark}{said}\n{sql}"));
        self.said.push(if destructive {
            format!("{said} (destructive)")
        } else {
            said
        });
        self.destructive |= destructive;
    }
}

/// A name as a migration file's name may have it: lowercase words joined by `_`.
fn file_word(name: &str) -> String {
    crate::names::words(name)
        .join("_")
        .chars()
        .take(60)
        .collect()
}

/// Tables added, dropped, altered or rebuilt.
fn tables(declared: &Shape, migrated: &Shape, steps: &mut Steps) {
    let table_names = |s: &Shape| -> BTreeSet<String> {
        s.objects
            .keys()
            .filter(|(k, _)| *k == Kind::Table)
            .map(|(_, n)| n.clone())
            .collect()
    };
    let (want, have) = (table_names(declared), table_names(migrated));
    let added: Vec<&String> = want.difference(&have).collect();
    for t in &added {
        let o = &declared.objects[&(Kind::Table, (*t).clone())];
        steps.push(
            format!("add table {t}"),
            format!("add_{t}"),
            format!("{};", o.sql),
            false,
        );
    }
    for t in have.difference(&want) {
        let mut said = format!("drop table {t} and its rows");
        if !added.is_empty() {
            said.push_str(&format!(
                " (if it was renamed, write `ALTER TABLE {t} RENAME TO ...` instead: renames are not guessed)"
            ));
        }
        steps.push(
            said,
            format!("drop_{t}"),
            format!("DROP TABLE {};", quoted(t)),
            true,
        );
    }
    for t in want.intersection(&have) {
        let key = (Kind::Table, t.clone());
        let (d, m) = (&declared.objects[&key], &migrated.objects[&key]);
        if d.facts == m.facts {
            continue;
        }
        let (dc, mc) = (&declared.columns[t], &migrated.columns[t]);
        match added_columns(d, m, dc, mc) {
            Some(new) => {
                for c in new {
                    steps.push(
                        format!("add column {t}.{}", c.name),
                        format!("add_{t}_{}", c.name),
                        format!("ALTER TABLE {} ADD COLUMN {};", quoted(t), column_ddl(c)),
                        false,
                    );
                }
            }
            None => rebuild(t, d, dc, mc, declared, steps),
        }
    }
}

/// The columns to add when the only change to a table is new columns at its end that
/// `ALTER TABLE ... ADD COLUMN` can make (no key, and NULL or a default for existing rows).
fn added_columns<'a>(
    d: &Object,
    m: &Object,
    dc: &'a [Column],
    mc: &[Column],
) -> Option<&'a [Column]> {
    if dc.len() <= mc.len() || dc[..mc.len()] != *mc {
        return None;
    }
    let new = &dc[mc.len()..];
    let addable = new
        .iter()
        .all(|c| c.pk == 0 && (!c.not_null || c.default.is_some()));
    // Keys and foreign keys beyond the columns must be unchanged.
    let keys = |o: &Object| -> Vec<String> {
        o.facts
            .iter()
            .filter(|f| !f.starts_with("column "))
            .cloned()
            .collect()
    };
    (addable && keys(d) == keys(m)).then_some(new)
}

/// A column's definition for `ADD COLUMN`.
fn column_ddl(c: &Column) -> String {
    let mut s = format!("{} {}", quoted(&c.name), c.ty);
    if c.not_null {
        s.push_str(" NOT NULL");
    }
    if let Some(d) = &c.default {
        s.push_str(" DEFAULT ");
        s.push_str(d);
    }
    s.trim_end().to_string()
}

/// Rebuilds `t` as declared, copying the columns both have; its indexes and triggers go with
/// the old table, so every declared one of `t` is made again.
fn rebuild(t: &str, d: &Object, dc: &[Column], mc: &[Column], declared: &Shape, steps: &mut Steps) {
    let new_name = format!("{t}_mcpspec_new");
    let create = d.sql.replacen(
        &create_prefix(&d.sql, t),
        &format!("CREATE TABLE {}", quoted(&new_name)),
        1,
    );
    let kept: Vec<String> = dc
        .iter()
        .filter(|c| mc.iter().any(|o| o.name == c.name))
        .map(|c| quoted(&c.name))
        .collect();
    let lost: Vec<&str> = mc
        .iter()
        .filter(|o| !dc.iter().any(|c| c.name == o.name))
        .map(|o| o.name.as_str())
        .collect();
    let mut sql = vec![
        format!("{create};"),
        format!(
            "INSERT INTO {} ({cols}) SELECT {cols} FROM {};",
            quoted(&new_name),
            quoted(t),
            cols = kept.join(", ")
        ),
        format!("DROP TABLE {};", quoted(t)),
        format!("ALTER TABLE {} RENAME TO {};", quoted(&new_name), quoted(t)),
    ];
    for o in declared
        .objects
        .values()
        .filter(|o| o.kind != Kind::Table && o.table == t)
    {
        sql.push(format!("{};", o.sql));
    }
    let mut said = format!(
        "rebuild table {t} as declared (ALTER TABLE cannot make the change on SQLite), copying its rows"
    );
    if !lost.is_empty() {
        said.push_str(&format!("; drops column(s) {}", lost.join(", ")));
    }
    steps.push(said, format!("change_{t}"), sql.join("\n"), true);
    steps.rebuilt.insert(t.to_string());
}

/// The `CREATE TABLE name` that begins a table's text as SQLite keeps it.
fn create_prefix(sql: &str, table: &str) -> String {
    let upto = sql.find(table).map_or(0, |i| i + table.len());
    // A quoted name keeps its closing quote.
    let end = sql[upto..]
        .chars()
        .next()
        .filter(|c| matches!(c, '"' | '`' | ']'))
        .map_or(upto, |c| upto + c.len_utf8());
    sql[..end].to_string()
}

/// Indexes, triggers and views added, dropped or changed (those of rebuilt tables are made
/// by the rebuild).
fn others(declared: &Shape, migrated: &Shape, steps: &mut Steps) {
    let rebuilt = steps.rebuilt.clone();
    let keys: BTreeSet<&(Kind, String)> = declared
        .objects
        .keys()
        .chain(migrated.objects.keys())
        .filter(|(k, _)| *k != Kind::Table)
        .collect();
    for key in keys {
        let (kind, name) = (key.0.word(), &key.1);
        let drop = format!("DROP {} {};", kind.to_uppercase(), quoted(name));
        match (declared.objects.get(key), migrated.objects.get(key)) {
            (Some(d), _) if rebuilt.contains(&d.table) => {}
            (Some(d), None) => steps.push(
                format!("add {kind} {name}"),
                format!("add_{kind}_{name}"),
                format!("{};", d.sql),
                false,
            ),
            (None, Some(m)) if !rebuilt.contains(&m.table) => steps.push(
                format!("drop {kind} {name}"),
                format!("drop_{kind}_{name}"),
                drop,
                false,
            ),
            (Some(d), Some(m)) if d.facts != m.facts => steps.push(
                format!("change {kind} {name}"),
                format!("change_{kind}_{name}"),
                format!("{drop}\n{};", d.sql),
                false,
            ),
            _ => {}
        }
    }
}

/// The file's text: a header saying what made it and what to do, then the steps.
fn render(spec: &Spec, db: &ir::Database, stem: &str, steps: &Steps) -> String {
    let mut out = format!(
        "-- {stem}: planned by `cargo run -p codegen -- migrate --plan {}` from the difference\n-- between the migrations before it and `database.schema` in {}. Read it, then run\n-- `cargo run -p codegen -- check`.\n",
        spec.ir.name, spec.ir.file
    );
    for dialect in db
        .engines
        .iter()
        .filter_map(|e| sqlscan::Dialect::named(e.dialect))
    {
        out.push_str(&format!(
            "-- The server also runs on {}: if this text does not run there, write its own in\n-- {stem}.{}.sql beside this file.\n",
            dialect.title, dialect.name
        ));
    }
    if steps.destructive {
        out.push_str(&format!(
            "-- Steps marked destructive may lose data. When you have read them and mean them, add a\n-- line `{}` (alone on its line); `check` refuses the file until then, and the\n-- contract then needs a major version step.\n",
            crate::migrations::ACKNOWLEDGED
        ));
    }
    for s in &steps.sql {
        out.push('\n');
        out.push_str(s);
        out.push('\n');
    }
    out
}
