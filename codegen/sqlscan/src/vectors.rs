//! Vector columns in SQL text: the dimensions a column type declares (`F32_BLOB(256)` and
//! sqlite-vec's `float[256]` on SQLite, pgvector's `vector(256)`, MariaDB's `VECTOR(256)`),
//! and where a schema declares a given column, so that the compiler can hold every column
//! that stores a provider's vectors to the provider's dimensions, and the runtime a live
//! database's.

/// The dimensions a column type declares, if it is a vector type: `vector(N)`, `VECTOR(N)`,
/// `F32_BLOB(N)`, `float[N]` (any case, spaces allowed, options after it ignored).
pub fn dimensions(ty: &str) -> Option<u32> {
    let ty = ty.trim();
    let lower = ty.to_ascii_lowercase();
    for (name, open, close) in [
        ("vector", '(', ')'),
        ("f32_blob", '(', ')'),
        ("float", '[', ']'),
    ] {
        let Some(rest) = lower.strip_prefix(name) else {
            continue;
        };
        let rest = rest.trim_start();
        let Some(rest) = rest.strip_prefix(open) else {
            continue;
        };
        let (n, _) = rest.split_once(close)?;
        return n.trim().parse().ok();
    }
    None
}

/// Whether a column type names a vector type, with or without dimensions.
pub fn is_vector(ty: &str) -> bool {
    let lower = ty.trim().to_ascii_lowercase();
    dimensions(ty).is_some() || lower == "vector" || lower.starts_with("f32_blob")
}

/// The column definitions of a `CREATE VIRTUAL TABLE ... USING module(...)` statement, as
/// `(name, the rest of its definition)`: what SQLite does not record as a column's type
/// (sqlite-vec's `embedding float[256] distance_metric=cosine`). Arguments that are options
/// (`key=value` alone) are left out.
pub fn virtual_columns(create: &str) -> Vec<(String, String)> {
    let Some(open) = create.find('(') else {
        return Vec::new();
    };
    let Some(close) = create.rfind(')') else {
        return Vec::new();
    };
    if close <= open {
        return Vec::new();
    }
    split_top(&create[open + 1..close])
        .into_iter()
        .filter_map(|arg| {
            let arg = arg.trim();
            let (name, rest) = arg.split_once(char::is_whitespace)?;
            if name.contains('=') {
                return None;
            }
            Some((unquote(name).to_string(), rest.trim().to_string()))
        })
        .collect()
}

/// Where a schema text declares the column `column` of the table `table`: each declaration's
/// type (as written) and its offset in `sql`. A `CREATE TABLE` (or `CREATE VIRTUAL TABLE`)
/// of the table with the column, and an `ALTER TABLE ... ADD [COLUMN]` or `ALTER COLUMN ...
/// TYPE` of it, count. Names compare without case and quotes; a schema-qualified table
/// matches by its last part.
pub fn declared(sql: &str, table: &str, column: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for st in crate::statements::statements(sql) {
        let Some(first) = st.iter().find(|t| t.kind == crate::statements::Kind::Word) else {
            continue;
        };
        let start = first.at.start;
        // To the `;` that ends it: its last token may be followed by closing brackets.
        let last = st.last().map_or(start, |t| t.at.end);
        let end = sql[last..].find(';').map_or(sql.len(), |p| last + p);
        let text = &sql[start..end];
        let words = crate::statements::words_of(&st);
        let named = |w: &str| w.eq_ignore_ascii_case(table);
        match words.as_slice() {
            ["CREATE", rest @ ..] => {
                let Some(at) = rest.iter().position(|w| *w == "TABLE") else {
                    continue;
                };
                if !rest[..at]
                    .iter()
                    .all(|w| matches!(*w, "TEMP" | "TEMPORARY" | "VIRTUAL" | "UNLOGGED"))
                {
                    continue;
                }
                if !table_named(text, table) {
                    continue;
                }
                let defs = if rest[..at].contains(&"VIRTUAL") {
                    virtual_columns(text)
                } else {
                    table_columns(text)
                };
                for (name, ty) in defs {
                    if name.eq_ignore_ascii_case(column) {
                        let offset = text.find(&name).map_or(start, |o| start + o);
                        out.push((ty, offset));
                    }
                }
            }
            ["ALTER", "TABLE", ..] if words.iter().skip(2).take(4).any(|w| named(w)) => {
                if let Some((ty, at)) = altered(text, column) {
                    out.push((ty, start + at));
                }
            }
            _ => {}
        }
    }
    out
}

/// Whether a `CREATE [VIRTUAL] TABLE [IF NOT EXISTS] name` statement makes `table` (its
/// name's last part).
fn table_named(create: &str, table: &str) -> bool {
    let head = &create[..create.find('(').unwrap_or(create.len())];
    let words: Vec<&str> = head.split_whitespace().collect();
    let Some(mut i) = words.iter().position(|w| w.eq_ignore_ascii_case("table")) else {
        return false;
    };
    i += 1;
    if words.get(i).is_some_and(|w| w.eq_ignore_ascii_case("if")) {
        i += 3;
    }
    words.get(i).is_some_and(|n| {
        let last = n.rsplit('.').next().unwrap_or(n);
        unquote(last).eq_ignore_ascii_case(table)
    })
}

/// The column definitions of a `CREATE TABLE (...)` statement, as `(name, type)`; table
/// constraints are left out.
fn table_columns(create: &str) -> Vec<(String, String)> {
    let Some(open) = create.find('(') else {
        return Vec::new();
    };
    let Some(close) = create.rfind(')') else {
        return Vec::new();
    };
    if close <= open {
        return Vec::new();
    }
    split_top(&create[open + 1..close])
        .into_iter()
        .filter_map(|def| {
            let def = def.trim();
            let (name, rest) = def.split_once(char::is_whitespace)?;
            let upper = name.to_ascii_uppercase();
            if matches!(
                upper.as_str(),
                "PRIMARY"
                    | "UNIQUE"
                    | "CHECK"
                    | "FOREIGN"
                    | "CONSTRAINT"
                    | "KEY"
                    | "INDEX"
                    | "FULLTEXT"
            ) {
                return None;
            }
            Some((unquote(name).to_string(), type_of(rest)))
        })
        .collect()
}

/// The type at the start of a column definition: its words up to a constraint's keyword,
/// with its parenthesised or bracketed arguments.
fn type_of(rest: &str) -> String {
    let stop = [
        "NOT",
        "NULL",
        "PRIMARY",
        "UNIQUE",
        "CHECK",
        "DEFAULT",
        "REFERENCES",
        "COLLATE",
        "GENERATED",
        "CONSTRAINT",
        "AS",
        "USING",
        "FIRST",
        "AFTER",
    ];
    let mut out = String::new();
    let mut depth = 0i32;
    for word in rest.split_inclusive(char::is_whitespace) {
        let w = word.trim();
        if depth == 0 && stop.iter().any(|s| w.eq_ignore_ascii_case(s)) {
            break;
        }
        depth += w.matches(['(', '[']).count() as i32 - w.matches([')', ']']).count() as i32;
        out.push_str(word);
    }
    out.trim().to_string()
}

/// The type an `ALTER TABLE` statement gives `column`: `ADD [COLUMN] column TYPE`, or
/// `ALTER [COLUMN] column [SET DATA] TYPE TYPE` (PostgreSQL), `MODIFY [COLUMN] column TYPE`
/// (MariaDB); with its offset in the statement.
fn altered(text: &str, column: &str) -> Option<(String, usize)> {
    let words: Vec<(usize, &str)> = text
        .split_whitespace()
        .map(|w| (w.as_ptr() as usize - text.as_ptr() as usize, w))
        .collect();
    for (i, (at, w)) in words.iter().enumerate() {
        if !unquote(w.trim_end_matches(',')).eq_ignore_ascii_case(column) {
            continue;
        }
        let before: Vec<String> = words[i.saturating_sub(2)..i]
            .iter()
            .map(|(_, w)| w.to_ascii_uppercase())
            .collect();
        let adds = before
            .iter()
            .any(|w| matches!(w.as_str(), "ADD" | "COLUMN" | "MODIFY" | "EXISTS"));
        let alters = before.iter().any(|w| w == "ALTER" || w == "COLUMN");
        if !(adds || alters) {
            continue;
        }
        let rest = &text[at + w.len()..];
        let rest = rest.trim_start();
        let upper = rest.to_ascii_uppercase();
        let rest = if let Some(r) = upper.strip_prefix("SET DATA TYPE") {
            &rest[rest.len() - r.len()..]
        } else if let Some(r) = upper.strip_prefix("TYPE") {
            &rest[rest.len() - r.len()..]
        } else {
            rest
        };
        let ty = type_of(rest.split(',').next().unwrap_or(rest));
        return Some((ty, *at));
    }
    None
}

/// `s` split at the commas outside parentheses, brackets and quotes.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start, mut quote) = (0i32, 0, None);
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"' | '`') => quote = Some(c),
            (None, '(' | '[') => depth += 1,
            (None, ')' | ']') => depth -= 1,
            (None, ',') if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn unquote(s: &str) -> &str {
    s.trim_matches(|c| matches!(c, '"' | '`' | '[' | ']'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dimensions_are_read_from_every_engines_type() {
        assert_eq!(dimensions("vector(256)"), Some(256));
        assert_eq!(dimensions("VECTOR(1536)"), Some(1536));
        assert_eq!(dimensions("F32_BLOB(256)"), Some(256));
        assert_eq!(dimensions("float[256] distance_metric=cosine"), Some(256));
        assert_eq!(dimensions("float [ 8 ]"), Some(8));
        assert_eq!(dimensions("BLOB"), None);
        assert_eq!(dimensions("double precision"), None);
        assert_eq!(dimensions("vector"), None);
        assert!(is_vector("vector"));
        assert!(!is_vector("BLOB"));
    }

    #[test]
    fn a_column_is_found_where_each_schema_declares_it() {
        let sqlite = "CREATE TABLE IF NOT EXISTS notes (id TEXT PRIMARY KEY, body TEXT NOT NULL,\n  embedding F32_BLOB(256), CHECK (length(body) > 0));\nCREATE VIRTUAL TABLE notes_vec USING vec0(embedding float[128] distance_metric=cosine, role text);";
        let found = declared(sqlite, "notes", "embedding");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, "F32_BLOB(256)");
        assert_eq!(&sqlite[found[0].1..found[0].1 + 9], "embedding");
        let v = declared(sqlite, "notes_vec", "embedding");
        assert_eq!(v[0].0, "float[128] distance_metric=cosine");
        let pg = "CREATE EXTENSION IF NOT EXISTS vector;\nALTER TABLE public.notes ADD COLUMN embedding vector(768);\nALTER TABLE notes ALTER COLUMN embedding TYPE vector(256) USING NULL;";
        let found: Vec<String> = declared(pg, "notes", "embedding")
            .into_iter()
            .map(|d| d.0)
            .collect();
        assert_eq!(found, ["vector(768)", "vector(256)"]);
        let my = "ALTER TABLE notes ADD embedding VECTOR(256) NOT NULL, ADD INDEX x (id)";
        assert_eq!(declared(my, "notes", "embedding")[0].0, "VECTOR(256)");
        assert!(declared(sqlite, "other", "embedding").is_empty());
    }
}
