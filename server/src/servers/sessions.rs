//! Claude Code session files, read for `lessons_scan`: the events of a session JSONL file and
//! the tier-2 heuristics that find likely lessons nobody tagged.
//!
//! A session file holds one JSON object per line: `{"type": "user" | "assistant", "message":
//! {"role", "content"}, "sessionId", ...}`. Assistant content blocks of type `tool_use` are
//! calls (`id`, `name`, `input`); user content blocks of type `tool_result` are their results
//! (`tool_use_id`, `is_error`, `content`); user text is what the person said. Lines that are
//! not JSON, or not messages, are skipped.
//!
//! The heuristics, each described with its reasons in `docs/lessons.md` (the spec's `docs`):
//! - [`Kind::Correction`]: the person's first words right after a tool call correct it;
//! - [`Kind::RetrySucceeded`]: a call failed, and a different call of the same purpose
//!   succeeded within the next three calls;
//! - [`Kind::RepeatedFailure`]: the same call failed more than once in the session.
//!
//! Each finding carries its evidence: the session, the line, the calls involved and the
//! person's words. Findings are suggestions for review, never lessons by themselves.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;
use serde_json::Value;

use super::lessons::canonical_tool;

/// How many calls after a failure a successful retry may come.
const RETRY_WINDOW: usize = 3;

/// The longest piece of a command, path or message kept in a finding.
const QUOTE: usize = 160;

/// What happened in a session, in order.
#[derive(Debug, Clone, PartialEq)]
enum Event {
    /// The assistant called a tool.
    Call(Call),
    /// A call's result came back.
    Result {
        id: String,
        failed: bool,
        text: String,
    },
    /// The person wrote something.
    Said { line: usize, text: String },
}

/// One tool call as the heuristics see it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Call {
    /// The line of the session file, from 1.
    pub line: usize,
    #[serde(skip)]
    pub id: String,
    /// The canonical tool name (`Bash`, `Edit`, ...).
    pub tool: String,
    /// What the call was about: the command, else the file path, else the input as JSON.
    pub key: String,
    /// Whether it failed; `None` while its result is unknown.
    pub failed: Option<bool>,
    /// The first line of a failed call's result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Which heuristic found something.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Correction,
    RetrySucceeded,
    RepeatedFailure,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Correction => "correction",
            Kind::RetrySucceeded => "retry-succeeded",
            Kind::RepeatedFailure => "repeated-failure",
        }
    }
}

/// A likely lesson and why it was suggested.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub kind: Kind,
    /// The session's id (`sessionId`), else the file's name.
    pub session: String,
    /// The line the finding is about: the person's words, the successful retry, or the last
    /// repeated failure.
    pub line: usize,
    /// The calls involved, in order.
    pub calls: Vec<Call>,
    /// The person's words, for a correction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub said: Option<String>,
}

impl Finding {
    /// Moves the finding's line numbers `by` lines down the file.
    pub fn shift(&mut self, by: usize) {
        self.line += by;
        for c in &mut self.calls {
            c.line += by;
        }
    }

    /// The tool the lesson would be about.
    pub fn tool(&self) -> &str {
        &self.calls[0].tool
    }

    /// The trigger of the suggested lesson: what the first call was about.
    pub fn trigger(&self) -> String {
        let key = &self.calls[0].key;
        if key.trim().chars().count() >= 3 {
            key.clone()
        } else {
            format!("{} {key}", self.tool())
        }
    }

    /// What went wrong, in words, with where it happened.
    pub fn problem(&self) -> String {
        let first = &self.calls[0];
        let at = format!("(session {}, line {})", self.session, self.line);
        match self.kind {
            Kind::Correction => format!(
                "Right after {} `{}` the person corrected the assistant: \"{}\" {at}",
                first.tool,
                first.key,
                self.said.as_deref().unwrap_or_default()
            ),
            Kind::RetrySucceeded => format!(
                "{} `{}` failed{} {at}",
                first.tool,
                first.key,
                error_suffix(first)
            ),
            Kind::RepeatedFailure => format!(
                "{} `{}` failed {} times in one session{} {at}",
                first.tool,
                first.key,
                self.calls.len(),
                error_suffix(self.calls.last().unwrap_or(first))
            ),
        }
    }

    /// What to do instead, as far as the session shows it.
    pub fn solution(&self) -> String {
        match self.kind {
            Kind::Correction => format!(
                "Before {} `{}` again, check what the person asked for; they said: \"{}\"",
                self.tool(),
                self.calls[0].key,
                self.said.as_deref().unwrap_or_default()
            ),
            Kind::RetrySucceeded => {
                let fix = self.calls.last().unwrap_or(&self.calls[0]);
                format!("{} `{}` worked instead.", fix.tool, fix.key)
            }
            Kind::RepeatedFailure => format!(
                "Do not retry {} `{}` unchanged: read the error and change the approach first.",
                self.tool(),
                self.calls[0].key
            ),
        }
    }
}

fn error_suffix(c: &Call) -> String {
    c.error
        .as_deref()
        .map(|e| format!(": {e}"))
        .unwrap_or_default()
}

/// Reads the events of a session's lines (text of whole lines, `first_line` being the number
/// of the first) and runs every heuristic over them.
pub fn findings(text: &str, first_line: usize, fallback_session: &str) -> Vec<Finding> {
    let lines: Vec<(usize, Value)> = text
        .lines()
        .enumerate()
        .filter_map(|(i, l)| Some((first_line + i, serde_json::from_str(l).ok()?)))
        .collect();
    findings_in(&lines, fallback_session)
}

/// The findings of a session's lines already parsed, each with its line number.
pub fn findings_in(lines: &[(usize, Value)], fallback_session: &str) -> Vec<Finding> {
    let mut session = None;
    let mut events = Vec::new();
    for (line, v) in lines {
        if session.is_none() {
            session = v
                .get("sessionId")
                .and_then(Value::as_str)
                .map(str::to_string);
        }
        events_of(v, *line, &mut events);
    }
    let session = session.unwrap_or_else(|| fallback_session.to_string());
    let calls = resolve(&events);
    let mut out = corrections(&events, &calls, &session);
    out.extend(retries(&calls, &session));
    out.extend(repeats(&calls, &session));
    out.sort_by_key(|f| f.line);
    out
}

/// The events of one line.
fn events_of(v: &Value, line: usize, out: &mut Vec<Event>) {
    // Claude Code marks its own injected text (command output, caveats) as meta.
    if v.get("isMeta").and_then(Value::as_bool) == Some(true) {
        return;
    }
    let message = v.get("message").unwrap_or(v);
    let role = message
        .get("role")
        .or_else(|| v.get("type"))
        .and_then(Value::as_str);
    let content = message.get("content");
    match (role, content) {
        (Some("user"), Some(Value::String(s))) => said(s, line, out),
        (Some("user"), Some(Value::Array(blocks))) => {
            for b in blocks {
                match b.get("type").and_then(Value::as_str) {
                    Some("tool_result") => out.push(Event::Result {
                        id: str_of(b, "tool_use_id"),
                        failed: b.get("is_error").and_then(Value::as_bool) == Some(true),
                        text: result_text(b.get("content")),
                    }),
                    Some("text") => said(&str_of(b, "text"), line, out),
                    _ => {}
                }
            }
        }
        (Some("assistant"), Some(Value::Array(blocks))) => {
            for b in blocks {
                if b.get("type").and_then(Value::as_str) == Some("tool_use") {
                    let input = b.get("input").cloned().unwrap_or(Value::Null);
                    out.push(Event::Call(Call {
                        line,
                        id: str_of(b, "id"),
                        tool: canonical_tool(&str_of(b, "name")),
                        key: key_of(&input),
                        failed: None,
                        error: None,
                    }));
                }
            }
        }
        _ => {}
    }
}

/// The person's words, unless they are text Claude Code wrote on their behalf.
fn said(text: &str, line: usize, out: &mut Vec<Event>) {
    let t = text.trim();
    if t.is_empty() || t.starts_with('<') || t.starts_with("Caveat:") || t.starts_with('[') {
        return;
    }
    out.push(Event::Said {
        line,
        text: t.to_string(),
    });
}

fn str_of(v: &Value, k: &str) -> String {
    v.get(k)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// A result's text: a string, or the text blocks joined.
fn result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// What a call is about: its command, else its file path, else its input.
fn key_of(input: &Value) -> String {
    let pick = [
        "command",
        "cmd",
        "file_path",
        "path",
        "notebook_path",
        "pattern",
        "url",
    ]
    .iter()
    .find_map(|k| input.get(*k).and_then(Value::as_str));
    let key = pick.map_or_else(|| input.to_string(), str::to_string);
    shorten(key.trim())
}

/// The first line of `s`, cut to [`QUOTE`] characters; `…` marks anything left out.
fn shorten(s: &str) -> String {
    let one_line = s.lines().next().unwrap_or_default();
    if one_line.len() < s.len() && one_line.chars().count() <= QUOTE {
        return format!("{one_line}…");
    }
    mcpspec::__internal::truncate(one_line, QUOTE + 1)
}

/// The calls, in order, each with its outcome from the matching result.
fn resolve(events: &[Event]) -> Vec<Call> {
    let mut outcome: HashMap<&str, (bool, &str)> = HashMap::new();
    for e in events {
        if let Event::Result { id, failed, text } = e {
            outcome.insert(id, (*failed, text));
        }
    }
    events
        .iter()
        .filter_map(|e| match e {
            Event::Call(c) => {
                let mut c = c.clone();
                if let Some((failed, text)) = outcome.get(c.id.as_str()) {
                    c.failed = Some(*failed);
                    if *failed {
                        c.error = Some(shorten(text.trim())).filter(|e| !e.is_empty());
                    }
                }
                Some(c)
            }
            _ => None,
        })
        .collect()
}

/// Words that open a correction, and phrases that are one wherever they stand.
static OPENS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(no\b|nope\b|stop\b|wait\b|wrong\b|undo\b|revert\b|don'?t\b|do not\b|never\b|not that\b|instead\b)")
        .unwrap_or_else(|_| unreachable!())
});
/// Openers that read like a correction but are not one.
static NEUTRAL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(no (problem|worries|rush|hurry|need)\b|never mind\b|nevermind\b|wait (for|until|till)\b|don'?t worry\b|do not worry\b)")
        .unwrap_or_else(|_| unreachable!())
});
static ANYWHERE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(that'?s wrong|that is wrong|that'?s not (what|right)|not what i (asked|meant|wanted)|you should(n'?t| not)? have|i told you|why did you)")
        .unwrap_or_else(|_| unreachable!())
});

/// The person corrected the assistant in the first words after a tool call.
fn corrections(events: &[Event], calls: &[Call], session: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut last_call: Option<&Call> = None;
    for e in events {
        match e {
            Event::Call(c) => last_call = calls.iter().find(|x| x.line == c.line && x.id == c.id),
            Event::Result { .. } => {}
            Event::Said { line, text } => {
                if let Some(c) = last_call.take()
                    && ((OPENS.is_match(text) && !NEUTRAL.is_match(text))
                        || ANYWHERE.is_match(text))
                {
                    out.push(Finding {
                        kind: Kind::Correction,
                        session: session.to_string(),
                        line: *line,
                        calls: vec![c.clone()],
                        said: Some(shorten(text)),
                    });
                }
            }
        }
    }
    out
}

/// What a call is for, to tell a retry for the same purpose from unrelated work: the program
/// of a command (after `sudo` and variable assignments), else the file name, else the tool.
fn purpose(c: &Call) -> String {
    if c.tool == "Bash" {
        let program = c
            .key
            .split_whitespace()
            .find(|w| *w != "sudo" && !w.contains('='))
            .unwrap_or_default();
        return format!("Bash {program}");
    }
    let name = c.key.rsplit(['/', '\\']).next().unwrap_or(&c.key);
    format!("{} {name}", c.tool)
}

/// A call failed, and a different call for the same purpose succeeded soon after.
fn retries(calls: &[Call], session: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    for (i, c) in calls.iter().enumerate() {
        if c.failed != Some(true) {
            continue;
        }
        let fix = calls[i + 1..]
            .iter()
            .take(RETRY_WINDOW)
            .find(|n| n.failed == Some(false) && n.key != c.key && purpose(n) == purpose(c));
        if let Some(fix) = fix {
            out.push(Finding {
                kind: Kind::RetrySucceeded,
                session: session.to_string(),
                line: fix.line,
                calls: vec![c.clone(), fix.clone()],
                said: None,
            });
        }
    }
    out
}

/// The same call (tool and what it was about) failed more than once.
fn repeats(calls: &[Call], session: &str) -> Vec<Finding> {
    let mut failed: Vec<(String, String, Vec<&Call>)> = Vec::new();
    for c in calls.iter().filter(|c| c.failed == Some(true)) {
        match failed
            .iter_mut()
            .find(|(t, k, _)| *t == c.tool && *k == c.key)
        {
            Some((_, _, list)) => list.push(c),
            None => failed.push((c.tool.clone(), c.key.clone(), vec![c])),
        }
    }
    failed
        .into_iter()
        .filter(|(_, _, list)| list.len() > 1)
        .map(|(_, _, list)| Finding {
            kind: Kind::RepeatedFailure,
            session: session.to_string(),
            line: list.last().map_or(0, |c| c.line),
            calls: list.into_iter().cloned().collect(),
            said: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str, command: &str) -> String {
        json!({"type": "assistant", "sessionId": "s1", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": id, "name": "Bash", "input": {"command": command}}]}})
        .to_string()
    }

    fn result(id: &str, failed: bool, text: &str) -> String {
        json!({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "is_error": failed, "content": text}]}})
        .to_string()
    }

    fn user(text: &str) -> String {
        json!({"type": "user", "message": {"role": "user", "content": text}}).to_string()
    }

    fn kinds(lines: &[String]) -> Vec<Kind> {
        findings(&lines.join("\n"), 1, "f")
            .iter()
            .map(|f| f.kind)
            .collect()
    }

    #[test]
    fn a_correction_right_after_a_call_is_found() {
        let lines = [
            call("a", "rm -rf build"),
            result("a", false, ""),
            user("No, don't delete build; it holds the cache"),
        ];
        let f = findings(&lines.join("\n"), 10, "f");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].kind, Kind::Correction);
        assert_eq!(f[0].line, 12);
        assert_eq!(f[0].session, "s1");
        assert_eq!(f[0].calls[0].key, "rm -rf build");
        // Words that are no correction, or a correction with no call before it, are not.
        assert!(
            kinds(&[
                call("a", "ls"),
                result("a", false, ""),
                user("Nothing else, thanks")
            ])
            .is_empty()
        );
        assert!(kinds(&[user("no, start over")]).is_empty());
        for polite in [
            "No problem, thanks!",
            "Never mind, that is fine",
            "Don't worry about it",
        ] {
            assert!(
                kinds(&[call("a", "ls"), result("a", false, ""), user(polite)]).is_empty(),
                "{polite}"
            );
        }
    }

    #[test]
    fn a_failure_fixed_by_a_different_call_is_found() {
        let lines = [
            call("a", "npm test"),
            result("a", true, "Error: Missing script: \"test\"\nmore"),
            call("b", "npm run test:unit"),
            result("b", false, "ok"),
        ];
        let f = findings(&lines.join("\n"), 1, "f");
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].kind, Kind::RetrySucceeded);
        assert_eq!(f[0].calls[1].key, "npm run test:unit");
        assert_eq!(
            f[0].calls[0].error.as_deref(),
            Some("Error: Missing script: \"test\"…")
        );
        assert!(f[0].solution().contains("npm run test:unit"));
        // Another program succeeding is not a retry.
        assert!(
            kinds(&[
                call("a", "npm test"),
                result("a", true, "x"),
                call("b", "git status"),
                result("b", false, "")
            ])
            .is_empty()
        );
    }

    #[test]
    fn the_same_failure_twice_is_found_once() {
        let lines = [
            call("a", "cargo build --offline"),
            result("a", true, "error: no network"),
            call("b", "cargo build --offline"),
            result("b", true, "error: no network"),
            call("c", "cargo build --offline"),
            result("c", true, "error: no network"),
        ];
        let f = findings(&lines.join("\n"), 1, "f");
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].kind, Kind::RepeatedFailure);
        assert_eq!(f[0].calls.len(), 3);
        assert_eq!(f[0].line, 5);
    }

    #[test]
    fn broken_lines_are_skipped() {
        let lines = [
            "{not json".to_string(),
            "[]".into(),
            "42".into(),
            call("a", "ls"),
        ];
        assert!(kinds(&lines).is_empty());
    }
}
