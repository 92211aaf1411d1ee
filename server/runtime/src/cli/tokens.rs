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

/// What a tool list costs a client's context: its `tools/list` JSON in bytes, and the
/// estimate in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cost {
    pub bytes: usize,
    pub tokens: usize,
    /// How many tools it lists.
    pub tools: usize,
}

/// What each list a client may receive costs: every tool's (`None`) first, then each
/// toolset's (`serve --toolset NAME`), in the spec's order.
pub fn list_costs(def: &ServerDef) -> Vec<(Option<&'static str>, Cost)> {
    let tools = crate::protocol::tools(def);
    let cost = |names: &mut dyn Iterator<Item = &str>| -> Cost {
        let picked: Vec<&rmcp::model::Tool> = names
            .filter_map(|n| tools.iter().find(|t| t.name == n))
            .collect();
        let bytes =
            serde_json::to_string(&serde_json::json!({ "tools": picked })).map_or(0, |j| j.len());
        Cost {
            bytes,
            tokens: tokens(bytes),
            tools: picked.len(),
        }
    };
    let mut out = vec![(None, cost(&mut def.tools.iter().map(|t| t.name)))];
    for (name, set) in def.toolsets {
        out.push((Some(*name), cost(&mut set.iter().copied())));
    }
    out
}

/// The report: one line a tool, largest first, then a line a toolset and the whole list, and
/// the spec's budget when it sets one.
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
    let _ = writeln!(
        out,
        "{:<width$}  {:>8}  {:>7}  tools",
        "list", "bytes", "~tokens"
    );
    let costs = list_costs(def);
    // The toolsets first and the whole list last, as a total.
    for (name, c) in costs.iter().skip(1).chain(costs.iter().take(1)) {
        let shown = name.map_or_else(|| "every tool".to_string(), |n| format!("--toolset {n}"));
        let _ = writeln!(
            out,
            "{shown:<width$}  {:>8}  {:>7}  {}",
            c.bytes, c.tokens, c.tools
        );
    }
    let _ = write!(
        out,
        "\nbytes: the JSON a client receives in `tools/list`; ~tokens: at {BYTES_PER_TOKEN} bytes a token, an estimate"
    );
    if let Some(budget) = def.token_budget {
        let over: Vec<String> = costs
            .iter()
            .filter(|(_, c)| c.tokens as u64 > budget)
            .map(|(n, _)| n.map_or_else(|| "every tool".to_string(), |n| format!("--toolset {n}")))
            .collect();
        let _ = if over.is_empty() {
            write!(
                out,
                "\nbudget: {budget} tokens (token_budget); every list is within it"
            )
        } else {
            write!(
                out,
                "\nbudget: {budget} tokens (token_budget); over it: {}",
                over.join(", ")
            )
        };
    }
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
