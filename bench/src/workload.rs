//! The workloads: the same sequence of tool calls for every contender, drawn from fixed seeds.
//!
//! Every contender runs the same SQL (copied from spec/studio.yaml), so differences are the
//! servers' own. MCP Toolbox cannot bind array parameters on SQLite, so its dialect passes tag
//! lists as JSON text and splits `query_learnings` into one tool per filter.

use serde_json::{Value, json};

use crate::data::{TECH, TOPICS, learning_id};
use crate::rng::Rng;

/// Which tool names and argument shapes a contender takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// spec/studio.yaml's tools, which the SDK servers reproduce.
    Studio,
    /// The MCP Toolbox tools.yaml: tags as JSON text, one tool per filter.
    Toolbox,
}

/// What a workload exercises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `get_learning` by primary key.
    Pk,
    /// Case-insensitive substring search over title, problem and solution, limit 10.
    Search,
    /// Learnings having any of one or two tags (json_each), limit 10.
    Tags,
    /// `capture_learning`: one insert returning the new id.
    Insert,
}

impl Kind {
    /// Every kind, in the order a session calls them.
    pub const ALL: [Kind; 4] = [Kind::Pk, Kind::Search, Kind::Tags, Kind::Insert];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Pk => "pk",
            Kind::Search => "search",
            Kind::Tags => "tags",
            Kind::Insert => "insert",
        }
    }

    fn seed(self) -> u64 {
        match self {
            Kind::Pk => 11,
            Kind::Search => 12,
            Kind::Tags => 13,
            Kind::Insert => 14,
        }
    }
}

/// Search terms, of differing frequency and case; the last matches nothing, forcing a full scan.
pub const SEARCH_TERMS: &[&str] = &[
    "Timeout",
    "deadlock",
    "stale data",
    "nightly batch",
    "Lockfile",
    "WAL mode",
    "macos",
    "webhooks",
    "exponential backoff",
    "no-such-phrase",
];

/// An endless, deterministic sequence of calls of one kind.
pub struct Workload {
    kind: Kind,
    dialect: Dialect,
    rows: usize,
    rng: Rng,
    count: usize,
}

impl Workload {
    pub fn new(kind: Kind, dialect: Dialect, rows: usize) -> Self {
        Workload {
            kind,
            dialect,
            rows,
            rng: Rng::new(kind.seed()),
            count: 0,
        }
    }

    /// The `tools/call` params of the next call.
    pub fn next_params(&mut self) -> Value {
        self.count += 1;
        let toolbox = self.dialect == Dialect::Toolbox;
        let (tool, args) = match self.kind {
            Kind::Pk => (
                "get_learning",
                json!({"id": learning_id(1 + self.rng.below(self.rows))}),
            ),
            Kind::Search => {
                let search = *self.rng.pick(SEARCH_TERMS);
                let tool = if toolbox {
                    "search_learnings"
                } else {
                    "query_learnings"
                };
                (tool, json!({"search": search, "limit": 10}))
            }
            Kind::Tags => {
                let mut tags = vec![*self.rng.pick(TECH)];
                if self.rng.chance(50) {
                    tags.push(*self.rng.pick(TOPICS));
                }
                if toolbox {
                    let text = serde_json::to_string(&tags).expect("tags serialise");
                    ("learnings_by_tags", json!({"tags": text, "limit": 10}))
                } else {
                    ("query_learnings", json!({"tags": tags, "limit": 10}))
                }
            }
            Kind::Insert => {
                let n = self.count;
                let tags = vec!["bench", *self.rng.pick(TECH)];
                let tags = if toolbox {
                    Value::String(serde_json::to_string(&tags).expect("tags serialise"))
                } else {
                    json!(tags)
                };
                (
                    "capture_learning",
                    json!({
                        "title": format!("Benchmark insert {n}"),
                        "problem": format!("Insert number {n} of the benchmark needs a problem text of realistic length."),
                        "solution": "Write it through the server under test, exactly as a model would.",
                        "tags": tags,
                        "project_id": format!("proj-{:03}", 1 + self.rng.below(crate::data::PROJECTS)),
                    }),
                )
            }
        };
        json!({"name": tool, "arguments": args})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_are_deterministic_and_dialects_agree_on_ids() {
        let mut a = Workload::new(Kind::Pk, Dialect::Studio, 1000);
        let mut b = Workload::new(Kind::Pk, Dialect::Toolbox, 1000);
        for _ in 0..10 {
            assert_eq!(a.next_params(), b.next_params());
        }
    }

    #[test]
    fn toolbox_gets_tags_as_json_text() {
        let mut w = Workload::new(Kind::Tags, Dialect::Toolbox, 10);
        let p = w.next_params();
        assert_eq!(p["name"], "learnings_by_tags");
        assert!(p["arguments"]["tags"].as_str().unwrap().starts_with('['));
    }
}
