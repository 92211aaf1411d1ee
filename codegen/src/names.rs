//! Identifier sanitising: wire names from the YAML become Rust identifiers that compile.
//!
//! Wire names stay beside the identifiers (`#[serde(rename)]`, table entries), so a tool or
//! property can be called anything a client accepts while the Rust side stays valid and unique.

use std::collections::BTreeSet;

const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut",
    "pub", "ref", "return", "self", "Self", "static", "struct", "super", "trait", "true", "type",
    "unsafe", "use", "where", "while", "abstract", "become", "box", "do", "final", "macro",
    "override", "priv", "try", "typeof", "unsized", "virtual", "yield",
];

/// The lowercase words of a name: split at every other character and where a lowercase letter
/// or digit meets an uppercase one.
pub(crate) fn words(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            if c.is_ascii_uppercase() && prev_lower && !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
            cur.push(c.to_ascii_lowercase());
        } else {
            prev_lower = false;
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// A snake_case field or function name: keywords get a trailing `_`, a leading digit a `_`.
pub(crate) fn snake(name: &str) -> String {
    let mut s = words(name).join("_");
    if s.is_empty() {
        s = "field".into();
    }
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    if KEYWORDS.contains(&s.as_str()) {
        s.push('_');
    }
    s
}

/// A PascalCase type name.
pub(crate) fn pascal(name: &str) -> String {
    let mut s: String = words(name)
        .iter()
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect();
    if s.is_empty() {
        s = "Type".into();
    }
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, 'T');
    }
    if KEYWORDS.contains(&s.as_str()) {
        s.push('_');
    }
    s
}

/// Makes snake_case names unique in order: a clash gets `_2`, `_3` and so on.
pub(crate) fn dedupe(names: impl IntoIterator<Item = String>) -> Vec<String> {
    dedupe_with(names, "_")
}

/// Makes PascalCase names unique in order: a clash gets `2`, `3` and so on.
pub(crate) fn dedupe_types(names: impl IntoIterator<Item = String>) -> Vec<String> {
    dedupe_with(names, "")
}

fn dedupe_with(names: impl IntoIterator<Item = String>, sep: &str) -> Vec<String> {
    let mut seen = BTreeSet::new();
    names
        .into_iter()
        .map(|n| {
            // A keyword's trailing `_` is not needed once a numeric suffix makes it unique.
            let base = n.trim_end_matches('_').to_string();
            let mut candidate = n.clone();
            let mut i = 2;
            while !seen.insert(candidate.clone()) {
                candidate = format!("{base}{sep}{i}");
                i += 1;
            }
            candidate
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitises_keywords_digits_and_punctuation() {
        for (wire, want_snake, want_pascal) in [
            ("query_learnings", "query_learnings", "QueryLearnings"),
            ("type", "type_", "Type"),
            ("self", "self_", "Self_"),
            ("projectId", "project_id", "ProjectId"),
            ("kb.add-entry", "kb_add_entry", "KbAddEntry"),
            ("2fa", "_2fa", "T2fa"),
            ("---", "field", "Type"),
        ] {
            assert_eq!(snake(wire), want_snake, "{wire}");
            assert_eq!(pascal(wire), want_pascal, "{wire}");
        }
    }

    #[test]
    fn clashing_names_get_suffixes() {
        let got = dedupe(["project_id", "projectId", "project-id"].map(snake));
        assert_eq!(got, ["project_id", "project_id_2", "project_id_3"]);
        let got = dedupe(["type", "Type"].map(snake));
        assert_eq!(got, ["type_", "type_2"]);
        let got = dedupe_types(["type", "Type", "self"].map(pascal));
        assert_eq!(got, ["Type", "Type2", "Self_"]);
    }
}
