//! `mcpspec skills`: writes a skill in the Agent Skills layout (`<name>/SKILL.md`) that teaches
//! an agent to use a server's tools, from what the spec already says of them: the server's
//! instructions, each tool's title, description, annotations and arguments, its examples with
//! what they return, and the error codes a call may answer. The skill is plain text an author
//! may edit and then serve with `skills:`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use serde_json::Value;

use crate::def::{ExpectDef, ServerDef, ToolDef};

/// The longest description the Agent Skills specification allows.
const MAX_DESCRIPTION: usize = 1024;

/// Writes the skill under `out` (`out/<name>/SKILL.md`) and returns its `SKILL.md`'s path; an
/// existing `SKILL.md` is replaced only with `force`.
pub(super) fn write(def: &ServerDef, out: &Path, force: bool) -> Result<PathBuf> {
    let (name, text) = render(def);
    let dir = out.join(&name);
    let file = dir.join("SKILL.md");
    if file.exists() && !force {
        bail!(
            "{} exists; pass --force to replace it (it may hold edits of your own)",
            file.display()
        );
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    crate::handler::replace_file(&file, text.as_bytes())
        .with_context(|| format!("writing {}", file.display()))?;
    Ok(file)
}

/// The skill's name and its `SKILL.md`.
pub(super) fn render(def: &ServerDef) -> (String, String) {
    let name = skill_name(def.name);
    let shown = def.title.unwrap_or(def.name);
    let mut text = String::new();
    let _ = writeln!(text, "---\nname: {name}");
    let _ = writeln!(text, "description: {}", json_text(&description(def, shown)));
    let _ = writeln!(text, "---\n\n# Using {shown}\n");
    if let Some(i) = def.instructions {
        let _ = writeln!(text, "{}\n", i.trim());
    }
    let _ = writeln!(
        text,
        "Each tool below is called with a JSON object of its arguments. A call that fails \
         answers with `isError` and a JSON body `{{\"error\": {{\"code\", \"message\"}}}}`: read \
         the code, fix what the message names, and call again.\n\n## Tools\n"
    );
    for tool in def.tools {
        tool_section(def, tool, &mut text);
    }
    errors_section(def, &mut text);
    (name, text)
}

/// `<server>-tools`, in the skill name's alphabet.
fn skill_name(server: &str) -> String {
    let mut name: String = server
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    while name.contains("--") {
        name = name.replace("--", "-");
    }
    let name = name.trim_matches('-');
    let mut name = if name.is_empty() { "server" } else { name }.to_string();
    name.truncate(58);
    format!("{}-tools", name.trim_end_matches('-'))
}

/// What the skill is for, naming the tools while it fits.
fn description(def: &ServerDef, shown: &str) -> String {
    let mut d = format!(
        "How to use the {shown} MCP server's tools: when to call each, its arguments, \
         examples and the errors it answers. Read it before calling"
    );
    let mut names: Vec<&str> = def.tools.iter().map(|t| t.name).collect();
    while !names.is_empty() {
        let candidate = format!("{d} {}.", names.join(", "));
        if candidate.chars().count() <= MAX_DESCRIPTION {
            return candidate;
        }
        names.pop();
    }
    d.push_str(" them.");
    d
}

/// A YAML scalar for `s`: JSON's string syntax, which YAML reads as it is.
fn json_text(s: &str) -> String {
    Value::from(s).to_string()
}

fn tool_section(def: &ServerDef, tool: &ToolDef, text: &mut String) {
    let _ = match tool.title {
        Some(t) => writeln!(text, "### `{}`: {t}\n", tool.name),
        None => writeln!(text, "### `{}`\n", tool.name),
    };
    let _ = writeln!(text, "{}\n", tool.description.trim());
    let a = &tool.annotations;
    let effect = if a.read_only {
        "Reads only."
    } else if a.destructive {
        "Changes or removes data: confirm with the person first."
    } else {
        "Adds or changes data."
    };
    let _ = writeln!(text, "{effect}\n");
    arguments(tool, text);
    let examples: Vec<_> = def
        .examples
        .iter()
        .filter(|e| e.tool == tool.name)
        .collect();
    if !examples.is_empty() {
        let _ = writeln!(text, "Examples:\n");
        for e in examples {
            let outcome = match e.expect {
                ExpectDef::Returns(v) => format!("returns `{v}`"),
                ExpectDef::Empty => "finds nothing".to_string(),
                ExpectDef::Error(code) => format!("fails with `{code}`"),
            };
            let _ = writeln!(text, "- `{}` {outcome}", e.arguments);
        }
        text.push('\n');
    }
}

/// The arguments from the tool's input schema: name, type, whether required, default,
/// allowed values and description.
fn arguments(tool: &ToolDef, text: &mut String) {
    let schema: Value = serde_json::from_str(tool.input_schema).unwrap_or(Value::Null);
    let Some(properties) = schema["properties"].as_object().filter(|p| !p.is_empty()) else {
        let _ = writeln!(text, "Takes no arguments.\n");
        return;
    };
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let _ = writeln!(text, "Arguments:\n");
    for (name, p) in properties {
        let kind = p["type"].as_str().unwrap_or("any");
        let mut line = format!("- `{name}` ({kind}");
        if required.contains(&name.as_str()) {
            line.push_str(", required");
        }
        if let Some(d) = p.get("default") {
            let _ = write!(line, ", default `{d}`");
        }
        if let Some(values) = p["enum"].as_array() {
            let values: Vec<String> = values.iter().map(|v| format!("`{v}`")).collect();
            let _ = write!(line, ", one of {}", values.join(", "));
        }
        line.push(')');
        if let Some(d) = p["description"].as_str() {
            let _ = write!(line, ": {}", d.trim());
        }
        let _ = writeln!(text, "{line}");
    }
    text.push('\n');
}

/// The error codes calls may answer: the server's declared errors, its renames of the
/// runtime's codes, and the codes its examples expect.
fn errors_section(def: &ServerDef, text: &mut String) {
    let mut codes: Vec<(String, String)> = Vec::new();
    for e in def.errors {
        let tools: Vec<&str> = e
            .rules
            .iter()
            .flat_map(|r| r.tools.iter().copied())
            .collect();
        let which = if tools.is_empty() {
            "any tool".to_string()
        } else {
            tools.join(", ")
        };
        codes.push((e.name.to_string(), format!("from {which}")));
    }
    for (from, to) in def.error_codes {
        codes.push((to.to_string(), format!("the runtime's `{from}`")));
    }
    for e in def.examples {
        if let ExpectDef::Error(code) = e.expect
            && !codes.iter().any(|(c, _)| c == code)
        {
            codes.push((code.to_string(), format!("from {}", e.tool)));
        }
    }
    if codes.is_empty() {
        return;
    }
    let _ = writeln!(text, "## Error codes\n");
    for (code, said) in codes {
        let _ = writeln!(text, "- `{code}`: {said}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_in_the_skill_alphabet() {
        assert_eq!(skill_name("studio"), "studio-tools");
        assert_eq!(skill_name("My_Server!"), "my-server-tools");
        assert_eq!(skill_name("__"), "server-tools");
        assert!(skill_name(&"x".repeat(100)).len() <= 64);
    }

    /// The basic golden's skill: front matter a YAML reader takes, a section a tool.
    #[test]
    fn the_skill_has_front_matter_and_a_section_a_tool() {
        let def = &crate::basic::SERVER;
        let (name, text) = render(def);
        let front = text
            .strip_prefix("---\n")
            .and_then(|t| t.split_once("\n---\n"))
            .map(|(f, _)| f)
            .unwrap();
        let lines: Vec<&str> = front.lines().collect();
        assert_eq!(lines[0], format!("name: {name}"));
        let description: String =
            serde_json::from_str(lines[1].strip_prefix("description: ").unwrap()).unwrap();
        assert!(description.chars().count() <= MAX_DESCRIPTION);
        for t in def.tools {
            assert!(text.contains(&format!("### `{}`", t.name)), "{text}");
            assert!(description.contains(t.name), "{description}");
        }
    }
}
