//! `regexp(pattern, text)`, the SQL function SQLite leaves to its host (`text REGEXP
//! pattern` calls it), in the Rust `regex` crate's syntax: registered by the runtime on every
//! connection it opens and by the spec compiler on the connections it checks statements on, so
//! that a statement that uses it (an interceptor's rule, a lesson's pattern) prepares and runs
//! alike in both.

use std::sync::Mutex;

use rusqlite::Connection;

/// How many compiled patterns one connection keeps for `regexp()`.
const REGEX_CACHE: usize = 256;

/// How many patterns that do not compile the process logs, once each: past them it logs no
/// more, so that a table of ever new bad patterns grows no set and floods no log.
const LOGGED_PATTERNS: usize = 1024;

/// Registers `regexp(pattern, text)` on a connection: true when `text` contains a match of
/// `pattern` (the Rust `regex` crate's syntax), NULL when either is NULL. Compiled patterns are
/// cached per connection, since interceptor queries take patterns from table rows, where
/// SQLite's per-statement auxiliary data would not keep them. A pattern that does not compile
/// matches nothing and is logged once per process (the first 1,024 such patterns), so
/// a bad lesson never fails a query.
pub fn register(conn: &Connection) -> rusqlite::Result<()> {
    use rusqlite::functions::FunctionFlags;
    use std::collections::{HashMap, HashSet};
    static LOGGED: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    // The function must be `Fn`; a connection is used by one thread at a time, so the lock is
    // never contended.
    let cache: Mutex<HashMap<String, Option<regex::Regex>>> = Mutex::new(HashMap::new());
    conn.create_scalar_function(
        "regexp",
        2,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        move |ctx| {
            let (Some(pattern), Some(text)) = (
                ctx.get_raw(0).as_str_or_null()?,
                ctx.get_raw(1).as_str_or_null()?,
            ) else {
                return Ok(None);
            };
            let mut cache = cache
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if !cache.contains_key(pattern) {
                if cache.len() >= REGEX_CACHE {
                    cache.clear();
                }
                let compiled = match regex::Regex::new(pattern) {
                    Ok(re) => Some(re),
                    Err(e) => {
                        let mut logged = LOGGED
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        let seen = logged.get_or_insert_with(HashSet::new);
                        if seen.len() < LOGGED_PATTERNS && seen.insert(pattern.to_string()) {
                            tracing::warn!(pattern, error = %e, "regexp(): the pattern does not compile; it matches nothing");
                        }
                        None
                    }
                };
                cache.insert(pattern.to_string(), compiled);
            }
            Ok(Some(
                cache
                    .get(pattern)
                    .and_then(Option::as_ref)
                    .is_some_and(|re| re.is_match(text)),
            ))
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regexp_matches_and_survives_bad_patterns() {
        let conn = Connection::open_in_memory().unwrap();
        register(&conn).unwrap();
        // (pattern, text, expected): NULL in, NULL out; a bad pattern matches nothing.
        let cases: [(Option<&str>, Option<&str>, Option<bool>); 6] = [
            (Some(r"\bgit\s+stash\b"), Some("git stash -u"), Some(true)),
            (Some(r"\bgit\s+stash\b"), Some("git status"), Some(false)),
            (Some("(^|/)Cargo\\.lock$"), Some("a/Cargo.lock"), Some(true)),
            (Some("(unclosed"), Some("(unclosed"), Some(false)),
            (None, Some("x"), None),
            (Some("x"), None, None),
        ];
        for (p, t, want) in cases {
            let got: Option<bool> = conn
                .query_row("SELECT regexp(?1, ?2)", rusqlite::params![p, t], |r| {
                    r.get(0)
                })
                .unwrap();
            assert_eq!(got, want, "regexp({p:?}, {t:?})");
        }
    }
}
