//! Argument transforms declared in a spec (`transform:`), applied after validation and before
//! binding. The FTS5 transforms turn free text into a query that cannot change the query's
//! structure or raise a syntax error: each word becomes a quoted phrase. Also the bounds on
//! text quoted back to a client ([`quote`], [`shorten`]).

use serde_json::{Value, json};

/// Applies `transforms` in order to a string value; other values pass through.
pub fn apply(value: &mut Value, transforms: &[&str]) {
    let Value::String(s) = value else { return };
    for t in transforms {
        *s = match *t {
            "trim" => s.trim().to_string(),
            "lower" => s.to_lowercase(),
            "words" => words(s),
            "fts5" => fts5(s, false),
            "fts5_prefix" => fts5(s, true),
            other => match other.strip_prefix("truncate:").and_then(|n| n.parse().ok()) {
                Some(n) => truncate(s, n),
                None => std::mem::take(s),
            },
        };
    }
}

/// The words of `text`: its runs of letters and digits (as SQLite's `unicode61` tokenizer
/// reads words), lower-cased, one space apart. Punctuation and operators separate words, so
/// that a query means the same on every engine: `zod"+validation` is `zod validation`.
pub fn words(text: &str) -> String {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every whitespace-separated word as an FTS5 string (a quoted phrase, quotes doubled), all
/// of them required; with `prefix`, each word matches as a prefix. No words gives the empty
/// phrase, which matches nothing.
pub fn fts5(text: &str, prefix: bool) -> String {
    // Control characters (NUL above all, which ends a string inside FTS5's parser) separate
    // words like white space does.
    let terms: Vec<String> = text
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .map(|w| {
            let quoted = format!("\"{}\"", w.replace('"', "\"\""));
            if prefix { quoted + "*" } else { quoted }
        })
        .collect();
    if terms.is_empty() {
        "\"\"".to_string()
    } else {
        terms.join(" ")
    }
}

/// At most `max` characters, the last of them an ellipsis when the text was cut.
pub fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The longest piece of a client's value quoted back in an error message, in characters.
pub const QUOTE_CHARS: usize = 100;

/// `s` as is when short, else its first [`QUOTE_CHARS`] characters and the length left out.
pub fn quote(s: &str) -> String {
    let cut = truncate(s, QUOTE_CHARS + 1);
    if cut == s {
        return cut;
    }
    // `truncate` ends the text with `…`; say how much was left out.
    let kept = cut.len() - '…'.len_utf8();
    format!("{cut} ({} more bytes)", s.len() - kept)
}

/// A value for an error's data: strings shortened as [`quote`] does, inside arrays and objects
/// too, so that a huge argument is never sent back whole.
pub fn shorten(v: &Value) -> Value {
    match v {
        Value::String(s) if s.chars().nth(QUOTE_CHARS).is_some() => Value::String(quote(s)),
        Value::Array(a) if a.len() > 20 => {
            let mut kept: Vec<Value> = a.iter().take(20).map(shorten).collect();
            kept.push(json!(format!("… ({} more items)", a.len() - 20)));
            Value::Array(kept)
        }
        Value::Array(a) => Value::Array(a.iter().map(shorten).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, x)| (k.clone(), shorten(x))).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fts5_quotes_every_operator_and_special_character() {
        for (input, want) in [
            ("rust async", r#""rust" "async""#),
            ("  spaced   out ", r#""spaced" "out""#),
            (r#"say "hi""#, r#""say" """hi""""#),
            ("NOT OR AND NEAR", r#""NOT" "OR" "AND" "NEAR""#),
            (
                "col:value ^start * (x)",
                r#""col:value" "^start" "*" "(x)""#,
            ),
            ("", r#""""#),
            ("a\u{0}b\u{7}c", r#""a" "b" "c""#),
        ] {
            assert_eq!(fts5(input, false), want, "{input}");
        }
        assert_eq!(fts5("asy rus", true), r#""asy"* "rus"*"#);
    }

    #[test]
    fn words_are_runs_of_letters_and_digits() {
        for (input, want) in [
            (r#"zod"+validation"#, "zod validation"),
            ("  The AND of ", "the and of"),
            ("acceptance-criteria", "acceptance criteria"),
            ("Zoë's café_2", "zoë s café 2"),
            ("--", ""),
        ] {
            assert_eq!(words(input), want, "{input}");
        }
        assert_eq!(
            fts5(&words(r#"zod"+validation"#), false),
            r#""zod" "validation""#
        );
    }

    #[test]
    fn truncate_counts_characters_and_marks_the_cut() {
        assert_eq!(truncate("héllo", 5), "héllo");
        assert_eq!(truncate("héllo world", 5), "héll…");
        let mut v = Value::from("  Hello World  ");
        apply(&mut v, &["trim", "lower", "truncate:5"]);
        assert_eq!(v, Value::from("hell…"));
    }
}
