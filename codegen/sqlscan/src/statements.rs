//! SQL text as statements of tokens, for the checks that judge what a statement does (a
//! migration's destructive statements) rather than rewrite it: words in upper case, `;`s,
//! `--` comments (kept, since a comment may carry a marker), and PostgreSQL's dollar-quoted
//! bodies as one token each. Quoted literals and identifiers and `/* ... */` comments are
//! skipped whole, so nothing inside them is a word, a `;` or a marker. A `CREATE TRIGGER` whose
//! body is a `BEGIN ... END` block (SQLite, MySQL) is one statement with its inner `;`s.

use std::ops::Range;

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A word of letters, digits and `_`, upper-cased in [`Token::word`].
    Word,
    /// A `;`.
    Semicolon,
    /// A `-- ...` comment to the end of its line.
    LineComment,
    /// A dollar-quoted body (`$$ ... $$`, `$tag$ ... $tag$`), delimiters included.
    Body,
}

/// One token and where it lies in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub kind: Kind,
    pub at: Range<usize>,
    /// The word in upper case; empty for the other kinds.
    pub word: String,
}

/// The dollar-quote tag starting at `i` (`$$` or `$tag$`), if one does.
fn dollar_tag(b: &[u8], i: usize) -> Option<usize> {
    let rest = &b[i + 1..];
    let len = rest
        .iter()
        .position(|&c| !(c.is_ascii_alphanumeric() || c == b'_'))?;
    let starts_ok = rest.first().is_none_or(|c| !c.is_ascii_digit());
    (rest.get(len) == Some(&b'$') && starts_ok).then_some(len + 2)
}

/// The tokens of `sql`, in order (see the module comment).
pub fn tokens(sql: &str) -> Vec<Token> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let token = |kind, at: Range<usize>| Token {
        kind,
        word: match kind {
            Kind::Word => sql[at.clone()].to_ascii_uppercase(),
            _ => String::new(),
        },
        at,
    };
    while i < b.len() {
        let c = b[i];
        let (kind, end) = match c {
            b'\'' | b'"' | b'`' => {
                let close = b[i + 1..].iter().position(|&x| x == c);
                (None, close.map_or(b.len(), |p| i + 1 + p + 1))
            }
            b'-' if b.get(i + 1) == Some(&b'-') => {
                let end = b[i..]
                    .iter()
                    .position(|&x| x == b'\n')
                    .map_or(b.len(), |p| i + p);
                (Some(Kind::LineComment), end)
            }
            b'/' if b.get(i + 1) == Some(&b'*') => (
                None,
                sql[i + 2..].find("*/").map_or(b.len(), |p| i + 2 + p + 2),
            ),
            b'$' if dollar_tag(b, i).is_some() => {
                let len = dollar_tag(b, i).unwrap_or(2);
                let tag = &sql[i..i + len];
                let end = sql[i + len..]
                    .find(tag)
                    .map_or(b.len(), |p| i + len + p + len);
                (Some(Kind::Body), end)
            }
            b';' => (Some(Kind::Semicolon), i + 1),
            c if c.is_ascii_alphanumeric() || c == b'_' => {
                let len = b[i..]
                    .iter()
                    .position(|&x| !(x.is_ascii_alphanumeric() || x == b'_' || x == b'$'))
                    .unwrap_or(b.len() - i);
                (Some(Kind::Word), i + len)
            }
            _ => (None, i + 1),
        };
        if let Some(kind) = kind {
            out.push(token(kind, i..end));
        }
        i = end;
    }
    out
}

/// `sql`'s statements, each as its tokens without the `;` that ends it; comments between
/// statements go with the next one.
pub fn statements(sql: &str) -> Vec<Vec<Token>> {
    let mut out = Vec::new();
    let mut current: Vec<Token> = Vec::new();
    for t in tokens(sql) {
        if t.kind == Kind::Semicolon && !in_block(&current) {
            out.push(std::mem::take(&mut current));
        } else {
            current.push(t);
        }
    }
    if current.iter().any(|t| t.kind != Kind::LineComment) {
        out.push(current);
    }
    out.retain(|s| s.iter().any(|t| t.kind != Kind::LineComment));
    out
}

/// The words of a statement's tokens, in order.
pub fn words_of(statement: &[Token]) -> Vec<&str> {
    statement
        .iter()
        .filter(|t| t.kind == Kind::Word)
        .map(|t| t.word.as_str())
        .collect()
}

/// Whether `tokens` (a statement so far) is a `CREATE TRIGGER` inside its `BEGIN ... END`
/// block, whose `;`s end its inner statements, not it: it has `BEGIN` and no `END` after it
/// at the same depth (`CASE ... END` inside counts as a block of its own).
fn in_block(tokens: &[Token]) -> bool {
    let words = words_of(tokens);
    let creates_trigger =
        words.first() == Some(&"CREATE") && words.iter().take(4).any(|w| *w == "TRIGGER");
    if !creates_trigger {
        return false;
    }
    let mut depth = 0usize;
    for w in words {
        match w {
            "BEGIN" | "CASE" => depth += 1,
            "END" => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    depth > 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(sql: &str) -> Vec<String> {
        statements(sql)
            .iter()
            .map(|s| words_of(s).join(" "))
            .collect()
    }

    #[test]
    fn statements_end_at_semicolons_outside_quotes_comments_bodies_and_trigger_blocks() {
        assert_eq!(
            shown("INSERT INTO t VALUES ('a;b', \"c;d\"); /* x; */ DROP TABLE u;"),
            ["INSERT INTO T VALUES", "DROP TABLE U"]
        );
        assert_eq!(
            shown(
                "CREATE TRIGGER x AFTER DELETE ON t BEGIN DELETE FROM u; SELECT CASE WHEN 1 THEN 2 END; END; DROP TABLE v"
            ),
            [
                "CREATE TRIGGER X AFTER DELETE ON T BEGIN DELETE FROM U SELECT CASE WHEN 1 THEN 2 END END",
                "DROP TABLE V"
            ]
        );
        assert_eq!(
            shown(
                "CREATE TRIGGER x BEFORE UPDATE ON t FOR EACH ROW EXECUTE FUNCTION f(); DROP TABLE v;"
            ),
            [
                "CREATE TRIGGER X BEFORE UPDATE ON T FOR EACH ROW EXECUTE FUNCTION F",
                "DROP TABLE V"
            ]
        );
        let f = "CREATE FUNCTION f() RETURNS trigger AS $body$ BEGIN DELETE FROM t; RETURN NEW; END $body$ LANGUAGE plpgsql; DROP TABLE v";
        let s = statements(f);
        assert_eq!(s.len(), 2);
        assert!(s[0].iter().any(|t| t.kind == Kind::Body));
        assert_eq!(words_of(&s[1]), ["DROP", "TABLE", "V"]);
        assert_eq!(shown("-- only a comment\n"), Vec::<String>::new());
    }

    #[test]
    fn a_line_comment_is_a_token_and_text_inside_others_is_not() {
        let t = tokens("/* -- no */ 'it''s -- no' -- yes\nx");
        let kinds: Vec<Kind> = t.iter().map(|t| t.kind).collect();
        assert_eq!(kinds, [Kind::LineComment, Kind::Word]);
        assert_eq!(
            &"/* -- no */ 'it''s -- no' -- yes\nx"[t[0].at.clone()],
            "-- yes"
        );
        // A `$n` parameter is no dollar quote.
        let t = tokens("SELECT $1, $2");
        assert!(t.iter().all(|t| t.kind != Kind::Body));
    }
}
