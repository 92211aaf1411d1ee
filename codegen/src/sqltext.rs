//! SQL text scanning shared by `validate` and `lower`: named parameters and whether a statement
//! writes. This is a lexer, not a parser; `check` confirms both facts against SQLite itself.

/// A named parameter (`:name`, `@name` or `$name`) and its byte offset in the statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParamRef {
    pub name: String,
    pub offset: usize,
}

/// Every named parameter in order of first appearance, skipping literals, quoted identifiers
/// and comments.
pub(crate) fn params(sql: &str) -> Vec<ParamRef> {
    let mut out: Vec<ParamRef> = Vec::new();
    for tok in tokens(sql) {
        if let Tok::Param(name, offset) = tok
            && !out.iter().any(|p| p.name == name)
        {
            out.push(ParamRef { name, offset });
        }
    }
    out
}

/// Whether the statement changes the database: any top-level data-changing keyword counts,
/// which also covers `WITH ... INSERT` and `INSERT ... RETURNING`.
pub(crate) fn writes(sql: &str) -> bool {
    tokens(sql).into_iter().any(|t| {
        matches!(t, Tok::Word(w) if matches!(
            w.to_ascii_uppercase().as_str(),
            "INSERT" | "UPDATE" | "DELETE" | "REPLACE" | "CREATE" | "DROP" | "ALTER" | "VACUUM" | "ATTACH" | "DETACH" | "REINDEX"
        ))
    })
}

/// Whether the statement inserts rows, so that its last insert rowid means something.
pub(crate) fn inserts(sql: &str) -> bool {
    tokens(sql).into_iter().any(|t| {
        matches!(t, Tok::Word(w) if matches!(w.to_ascii_uppercase().as_str(), "INSERT" | "REPLACE"))
    })
}

/// Whether the statement removes or overwrites data (as opposed to only adding it).
pub(crate) fn destroys(sql: &str) -> bool {
    tokens(sql).into_iter().any(|t| {
        matches!(t, Tok::Word(w) if matches!(
            w.to_ascii_uppercase().as_str(),
            "UPDATE" | "DELETE" | "REPLACE" | "DROP" | "ALTER"
        ))
    })
}

#[derive(Debug, PartialEq)]
enum Tok {
    Word(String),
    Param(String, usize),
}

fn tokens(sql: &str) -> Vec<Tok> {
    let b = sql.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80;
    while i < b.len() {
        let c = b[i];
        match c {
            b'\'' | b'"' | b'`' => {
                // Quoted literal or identifier; a doubled quote escapes itself.
                i += 1;
                while i < b.len() {
                    if b[i] == c {
                        if i + 1 < b.len() && b[i + 1] == c {
                            i += 2;
                            continue;
                        }
                        break;
                    }
                    i += 1;
                }
                i += 1;
            }
            b'[' => {
                while i < b.len() && b[i] != b']' {
                    i += 1;
                }
                i += 1;
            }
            b'-' if b.get(i + 1) == Some(&b'-') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
            }
            b':' | b'@' | b'$' if b.get(i + 1).is_some_and(|&n| ident(n)) => {
                let start = i;
                i += 1;
                while i < b.len() && ident(b[i]) {
                    i += 1;
                }
                // `:auth.sub`, `:embeddings.NAME.model`: dotted names (see `sqlscan::DOTTED`).
                if sqlscan::dotted(&sql[start + 1..i]) {
                    while i + 1 < b.len()
                        && b[i] == b'.'
                        && (b[i + 1].is_ascii_alphabetic() || b[i + 1] == b'_')
                    {
                        i += 1;
                        while i < b.len() && ident(b[i]) {
                            i += 1;
                        }
                    }
                }
                out.push(Tok::Param(sql[start + 1..i].to_string(), start));
            }
            _ if ident(c) => {
                let start = i;
                while i < b.len() && ident(b[i]) {
                    i += 1;
                }
                // A word followed by `(` is a function call, such as `replace(x, 'a', 'b')`,
                // never one of the statement keywords.
                let next = b[i..].iter().find(|c| !c.is_ascii_whitespace());
                if next != Some(&b'(') {
                    out.push(Tok::Word(sql[start..i].to_string()));
                }
            }
            _ => i += 1,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_params_outside_literals_and_comments() {
        let sql = "SELECT ':no' AS x, \"@no\" -- :no\n/* $no */ FROM t WHERE a = :a AND (:b IS NULL OR b = @b) AND c = $c AND a = :a";
        let names: Vec<String> = params(sql).into_iter().map(|p| p.name).collect();
        assert_eq!(names, ["a", "b", "c"]);
    }

    #[test]
    fn classifies_writes() {
        for (sql, w, d) in [
            ("SELECT * FROM t", false, false),
            ("select 'delete' from t", false, false),
            ("INSERT INTO t VALUES (1) RETURNING id", true, false),
            ("WITH x AS (SELECT 1) UPDATE t SET a = 1", true, true),
            ("SELECT replace(a, 'x', 'y') FROM t", false, false),
            ("INSERT OR REPLACE INTO t (a) VALUES (1)", true, true),
            ("DELETE FROM t", true, true),
        ] {
            assert_eq!((writes(sql), destroys(sql)), (w, d), "{sql}");
        }
    }
}
