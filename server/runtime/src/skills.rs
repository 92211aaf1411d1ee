//! The Skills extension (SEP-2640, `io.modelcontextprotocol/skills`): the skills a spec's
//! `skills:` names, served from its definition. Each file of a skill is the resource
//! `skill://<name>/<path>`; `skills/list` and `skills/get` give each skill's front matter and
//! the manifest of its files with their digests, `resources/read` their bytes and
//! `resources/directory/read` a directory's children. A leaf over the definition: the
//! protocol layer calls it.

use rmcp::model::{
    Resource, ResourceContents, Skill, SkillFrontmatter, SkillResource, SkillResources,
};

use crate::def::{ServerDef, SkillDef, SkillFileDef};

/// The URI scheme of the files.
const SCHEME: &str = "skill://";

/// The URI of a skill's file.
fn file_uri(skill: &SkillDef, file: &SkillFileDef) -> String {
    format!("{SCHEME}{}/{}", skill.name, file.path)
}

/// The entry `skills/list` and `skills/get` give for `skill`.
fn entry(skill: &SkillDef) -> Skill {
    // The compiler wrote the front matter as JSON with a `name` and a `description`.
    let frontmatter = serde_json::from_str(skill.frontmatter)
        .unwrap_or_else(|_| SkillFrontmatter::new(skill.name, skill.description));
    let files = skill
        .files
        .iter()
        .map(|f| SkillResource::new(file_uri(skill, f), f.digest, f.size))
        .collect();
    Skill::new(
        format!("{SCHEME}{}/SKILL.md", skill.name),
        frontmatter,
        SkillResources::Files(files),
    )
}

/// Every skill's entry, in spec order.
pub(crate) fn list(def: &ServerDef) -> Vec<Skill> {
    def.skills.iter().map(entry).collect()
}

/// The entry of the skill whose `SKILL.md` is at `uri`.
pub(crate) fn get(def: &ServerDef, uri: &str) -> Option<Skill> {
    def.skills
        .iter()
        .find(|s| uri.strip_prefix(SCHEME) == Some(&format!("{}/SKILL.md", s.name)))
        .map(entry)
}

/// Whether `uri` is in the skills' namespace, which only they answer.
pub(crate) fn owns(uri: &str) -> bool {
    uri.starts_with(SCHEME)
}

/// The contents of the skill file at `uri`.
pub(crate) fn read(def: &ServerDef, uri: &str) -> Option<ResourceContents> {
    let (name, path) = uri.strip_prefix(SCHEME)?.split_once('/')?;
    let skill = def.skills.iter().find(|s| s.name == name)?;
    let file = skill.files.iter().find(|f| f.path == path)?;
    let contents = if file.base64 {
        ResourceContents::blob(file.content, uri)
    } else {
        ResourceContents::text(file.content, uri)
    };
    Some(contents.with_mime_type(file.mime_type))
}

/// `SKILL.md` of every skill, as `resources/list` lists it for clients without the extension.
pub(crate) fn resources(def: &ServerDef) -> Vec<Resource> {
    def.skills
        .iter()
        .map(|s| {
            Resource::new(format!("{SCHEME}{}/SKILL.md", s.name), s.name)
                .with_description(s.description)
                .with_mime_type("text/markdown")
        })
        .collect()
}

/// Why a directory read failed.
#[derive(Debug, PartialEq)]
pub(crate) enum NotADirectory {
    /// Nothing is served at the URI.
    Unknown,
    /// A file is.
    File,
}

/// The direct children of the directory at `uri` (a skill's root, `skill://<name>`, or one
/// of its subdirectories): files with their MIME types, subdirectories as `inode/directory`.
pub(crate) fn directory(def: &ServerDef, uri: &str) -> Result<Vec<Resource>, NotADirectory> {
    let rest = uri.strip_prefix(SCHEME).ok_or(NotADirectory::Unknown)?;
    let (name, dir) = rest.split_once('/').unwrap_or((rest, ""));
    let skill = def
        .skills
        .iter()
        .find(|s| s.name == name)
        .ok_or(NotADirectory::Unknown)?;
    if skill.files.iter().any(|f| f.path == dir) {
        return Err(NotADirectory::File);
    }
    let prefix = if dir.is_empty() {
        String::new()
    } else {
        format!("{dir}/")
    };
    let base = uri.trim_end_matches('/');
    let mut children: Vec<Resource> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for f in skill.files {
        let Some(below) = f.path.strip_prefix(&prefix) else {
            continue;
        };
        let child = match below.split_once('/') {
            Some((sub, _)) => {
                if !seen.insert(sub) {
                    continue;
                }
                Resource::new(format!("{base}/{sub}"), sub)
                    .with_mime_type(rmcp::model::DIRECTORY_MIME_TYPE)
            }
            None => Resource::new(file_uri(skill, f), below).with_mime_type(f.mime_type),
        };
        children.push(child);
    }
    if children.is_empty() && !dir.is_empty() {
        return Err(NotADirectory::Unknown);
    }
    Ok(children)
}
