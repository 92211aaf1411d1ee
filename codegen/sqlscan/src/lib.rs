//! What the spec compiler (build time) and the runtime (run time) must agree on about SQL
//! dialects, so that both read a statement, a URL and a column type the same way: the
//! [`DIALECTS`] mcpspec runs (a new engine adds its entry there); which parts of a statement
//! are code rather than quoted literals, quoted identifiers or comments; how `:name` parameters
//! become a dialect's placeholders; which locations are database URLs and how their passwords
//! are hidden; which declared column kinds a database type reads as; which column types hold
//! vectors, and of how many dimensions ([`vectors`]). A lexer and tables, not a parser; it
//! depends on nothing.

mod dialect;
pub mod statements;
pub mod vectors;

pub use dialect::{DIALECTS, Dialect, MYSQL, POSTGRES, Placeholders, SQLITE};

use std::ops::Range;

/// The byte ranges of `sql` that are code: outside `'...'` literals, `"..."` identifiers (a
/// doubled quote inside either is two adjacent quoted parts, also skipped), `-- ...` and
/// `/* ... */` comments. Dollar-quoted bodies count as code: a function body is code.
pub fn code(sql: &str) -> Vec<Range<usize>> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut start) = (0, 0);
    while i < b.len() {
        let skip_to = match b[i] {
            q @ (b'\'' | b'"') => {
                let close = b[i + 1..].iter().position(|&c| c == q);
                close.map_or(b.len(), |p| i + 1 + p + 1)
            }
            b'-' if b.get(i + 1) == Some(&b'-') => b[i..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |p| i + p),
            b'/' if b.get(i + 1) == Some(&b'*') => {
                sql[i + 2..].find("*/").map_or(b.len(), |p| i + 2 + p + 2)
            }
            _ => {
                i += 1;
                continue;
            }
        };
        if start < i {
            out.push(start..i);
        }
        i = skip_to;
        start = skip_to;
    }
    if start < b.len() {
        out.push(start..b.len());
    }
    out
}

/// A statement with its `:name` parameters numbered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Positional {
    /// The text with each `:name` replaced by the dialect's placeholder.
    pub text: String,
    /// The name bound to each placeholder, in order: with `$n`, one number per name however
    /// often it appears; with `?`, one entry per occurrence.
    pub names: Vec<String>,
    /// Every parameter as written: its name and byte offset in the original text.
    pub refs: Vec<(String, usize)>,
}

/// The roots of the dotted parameter names: `:auth.sub` and `:auth.claims.NAME` (the caller's
/// identity), `:embeddings.NAME.FIELD` (an embedding provider as the server runs it),
/// `:page.limit` and `:after.COLUMN` (a paged statement's page). Elsewhere a dot ends a
/// parameter's name, as in `:a.b`.
pub const DOTTED: &[&str] = &["auth", "embeddings", "page", "after"];

/// Whether a parameter named `root` goes on past a dot (see [`DOTTED`]).
pub fn dotted(root: &str) -> bool {
    DOTTED.contains(&root)
}

/// `sql` with each `:name` parameter (a letter or `_`, then letters, digits and `_`; under
/// the roots of [`DOTTED`], dotted: `:auth.sub`) replaced by `$n`. `::` casts, `arr[1:2]` slices and anything in literals or comments are left alone.
pub fn positional(sql: &str) -> Positional {
    placed(sql, Placeholders::Numbered)
}

/// `sql` with each `:name` parameter replaced as `style` writes placeholders (see
/// [`positional`]); [`Placeholders::Named`] keeps the text and still lists the names.
pub fn placed(sql: &str, style: Placeholders) -> Positional {
    let b = sql.as_bytes();
    let mut p = Positional {
        text: String::with_capacity(sql.len()),
        names: Vec::new(),
        refs: Vec::new(),
    };
    let mut copied = 0;
    for range in code(sql) {
        let mut i = range.start;
        while i < range.end {
            if b[i] == b':' && b.get(i + 1) == Some(&b':') {
                i += 2;
                continue;
            }
            let starts = |c: u8| c.is_ascii_alphabetic() || c == b'_';
            if b[i] != b':' || i + 1 >= range.end || !starts(b[i + 1]) {
                i += 1;
                continue;
            }
            let word_end = |from: usize| {
                (from..range.end)
                    .find(|&j| !(b[j].is_ascii_alphanumeric() || b[j] == b'_'))
                    .unwrap_or(range.end)
            };
            let mut end = word_end(i + 1);
            // `:auth.sub`, `:embeddings.NAME.model`: dotted names under `DOTTED` only.
            if dotted(&sql[i + 1..end]) {
                while end + 1 < range.end && b[end] == b'.' && starts(b[end + 1]) {
                    end = word_end(end + 1);
                }
            }
            let name = &sql[i + 1..end];
            p.refs.push((name.to_string(), i));
            let placeholder = match style {
                Placeholders::Named => {
                    if !p.names.iter().any(|x| x == name) {
                        p.names.push(name.to_string());
                    }
                    i = end;
                    continue;
                }
                Placeholders::Question => {
                    p.names.push(name.to_string());
                    "?".to_string()
                }
                Placeholders::Numbered => {
                    let n = match p.names.iter().position(|x| x == name) {
                        Some(k) => k + 1,
                        None => {
                            p.names.push(name.to_string());
                            p.names.len()
                        }
                    };
                    format!("${n}")
                }
            };
            p.text.push_str(&sql[copied..i]);
            p.text.push_str(&placeholder);
            copied = end;
            i = end;
        }
    }
    p.text.push_str(&sql[copied..]);
    p
}

/// `sql` as SQLite runs it: its parameters keep their names, but SQLite's names have no dots,
/// so the caller's `:auth.sub` is written `:auth$sub` (`$` is a name character to SQLite,
/// never one of an mcpspec parameter); [`sqlite_param`] reads the name back.
pub fn sqlite_text(sql: &str) -> String {
    let mut out = sql.to_string();
    for (name, at) in placed(sql, Placeholders::Named).refs.iter().rev() {
        if name.contains('.') {
            let start = at + 1;
            out.replace_range(start..start + name.len(), &name.replace('.', "$"));
        }
    }
    out
}

/// The mcpspec parameter a SQLite parameter name (without its sigil) stands for: see
/// [`sqlite_text`].
pub fn sqlite_param(name: &str) -> std::borrow::Cow<'_, str> {
    match name.contains('$') {
        true => name.replace('$', ".").into(),
        false => name.into(),
    }
}

/// The words of `sql`'s code in upper case, and its `;`s, in order.
pub fn words(sql: &str) -> Vec<String> {
    words_at(sql).into_iter().map(|(w, _)| w).collect()
}

/// [`words`], each with the byte offset in `sql` where it starts (for pointing at a line).
pub fn words_at(sql: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for range in code(sql) {
        let base = range.start;
        let mut start = None;
        for (i, c) in sql[range.clone()].char_indices() {
            if c.is_ascii_alphanumeric() || c == '_' {
                start.get_or_insert(i);
                continue;
            }
            if let Some(s) = start.take() {
                out.push((sql[base + s..base + i].to_ascii_uppercase(), base + s));
            }
            if c == ';' {
                out.push((";".to_string(), base + i));
            }
        }
        if let Some(s) = start {
            out.push((sql[base + s..range.end].to_ascii_uppercase(), base + s));
        }
    }
    out
}

/// Which of `names` (table names, say) `sql` names in its code: a word of the code equal to
/// one, in any case. The tables a spec's derived structures are built from are the schema's
/// tables its derived DDL names; the runtime mirrors those (see the runtime's
/// `backend::sqlite::mirror`) and `codegen check` checks against them, through this one rule.
pub fn named_in<'a>(sql: &str, names: &'a [String]) -> Vec<&'a str> {
    let words: std::collections::HashSet<String> = words(sql).into_iter().collect();
    names
        .iter()
        .filter(|n| words.contains(&n.to_ascii_uppercase()))
        .map(String::as_str)
        .collect()
}

/// The source tables of a spec's derived structures in a database with `tables`: the tables
/// `derived` names (see [`named_in`]) and, transitively, the tables their foreign keys refer
/// to (`parents` of a table), so that a copy of them is whole. The runtime's mirror copies
/// these, and `codegen check --db` checks against copies of them, by this one rule.
pub fn sources(
    derived: &str,
    tables: &[String],
    parents: impl Fn(&str) -> Vec<String>,
) -> Vec<String> {
    let mut out: Vec<String> = named_in(derived, tables)
        .into_iter()
        .map(str::to_string)
        .collect();
    let mut i = 0;
    while i < out.len() {
        for p in parents(&out[i]) {
            if tables.contains(&p) && !out.contains(&p) {
                out.push(p);
            }
        }
        i += 1;
    }
    out
}

/// Whether a database location is a PostgreSQL URL rather than a SQLite file.
pub fn is_url(location: &str) -> bool {
    Dialect::of_url(location).is_some_and(|d| d == &POSTGRES)
}

/// What a database location given on the command line or in the environment is, by its form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Form {
    /// A URL of a scheme a dialect of [`DIALECTS`] is reached by (`postgres://`, ...).
    Url(&'static Dialect),
    /// A URL of another scheme (`mysql://...`), named here in lower case.
    OtherScheme(String),
    /// A libpq keyword/value connection string (`host=... dbname=... password=...`).
    KeywordString,
    /// Anything else: a file path.
    File,
}

/// The keys of libpq's keyword/value connection strings that tell one from a file name.
const LIBPQ_KEYS: &[&str] = &[
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "passfile",
    "sslmode",
    "sslrootcert",
    "application_name",
    "options",
    "connect_timeout",
    "service",
    "target_session_attrs",
];

/// The form of `location`: a scheme (letters, digits, `+`, `-`, `.`) before `://` makes a URL;
/// words of the form `key=value` with a libpq key, separated by spaces, a keyword string.
pub fn form(location: &str) -> Form {
    if let Some(dialect) = Dialect::of_url(location) {
        return Form::Url(dialect);
    }
    if let Some((scheme, _)) = location.split_once("://") {
        let is_scheme = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        // `file://` is SQLite's own URI form of a file name.
        if is_scheme && !scheme.eq_ignore_ascii_case("file") {
            return Form::OtherScheme(scheme.to_ascii_lowercase());
        }
    }
    let keyed = location.split_whitespace().any(|word| {
        word.split_once('=')
            .is_some_and(|(k, _)| LIBPQ_KEYS.contains(&k.to_ascii_lowercase().as_str()))
    });
    if keyed && (location.contains(char::is_whitespace) || !location.contains('/')) {
        return Form::KeywordString;
    }
    Form::File
}

/// `location` with every password replaced by `***`, for messages and logs, whatever its
/// form: the user information of a URL of any scheme (up to its last `@`, so that a raw `/`,
/// `?` or `@` in the password is hidden too), and the value of every `key=value` whose key,
/// percent-decoded, names a password or secret (URL query parameters and libpq keyword
/// strings alike, quoted values included). It hides too much rather than too little.
pub fn redact(location: &str) -> String {
    let mut out = location.to_string();
    if let Some(scheme_end) = location.find("://") {
        let start = scheme_end + 3;
        let rest = &location[start..];
        if let Some(at) = rest.rfind('@')
            && let Some(colon) = rest[..at].find(':')
        {
            out.replace_range(start + colon + 1..start + at, "***");
        }
    }
    redact_keyed(&out)
}

/// Whether a key (as written, maybe percent-encoded) names a password or a secret.
fn secret_key(key: &str) -> bool {
    let key = percent_decoded(key).to_ascii_lowercase();
    ["pass", "pwd", "secret", "token"]
        .iter()
        .any(|w| key.contains(w))
}

/// `s` with `%XX` sequences decoded (invalid ones kept as they are).
fn percent_decoded(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && let (Some(h), Some(l)) = (
                b.get(i + 1).copied().and_then(hex),
                b.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `s` with the value of every secret `key=value` (see [`secret_key`]) replaced by `***`. A
/// key runs back from its `=` to `?`, `&`, `;` or white space; a value runs to `&`, `;` or
/// white space, or is a single-quoted string with backslash escapes.
fn redact_keyed(s: &str) -> String {
    let b = s.as_bytes();
    let delimiter = |c: u8| matches!(c, b'?' | b'&' | b';') || c.is_ascii_whitespace();
    let mut out = String::with_capacity(s.len());
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'=' {
            i += 1;
            continue;
        }
        // The key: back over spaces before `=`, then to a delimiter.
        let mut k_end = i;
        while k_end > 0 && b[k_end - 1] == b' ' {
            k_end -= 1;
        }
        let mut k_start = k_end;
        while k_start > 0 && !delimiter(b[k_start - 1]) {
            k_start -= 1;
        }
        // The value: after spaces, quoted or to a delimiter.
        let mut v_start = i + 1;
        while v_start < b.len() && b[v_start] == b' ' {
            v_start += 1;
        }
        let v_end = if b.get(v_start) == Some(&b'\'') {
            let mut j = v_start + 1;
            while j < b.len() && b[j] != b'\'' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            (j + 1).min(b.len())
        } else {
            let mut j = v_start;
            while j < b.len() && !(b[j] == b'&' || b[j] == b';' || b[j].is_ascii_whitespace()) {
                j += 1;
            }
            j
        };
        if k_start < k_end && secret_key(&s[k_start..k_end]) && v_start < v_end {
            out.push_str(&s[copied..v_start]);
            out.push_str("***");
            copied = v_end;
        }
        i = v_end.max(i + 1);
    }
    out.push_str(&s[copied..]);
    out
}

/// The declared column kinds (`text`, `integer`, `real`, `boolean`, `json`) a result column of
/// the PostgreSQL type named `ty` (as `pg_type.typname` names it) reads as; none for a type
/// mcpspec does not read. [`POSTGRES`]'s `reads_as`.
pub fn reads_as(ty: &str) -> &'static [&'static str] {
    match ty {
        "int2" | "int4" | "int8" | "oid" => &["integer", "real", "boolean"],
        "float4" | "float8" => &["real"],
        "bool" => &["boolean", "integer"],
        "json" | "jsonb" => &["json"],
        "text" | "varchar" | "bpchar" | "name" | "unknown" | "bytea" => &["text", "json"],
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_passwords_in_every_form() {
        for (url, want) in [
            (
                "postgres://u:secret@h:5432/db",
                "postgres://u:***@h:5432/db",
            ),
            ("postgresql://u@h/db", "postgresql://u@h/db"),
            (
                "postgresql:///db?host=/tmp&password=secret&user=u",
                "postgresql:///db?host=/tmp&password=***&user=u",
            ),
            (
                "postgres://u:p%40ss@h/db?sslmode=require",
                "postgres://u:***@h/db?sslmode=require",
            ),
            // A percent-encoded key, a raw `/`, `?` or `@` in the password.
            (
                "postgresql:///db?host=/tmp&pass%77ord=PW&user=u",
                "postgresql:///db?host=/tmp&pass%77ord=***&user=u",
            ),
            ("postgres://u:pa/ss@h/db", "postgres://u:***@h/db"),
            ("postgres://u:p?w@h/db", "postgres://u:***@h/db"),
            ("postgres://u:p@w@h/db", "postgres://u:***@h/db"),
            (
                "postgres://u:PW@h/db?PASSWORD=PW",
                "postgres://u:***@h/db?PASSWORD=***",
            ),
            // A URL of a scheme mcpspec does not serve.
            ("mysql://user:PW@host/db", "mysql://user:***@host/db"),
            // libpq keyword strings, plain and quoted.
            (
                "host=/tmp dbname=x password=PW user=u",
                "host=/tmp dbname=x password=*** user=u",
            ),
            (
                "host=h password = 'P W\\'x' port=5",
                "host=h password = *** port=5",
            ),
            ("/plain/path/app.db", "/plain/path/app.db"),
        ] {
            let shown = redact(url);
            assert_eq!(shown, want, "{url}");
            assert!(!shown.contains("PW") && !shown.contains("P W"), "{url}");
        }
    }

    #[test]
    fn dotted_names_are_the_callers_identity_and_the_providers_only() {
        let p = positional(
            "SELECT * FROM n WHERE owner = :auth.sub AND t = :auth.claims.team AND x = :a.b AND y = :auth. AND m = :embeddings.kb.model",
        );
        assert_eq!(
            p.names,
            [
                "auth.sub",
                "auth.claims.team",
                "a",
                "auth",
                "embeddings.kb.model"
            ]
        );
        let sqlite = sqlite_text("SELECT ':auth.sub' WHERE owner = :auth.sub AND x = :a.b");
        assert_eq!(
            sqlite,
            "SELECT ':auth.sub' WHERE owner = :auth$sub AND x = :a.b"
        );
        assert_eq!(sqlite_param("auth$sub"), "auth.sub");
        assert_eq!(sqlite_param("title"), "title");
        assert_eq!(
            p.text,
            "SELECT * FROM n WHERE owner = $1 AND t = $2 AND x = $3.b AND y = $4. AND m = $5"
        );
    }

    #[test]
    fn locations_are_told_apart_by_form() {
        for (location, want) in [
            ("postgres://h/db", Form::Url(&POSTGRES)),
            ("postgresql:///db?host=/tmp", Form::Url(&POSTGRES)),
            ("mysql://u:p@h/db", Form::Url(&MYSQL)),
            ("MariaDB://h/db", Form::Url(&MYSQL)),
            ("mssql://u:p@h/db", Form::OtherScheme("mssql".into())),
            ("host=/tmp dbname=x", Form::KeywordString),
            ("dbname=x", Form::KeywordString),
            ("password=PW", Form::KeywordString),
            ("/data/app.db", Form::File),
            ("app.db", Form::File),
            ("C:\\data\\app.db", Form::File),
            ("/data/host=1/app.db", Form::File),
            ("./weird name.db", Form::File),
            ("file:///data/app.db?mode=ro", Form::File),
            ("file:app.db?mode=ro", Form::File),
        ] {
            assert_eq!(form(location), want, "{location}");
        }
    }

    #[test]
    fn numbers_named_parameters_outside_literals_comments_and_casts() {
        for (sql, want, names) in [
            ("SELECT :a, :b, :a", "SELECT $1, $2, $1", vec!["a", "b"]),
            (
                "SELECT ':no', \"x:no\" -- :no\n, x::text, :t::jsonb /* :no */ @@ q",
                "SELECT ':no', \"x:no\" -- :no\n, x::text, $1::jsonb /* :no */ @@ q",
                vec!["t"],
            ),
            ("SELECT arr[1:2], $1", "SELECT arr[1:2], $1", vec![]),
            (
                "SELECT 'it''s :no' || :yes",
                "SELECT 'it''s :no' || $1",
                vec!["yes"],
            ),
            ("SELECT 1 -- :no", "SELECT 1 -- :no", vec![]),
            ("SELECT '", "SELECT '", vec![]),
        ] {
            let p = positional(sql);
            assert_eq!(p.text, want, "{sql}");
            assert_eq!(p.names, names, "{sql}");
        }
        assert_eq!(
            positional("a = :x OR b = :x").refs,
            [("x".to_string(), 4), ("x".to_string(), 14)]
        );
    }

    #[test]
    fn names_count_only_as_words_of_code() {
        let tables: Vec<String> = ["learnings", "decisions", "projects", "tags"]
            .map(String::from)
            .to_vec();
        let sql = "CREATE TRIGGER t AFTER INSERT ON Learnings BEGIN \
                   INSERT INTO learning_tags SELECT 'projects' FROM decisions; END; -- tags";
        assert_eq!(named_in(sql, &tables), ["learnings", "decisions"]);
    }

    #[test]
    fn words_are_code_only() {
        assert_eq!(
            words("copy t; -- drop database\nSELECT 'drop role' /* alter */ FROM x"),
            ["COPY", "T", ";", "SELECT", "FROM", "X"]
        );
    }
}
