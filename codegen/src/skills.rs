//! Read stage of `skills:`: each directory a spec names, in the Agent Skills layout, read into
//! the files the server serves over the Skills extension (SEP-2640) with their digests. Every
//! problem is a diagnostic at the `skills:` entry or in the `SKILL.md` itself, all of them
//! collected.
//!
//! A skill is a directory inside the spec's own directory holding a `SKILL.md` that starts with
//! YAML front matter giving its `name` (the directory's name: lowercase letters, digits and
//! single hyphens, at most 64 characters) and `description` (at most 1,024 characters). Its
//! other files are served beside it; a name starting with `.` is left out, a symbolic link is
//! refused (it could lead out of the directory), names use letters, digits, `.`, `_` and `-`
//! (each is a segment of a URI), and the SEP's limits hold: at most 512 files and 16 MiB in
//! all.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use base64::Engine as _;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::diag::{Diagnostic, Diagnostics, Pos};
use crate::ir::{Skill, SkillFile};
use crate::spec::Sp;

/// The most files a skill may have (SEP-2640's limit, `SKILL.md` included).
pub(crate) const MAX_FILES: usize = 512;
/// The most bytes a skill's files may hold together (SEP-2640's limit).
pub(crate) const MAX_BYTES: u64 = 16 * 1024 * 1024;
/// The longest `description` the Agent Skills specification allows.
const MAX_DESCRIPTION: usize = 1024;

/// Where the skills are, and how problems name them.
pub(crate) struct Place<'a> {
    /// The spec file as shown in messages.
    pub spec_file: &'a Path,
    /// The spec's directory on disk.
    pub dir: &'a Path,
}

impl Place<'_> {
    /// A problem at a `skills:` entry.
    fn at(&self, pos: Pos, message: String, help: &str) -> Diagnostic {
        Diagnostic {
            file: self.spec_file.to_path_buf(),
            pos,
            message,
            label: Some("the skill's directory".into()),
            help: Some(help.to_string()),
        }
    }

    /// A directory or file as shown in messages: beside the shown spec file.
    fn shown(&self, rel: &Path) -> PathBuf {
        self.spec_file.parent().unwrap_or(Path::new("")).join(rel)
    }
}

/// The skills `entries` name, in order; every problem found otherwise.
pub(crate) fn read(place: &Place<'_>, entries: &[Sp<String>]) -> Result<Vec<Skill>, Diagnostics> {
    let mut problems = Diagnostics::default();
    let mut skills: Vec<Skill> = Vec::new();
    let mut seen = BTreeMap::new();
    for entry in entries {
        let pos = crate::spec::pos(entry);
        let Some(skill) = one(place, &entry.value, pos, &mut problems) else {
            continue;
        };
        if let Some(first) = seen.insert(skill.name.clone(), entry.value.clone()) {
            problems.items.push(place.at(
                pos,
                format!("skill `{}` is also served from `{first}`", skill.name),
                "serve each skill once",
            ));
            continue;
        }
        skills.push(skill);
    }
    if problems.is_empty() {
        Ok(skills)
    } else {
        Err(problems)
    }
}

/// One skill directory, or `None` with its problems recorded.
fn one(place: &Place<'_>, rel: &str, pos: Pos, problems: &mut Diagnostics) -> Option<Skill> {
    let rel_path = Path::new(rel);
    if rel.is_empty()
        || !rel_path
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
    {
        problems.items.push(place.at(
            pos,
            format!("skill directory `{rel}` is not a directory under the spec's"),
            "name a directory beside the spec, e.g. `skills/notes` (no `..`, not absolute)",
        ));
        return None;
    }
    let dir = place.dir.join(rel_path);
    let shown = place.shown(rel_path);
    if let Err(message) = inside(place.dir, &dir) {
        problems.items.push(place.at(
            pos,
            format!("skill directory {}: {message}", shown.display()),
            "make it a directory of the spec's own, holding a `SKILL.md`",
        ));
        return None;
    }
    let mut files = Vec::new();
    if let Err(message) = walk(&dir, Path::new(""), &mut files) {
        problems.items.push(place.at(
            pos,
            format!("skill directory {}: {message}", shown.display()),
            "serve regular files only, each inside the skill's directory",
        ));
        return None;
    }
    let name = rel_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let skill_md = shown.join("SKILL.md");
    let Some((_, bytes)) = files.iter().find(|(path, _)| path == "SKILL.md") else {
        problems.items.push(place.at(
            pos,
            format!("skill directory {} has no SKILL.md", shown.display()),
            "add a `SKILL.md` starting with front matter: `---`, `name: ...`, `description: ...`, `---`",
        ));
        return None;
    };
    let Ok(text) = std::str::from_utf8(bytes) else {
        problems.items.push(place.at(
            pos,
            format!("{} is not UTF-8 text", skill_md.display()),
            "save SKILL.md as UTF-8",
        ));
        return None;
    };
    let frontmatter = front_matter(&skill_md, text, &name, problems)?;
    limits(place, pos, &shown, &files, problems)?;
    let description = frontmatter["description"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    Some(Skill {
        name,
        description,
        frontmatter,
        dir: rel.to_string(),
        files: served(files),
    })
}

/// Whether `dir` is a directory inside `root` once links are resolved.
pub(crate) fn inside(root: &Path, dir: &Path) -> Result<(), String> {
    inside_as(root, dir, true)
}

/// Whether `path` lies inside `root` once links are resolved, and is a directory (`dir`) or a
/// regular file.
pub(crate) fn inside_as(root: &Path, path: &Path, dir: bool) -> Result<(), String> {
    // A spec named without a directory lies in the current one.
    let root = if root.as_os_str().is_empty() {
        Path::new(".")
    } else {
        root
    };
    let real = path
        .canonicalize()
        .map_err(|e| format!("cannot read it: {}", e.to_string().to_lowercase()))?;
    let root = root
        .canonicalize()
        .map_err(|e| format!("cannot read the spec's directory: {e}"))?;
    if !real.starts_with(&root) {
        return Err("it leads outside the spec's directory".into());
    }
    match (dir, real.is_dir(), real.is_file()) {
        (true, false, _) => Err("it is not a directory".into()),
        (false, _, false) => Err("it is not a regular file".into()),
        _ => Ok(()),
    }
}

/// Every file under `dir` (at `rel` below the skill's root), by `/`-separated path, with its
/// bytes; stops at the first link, special file or unreadable entry, or once the files pass
/// the limits (so that a huge tree is not read whole).
fn walk(dir: &Path, rel: &Path, out: &mut Vec<(String, Vec<u8>)>) -> Result<(), String> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read it: {}", e.to_string().to_lowercase()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cannot read it: {}", e.to_string().to_lowercase()))?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            return Err(format!(
                "`{}` has a name that is not UTF-8",
                rel.join(&name).display()
            ));
        };
        if name.starts_with('.') {
            continue;
        }
        let path = rel.join(name);
        let shown = path.to_string_lossy().replace('\\', "/");
        // Each name is a segment of the file's URI as it is, with nothing to escape.
        if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        {
            return Err(format!(
                "`{shown}` has a name a URI cannot carry as it is (use letters, digits, `.`, `_` and `-`)"
            ));
        }
        let kind = entry
            .file_type()
            .map_err(|e| format!("cannot read `{shown}`: {e}"))?;
        if kind.is_symlink() {
            return Err(format!("`{shown}` is a symbolic link"));
        } else if kind.is_dir() {
            walk(&entry.path(), &path, out)?;
        } else if kind.is_file() {
            let total: u64 = out.iter().map(|(_, b)| b.len() as u64).sum();
            // One file past the limit is enough to say so.
            if out.len() > MAX_FILES || total > MAX_BYTES {
                return Ok(());
            }
            let bytes = read_bounded(&entry.path(), MAX_BYTES + 1 - total)
                .map_err(|e| format!("cannot read `{shown}`: {e}"))?;
            out.push((shown, bytes));
        } else {
            return Err(format!("`{shown}` is not a regular file"));
        }
    }
    Ok(())
}

/// At most `limit` bytes of the file at `path`.
pub(crate) fn read_bounded(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(limit)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The SEP's per-skill limits.
fn limits(
    place: &Place<'_>,
    pos: Pos,
    shown: &Path,
    files: &[(String, Vec<u8>)],
    problems: &mut Diagnostics,
) -> Option<()> {
    let total: u64 = files.iter().map(|(_, b)| b.len() as u64).sum();
    if files.len() > MAX_FILES || total > MAX_BYTES {
        problems.items.push(place.at(
            pos,
            format!(
                "skill directory {} holds more than a skill may ({MAX_FILES} files, 16 MiB)",
                shown.display()
            ),
            "keep a skill's files few and small; hosts need not load a larger one",
        ));
        return None;
    }
    Some(())
}

/// A problem at `line` of `file` (a `SKILL.md`).
fn at_line(file: &Path, line: usize, message: String, help: &str) -> Diagnostic {
    Diagnostic {
        file: file.to_path_buf(),
        pos: Pos {
            line: u32::try_from(line).unwrap_or(u32::MAX),
            column: 1,
        },
        message,
        label: None,
        help: Some(help.to_string()),
    }
}

/// The front matter of `SKILL.md` as JSON, checked ([`fields`]).
fn front_matter(
    file: &Path,
    text: &str,
    dir_name: &str,
    problems: &mut Diagnostics,
) -> Option<Map<String, Value>> {
    let at = |line: usize, message: String, help: &str| at_line(file, line, message, help);
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines();
    if lines.next().map(str::trim_end) != Some("---") {
        problems.items.push(at(
            1,
            "SKILL.md does not start with front matter".into(),
            "start it with `---`, then `name: ...` and `description: ...`, then `---`",
        ));
        return None;
    }
    let Some(end) = lines.position(|l| l.trim_end() == "---") else {
        problems.items.push(at(
            1,
            "SKILL.md's front matter has no closing `---`".into(),
            "end the front matter with a line `---`",
        ));
        return None;
    };
    let yaml: String = text
        .lines()
        .skip(1)
        .take(end)
        .collect::<Vec<_>>()
        .join("\n");
    let value: Value = match serde_saphyr::from_str(&yaml) {
        Ok(v) => v,
        Err(e) => {
            problems.items.push(at(
                2,
                format!(
                    "SKILL.md's front matter is not YAML: {}",
                    first_line(&e.to_string())
                ),
                "write it as YAML, e.g. `name: notes` and `description: ...`",
            ));
            return None;
        }
    };
    let Value::Object(map) = value else {
        problems.items.push(at(
            2,
            "SKILL.md's front matter is not a mapping".into(),
            "write `name: ...` and `description: ...` lines",
        ));
        return None;
    };
    // The line of a front matter key, for messages about it; the first key's when absent.
    let line_of = |key: &str| {
        let prefix = format!("{key}:");
        text.lines()
            .take(end + 1)
            .position(|l| l.starts_with(&prefix))
            .map_or(2, |i| i + 1)
    };
    let found = fields(&map, dir_name, &|key, message, help| {
        at(key.map_or(2, line_of), message, help)
    });
    let ok = found.is_empty();
    problems.items.extend(found);
    ok.then_some(map)
}

/// The problems of the front matter's fields: `name` equal to the directory's name and valid,
/// `description` given and short enough. `at` places a problem at a key's line (`None`: the
/// front matter's first).
fn fields(
    map: &Map<String, Value>,
    dir_name: &str,
    at: &dyn Fn(Option<&str>, String, &str) -> Diagnostic,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    match map.get("name").and_then(Value::as_str) {
        None => out.push(at(
            None,
            "SKILL.md's front matter has no `name`".into(),
            &format!("add `name: {dir_name}`"),
        )),
        Some(name) if name != dir_name => out.push(at(
            Some("name"),
            format!("the skill's name `{name}` differs from its directory's, `{dir_name}`"),
            "name the directory as the skill: the name is the last segment of its URI",
        )),
        Some(name) if !valid_name(name) => out.push(at(
            Some("name"),
            format!("invalid skill name `{name}`"),
            "use lowercase letters, digits and single hyphens, at most 64, not starting or ending with a hyphen",
        )),
        Some(_) => {}
    }
    match map.get("description").and_then(Value::as_str) {
        None | Some("") => out.push(at(
            None,
            "SKILL.md's front matter has no `description`".into(),
            "say what the skill does and when to use it, in a sentence or two",
        )),
        Some(d) if d.chars().count() > MAX_DESCRIPTION => out.push(at(
            Some("description"),
            format!(
                "the skill's description is {} characters long",
                d.chars().count()
            ),
            "keep it to at most 1,024 characters; the body of SKILL.md holds the rest",
        )),
        Some(_) => {}
    }
    out
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_lowercase()
}

/// The Agent Skills specification's name rule: 1 to 64 lowercase letters, digits and
/// hyphens, neither starting nor ending with a hyphen, and no two hyphens in a row.
pub(crate) fn valid_name(name: &str) -> bool {
    let chars = name.chars().count();
    (1..=64).contains(&chars)
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
        && name
            .chars()
            .all(|c| c == '-' || (c.is_alphanumeric() && !c.is_uppercase()))
}

/// The files as served: `SKILL.md` first, then by path, each with its MIME type, its text or
/// base64, its digest and size.
fn served(mut files: Vec<(String, Vec<u8>)>) -> Vec<SkillFile> {
    files.sort_by(|(a, _), (b, _)| (a != "SKILL.md", a).cmp(&(b != "SKILL.md", b)));
    files
        .into_iter()
        .map(|(path, bytes)| {
            let digest: String = Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            let size = bytes.len() as u64;
            let (content, base64) = match String::from_utf8(bytes) {
                Ok(text) => (text, false),
                Err(e) => (
                    base64::engine::general_purpose::STANDARD.encode(e.into_bytes()),
                    true,
                ),
            };
            SkillFile {
                mime_type: mime_type(&path, base64).to_string(),
                path,
                content,
                base64,
                digest: format!("sha256:{digest}"),
                size,
            }
        })
        .collect()
}

/// The MIME type of a skill's file, by its extension.
fn mime_type(path: &str, binary: bool) -> &'static str {
    let ext = Path::new(path)
        .extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "md" | "markdown" => "text/markdown",
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        "html" | "htm" => "text/html",
        "csv" => "text/csv",
        "py" => "text/x-python",
        "sh" => "application/x-sh",
        "js" | "mjs" => "text/javascript",
        "sql" => "application/sql",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        _ if binary => "application/octet-stream",
        _ => "text/plain",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_agent_skills_rule() {
        for good in ["notes", "kb-search", "a1", "ünïcode-ok"] {
            assert!(valid_name(good), "{good}");
        }
        let long = "a".repeat(65);
        for bad in [
            "",
            "-notes",
            "notes-",
            "kb--search",
            "Notes",
            "kb_search",
            &long,
        ] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn skill_md_comes_first_and_binary_files_are_base64() {
        let files = served(vec![
            ("references/a.md".into(), b"# a".to_vec()),
            ("SKILL.md".into(), b"---".to_vec()),
            ("assets/logo.png".into(), vec![0x89, 0x50, 0xff]),
        ]);
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["SKILL.md", "assets/logo.png", "references/a.md"]);
        assert_eq!(
            (files[1].base64, files[1].mime_type.as_str(), files[1].size),
            (true, "image/png", 3)
        );
        assert_eq!(files[2].mime_type, "text/markdown");
        // The digest of the bytes, whatever form they are kept in.
        assert_eq!(
            files[0].digest,
            "sha256:cb3f91d54eee30e53e35b2b99905f70f169ed549fd78909d3dac2defc9ed8d3b"
        );
    }
}
