//! Read stage of `database.migrations`: the numbered SQL files in the directory a spec names,
//! as versions with a text and a checksum per engine the server runs on. Every problem is a
//! diagnostic at the `migrations:` key or in the file itself, all of them collected.
//!
//! A file is `NNNN_name.sql` (SQLite's text, which the other engines run too) or
//! `NNNN_name.<dialect>.sql` (that engine's own text of the same version). Versions count up
//! from 1 without gaps. A migration whose statements lose data (a dropped table or column, a
//! changed type, a rename, a new NOT NULL) must say so with a line `-- mcpspec: destructive`.

use std::collections::BTreeMap;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::diag::{Diagnostic, Diagnostics, Pos};
use crate::ir::{Migration, MigrationText};

/// The line a migration file carries when its destructive statements were read and meant.
pub(crate) const ACKNOWLEDGED: &str = "-- mcpspec: destructive";

/// Where the directory is, and how problems name it.
pub(crate) struct Place<'a> {
    /// The spec file as shown in messages.
    pub spec_file: &'a Path,
    /// The `migrations:` key's position in the spec.
    pub pos: Pos,
    /// The directory on disk.
    pub dir: &'a Path,
    /// The directory as shown in messages (beside the shown spec file).
    pub shown: &'a Path,
}

/// The files of one version: its name, and the file of each text (`None`: SQLite's, which
/// every engine without its own runs).
type Files = (String, BTreeMap<Option<&'static str>, String>);

impl Place<'_> {
    /// A problem at the spec's `migrations:` key.
    fn at_key(&self, message: String, help: &str) -> Diagnostic {
        Diagnostic {
            file: self.spec_file.to_path_buf(),
            pos: self.pos,
            message,
            label: Some("the migrations directory".into()),
            help: Some(help.to_string()),
        }
    }
}

/// The migrations in `place.dir` for a server that runs on `dialects` (SQLite first), in
/// version order; every problem found otherwise.
pub(crate) fn read(
    place: &Place<'_>,
    dialects: &[&'static sqlscan::Dialect],
) -> Result<Vec<Migration>, Diagnostics> {
    let mut problems = Diagnostics::default();
    let found = list(place, dialects, &mut problems);
    if found.is_empty() && problems.is_empty() {
        problems.items.push(place.at_key(
            format!("{} holds no migrations", place.shown.display()),
            "add a first migration, `0001_init.sql`, holding the schema",
        ));
    }
    let mut out = Vec::new();
    for (i, (version, files)) in found.into_iter().enumerate() {
        let expected = u32::try_from(i + 1).unwrap_or(u32::MAX);
        if version != expected {
            problems.items.push(place.at_key(
                format!("migration {expected:04} is missing: the versions go on at {version:04}"),
                "number migrations 0001, 0002, ... without gaps; never renumber one a database may have applied",
            ));
            break;
        }
        if let Some(m) = migration(place, dialects, version, files, &mut problems) {
            out.push(m);
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// The migration files in the directory, by version.
fn list(
    place: &Place<'_>,
    dialects: &[&'static sqlscan::Dialect],
    problems: &mut Diagnostics,
) -> BTreeMap<u32, Files> {
    let mut found: BTreeMap<u32, Files> = BTreeMap::new();
    let entries = match std::fs::read_dir(place.dir) {
        Ok(e) => e,
        Err(e) => {
            problems.items.push(place.at_key(
                format!(
                    "cannot read the migrations directory {}: {}",
                    place.shown.display(),
                    e.to_string().to_lowercase()
                ),
                "create it with a first migration, e.g. `0001_init.sql` holding the schema",
            ));
            return found;
        }
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".sql"))
        .collect();
    names.sort();
    for file in names {
        let shown = place.shown.join(&file);
        let problem =
            |message: String, help: &str| file_problem(&shown, Pos::default(), message, help);
        let Some((version, name, dialect)) = file_name(&file) else {
            problems.items.push(problem(
                format!("`{file}` is not a migration file name"),
                "name it `NNNN_name.sql` (four digits, then lowercase letters, digits and `_`), or `NNNN_name.<dialect>.sql` for one engine's own text",
            ));
            continue;
        };
        let dialect = match dialect {
            None => None,
            Some(d) => {
                match dialects.iter().skip(1).find(|x| x.name == d) {
                    Some(x) => Some(x.name),
                    None => {
                        problems.items.push(problem(
                        format!("`{file}` is a `{d}` text, but the spec gives no `database.{d}` side"),
                        "remove the file, or declare the engine's side in the spec",
                    ));
                        continue;
                    }
                }
            }
        };
        let entry = found
            .entry(version)
            .or_insert_with(|| (name.to_string(), BTreeMap::new()));
        if entry.0 != name {
            problems.items.push(problem(
                format!(
                    "migration {version:04} is named both `{}` and `{name}`",
                    entry.0
                ),
                "give each version one name: its texts for other engines share it",
            ));
            continue;
        }
        entry.1.insert(dialect, file);
    }
    found
}

/// One version's migration: a text per dialect (the engine's own file, else SQLite's), each
/// read and checked for unacknowledged destructive statements.
fn migration(
    place: &Place<'_>,
    dialects: &[&'static sqlscan::Dialect],
    version: u32,
    (name, files): Files,
    problems: &mut Diagnostics,
) -> Option<Migration> {
    let Some(base) = files.get(&None) else {
        problems.items.push(place.at_key(
            format!("migration {version:04}_{name} has no `{version:04}_{name}.sql`: SQLite's text, which every engine without its own runs"),
            "add the SQLite text of the migration",
        ));
        return None;
    };
    let mut texts = Vec::new();
    for dialect in dialects {
        let file = files.get(&Some(dialect.name)).unwrap_or(base);
        match text(place, file, dialect) {
            Ok(t) => texts.push(t),
            Err(d) => problems.items.push(d),
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for t in texts.iter().filter(|t| seen.insert(t.file.clone())) {
        acknowledged(t, problems);
    }
    Some(Migration {
        version,
        name,
        texts,
    })
}

/// The version, name and dialect a file name gives; `None` when it is not a migration's.
fn file_name(file: &str) -> Option<(u32, &str, Option<&str>)> {
    let stem = file.strip_suffix(".sql")?;
    let (stem, dialect) = match stem.split_once('.') {
        Some((s, d)) => (s, Some(d)),
        None => (stem, None),
    };
    let (digits, name) = stem.split_once('_')?;
    let plain = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    };
    if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_digit()) || !plain(name) {
        return None;
    }
    if dialect.is_some_and(|d| !plain(d)) {
        return None;
    }
    let version: u32 = digits.parse().ok()?;
    (version > 0).then_some((version, name, dialect))
}

/// One file's text and checksum, read as a spec is read (a regular file, bounded, UTF-8).
fn text(
    place: &Place<'_>,
    file: &str,
    dialect: &'static sqlscan::Dialect,
) -> Result<MigrationText, Diagnostic> {
    let shown = place.shown.join(file);
    // Read as a spec is read: a regular file, bounded, UTF-8.
    let sql = crate::read_spec(&place.dir.join(file)).map_err(|e| {
        file_problem(
            &shown,
            Pos::default(),
            format!("cannot read: {}", e.to_string().to_lowercase()),
            "a migration is a UTF-8 text file",
        )
    })?;
    Ok(MigrationText {
        dialect,
        file: shown.to_string_lossy().replace('\\', "/"),
        checksum: checksum(&sql),
        sql,
    })
}

/// The SHA-256 of a migration's text, as lowercase hex: what a database records when it
/// applies it and what the contract snapshot records.
pub(crate) fn checksum(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn file_problem(file: &Path, pos: Pos, message: String, help: &str) -> Diagnostic {
    Diagnostic {
        file: file.to_path_buf(),
        pos,
        message,
        label: None,
        help: Some(help.to_string()),
    }
}

/// A problem for each destructive statement of `t` when the file does not acknowledge them.
fn acknowledged(t: &MigrationText, problems: &mut Diagnostics) {
    if marked(&t.sql) {
        return;
    }
    for (what, offset) in destructive(&t.sql) {
        let line = u32::try_from(t.sql[..offset].matches('\n').count() + 1).unwrap_or(u32::MAX);
        problems.items.push(Diagnostic {
            file: t.file.clone().into(),
            pos: Pos { line, column: 1 },
            message: format!("`{what}` may lose data, and the migration does not say it means it"),
            label: Some("destructive".into()),
            help: Some(format!(
                "read what it drops or changes, then add the line `{ACKNOWLEDGED}` to the file; the contract then needs a major version step"
            )),
        });
    }
}

/// Whether `sql` carries [`ACKNOWLEDGED`] as a comment of its own line: a `--` comment outside
/// literals and block comments, with nothing but blanks before it on its line.
fn marked(sql: &str) -> bool {
    use sqlscan::statements::{Kind, tokens};
    tokens(sql).iter().any(|t| {
        let line_start = sql[..t.at.start].rfind('\n').map_or(0, |n| n + 1);
        t.kind == Kind::LineComment
            && sql[t.at.clone()].trim() == ACKNOWLEDGED
            && sql[line_start..t.at.start].trim().is_empty()
    })
}

/// Whether `t`'s statements may lose data.
pub(crate) fn is_destructive(t: &MigrationText) -> bool {
    !destructive(&t.sql).is_empty()
}

/// The statements of `sql` that may lose data or fail on existing rows, named by their
/// leading words, with where they start: a dropped table, schema, database, column or
/// partition, TRUNCATE, DELETE, UPDATE and REPLACE (which rewrite rows), a rename, a changed
/// column (`ALTER COLUMN`, `MODIFY`, `CHANGE`). The body of a trigger, a function or a
/// procedure runs later and changes nothing now; a `DO` block runs now, and is read.
pub(crate) fn destructive(sql: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    destructive_into(sql, 0, &mut out);
    out
}

/// [`destructive`] of `sql`, which starts at `base` in the file.
fn destructive_into(sql: &str, base: usize, out: &mut Vec<(String, usize)>) {
    use sqlscan::statements::{Kind, statements};
    for statement in statements(sql) {
        let words: Vec<(&str, usize)> = statement
            .iter()
            .filter(|t| t.kind == Kind::Word)
            .map(|t| (t.word.as_str(), base + t.at.start))
            .collect();
        if runs_later(&words) {
            continue;
        }
        found_in(sql, base, &words, out);
        // A `DO $$ ... $$` block runs now: what its body does counts.
        if words.first().is_some_and(|(w, _)| *w == "DO") {
            for body in statement.iter().filter(|t| t.kind == Kind::Body) {
                let text = &sql[body.at.clone()];
                let tag = text[1..].find('$').map_or(text.len(), |p| p + 2);
                if let Some(inner) = text.get(tag..text.len().saturating_sub(tag)) {
                    destructive_into(inner, base + body.at.start + tag, out);
                }
            }
        }
    }
}

/// Whether a statement of `words` makes something that runs later (a trigger, a function, a
/// procedure), whose body changes nothing now.
fn runs_later(words: &[(&str, usize)]) -> bool {
    words.first().is_some_and(|(w, _)| *w == "CREATE")
        && words
            .iter()
            .take(6)
            .any(|(w, _)| matches!(*w, "TRIGGER" | "FUNCTION" | "PROCEDURE"))
}

/// The destructive steps among one statement's `words` (with their offsets in the file, whose
/// text from `base` is `sql`).
fn found_in(sql: &str, base: usize, words: &[(&str, usize)], out: &mut Vec<(String, usize)>) {
    let at = |i: usize| words.get(i).map_or("", |(w, _)| *w);
    let altering = at(0) == "ALTER";
    for (i, (w, offset)) in words.iter().enumerate() {
        let before = if i > 0 { at(i - 1) } else { "" };
        let found = match (*w, at(i + 1)) {
            ("DROP", next @ ("TABLE" | "SCHEMA" | "DATABASE")) if !altering => {
                Some(format!("DROP {next}"))
            }
            ("DROP", next) if altering => dropped_by_alter(next),
            ("TRUNCATE", _) => Some("TRUNCATE".to_string()),
            ("DELETE", _) if before != "ON" && before != "AFTER" && before != "BEFORE" => {
                Some("DELETE".to_string())
            }
            ("UPDATE", _) if !matches!(before, "ON" | "FOR" | "OF" | "GRANT" | "REVOKE") => {
                Some("UPDATE".to_string())
            }
            ("REPLACE", _) if replaces_rows(sql, base, words, i) => Some("REPLACE".to_string()),
            ("RENAME", _) => Some("RENAME".to_string()),
            ("ALTER", "COLUMN") => Some("ALTER COLUMN".to_string()),
            ("MODIFY" | "CHANGE", _) if altering => Some((*w).to_string()),
            _ => None,
        };
        if let Some(f) = found {
            out.push((f, *offset));
        }
    }
}

/// What `ALTER TABLE ... DROP <next>` drops, when it loses data: a column (`DROP COLUMN c`,
/// `DROP c`, `DROP IF EXISTS c`) or a partition; a constraint, an index, a key or a default
/// loses none.
fn dropped_by_alter(next: &str) -> Option<String> {
    match next {
        "CONSTRAINT" | "INDEX" | "KEY" | "PRIMARY" | "FOREIGN" | "CHECK" | "DEFAULT" | "NOT"
        | "EXPRESSION" | "IDENTITY" | "UNIQUE" | "SYSTEM" | "" => None,
        "PARTITION" => Some("DROP PARTITION".to_string()),
        _ => Some("DROP COLUMN".to_string()),
    }
}

/// Whether the `REPLACE` at `words[i]` rewrites rows: `REPLACE INTO` or `INSERT OR REPLACE`,
/// not `CREATE OR REPLACE`, `ON CONFLICT REPLACE` or the `replace()` function.
fn replaces_rows(sql: &str, base: usize, words: &[(&str, usize)], i: usize) -> bool {
    let (_, offset) = words[i];
    let after = &sql[offset - base + "REPLACE".len()..];
    if after.trim_start().starts_with('(') {
        return false;
    }
    let before = |back: usize| i.checked_sub(back).map_or("", |j| words[j].0);
    !(before(1) == "CONFLICT" || (before(1) == "OR" && before(2) == "CREATE"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_give_version_name_and_dialect() {
        let cases = [
            ("0001_init.sql", Some((1, "init", None))),
            (
                "0012_add_due_date.postgres.sql",
                Some((12, "add_due_date", Some("postgres"))),
            ),
            ("0000_zero.sql", None),
            ("1_init.sql", None),
            ("0001-init.sql", None),
            ("0001_Init.sql", None),
            ("0001_.sql", None),
            ("0001_init.txt", None),
        ];
        for (file, want) in cases {
            assert_eq!(file_name(file), want, "{file}");
        }
    }

    #[test]
    fn destructive_statements_are_found_outside_literals_and_comments() {
        let cases: &[(&str, &[&str])] = &[
            (
                "CREATE TRIGGER t_ad AFTER DELETE ON t BEGIN DELETE FROM u WHERE id = old.id; END;\nDROP TABLE v;",
                &["DROP TABLE"],
            ),
            ("ALTER TABLE t ADD COLUMN c TEXT;", &[]),
            ("ALTER TABLE t DROP COLUMN c;", &["DROP COLUMN"]),
            ("drop table t; -- DROP TABLE u\n", &["DROP TABLE"]),
            ("INSERT INTO t VALUES ('DROP TABLE x');", &[]),
            (
                "ALTER TABLE t ALTER COLUMN c TYPE bigint;",
                &["ALTER COLUMN"],
            ),
            ("ALTER TABLE t RENAME TO u; DROP INDEX i;", &["RENAME"]),
            ("DELETE FROM t WHERE x = 1;", &["DELETE"]),
            // A trigger without a BEGIN ... END body ends at its `;`: what follows is read.
            (
                "CREATE TRIGGER tg BEFORE INSERT ON t FOR EACH ROW EXECUTE FUNCTION f();\nDROP TABLE secret;",
                &["DROP TABLE"],
            ),
            (
                "CREATE TRIGGER tg AFTER INSERT ON t FOR EACH ROW INSERT INTO log VALUES (NEW.id); DROP TABLE x;",
                &["DROP TABLE"],
            ),
            // ALTER TABLE's DROP of a column, with or without COLUMN; of a constraint, no.
            ("ALTER TABLE t DROP c;", &["DROP COLUMN"]),
            ("ALTER TABLE t DROP IF EXISTS c;", &["DROP COLUMN"]),
            (
                "ALTER TABLE t DROP CONSTRAINT k, DROP INDEX i, DROP PRIMARY KEY;",
                &[],
            ),
            ("ALTER TABLE t DROP PARTITION p1;", &["DROP PARTITION"]),
            // Rows rewritten.
            ("UPDATE t SET x = 0;", &["UPDATE"]),
            ("REPLACE INTO t VALUES (1);", &["REPLACE"]),
            ("INSERT OR REPLACE INTO t VALUES (1);", &["REPLACE"]),
            (
                "INSERT INTO t VALUES (1) ON CONFLICT (id) DO UPDATE SET x = 1;",
                &["UPDATE"],
            ),
            (
                "INSERT INTO t VALUES (1) ON DUPLICATE KEY UPDATE x = 1;",
                &["UPDATE"],
            ),
            // What rewrites nothing.
            (
                "CREATE OR REPLACE VIEW v AS SELECT replace(a, 'x', 'y') FROM t;",
                &[],
            ),
            (
                "CREATE TABLE c (id INT REFERENCES p ON DELETE CASCADE ON UPDATE CASCADE);",
                &[],
            ),
            ("CREATE TABLE u (x TEXT UNIQUE ON CONFLICT REPLACE);", &[]),
            ("SELECT * FROM t FOR UPDATE;", &[]),
            // A function's body runs later; a DO block runs now.
            (
                "CREATE FUNCTION f() RETURNS void AS $$ BEGIN DELETE FROM t; END $$ LANGUAGE plpgsql;",
                &[],
            ),
            ("DO $$ BEGIN DELETE FROM t; END $$;", &["DELETE"]),
        ];
        for (sql, want) in cases {
            let got: Vec<String> = destructive(sql).into_iter().map(|(w, _)| w).collect();
            assert_eq!(&got, want, "{sql}");
        }
        // Offsets point into the file, inside a DO block too.
        let sql = "SELECT 1;\nDO $$ BEGIN\n  DELETE FROM t; END $$;";
        let (_, at) = destructive(sql).pop().unwrap();
        assert!(sql[at..].starts_with("DELETE"));
    }

    #[test]
    fn the_marker_counts_only_as_a_comment_of_its_own_line() {
        assert!(marked("-- mcpspec: destructive\nDROP TABLE t;"));
        assert!(marked("DROP TABLE t;\n  -- mcpspec: destructive  \n"));
        for not in [
            "/*\n-- mcpspec: destructive\n*/ DROP TABLE t;",
            "INSERT INTO t VALUES ('\n-- mcpspec: destructive\n');",
            "DROP TABLE t; -- mcpspec: destructive",
            "-- mcpspec: destructive, maybe",
        ] {
            assert!(!marked(not), "{not}");
        }
    }
}
