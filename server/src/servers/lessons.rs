//! The handlers of the `lessons` server (spec/lessons.yaml): the management tools that need
//! more than one SQL statement: intake checks, manifest builds, the doctor's checks, the
//! configuration and the session-log scanner.
//!
//! Lessons live in the server's database. The interceptor that blocks and annotates proxied
//! calls reads the `lesson_manifest` table, which every change here rebuilds (and mirrors to
//! `lesson-manifest.json` beside the database for other readers of the same library), so a
//! lesson added in one call applies from the next.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use regex::Regex;
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::{Value, json};

use crate::generated::lessons::{
    LessonsAddHandler, LessonsBuildHandler, LessonsCancelHandler, LessonsConfigGetHandler,
    LessonsConfigSetHandler, LessonsDoctorHandler, LessonsEditHandler, LessonsPromoteHandler,
    LessonsRestoreHandler, LessonsScanHandler, LessonsScopeHandler, args, outputs,
};
use mcpspec::handler::{Context, HandlerError};

/// The `lessons` handlers; all state is in the server's database.
#[derive(Debug, Clone, Copy, Default)]
pub struct Lessons;

type Result<T> = std::result::Result<T, HandlerError>;

/// The manifest file written beside the database on every build.
pub const MANIFEST_FILE: &str = "lesson-manifest.json";

/// Claude Code's tool names, which lessons use as canonical names (PRD section 5).
pub const CANONICAL_TOOLS: &[&str] = &[
    "Bash",
    "Read",
    "Edit",
    "MultiEdit",
    "Write",
    "Glob",
    "Grep",
    "NotebookEdit",
    "Agent",
    "TodoWrite",
    "WebFetch",
    "WebSearch",
];

/// Desktop Commander's tool names and their canonical equivalents (PRD section 5).
pub const DESKTOP_COMMANDER_MAP: &[(&str, &str)] = &[
    ("start_process", "Bash"),
    ("read_file", "Read"),
    ("read_multiple_files", "Read"),
    ("edit_block", "Edit"),
    ("write_file", "Write"),
    ("list_directory", "Glob"),
    ("search_code", "Grep"),
];

/// Tools only Claude Code has: a lesson about them alone needs `platform:claude-code`.
const CLAUDE_CODE_ONLY: &[&str] = &[
    "Agent",
    "TodoWrite",
    "WebFetch",
    "WebSearch",
    "NotebookEdit",
];

/// Tools only Desktop Commander has: a lesson about them alone needs `platform:mcp`.
const MCP_ONLY: &[&str] = &[
    "read_process_output",
    "list_processes",
    "force_terminate",
    "interact_with_process",
    "kill_process",
];

/// Tools whose calls carry a command, so a trigger becomes a command pattern.
const COMMAND_TOOLS: &[&str] = &["Bash"];

const TYPES: &[&str] = &["hint", "guard", "protocol", "directive"];

/// Candidates older than this many days are flagged by the doctor.
const STALE_CANDIDATE_DAYS: i64 = 30;

/// The shortest problem or solution text the doctor accepts as informative.
const THIN_TEXT: usize = 20;

/// The canonical name of a tool as a lesson names it: Desktop Commander names map to Claude
/// Code's, and a canonical name in the wrong case is corrected.
pub fn canonical_tool(name: &str) -> String {
    if let Some((_, c)) = DESKTOP_COMMANDER_MAP.iter().find(|(dc, _)| *dc == name) {
        return (*c).to_string();
    }
    if let Some(c) = CANONICAL_TOOLS
        .iter()
        .find(|c| c.eq_ignore_ascii_case(name) && **c != name)
    {
        return (*c).to_string();
    }
    name.to_string()
}

/// A lesson as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Lesson {
    pub id: i64,
    pub slug: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub status: String,
    pub tool_names: Vec<String>,
    pub command_patterns: Vec<String>,
    pub path_patterns: Vec<String>,
    pub trigger: String,
    pub problem: String,
    pub solution: String,
    pub tags: Vec<String>,
    pub scope: Option<String>,
    pub source: String,
    pub created_at: String,
    pub updated_at: String,
}

const LESSON_COLUMNS: &str = "id, slug, type, status, tool_names, command_patterns, path_patterns, \
     trigger, problem, solution, tags, scope, source, created_at, updated_at";

fn json_list(text: String) -> Vec<String> {
    serde_json::from_str(&text).unwrap_or_default()
}

impl Lesson {
    fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Lesson> {
        Ok(Lesson {
            id: r.get(0)?,
            slug: r.get(1)?,
            kind: r.get(2)?,
            status: r.get(3)?,
            tool_names: json_list(r.get(4)?),
            command_patterns: json_list(r.get(5)?),
            path_patterns: json_list(r.get(6)?),
            trigger: r.get(7)?,
            problem: r.get(8)?,
            solution: r.get(9)?,
            tags: json_list(r.get(10)?),
            scope: r.get(11)?,
            source: r.get(12)?,
            created_at: r.get(13)?,
            updated_at: r.get(14)?,
        })
    }
}

// The lesson-returning tools share one output shape (a YAML anchor in the spec), so codegen
// makes their output types aliases of `lessons_add`'s.
impl From<Lesson> for outputs::LessonsAddLesson {
    fn from(l: Lesson) -> Self {
        outputs::LessonsAddLesson {
            id: l.id,
            slug: l.slug,
            type_: l.kind,
            status: l.status,
            tool_names: l.tool_names,
            command_patterns: l.command_patterns,
            path_patterns: l.path_patterns,
            trigger: l.trigger,
            problem: l.problem,
            solution: l.solution,
            tags: l.tags,
            scope: l.scope,
            source: l.source,
            created_at: l.created_at,
            updated_at: l.updated_at,
        }
    }
}

impl From<&Built> for outputs::LessonsAddManifest {
    fn from(b: &Built) -> Self {
        outputs::LessonsAddManifest {
            lessons: b.lessons,
            path: b.file.clone(),
        }
    }
}

fn db_error(e: rusqlite::Error) -> HandlerError {
    HandlerError::internal(e)
}

fn invalid(field: &str, message: impl Into<String>) -> HandlerError {
    HandlerError::new("INVALID_LESSON")
        .message(message)
        .with("field", field)
}

fn not_found(id: i64) -> HandlerError {
    HandlerError::new("LESSON_NOT_FOUND")
        .message(format!("no lesson with id {id}"))
        .with("id", id)
}

fn get(conn: &Connection, id: i64) -> Result<Lesson> {
    conn.query_row(
        &format!("SELECT {LESSON_COLUMNS} FROM lessons WHERE id = ?1"),
        [id],
        Lesson::from_row,
    )
    .optional()
    .map_err(db_error)?
    .ok_or_else(|| not_found(id))
}

/// A manifest build: how many active lessons it holds and the file it wrote.
#[derive(Debug, Clone)]
struct Built {
    lessons: i64,
    file: Option<String>,
}

/// Rebuilds `lesson_manifest` from the active lessons, inside the caller's transaction.
fn rebuild(conn: &Connection) -> Result<i64> {
    conn.execute("DELETE FROM lesson_manifest", [])
        .map_err(db_error)?;
    let n = conn
        .execute(
            "INSERT INTO lesson_manifest \
               (slug, type, tool_names, command_patterns, path_patterns, scope, tags, message) \
             SELECT slug, type, tool_names, command_patterns, path_patterns, scope, tags, \
                    problem || ' ' || solution \
             FROM lessons WHERE status = 'active'",
            [],
        )
        .map_err(db_error)?;
    Ok(n as i64)
}

/// Mirrors the manifest table to `lesson-manifest.json` beside the database, written to a
/// temporary file and renamed so that a reader never sees half a file. A failure to write is
/// logged and leaves the database build in place.
fn write_manifest_file(ctx: &Context, conn: &Connection) -> Option<String> {
    let dir = ctx.sqlite().ok()?.path().parent()?.to_path_buf();
    let result = (|| -> std::result::Result<(), Box<dyn std::error::Error>> {
        let mut stmt = conn.prepare(
            "SELECT slug, type, tool_names, command_patterns, path_patterns, scope, tags, message \
             FROM lesson_manifest ORDER BY slug",
        )?;
        let lessons: Vec<Value> = stmt
            .query_map([], |r| {
                Ok(json!({
                    "slug": r.get::<_, String>(0)?,
                    "type": r.get::<_, String>(1)?,
                    "toolNames": json_list(r.get(2)?),
                    "commandPatterns": json_list(r.get(3)?),
                    "pathPatterns": json_list(r.get(4)?),
                    "scope": r.get::<_, Option<String>>(5)?,
                    "tags": json_list(r.get(6)?),
                    "message": r.get::<_, String>(7)?,
                }))
            })?
            .collect::<rusqlite::Result<_>>()?;
        let text = serde_json::to_string_pretty(&json!({"version": 1, "lessons": lessons}))?;
        mcpspec::handler::replace_file(&dir.join(MANIFEST_FILE), (text + "\n").as_bytes())?;
        Ok(())
    })();
    match result {
        Ok(()) => Some(MANIFEST_FILE.to_string()),
        Err(e) => {
            tracing::warn!(error = %e, "could not write {MANIFEST_FILE}");
            None
        }
    }
}

/// Runs `f` in a write transaction, rebuilds the manifest before committing, and mirrors it
/// to the manifest file after.
fn write_and_build<T>(
    ctx: &Context,
    f: impl FnOnce(&Connection) -> Result<T>,
) -> Result<(T, Built)> {
    ctx.sqlite()?.write(|conn| {
        let tx = conn.transaction().map_err(db_error)?;
        let out = f(&tx)?;
        let lessons = rebuild(&tx)?;
        tx.commit().map_err(db_error)?;
        let file = write_manifest_file(ctx, conn);
        Ok((out, Built { lessons, file }))
    })?
}

/// The fields a new lesson or a patch sets, after intake checks.
#[derive(Debug, Default, Clone)]
struct Fields {
    kind: Option<String>,
    tool_names: Option<Vec<String>>,
    trigger: Option<String>,
    problem: Option<String>,
    solution: Option<String>,
    tags: Option<Vec<String>>,
    command_patterns: Option<Vec<String>>,
    path_patterns: Option<Vec<String>>,
}

fn check_patterns(field: &str, patterns: &[String]) -> Result<()> {
    for p in patterns {
        if let Err(e) = Regex::new(p) {
            let reason = e.to_string();
            let reason = reason.lines().last().unwrap_or("invalid").trim();
            let reason = reason.strip_prefix("error: ").unwrap_or(reason);
            return Err(invalid(
                field,
                format!("`{p}` in {field} is not a valid regular expression: {reason}"),
            )
            .with("pattern", p));
        }
    }
    Ok(())
}

fn check_tools(names: &[String]) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for n in names {
        let n = n.trim();
        if n.is_empty()
            || !n
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))
        {
            return Err(invalid(
                "tool",
                format!("`{n}` is not a tool name (letters, digits, `_`, `-`, `.`, `:`)"),
            ));
        }
        let c = canonical_tool(n);
        if !out.contains(&c) {
            out.push(c);
        }
    }
    Ok(out)
}

fn check_text(field: &str, text: &str) -> Result<String> {
    let t = text.trim();
    let placeholder = ["todo", "tbd", "n/a", "none", "...", "xxx"];
    if placeholder.iter().any(|p| t.eq_ignore_ascii_case(p)) {
        return Err(invalid(
            field,
            format!("{field} is a placeholder; say what happened"),
        ));
    }
    Ok(t.to_string())
}

fn check_tags(tags: &[String]) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for t in tags {
        let t = t.trim().to_lowercase();
        if let Some(p) = t.strip_prefix("platform:")
            && !matches!(p, "claude-code" | "mcp" | "both")
        {
            return Err(invalid(
                "tags",
                format!(
                    "`{t}` is not a platform tag; use platform:claude-code, platform:mcp or platform:both"
                ),
            ));
        }
        if !t.is_empty() && !out.contains(&t) {
            out.push(t);
        }
    }
    Ok(out)
}

/// The command pattern a trigger stands for: its words in order, separated by any space, on
/// word boundaries where the trigger starts or ends with a word character.
fn trigger_pattern(trigger: &str) -> String {
    let words: Vec<String> = trigger.split_whitespace().map(regex::escape).collect();
    let mut p = words.join(r"\s+");
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    if word(trigger.trim().chars().next()) {
        p = format!(r"\b{p}");
    }
    if word(trigger.trim().chars().last()) {
        p.push_str(r"\b");
    }
    p
}

fn slugify(text: &str) -> String {
    let mut s = String::new();
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            s.push(c);
        } else if !s.ends_with('-') && !s.is_empty() {
            s.push('-');
        }
        if s.len() >= 60 {
            break;
        }
    }
    s.trim_end_matches('-').to_string()
}

impl Fields {
    fn from_patch(patch: &Value) -> Result<Fields> {
        let list = |k: &str| -> Option<Vec<String>> {
            patch.get(k).and_then(Value::as_array).map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
        };
        let text = |k: &str| patch.get(k).and_then(Value::as_str).map(str::to_string);
        let f = Fields {
            kind: text("type"),
            tool_names: list("tool"),
            trigger: text("trigger"),
            problem: text("problem"),
            solution: text("solution"),
            tags: list("tags"),
            command_patterns: list("command_patterns"),
            path_patterns: list("path_patterns"),
        };
        f.checked()
    }

    /// Applies the intake checks the JSON Schema cannot express.
    fn checked(mut self) -> Result<Fields> {
        if let Some(k) = &self.kind
            && !TYPES.contains(&k.as_str())
        {
            return Err(invalid("type", format!("`{k}` is not a lesson type")));
        }
        if let Some(t) = &self.tool_names {
            self.tool_names = Some(check_tools(t)?);
        }
        for (field, v) in [
            ("trigger", &mut self.trigger),
            ("problem", &mut self.problem),
            ("solution", &mut self.solution),
        ] {
            if let Some(t) = v {
                *t = check_text(field, t)?;
            }
        }
        if let (Some(p), Some(s)) = (&self.problem, &self.solution)
            && p.eq_ignore_ascii_case(s)
        {
            return Err(invalid(
                "solution",
                "the solution repeats the problem; say what to do instead",
            ));
        }
        if let Some(t) = &self.tags {
            self.tags = Some(check_tags(t)?);
        }
        if let Some(p) = &self.command_patterns {
            check_patterns("command_patterns", p)?;
        }
        if let Some(p) = &self.path_patterns {
            check_patterns("path_patterns", p)?;
        }
        Ok(self)
    }

    /// Writes the set fields onto lesson `id`; checks the result as a whole (a guard must
    /// say which calls it blocks).
    fn apply(&self, conn: &Connection, id: i64) -> Result<Lesson> {
        let mut l = get(conn, id)?;
        if let Some(v) = &self.kind {
            l.kind.clone_from(v);
        }
        if let Some(v) = &self.tool_names {
            l.tool_names.clone_from(v);
        }
        if let Some(v) = &self.trigger {
            l.trigger.clone_from(v);
        }
        if let Some(v) = &self.problem {
            l.problem.clone_from(v);
        }
        if let Some(v) = &self.solution {
            l.solution.clone_from(v);
        }
        if let Some(v) = &self.tags {
            l.tags.clone_from(v);
        }
        if let Some(v) = &self.command_patterns {
            l.command_patterns.clone_from(v);
        }
        if let Some(v) = &self.path_patterns {
            l.path_patterns.clone_from(v);
        }
        check_guard(&l)?;
        let json = |v: &Vec<String>| serde_json::to_string(v).unwrap_or_else(|_| "[]".into());
        conn.execute(
            "UPDATE lessons SET type = ?2, tool_names = ?3, trigger = ?4, problem = ?5, \
               solution = ?6, tags = ?7, command_patterns = ?8, path_patterns = ?9, \
               updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
             WHERE id = ?1",
            params![
                id,
                l.kind,
                json(&l.tool_names),
                l.trigger,
                l.problem,
                l.solution,
                json(&l.tags),
                json(&l.command_patterns),
                json(&l.path_patterns),
            ],
        )
        .map_err(db_error)?;
        get(conn, id)
    }
}

/// A guard blocks calls; without a pattern it would block every call of its tools.
fn check_guard(l: &Lesson) -> Result<()> {
    if l.kind == "guard" && l.command_patterns.is_empty() && l.path_patterns.is_empty() {
        return Err(invalid(
            "type",
            "a guard needs command_patterns or path_patterns, or it blocks every call of its tools",
        ));
    }
    if matches!(l.kind.as_str(), "hint" | "guard") && l.tool_names.is_empty() {
        return Err(invalid(
            "tool",
            "a hint or guard needs the tools it is about",
        ));
    }
    Ok(())
}

/// Refuses a lesson that another one already covers: the same tools and trigger, whatever its
/// slug (`tool_names` as stored, JSON), or the same `slug`.
fn refuse_duplicates(conn: &Connection, trigger: &str, tool_names: &str, slug: &str) -> Result<()> {
    // The same tools and trigger make the same lesson, whatever its slug.
    let twin: Option<String> = conn
        .query_row(
            "SELECT slug FROM lessons WHERE status != 'archived' AND lower(trigger) = lower(?1) \
               AND tool_names = ?2",
            params![trigger, tool_names],
            |r| r.get(0),
        )
        .optional()
        .map_err(db_error)?;
    if let Some(existing) = twin {
        return Err(HandlerError::new("DUPLICATE_LESSON")
            .message(format!(
                "lesson `{existing}` already covers this trigger; edit it with lessons_edit"
            ))
            .with("slug", existing));
    }
    let taken: Option<String> = conn
        .query_row("SELECT status FROM lessons WHERE slug = ?1", [slug], |r| {
            r.get(0)
        })
        .optional()
        .map_err(db_error)?;
    if let Some(status) = taken {
        return Err(HandlerError::new("DUPLICATE_LESSON")
            .message(format!(
                "slug `{slug}` is taken by a lesson that is {status}; pass another `slug`"
            ))
            .with("slug", slug));
    }
    Ok(())
}

/// Inserts a new lesson after the intake checks; `status` is `active` for lessons added in
/// a session and `candidate` for lessons found by a scan.
fn insert(conn: &Connection, a: &args::LessonsAdd, status: &str, source: &str) -> Result<Lesson> {
    let fields = Fields {
        kind: Some(a.type_.clone()),
        tool_names: Some(a.tool.clone()),
        trigger: Some(a.trigger.clone()),
        problem: Some(a.problem.clone()),
        solution: Some(a.solution.clone()),
        tags: Some(a.tags.clone()),
        command_patterns: a.command_patterns.clone(),
        path_patterns: a.path_patterns.clone(),
    }
    .checked()?;
    let tool_names = fields.tool_names.unwrap_or_default();
    let trigger = fields.trigger.unwrap_or_default();
    let command_patterns = fields.command_patterns.unwrap_or_else(|| {
        if tool_names
            .iter()
            .any(|t| COMMAND_TOOLS.contains(&t.as_str()))
        {
            vec![trigger_pattern(&trigger)]
        } else {
            Vec::new()
        }
    });
    let path_patterns = fields.path_patterns.unwrap_or_default();
    let slug = match &a.slug {
        Some(s) => s.clone(),
        None => slugify(&trigger),
    };
    if slug.is_empty() {
        return Err(invalid("slug", "the trigger gives no slug; pass `slug`"));
    }
    let json = |v: &Vec<String>| serde_json::to_string(v).unwrap_or_else(|_| "[]".into());
    refuse_duplicates(conn, &trigger, &json(&tool_names), &slug)?;
    let l = Lesson {
        id: 0,
        slug,
        kind: fields.kind.unwrap_or_default(),
        status: status.into(),
        tool_names,
        command_patterns,
        path_patterns,
        trigger,
        problem: fields.problem.unwrap_or_default(),
        solution: fields.solution.unwrap_or_default(),
        tags: fields.tags.unwrap_or_default(),
        scope: a.scope.clone(),
        source: source.into(),
        created_at: String::new(),
        updated_at: String::new(),
    };
    check_guard(&l)?;
    conn.execute(
        "INSERT INTO lessons (slug, type, status, tool_names, command_patterns, path_patterns, \
           trigger, problem, solution, tags, scope, source) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        params![
            l.slug,
            l.kind,
            l.status,
            json(&l.tool_names),
            json(&l.command_patterns),
            json(&l.path_patterns),
            l.trigger,
            l.problem,
            l.solution,
            json(&l.tags),
            l.scope,
            l.source,
        ],
    )
    .map_err(db_error)?;
    get(conn, conn.last_insert_rowid())
}

impl LessonsAddHandler for Lessons {
    fn lessons_add(&self, ctx: &Context, a: args::LessonsAdd) -> Result<outputs::LessonsAdd> {
        let (l, built) = write_and_build(ctx, |conn| insert(conn, &a, "active", "mcp"))?;
        Ok(outputs::LessonsAdd {
            lesson: l.into(),
            manifest: (&built).into(),
        })
    }
}

impl LessonsPromoteHandler for Lessons {
    fn lessons_promote(
        &self,
        ctx: &Context,
        a: args::LessonsPromote,
    ) -> Result<outputs::LessonsPromote> {
        let patch = match &a.patch {
            Some(p) => Some(Fields::from_patch(p)?),
            None => None,
        };
        let status = if a.archive { "archived" } else { "active" };
        let (changed, built) = write_and_build(ctx, |conn| {
            let mut changed = Vec::new();
            for &id in &a.ids {
                let l = get(conn, id)?;
                if l.status != "candidate" {
                    return Err(HandlerError::new("NOT_A_CANDIDATE")
                        .message(format!(
                            "lesson {id} (`{}`) is {}, not a candidate; use lessons_edit or lessons_restore",
                            l.slug, l.status
                        ))
                        .with("id", id)
                        .with("status", l.status));
                }
                if let Some(p) = &patch {
                    p.apply(conn, id)?;
                } else if !a.archive {
                    check_guard(&l)?;
                }
                conn.execute(
                    "UPDATE lessons SET status = ?2, archived_reason = ?3, \
                       updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?1",
                    params![id, status, a.archive.then_some("rejected in review")],
                )
                .map_err(db_error)?;
                changed.push(id);
            }
            Ok(changed)
        })?;
        Ok(outputs::LessonsPromote {
            changed,
            status: status.into(),
            manifest: (&built).into(),
        })
    }
}

impl LessonsEditHandler for Lessons {
    fn lessons_edit(&self, ctx: &Context, a: args::LessonsEdit) -> Result<outputs::LessonsEdit> {
        let fields = Fields::from_patch(&a.patch)?;
        let (l, built) = write_and_build(ctx, |conn| fields.apply(conn, a.id))?;
        Ok(outputs::LessonsEdit {
            lesson: l.into(),
            manifest: (&built).into(),
        })
    }
}

impl LessonsRestoreHandler for Lessons {
    fn lessons_restore(
        &self,
        ctx: &Context,
        a: args::LessonsRestore,
    ) -> Result<outputs::LessonsRestore> {
        let (l, built) = write_and_build(ctx, |conn| {
            let l = get(conn, a.id)?;
            if l.status != "archived" {
                return Err(HandlerError::new("NOT_ARCHIVED")
                    .message(format!(
                        "lesson {} (`{}`) is {}, not archived",
                        l.id, l.slug, l.status
                    ))
                    .with("id", l.id)
                    .with("status", l.status));
            }
            conn.execute(
                "UPDATE lessons SET status = 'active', archived_reason = NULL, \
                   updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?1",
                [a.id],
            )
            .map_err(db_error)?;
            get(conn, a.id)
        })?;
        Ok(outputs::LessonsRestore {
            lesson: l.into(),
            manifest: (&built).into(),
        })
    }
}

impl LessonsCancelHandler for Lessons {
    fn lessons_cancel(
        &self,
        ctx: &Context,
        a: args::LessonsCancel,
    ) -> Result<outputs::LessonsCancel> {
        let key = a.id_or_slug.trim().to_string();
        let (archived, built) = write_and_build(ctx, |conn| {
            let id: Option<i64> = key.parse().ok();
            let mut stmt = conn
                .prepare(
                    "UPDATE lessons SET status = 'archived', archived_reason = 'cancelled', \
                       updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
                     WHERE (id = ?1 OR slug = ?2) AND status != 'archived' RETURNING slug",
                )
                .map_err(db_error)?;
            let slugs = stmt
                .query_map(params![id, key], |r| r.get::<_, String>(0))
                .map_err(db_error)?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(db_error)?;
            Ok(slugs)
        })?;
        let slug = archived.first().cloned().unwrap_or_else(|| key.clone());
        Ok(outputs::LessonsCancel {
            archived,
            tag: format!("#lesson:cancel {slug}"),
            manifest: (&built).into(),
        })
    }
}

impl LessonsScopeHandler for Lessons {
    fn lessons_scope(&self, ctx: &Context, a: args::LessonsScope) -> Result<outputs::LessonsScope> {
        let scope = a.scope.map(|s| s.trim().trim_end_matches('/').to_string());
        let (l, built) = write_and_build(ctx, |conn| {
            get(conn, a.id)?;
            conn.execute(
                "UPDATE lessons SET scope = ?2, \
                   updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?1",
                params![a.id, scope],
            )
            .map_err(db_error)?;
            get(conn, a.id)
        })?;
        Ok(outputs::LessonsScope {
            lesson: l.into(),
            manifest: (&built).into(),
        })
    }
}

impl LessonsBuildHandler for Lessons {
    fn lessons_build(&self, ctx: &Context, _: args::LessonsBuild) -> Result<outputs::LessonsBuild> {
        let ((), built) = write_and_build(ctx, |_| Ok(()))?;
        Ok(outputs::LessonsBuild {
            manifest: (&built).into(),
        })
    }
}

/// One finding of the doctor.
struct Finding {
    lesson: String,
    problem: String,
    fix: String,
}

fn finding(l: &Lesson, problem: String, fix: impl Into<String>) -> Finding {
    Finding {
        lesson: l.slug.clone(),
        problem,
        fix: fix.into(),
    }
}

/// The doctor's checks, in order; each takes every lesson and what the manifest holds.
fn doctor(
    lessons: &[Lesson],
    manifest: &BTreeSet<String>,
    today: i64,
) -> Vec<(&'static str, Vec<Finding>)> {
    let live: Vec<&Lesson> = lessons.iter().filter(|l| l.status != "archived").collect();
    vec![
        ("invalid patterns", invalid_patterns(&live)),
        ("missing tool names", missing_tool_names(&live)),
        ("non-canonical tool names", non_canonical_tool_names(&live)),
        ("duplicates", duplicates(&live)),
        ("thin text", thin_text(&live)),
        ("stale manifest", stale_manifest(lessons, manifest)),
        ("stale candidates", stale_candidates(&live, today)),
        ("unbounded guards", unbounded_guards(&live)),
        (
            "platform tag missing for platform-exclusive tools",
            platform_tag_missing(&live),
        ),
    ]
}

/// Patterns that are not valid regular expressions.
fn invalid_patterns(live: &[&Lesson]) -> Vec<Finding> {
    let mut f = Vec::new();
    for l in live {
        for (field, ps) in [
            ("command_patterns", &l.command_patterns),
            ("path_patterns", &l.path_patterns),
        ] {
            for p in ps {
                if Regex::new(p).is_err() {
                    f.push(finding(
                        l,
                        format!("`{p}` in {field} is not a valid regular expression"),
                        "fix the pattern with lessons_edit",
                    ));
                }
            }
        }
    }
    f
}

/// Hints and guards that name no tools, so never fire.
fn missing_tool_names(live: &[&Lesson]) -> Vec<Finding> {
    live.iter()
        .filter(|l| matches!(l.kind.as_str(), "hint" | "guard") && l.tool_names.is_empty())
        .map(|l| {
            finding(
                l,
                format!("the {} names no tools, so it never fires", l.kind),
                "add the tools with lessons_edit",
            )
        })
        .collect()
}

/// Tool names not spelled the canonical way.
fn non_canonical_tool_names(live: &[&Lesson]) -> Vec<Finding> {
    let mut f = Vec::new();
    for l in live {
        for t in &l.tool_names {
            let c = canonical_tool(t);
            if &c != t {
                f.push(finding(
                    l,
                    format!("tool `{t}` is spelled `{c}` in lessons"),
                    format!("replace `{t}` with `{c}`"),
                ));
            }
        }
    }
    f
}

/// Lessons with the same trigger and tools as an earlier one.
fn duplicates(live: &[&Lesson]) -> Vec<Finding> {
    let mut f = Vec::new();
    let mut seen: BTreeMap<(String, String), &str> = BTreeMap::new();
    for l in live {
        let key = (l.trigger.to_lowercase(), l.tool_names.join(","));
        if let Some(first) = seen.insert(key, &l.slug) {
            f.push(finding(
                l,
                format!("duplicates `{first}` (same tools and trigger)"),
                "archive one with lessons_cancel",
            ));
        }
    }
    f
}

/// Problems and solutions too short to help.
fn thin_text(live: &[&Lesson]) -> Vec<Finding> {
    let mut f = Vec::new();
    for l in live {
        for (field, text) in [("problem", &l.problem), ("solution", &l.solution)] {
            if text.trim().chars().count() < THIN_TEXT {
                f.push(finding(
                    l,
                    format!("the {field} is under {THIN_TEXT} characters"),
                    format!("say more in the {field}"),
                ));
            }
        }
    }
    f
}

/// Differences between the active lessons and the manifest.
fn stale_manifest(lessons: &[Lesson], manifest: &BTreeSet<String>) -> Vec<Finding> {
    let active: BTreeSet<String> = lessons
        .iter()
        .filter(|l| l.status == "active")
        .map(|l| l.slug.clone())
        .collect();
    active
        .symmetric_difference(manifest)
        .map(|s| Finding {
            lesson: s.clone(),
            problem: if active.contains(s) {
                "active but not in the manifest".into()
            } else {
                "in the manifest but not active".into()
            },
            fix: "run lessons_build".into(),
        })
        .collect()
}

/// Candidates nobody reviewed for too long.
fn stale_candidates(live: &[&Lesson], today: i64) -> Vec<Finding> {
    live.iter()
        .filter(|l| {
            l.status == "candidate" && today - day_number(&l.created_at) > STALE_CANDIDATE_DAYS
        })
        .map(|l| {
            finding(
                l,
                format!("a candidate for more than {STALE_CANDIDATE_DAYS} days"),
                "review it with lessons_review and promote or archive it",
            )
        })
        .collect()
}

/// Guards without patterns, which block every call of their tools.
fn unbounded_guards(live: &[&Lesson]) -> Vec<Finding> {
    live.iter()
        .filter(|l| {
            l.kind == "guard" && l.command_patterns.is_empty() && l.path_patterns.is_empty()
        })
        .map(|l| {
            finding(
                l,
                "a guard without patterns blocks every call of its tools".into(),
                "add command_patterns or path_patterns",
            )
        })
        .collect()
}

/// Lessons only about one platform's tools, without its platform tag.
fn platform_tag_missing(live: &[&Lesson]) -> Vec<Finding> {
    let mut f = Vec::new();
    for l in live {
        let tagged = l.tags.iter().any(|t| t.starts_with("platform:"));
        if tagged || l.tool_names.is_empty() {
            continue;
        }
        let all = |set: &[&str]| l.tool_names.iter().all(|t| set.contains(&t.as_str()));
        if all(CLAUDE_CODE_ONLY) {
            f.push(finding(
                l,
                "it is only about tools Claude Code alone has".into(),
                "add the tag platform:claude-code",
            ));
        } else if all(MCP_ONLY) {
            f.push(finding(
                l,
                "it is only about tools Desktop Commander alone has".into(),
                "add the tag platform:mcp",
            ));
        }
    }
    f
}

/// Days since 1970-01-01 of an ISO date `YYYY-MM-DD...`, or 0 when it does not parse.
fn day_number(date: &str) -> i64 {
    let p = |r: std::ops::Range<usize>| date.get(r).and_then(|s| s.parse::<i64>().ok());
    let (Some(y), Some(m), Some(d)) = (p(0..4), p(5..7), p(8..10)) else {
        return 0;
    };
    // Howard Hinnant's days_from_civil.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn all_lessons(conn: &Connection) -> rusqlite::Result<Vec<Lesson>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {LESSON_COLUMNS} FROM lessons ORDER BY slug"
    ))?;
    stmt.query_map([], Lesson::from_row)?.collect()
}

impl LessonsDoctorHandler for Lessons {
    fn lessons_doctor(
        &self,
        ctx: &Context,
        _: args::LessonsDoctor,
    ) -> Result<outputs::LessonsDoctor> {
        let (lessons, manifest, today) = ctx
            .sqlite()?
            .read(|conn| -> rusqlite::Result<_> {
                let lessons = all_lessons(conn)?;
                let mut stmt = conn.prepare("SELECT slug FROM lesson_manifest")?;
                let manifest = stmt
                    .query_map([], |r| r.get(0))?
                    .collect::<rusqlite::Result<_>>()?;
                let today: String = conn.query_row("SELECT date('now')", [], |r| r.get(0))?;
                Ok((lessons, manifest, day_number(&today)))
            })
            .map_err(db_error)?;
        let checks: Vec<outputs::LessonsDoctorChecksItem> = doctor(&lessons, &manifest, today)
            .into_iter()
            .enumerate()
            .map(|(i, (name, findings))| outputs::LessonsDoctorChecksItem {
                id: i as i64 + 1,
                name: name.into(),
                ok: findings.is_empty(),
                issues: findings
                    .into_iter()
                    .map(|f| outputs::LessonsDoctorChecksItemIssuesItem {
                        lesson: f.lesson,
                        problem: f.problem,
                        fix: f.fix,
                    })
                    .collect(),
            })
            .collect();
        Ok(outputs::LessonsDoctor {
            ok: checks.iter().all(|c| c.ok),
            checks,
        })
    }
}

/// The configuration with its defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub hints: bool,
    pub sessions_dir: String,
    pub max_files: i64,
    /// Whether scans also run the tier-2 heuristics.
    pub heuristics: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            hints: true,
            sessions_dir: "~/.claude/projects".into(),
            max_files: 500,
            heuristics: true,
        }
    }
}

fn read_config(conn: &Connection) -> rusqlite::Result<Config> {
    let mut c = Config::default();
    let mut stmt = conn.prepare("SELECT key, value FROM settings")?;
    let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
    for row in rows {
        let (k, v) = row?;
        let v: Value = serde_json::from_str(&v).unwrap_or(Value::Null);
        match (k.as_str(), v) {
            ("injection.hints", Value::Bool(b)) => c.hints = b,
            ("scanning.sessions_dir", Value::String(s)) => c.sessions_dir = s,
            ("scanning.max_files", Value::Number(n)) => {
                c.max_files = n.as_i64().unwrap_or(c.max_files)
            }
            ("scanning.heuristics", Value::Bool(b)) => c.heuristics = b,
            _ => {}
        }
    }
    Ok(c)
}

/// The result of `lessons_config_get`, and of `lessons_config_set`, whose output type is an
/// alias of it.
fn config_out(c: Config) -> outputs::LessonsConfigGet {
    outputs::LessonsConfigGet {
        config: outputs::LessonsConfigGetConfig {
            injection: outputs::LessonsConfigGetConfigInjection { hints: c.hints },
            scanning: outputs::LessonsConfigGetConfigScanning {
                sessions_dir: c.sessions_dir,
                max_files: c.max_files,
                heuristics: c.heuristics,
            },
        },
    }
}

impl LessonsConfigGetHandler for Lessons {
    fn lessons_config_get(
        &self,
        ctx: &Context,
        _: args::LessonsConfigGet,
    ) -> Result<outputs::LessonsConfigGet> {
        let c = ctx
            .sqlite()?
            .read(|conn| read_config(conn))
            .map_err(db_error)?;
        Ok(config_out(c))
    }
}

impl LessonsConfigSetHandler for Lessons {
    fn lessons_config_set(
        &self,
        ctx: &Context,
        a: args::LessonsConfigSet,
    ) -> Result<outputs::LessonsConfigSet> {
        let ok = match a.key.as_str() {
            "injection.hints" | "scanning.heuristics" => a.value.is_boolean(),
            "scanning.sessions_dir" => a.value.as_str().is_some_and(|s| !s.trim().is_empty()),
            "scanning.max_files" => a.value.as_i64().is_some_and(|n| (1..=100_000).contains(&n)),
            _ => false,
        };
        if !ok {
            let want = match a.key.as_str() {
                "injection.hints" | "scanning.heuristics" => "true or false",
                "scanning.max_files" => "an integer from 1 to 100000",
                _ => "a non-empty string",
            };
            return Err(HandlerError::new("INVALID_CONFIG")
                .message(format!("`{}` must be {want}", a.key))
                .with("key", a.key.clone()));
        }
        let c = ctx
            .sqlite()?
            .write(|conn| -> rusqlite::Result<Config> {
                conn.execute(
                    "INSERT INTO settings (key, value) VALUES (?1, ?2) \
                     ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    params![a.key, a.value.to_string()],
                )?;
                read_config(conn)
            })?
            .map_err(db_error)?;
        Ok(config_out(c))
    }
}

/// A `#lesson ... #/lesson` block, its `key: value` lines.
fn parse_block(body: &str) -> BTreeMap<String, String> {
    let mut fields = BTreeMap::new();
    let mut last: Option<String> = None;
    for line in body.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match line.split_once(':') {
            Some((k, v)) if !k.contains(' ') && k.len() < 24 => {
                let k = k.trim().to_lowercase();
                fields.insert(k.clone(), v.trim().to_string());
                last = Some(k);
            }
            _ => {
                if let Some(k) = &last
                    && let Some(v) = fields.get_mut(k)
                {
                    v.push(' ');
                    v.push_str(line);
                }
            }
        }
    }
    fields
}

/// The texts assistants wrote in one line of a session JSONL file.
#[cfg(test)]
fn assistant_texts(line: &str) -> Vec<String> {
    serde_json::from_str::<Value>(line)
        .map(|v| assistant_texts_of(&v))
        .unwrap_or_default()
}

/// The texts assistants wrote in one parsed line of a session file.
fn assistant_texts_of(v: &Value) -> Vec<String> {
    let message = v.get("message").unwrap_or(v);
    let role = message
        .get("role")
        .or_else(|| v.get("type"))
        .and_then(Value::as_str);
    if role != Some("assistant") {
        return Vec::new();
    }
    match message.get("content") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str).map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

/// What a scan found in the text of one session.
#[derive(Debug, Default)]
struct Found {
    blocks: Vec<BTreeMap<String, String>>,
    cancels: Vec<String>,
}

fn scan_text(text: &str, found: &mut Found) {
    static CANCEL: std::sync::LazyLock<Regex> = std::sync::LazyLock::new(|| {
        Regex::new(r"#lesson:cancel\s+([a-z0-9][a-z0-9-]*)").unwrap_or_else(|_| unreachable!())
    });
    static BLOCK: std::sync::LazyLock<Regex> = std::sync::LazyLock::new(|| {
        Regex::new(r"(?s)#lesson\b(.*?)#/lesson").unwrap_or_else(|_| unreachable!())
    });
    for c in CANCEL.captures_iter(text) {
        found.cancels.push(c[1].to_string());
    }
    for b in BLOCK.captures_iter(text) {
        found.blocks.push(parse_block(&b[1]));
    }
}

fn session_files(dir: &Path, max: usize) -> Vec<PathBuf> {
    fn walk(dir: &Path, depth: usize, out: &mut Vec<(std::time::SystemTime, PathBuf)>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            let Ok(m) = e.metadata() else { continue };
            if m.is_dir() && depth < 4 {
                walk(&p, depth + 1, out);
            } else if m.is_file() && p.extension().is_some_and(|x| x == "jsonl") {
                out.push((m.modified().unwrap_or(std::time::UNIX_EPOCH), p));
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, 0, &mut files);
    files.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    files.truncate(max);
    files.into_iter().map(|(_, p)| p).collect()
}

/// Reads `path` from byte `from` to its last complete line; returns the text, where it starts
/// and the offset after it, so that a line still being written is read whole by the next scan.
fn read_from(path: &Path, from: u64) -> std::io::Result<(String, u64, u64)> {
    let len = std::fs::metadata(path)?.len();
    // A file shorter than where the last scan stopped was rewritten: read it from the start.
    let from = if from > len { 0 } else { from };
    let mut buf = read_range(path, from, len)?;
    let end = buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    buf.truncate(end);
    Ok((
        String::from_utf8_lossy(&buf).into_owned(),
        from,
        from + end as u64,
    ))
}

impl LessonsScanHandler for Lessons {
    fn lessons_scan(&self, ctx: &Context, a: args::LessonsScan) -> Result<outputs::LessonsScan> {
        let config = ctx
            .sqlite()?
            .read(|conn| read_config(conn))
            .map_err(db_error)?;
        let dir = sessions_dir(ctx, a.dir.as_deref(), &config)?;
        // The directory is good: a client that takes tasks gets one for the reading.
        ctx.background();
        let files = session_files(&dir, usize::try_from(config.max_files).unwrap_or(500));
        let mut out = outputs::LessonsScan {
            files: 0,
            lessons: 0,
            added: Vec::new(),
            repeated: Vec::new(),
            cancelled: Vec::new(),
            invalid: 0,
            suggested: Vec::new(),
        };
        for (i, path) in files.iter().enumerate() {
            if ctx.is_cancelled() {
                break;
            }
            ctx.progress(i as f64, Some(files.len() as f64), "scanning session files");
            let key = path.to_string_lossy().into_owned();
            let from = if a.full {
                0
            } else {
                ctx.sqlite()?.read(|conn| scanned_up_to(conn, &key))?
            };
            // Reading and analysing the file takes no connection; the writer is held only
            // for one file's records, so a long scan (the start-up job's, say) never holds
            // up a write call for longer than that.
            let Some(scan) = read_session(path, from, config.heuristics) else {
                continue;
            };
            out.files += 1;
            ctx.sqlite()?
                .write(|conn| record_scan(conn, &key, &scan, &mut out))??;
        }
        Ok(out)
    }
}

/// The directory to scan: the one given, else the configured one; relative to the server's
/// working directory.
fn sessions_dir(ctx: &Context, given: Option<&str>, config: &Config) -> Result<PathBuf> {
    let dir = mcpspec::__internal::backend::paths::expand(given.unwrap_or(&config.sessions_dir));
    let dir = if dir.is_relative() {
        ctx.dir().join(dir)
    } else {
        dir
    };
    if !dir.is_dir() {
        return Err(HandlerError::new("SESSIONS_NOT_FOUND").message(
            "the sessions directory does not exist; pass `dir` or set scanning.sessions_dir",
        ));
    }
    Ok(dir)
}

/// Where the last scan of the file at `key` stopped, or 0.
fn scanned_up_to(conn: &Connection, key: &str) -> Result<u64> {
    Ok(conn
        .query_row(
            "SELECT offset FROM scan_state WHERE path = ?1",
            [key],
            |r| r.get::<_, i64>(0),
        )
        .optional()
        .map_err(db_error)?
        .map_or(0, |o| o.max(0) as u64))
}

/// What one file holds beyond where the last scan stopped.
struct SessionScan {
    /// Tier-1 blocks and cancel tags.
    found: Found,
    /// Tier-2 findings about the new lines.
    findings: Vec<super::sessions::Finding>,
    /// Where this scan stopped: after the last complete line.
    end: u64,
}

/// Reads the unread part of a session file (each line parsed once, for both tiers) and
/// analyses it; `None` when the file cannot be read.
fn read_session(path: &Path, from: u64, heuristics: bool) -> Option<SessionScan> {
    let (text, from, end) = read_from(path, from).ok()?;
    let lines: Vec<(usize, Value)> = text
        .lines()
        .enumerate()
        .filter_map(|(i, l)| Some((i, serde_json::from_str(l).ok()?)))
        .collect();
    let mut found = Found::default();
    for (_, v) in &lines {
        for t in assistant_texts_of(v) {
            scan_text(&t, &mut found);
        }
    }
    let findings = if heuristics && !lines.is_empty() {
        heuristic_findings(path, from, lines)
    } else {
        Vec::new()
    };
    Some(SessionScan {
        found,
        findings,
        end,
    })
}

/// Records one file's scan in one transaction: tier-1 candidates and cancels, tier-2
/// suggestions, and how far the file has been read.
fn record_scan(
    conn: &Connection,
    key: &str,
    scan: &SessionScan,
    out: &mut outputs::LessonsScan,
) -> Result<()> {
    let tx = conn.unchecked_transaction().map_err(db_error)?;
    for block in &scan.found.blocks {
        out.lessons += 1;
        record(&tx, block, out)?;
    }
    for slug in &scan.found.cancels {
        let n = tx
            .execute(
                "UPDATE lessons SET status = 'archived', archived_reason = 'cancelled', \
                   updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
                 WHERE slug = ?1 AND status = 'candidate'",
                [slug],
            )
            .map_err(db_error)?;
        if n > 0 {
            out.cancelled.push(slug.clone());
        }
    }
    for f in &scan.findings {
        suggest(&tx, f, out)?;
    }
    tx.execute(
        "INSERT INTO scan_state (path, offset, scanned_at) \
         VALUES (?1, ?2, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) \
         ON CONFLICT (path) DO UPDATE SET offset = excluded.offset, scanned_at = excluded.scanned_at",
        params![key, scan.end as i64],
    )
    .map_err(db_error)?;
    tx.commit().map_err(db_error)
}

/// How much of a session before where the last scan stopped the heuristics see again, so that
/// a call and what became of it are seen together when a scan stopped between them.
const HEURISTIC_CONTEXT: u64 = 256 * 1024;

/// The tier-2 findings about the new lines (parsed, numbered from 0), seen with up to
/// [`HEURISTIC_CONTEXT`] of the lines before them. Line numbers in the file are counted only
/// when there is a finding to number.
fn heuristic_findings(
    path: &Path,
    from: u64,
    new: Vec<(usize, Value)>,
) -> Vec<super::sessions::Finding> {
    let start = from.saturating_sub(HEURISTIC_CONTEXT);
    let bytes = read_range(path, start, from).unwrap_or_default();
    let mut context = String::from_utf8_lossy(&bytes).into_owned();
    if start > 0 {
        // The first line of the window is cut; the whole lines after it are kept.
        context = context
            .split_once('\n')
            .map(|(_, rest)| rest.to_string())
            .unwrap_or_default();
    }
    // Numbered from 1 at the context's first line; the new lines follow it.
    let before = context.lines().count();
    let mut lines: Vec<(usize, Value)> = context
        .lines()
        .enumerate()
        .filter_map(|(i, l)| Some((i + 1, serde_json::from_str(l).ok()?)))
        .collect();
    lines.extend(new.into_iter().map(|(i, v)| (before + 1 + i, v)));
    let fallback = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut found: Vec<_> = super::sessions::findings_in(&lines, &fallback)
        .into_iter()
        .filter(|f| f.line > before)
        .collect();
    if !found.is_empty() {
        let shift = lines_before(path, from).unwrap_or(0).saturating_sub(before);
        for f in &mut found {
            f.shift(shift);
        }
    }
    found
}

/// The bytes `from..to` of a file.
fn read_range(path: &Path, from: u64, to: u64) -> std::io::Result<Vec<u8>> {
    let mut f = std::fs::File::open(path)?;
    f.seek(SeekFrom::Start(from))?;
    let mut buf = Vec::new();
    f.take(to.saturating_sub(from)).read_to_end(&mut buf)?;
    Ok(buf)
}

/// How many lines the first `upto` bytes of a file hold, to number the lines read after them.
fn lines_before(path: &Path, upto: u64) -> std::io::Result<usize> {
    let mut f = std::io::BufReader::new(std::fs::File::open(path)?).take(upto);
    let mut buf = [0u8; 64 * 1024];
    let mut n = 0;
    loop {
        let got = f.read(&mut buf)?;
        if got == 0 {
            return Ok(n);
        }
        n += buf[..got].iter().filter(|b| **b == b'\n').count();
    }
}

/// Records a tier-2 finding: a new candidate tagged `heuristic`, or one more occurrence of the
/// candidate it already suggested, with the evidence either way. A finding recorded before
/// (the same lines scanned again) changes nothing, and a lesson that is active or archived
/// already is left alone.
fn suggest(
    conn: &Connection,
    f: &super::sessions::Finding,
    out: &mut outputs::LessonsScan,
) -> Result<()> {
    let kind = f.kind.as_str();
    let a = args::LessonsAdd {
        tool: vec![f.tool().to_string()],
        trigger: f.trigger(),
        problem: f.problem(),
        solution: f.solution(),
        tags: vec!["heuristic".into(), format!("heuristic:{kind}")],
        scope: None,
        type_: "hint".into(),
        command_patterns: None,
        path_patterns: None,
        slug: Some(slugify(&format!("{kind} {} {}", f.tool(), f.calls[0].key))),
    };
    let (lesson, new) = match insert(conn, &a, "candidate", "scan") {
        Ok(l) => (l, true),
        Err(e) if e.name() == "DUPLICATE_LESSON" => {
            let slug = e
                .fields()
                .get("slug")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let l = get_by_slug(conn, slug)?;
            if l.status != "candidate" {
                return Ok(());
            }
            (l, false)
        }
        Err(e) => {
            tracing::debug!(heuristic = kind, error = %e, "a heuristic finding failed the intake checks");
            return Ok(());
        }
    };
    let calls = serde_json::to_string(&f.calls).unwrap_or_else(|_| "[]".into());
    let recorded = conn
        .execute(
            "INSERT OR IGNORE INTO lesson_evidence (lesson_id, heuristic, session, line, calls, said) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![lesson.id, kind, f.session, f.line as i64, calls, f.said],
        )
        .map_err(db_error)?;
    if recorded == 0 {
        return Ok(());
    }
    if !new {
        conn.execute(
            "UPDATE lessons SET occurrences = occurrences + 1 WHERE id = ?1",
            [lesson.id],
        )
        .map_err(db_error)?;
    }
    out.suggested.push(outputs::LessonsScanSuggestedItem {
        slug: lesson.slug,
        heuristic: kind.to_string(),
        session: f.session.clone(),
        line: f.line as i64,
        new,
    });
    Ok(())
}

/// The lesson with `slug`.
fn get_by_slug(conn: &Connection, slug: &str) -> Result<Lesson> {
    let id: i64 = conn
        .query_row("SELECT id FROM lessons WHERE slug = ?1", [slug], |r| {
            r.get(0)
        })
        .map_err(db_error)?;
    get(conn, id)
}

/// Records one scanned block as a candidate, or counts a repeat of one already recorded.
fn record(
    conn: &Connection,
    block: &BTreeMap<String, String>,
    out: &mut outputs::LessonsScan,
) -> Result<()> {
    let field = |k: &str| block.get(k).cloned().unwrap_or_default();
    let list = |k: &str| -> Vec<String> {
        field(k)
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    };
    let a = args::LessonsAdd {
        tool: list("tool"),
        trigger: field("trigger"),
        problem: field("problem"),
        solution: field("solution"),
        tags: list("tags"),
        scope: None,
        type_: block.get("type").cloned().unwrap_or_else(|| "hint".into()),
        command_patterns: None,
        path_patterns: None,
        slug: block.get("slug").cloned(),
    };
    if a.tool.is_empty()
        || a.trigger.trim().len() < 3
        || a.problem.trim().len() < 10
        || a.solution.trim().len() < 10
    {
        out.invalid += 1;
        return Ok(());
    }
    match insert(conn, &a, "candidate", "scan") {
        Ok(l) => out.added.push(l.slug),
        Err(e) if e.name() == "DUPLICATE_LESSON" => {
            let slug = e
                .fields()
                .get("slug")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            conn.execute(
                "UPDATE lessons SET occurrences = occurrences + 1 WHERE slug = ?1 AND status = 'candidate'",
                [&slug],
            )
            .map_err(db_error)?;
            out.repeated.push(slug);
        }
        Err(e) if e.name() == "INVALID_LESSON" => out.invalid += 1,
        Err(e) => return Err(e),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_names() {
        for (given, want) in [
            ("start_process", "Bash"),
            ("read_multiple_files", "Read"),
            ("bash", "Bash"),
            ("Bash", "Bash"),
            ("query", "query"),
            ("list_processes", "list_processes"),
        ] {
            assert_eq!(canonical_tool(given), want, "{given}");
        }
    }

    #[test]
    fn trigger_patterns_match_the_command() {
        for (trigger, command, hit) in [
            ("git stash", "git  stash pop", true),
            ("git stash", "git stashed", false),
            ("rm -rf", "sudo rm -rf /tmp/x", true),
            ("npm i --force", "npm i --force", true),
            ("--no-verify", "git commit --no-verify -m x", true),
        ] {
            let re = Regex::new(&trigger_pattern(trigger)).expect("a pattern");
            assert_eq!(re.is_match(command), hit, "{trigger} vs {command}");
        }
    }

    #[test]
    fn slugs() {
        for (text, want) in [
            ("git stash", "git-stash"),
            ("  Editing a LOCK file!  ", "editing-a-lock-file"),
            ("rm -rf /", "rm-rf"),
        ] {
            assert_eq!(slugify(text), want);
        }
    }

    #[test]
    fn day_numbers() {
        assert_eq!(day_number("1970-01-01"), 0);
        assert_eq!(
            day_number("2026-11-22T01:02:03Z") - day_number("2026-10-23"),
            30
        );
        assert_eq!(day_number("garbage"), 0);
    }

    #[test]
    fn blocks_in_assistant_text() {
        let line = json!({"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "text", "text": "Done.\n#lesson\ntool: Bash\ntrigger: git stash\nproblem: untracked files\n  were left behind\nsolution: use git stash -u\n#/lesson\n#lesson:cancel old-one"}
        ]}})
        .to_string();
        let mut found = Found::default();
        for t in assistant_texts(&line) {
            scan_text(&t, &mut found);
        }
        assert_eq!(found.cancels, ["old-one"]);
        assert_eq!(found.blocks.len(), 1);
        assert_eq!(
            found.blocks[0]["problem"],
            "untracked files were left behind"
        );
        assert_eq!(found.blocks[0]["tool"], "Bash");
        let user = json!({"type": "user", "message": {"role": "user", "content": "#lesson\ntool: X\n#/lesson"}}).to_string();
        assert!(assistant_texts(&user).is_empty());
    }
}
