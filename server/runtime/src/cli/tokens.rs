//! `mcpspec tokens`: what a server's tools cost a client's context before any call. Each
//! tool's entry in `tools/list` (name, title, description, schemas, annotations) is measured
//! as the JSON a client receives, and estimated in tokens at four bytes a token, the usual
//! rule of thumb for English text and JSON with today's tokenizers (an estimate, not any
//! model's count). The toolsets (`toolsets:`) are measured the same way, since a client served
//! with `serve --toolset` receives only theirs.

use std::fmt::Write as _;

use crate::def::ServerDef;

/// Bytes a token, for the estimate.
const BYTES_PER_TOKEN: usize = 4;

/// The report: one line a tool, largest first, then a line a toolset and the whole list.
pub(super) fn report(def: &ServerDef) -> String {
    let tools = crate::protocol::tools(def);
    let sizes: Vec<(String, usize)> = tools
        .iter()
        .map(|t| {
            let bytes = serde_json::to_string(t).map_or(0, |j| j.len());
            (t.name.to_string(), bytes)
        })
        .collect();
    let mut out = String::new();
    let width = sizes.iter().map(|(n, _)| n.len()).max().unwrap_or(4).max(8);
    let _ = writeln!(out, "{:<width$}  {:>8}  {:>7}", "tool", "bytes", "~tokens");
    let mut by_size: Vec<&(String, usize)> = sizes.iter().collect();
    by_size.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for (name, bytes) in by_size {
        let _ = writeln!(out, "{name:<width$}  {bytes:>8}  {:>7}", tokens(*bytes));
    }
    let _ = writeln!(out);
    let total = |names: &mut dyn Iterator<Item = &str>| -> (usize, usize) {
        let picked: Vec<&rmcp::model::Tool> = names
            .filter_map(|n| tools.iter().find(|t| t.name == n))
            .collect();
        let bytes =
            serde_json::to_string(&serde_json::json!({ "tools": picked })).map_or(0, |j| j.len());
        (picked.len(), bytes)
    };
    let _ = writeln!(
        out,
        "{:<width$}  {:>8}  {:>7}  tools",
        "list", "bytes", "~tokens"
    );
    for (name, set) in def.toolsets {
        let (n, bytes) = total(&mut set.iter().copied());
        let _ = writeln!(
            out,
            "{:<width$}  {bytes:>8}  {:>7}  {n}",
            format!("--toolset {name}"),
            tokens(bytes)
        );
    }
    let (n, bytes) = total(&mut def.tools.iter().map(|t| t.name));
    let _ = write!(
        out,
        "{:<width$}  {bytes:>8}  {:>7}  {n}\n\nbytes: the JSON a client receives in `tools/list`; ~tokens: at {BYTES_PER_TOKEN} bytes a token, an estimate",
        "every tool",
        tokens(bytes)
    );
    out
}

/// The estimate for `bytes` of JSON, rounded up.
fn tokens(bytes: usize) -> usize {
    bytes.div_ceil(BYTES_PER_TOKEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The basic golden's report: a line a tool, largest first, and the whole list, whose
    /// size is the `tools/list` result the server sends.
    #[test]
    fn the_report_measures_what_tools_list_sends() {
        let def = &crate::basic::SERVER;
        let text = report(def);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("tool "), "{text}");
        let sizes: Vec<usize> = lines[1..=def.tools.len()]
            .iter()
            .map(|l| l.split_whitespace().nth(1).unwrap().parse().unwrap())
            .collect();
        assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "{text}");
        let listed = serde_json::to_string(&serde_json::json!({
            "tools": crate::protocol::tools(def)
        }))
        .unwrap();
        let every = lines.iter().find(|l| l.starts_with("every tool")).unwrap();
        let words: Vec<&str> = every.split_whitespace().collect();
        assert_eq!(words[2], listed.len().to_string(), "{text}");
        assert_eq!(words[3], listed.len().div_ceil(4).to_string(), "{text}");
        assert_eq!(words[4], def.tools.len().to_string(), "{text}");
    }
}
