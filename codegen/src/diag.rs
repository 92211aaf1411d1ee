//! Diagnostics: every stage of the pipeline reports spec problems here.
//!
//! A [`Diagnostic`] points at a file, line and column of the YAML, carries a short label for the
//! offending span and a help line, and renders in the familiar compiler style. Stages push into a
//! [`Diagnostics`] collector so that one run reports every problem, not just the first.

use std::fmt;
use std::path::{Path, PathBuf};

/// A position in a spec file, 1-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Pos {
    pub line: u32,
    pub column: u32,
}

impl Pos {
    pub(crate) fn from_saphyr(loc: serde_saphyr::Location) -> Self {
        Pos {
            line: u32::try_from(loc.line()).unwrap_or(u32::MAX),
            column: u32::try_from(loc.column()).unwrap_or(u32::MAX),
        }
    }
}

/// One problem in a spec, with where it is and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: PathBuf,
    pub pos: Pos,
    /// What is wrong, lowercase and without a trailing period.
    pub message: String,
    /// A few words shown under the offending source text.
    pub label: Option<String>,
    /// How to fix it.
    pub help: Option<String>,
}

impl Diagnostic {
    /// Renders the diagnostic with the line of source it points at. A long line is shown as
    /// a window around the column, and a long message is cut: a spec of one huge line never
    /// prints it whole.
    pub fn render(&self, source: &str) -> String {
        let mut out = format!(
            "error: {}\n  --> {}:{}:{}\n",
            cut(&self.message, MAX_MESSAGE_CHARS),
            self.file.display(),
            self.pos.line,
            self.pos.column
        );
        let line_no = self.pos.line.to_string();
        let pad = " ".repeat(line_no.len());
        if let Some(line) = source.lines().nth(self.pos.line.saturating_sub(1) as usize) {
            let (text, col) = window(line, self.pos.column.saturating_sub(1) as usize);
            let text = text.as_str();
            let rest: String = text.chars().skip(col).take(WINDOW_AFTER).collect();
            // Underline one token: up to white space or a flow delimiter, without a key's colon.
            let token: String = rest
                .chars()
                .take_while(|c| !c.is_whitespace() && !matches!(c, ',' | '}' | ']'))
                .collect();
            let width = match token.strip_prefix(':') {
                // A SQL parameter: `:name` and no more (not a `::cast` or a `)` after it).
                Some(name) if name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') => {
                    1 + name
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .count()
                }
                _ => token.trim_end_matches(':').chars().count().max(1),
            };
            out.push_str(&format!("{pad} |\n{line_no} | {text}\n{pad} | "));
            out.push_str(&" ".repeat(col));
            out.push_str(&"^".repeat(width));
            if let Some(label) = &self.label {
                out.push(' ');
                out.push_str(label);
            }
            out.push('\n');
        }
        if let Some(help) = &self.help {
            out.push_str(&format!("{pad} = help: {help}\n"));
        }
        out
    }
}

/// The most characters of a message a rendered diagnostic shows.
const MAX_MESSAGE_CHARS: usize = 300;

/// How much of a long source line is shown before and after the column.
const WINDOW_BEFORE: usize = 60;
const WINDOW_AFTER: usize = 100;

/// `text` cut to `max` characters, an ellipsis marking the cut.
fn cut(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]).into(),
        None => text.into(),
    }
}

/// The part of `line` to show around character column `col` (0-based), and the column within
/// it: the whole line when short, else a window with ellipses where it was cut.
fn window(line: &str, col: usize) -> (String, usize) {
    if line.chars().nth(WINDOW_BEFORE + WINDOW_AFTER).is_none() {
        return (line.to_string(), col);
    }
    let start = col.saturating_sub(WINDOW_BEFORE);
    let mut shown: String = line
        .chars()
        .skip(start)
        .take(col - start + WINDOW_AFTER)
        .collect();
    let more_after = line.chars().nth(col + WINDOW_AFTER).is_some();
    if more_after {
        shown.push('…');
    }
    if start > 0 {
        (format!("…{shown}"), col - start + 1)
    } else {
        (shown, col)
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file.display(),
            self.pos.line,
            self.pos.column,
            self.message
        )
    }
}

/// Every problem found in one or more spec files, sorted by position when rendered.
#[derive(Debug, Clone, Default, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.summary())]
pub struct Diagnostics {
    pub items: Vec<Diagnostic>,
}

impl Diagnostics {
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub(crate) fn extend(&mut self, other: Diagnostics) {
        self.items.extend(other.items);
    }

    fn summary(&self) -> String {
        let mut items = self.items.clone();
        items.sort_by(|a, b| (&a.file, a.pos).cmp(&(&b.file, b.pos)));
        let lines: Vec<String> = items.iter().map(ToString::to_string).collect();
        lines.join("\n")
    }

    /// Renders every diagnostic with source context, reading each file once.
    pub fn render(&self) -> String {
        self.render_with(&|p: &Path| crate::read_spec(p).unwrap_or_default())
    }

    /// Renders every diagnostic with source context from `read`, which maps a diagnostic's
    /// file to its text.
    pub fn render_with(&self, read: &dyn Fn(&Path) -> String) -> String {
        let mut items = self.items.clone();
        items.sort_by(|a, b| (&a.file, a.pos, &a.message).cmp(&(&b.file, b.pos, &b.message)));
        let mut out = String::new();
        let mut cached: Option<(PathBuf, String)> = None;
        for d in &items {
            if cached.as_ref().is_none_or(|(p, _)| p != &d.file) {
                let text = read(&d.file);
                cached = Some((d.file.clone(), text));
            }
            let source = cached.as_ref().map_or("", |(_, s)| s.as_str());
            out.push_str(&d.render(source));
            out.push('\n');
        }
        let n = items.len();
        out.push_str(&format!(
            "error: {n} problem{} found in the spec{}\n",
            if n == 1 { "" } else { "s" },
            if n == 1 { "" } else { "s" }
        ));
        out
    }
}

/// Collects diagnostics for one file while a stage walks it.
pub(crate) struct Sink<'a> {
    pub file: &'a Path,
    pub diags: Diagnostics,
}

impl<'a> Sink<'a> {
    pub fn new(file: &'a Path) -> Self {
        Sink {
            file,
            diags: Diagnostics::default(),
        }
    }

    /// Records one problem; `label` and `help` may be empty.
    pub fn error(&mut self, pos: Pos, message: impl Into<String>, label: &str, help: &str) {
        self.diags.items.push(Diagnostic {
            file: self.file.to_path_buf(),
            pos,
            message: message.into(),
            label: (!label.is_empty()).then(|| label.to_string()),
            help: (!help.is_empty()).then(|| help.to_string()),
        });
    }

    pub fn finish(self) -> Diagnostics {
        self.diags
    }
}

/// The closest candidate to `word` by edit distance, for "did you mean" help lines.
pub(crate) fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (edit_distance(word, c), *c))
        .filter(|(d, c)| *d <= (c.len().max(word.len()) / 3).max(1))
        .min()
        .map(|(_, c)| c)
}

/// Edit distance counting an insertion, a deletion, a substitution or a swap of two adjacent
/// characters as one edit, since `titel` for `title` is one slip of the fingers.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_source_line_with_caret_label_and_help() {
        let d = Diagnostic {
            file: PathBuf::from("spec/x.yaml"),
            pos: Pos { line: 2, column: 9 },
            message: "unknown result mode `manny`".into(),
            label: Some("not a result mode".into()),
            help: Some("did you mean `many`?".into()),
        };
        let got = d.render("tools:\n  mode: manny\n");
        let want = "error: unknown result mode `manny`\n  --> spec/x.yaml:2:9\n  |\n2 |   mode: manny\n  |         ^^^^^ not a result mode\n  = help: did you mean `many`?\n";
        assert_eq!(got, want);
    }

    #[test]
    fn suggests_close_names_only() {
        assert_eq!(
            did_you_mean("manny", &["many", "one", "scalar"]),
            Some("many")
        );
        assert_eq!(did_you_mean("zzzzzz", &["many", "one", "scalar"]), None);
        assert_eq!(did_you_mean("titel", &["name", "title"]), Some("title"));
    }

    #[test]
    fn a_long_line_shows_a_window_around_the_column_and_a_long_message_is_cut() {
        let line = format!("{}: {}", "k".repeat(10_000), "v".repeat(10_000));
        let d = Diagnostic {
            file: PathBuf::from("spec/x.yaml"),
            pos: Pos {
                line: 1,
                column: 10_003,
            },
            message: format!("unknown key `{}`", "k".repeat(10_000)),
            label: Some("here".into()),
            help: None,
        };
        let got = d.render(&line);
        assert!(got.len() < 1200, "{} bytes: {got}", got.len());
        let lines: Vec<&str> = got.lines().collect();
        // The source line and the caret under the column's character.
        let (source, caret) = (lines[3], lines[4]);
        let at = caret.chars().position(|c| c == '^').unwrap();
        assert_eq!(source.chars().nth(at), Some('v'), "{got}");
        assert!(source.contains('…') && lines[0].ends_with('…'), "{got}");
    }
}
