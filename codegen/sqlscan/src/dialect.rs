//! The SQL dialects mcpspec runs, in one table: the spec's key for a statement's text in the
//! dialect, the URL schemes that reach its engine, how its placeholders are written, and which
//! declared column kinds its types read as. The spec compiler, the runtime's backends and the
//! command lines all read this table; a new engine adds its entry here and a backend module in
//! the runtime.

use crate::Positional;

/// How a dialect writes a statement's parameters once the build has rewritten `:name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placeholders {
    /// `:name`, bound by name (SQLite).
    Named,
    /// `$1`, `$2`: one number per name (PostgreSQL).
    Numbered,
    /// `?`, bound in order of appearance (MySQL, MariaDB).
    Question,
}

/// One SQL dialect and its engine; dialects are the same when their names are.
#[derive(Debug)]
pub struct Dialect {
    /// The dialect's name: the spec's key for its texts (`postgres:`) and its backend's name.
    pub name: &'static str,
    /// Its name in messages.
    pub title: &'static str,
    /// Its engine's name in OpenTelemetry's `db.system.name` (the statements' spans).
    pub system: &'static str,
    /// The URL schemes that reach its engine, lower case; none for an engine opened by file
    /// name.
    pub schemes: &'static [&'static str],
    /// How its placeholders are written.
    pub placeholders: Placeholders,
    /// A URL of this engine for messages, with the parts a user fills in.
    pub url_form: &'static str,
    /// The declared column kinds a result column of the database type `ty` reads as; none
    /// for a type mcpspec does not read; `None` for a dialect whose columns take any value.
    pub reads_as: Option<fn(&str) -> &'static [&'static str]>,
    /// How a statement casts a value to what each declared kind reads as, for help lines.
    pub casts: &'static [(&'static str, &'static str)],
    /// How its schema declares a column of vectors of `{dims}` dimensions, for help lines.
    pub vector_column: &'static str,
}

/// SQLite: the embedded default, opened by file name; its statements are the spec's `query`
/// texts as written.
pub static SQLITE: Dialect = Dialect {
    name: "sqlite",
    title: "SQLite",
    system: "sqlite",
    schemes: &[],
    placeholders: Placeholders::Named,
    url_form: "PATH",
    reads_as: None,
    casts: &[],
    vector_column: "F32_BLOB({dims}), or float[{dims}] in a vec0 table",
};

/// PostgreSQL.
pub static POSTGRES: Dialect = Dialect {
    name: "postgres",
    title: "PostgreSQL",
    system: "postgresql",
    schemes: &["postgres", "postgresql"],
    placeholders: Placeholders::Numbered,
    url_form: "postgresql://USER:PASSWORD@HOST:PORT/DATABASE",
    reads_as: Some(crate::reads_as),
    casts: &[
        ("text", "`x::text`, or `to_char(...)` for a timestamp"),
        ("integer", "`x::bigint`"),
        ("real", "`x::float8`"),
        ("boolean", "`x::boolean`"),
        ("json", "`to_jsonb(x)`"),
    ],
    vector_column: "vector({dims})",
};

impl PartialEq for Dialect {
    fn eq(&self, other: &Dialect) -> bool {
        self.name == other.name
    }
}

impl Eq for Dialect {}

/// MariaDB and MySQL: one dialect, reached by `mysql://` and `mariadb://` URLs. Statements run
/// with `ANSI_QUOTES` and `PIPES_AS_CONCAT` in the session's `sql_mode`, so that `"name"` quotes
/// an identifier and `||` joins text, as in the spec's other texts.
pub static MYSQL: Dialect = Dialect {
    name: "mysql",
    title: "MariaDB/MySQL",
    system: "mysql",
    schemes: &["mysql", "mariadb"],
    placeholders: Placeholders::Question,
    url_form: "mysql://USER:PASSWORD@HOST:PORT/DATABASE",
    reads_as: Some(mysql_reads_as),
    casts: &[
        ("text", "`CAST(x AS CHAR)`"),
        ("integer", "`CAST(x AS SIGNED)`"),
        ("real", "`CAST(x AS DOUBLE)`"),
        ("boolean", "`x <> 0`"),
        ("json", "`JSON_QUOTE(x)`, or a column that holds JSON text"),
    ],
    vector_column: "VECTOR({dims})",
};

/// The declared column kinds a MariaDB/MySQL result column of type `ty` (as the protocol names
/// it: `LONG`, `VAR_STRING`, ...) reads as.
fn mysql_reads_as(ty: &str) -> &'static [&'static str] {
    match ty {
        "TINY" | "SHORT" | "LONG" | "LONGLONG" | "INT24" | "YEAR" | "BIT" => {
            &["integer", "real", "boolean"]
        }
        "FLOAT" | "DOUBLE" | "DECIMAL" | "NEWDECIMAL" => &["real"],
        "JSON" => &["json", "text"],
        "VARCHAR" | "VAR_STRING" | "STRING" | "BLOB" | "TINY_BLOB" | "MEDIUM_BLOB"
        | "LONG_BLOB" | "ENUM" | "SET" | "NULL" => &["text", "json"],
        "DATE" | "TIME" | "DATETIME" | "TIMESTAMP" | "NEWDATE" | "TIME2" | "DATETIME2"
        | "TIMESTAMP2" => &["text"],
        _ => &[],
    }
}

/// Every dialect, the embedded default first.
pub static DIALECTS: &[&Dialect] = &[&SQLITE, &POSTGRES, &MYSQL];

impl Dialect {
    /// The dialect named `name`.
    pub fn named(name: &str) -> Option<&'static Dialect> {
        DIALECTS.iter().copied().find(|d| d.name == name)
    }

    /// The dialect whose engine a URL of `location`'s scheme reaches.
    pub fn of_url(location: &str) -> Option<&'static Dialect> {
        let (scheme, _) = location.split_once("://")?;
        DIALECTS
            .iter()
            .copied()
            .find(|d| d.schemes.iter().any(|s| s.eq_ignore_ascii_case(scheme)))
    }

    /// The dialects other than the embedded default: those a spec gives texts for.
    pub fn served() -> impl Iterator<Item = &'static Dialect> {
        DIALECTS.iter().copied().filter(|d| !d.schemes.is_empty())
    }

    /// `sql` with its `:name` parameters written as this dialect writes placeholders.
    pub fn place(&self, sql: &str) -> Positional {
        crate::placed(sql, self.placeholders)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dialect_is_found_by_name_and_scheme() {
        for d in DIALECTS {
            assert_eq!(Dialect::named(d.name), Some(*d));
            for s in d.schemes {
                let url = format!("{}://h/db", s.to_uppercase());
                assert_eq!(Dialect::of_url(&url), Some(*d), "{url}");
            }
        }
        assert_eq!(Dialect::of_url("/data/app.db"), None);
        assert_eq!(Dialect::of_url("ftp://h/x"), None);
    }

    #[test]
    fn placeholders_follow_the_dialect() {
        let sql = "SELECT :a, :b, :a, 'x:y' -- :c";
        let cases = [
            (Placeholders::Named, sql, vec!["a", "b"]),
            (
                Placeholders::Numbered,
                "SELECT $1, $2, $1, 'x:y' -- :c",
                vec!["a", "b"],
            ),
            (
                Placeholders::Question,
                "SELECT ?, ?, ?, 'x:y' -- :c",
                vec!["a", "b", "a"],
            ),
        ];
        for (style, text, names) in cases {
            let p = crate::placed(sql, style);
            assert_eq!(
                (p.text.as_str(), p.names),
                (text, names.iter().map(|s| s.to_string()).collect()),
                "{style:?}"
            );
            assert_eq!(p.refs.len(), 3);
        }
    }
}
