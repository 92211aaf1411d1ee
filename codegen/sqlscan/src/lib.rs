//! What the spec compiler (build time) and the runtime (run time) must agree on about
//! PostgreSQL, so that both read a statement, a URL and a column type the same way: which parts
//! of a statement are code rather than quoted literals, quoted identifiers or comments; how
//! `:name` parameters become PostgreSQL's `$n`; which locations are PostgreSQL URLs and how
//! their passwords are hidden; which declared column kinds a PostgreSQL type reads as. A lexer
//! and tables, not a parser; it depends on nothing.

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
    /// The text with each `:name` replaced by `$n`.
    pub text: String,
    /// The name of each `$n`, in order: one number per name, however often it appears.
    pub names: Vec<String>,
    /// Every parameter as written: its name and byte offset in the original text.
    pub refs: Vec<(String, usize)>,
}

/// `sql` with each `:name` parameter (a letter or `_`, then letters, digits and `_`) replaced by
/// `$n`. `::` casts, `arr[1:2]` slices and anything in literals or comments are left alone.
pub fn positional(sql: &str) -> Positional {
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
            let end = (i + 1..range.end)
                .find(|&j| !(b[j].is_ascii_alphanumeric() || b[j] == b'_'))
                .unwrap_or(range.end);
            let name = &sql[i + 1..end];
            let n = match p.names.iter().position(|x| x == name) {
                Some(k) => k + 1,
                None => {
                    p.names.push(name.to_string());
                    p.names.len()
                }
            };
            p.refs.push((name.to_string(), i));
            p.text.push_str(&sql[copied..i]);
            p.text.push('$');
            p.text.push_str(&n.to_string());
            copied = end;
            i = end;
        }
    }
    p.text.push_str(&sql[copied..]);
    p
}

/// The words of `sql`'s code in upper case, and its `;`s, in order.
pub fn words(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    for range in code(sql) {
        let part = &sql[range];
        let mut word = String::new();
        for c in part.chars() {
            if c.is_ascii_alphanumeric() || c == '_' {
                word.push(c.to_ascii_uppercase());
                continue;
            }
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            if c == ';' {
                out.push(";".to_string());
            }
        }
        if !word.is_empty() {
            out.push(word);
        }
    }
    out
}

/// Whether a database location is a PostgreSQL URL rather than a SQLite file.
pub fn is_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// `url` with its password replaced by `***`, for messages and logs.
pub fn redact(url: &str) -> String {
    let mut out = url.to_string();
    if let Some(scheme_end) = url.find("://") {
        let rest = &url[scheme_end + 3..];
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        if let Some(at) = rest[..authority_end].rfind('@')
            && let Some(colon) = rest[..at].find(':')
        {
            let start = scheme_end + 3 + colon + 1;
            out.replace_range(start..scheme_end + 3 + at, "***");
        }
    }
    // A password given as a query parameter.
    if let Some(q) = out.find('?') {
        let (head, query) = out.split_at(q + 1);
        let query: Vec<String> = query
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => kv.to_string(),
            })
            .collect();
        out = format!("{head}{}", query.join("&"));
    }
    out
}

/// The declared column kinds (`text`, `integer`, `real`, `boolean`, `json`) a result column of
/// the PostgreSQL type named `ty` (as `pg_type.typname` names it) reads as; none for a type
/// mcpspec does not read.
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
    fn redacts_passwords() {
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
        ] {
            assert_eq!(redact(url), want, "{url}");
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
    fn words_are_code_only() {
        assert_eq!(
            words("copy t; -- drop database\nSELECT 'drop role' /* alter */ FROM x"),
            ["COPY", "T", ";", "SELECT", "FROM", "X"]
        );
    }
}
