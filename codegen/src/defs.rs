//! The last step of the one builder of definitions: a server's definition ([`mcpspec_def`])
//! assembled from its IR, where `lower` already built the definitions of its statements,
//! tools, resources, prompts, database, embedding providers, declared errors and proxy
//! (taken as they are). Served as it is when a spec file is served (`mcpspec dev`, the examples `check`
//! runs), and baked into the Rust that rebuilds it for a compiled server (`emit`, through
//! `databake`), so that the two never differ.
//!
//! The runtime keeps `&'static` tables, so a definition built here is leaked. Each is leaked
//! once: a server's definition is kept by its IR's digest and handed out again for an IR seen
//! before, and texts and slices are interned (the `intern` module), so a `dev` session that saves
//! a version it has served before leaks nothing, and a new version only what differs
//! (`tests/reload.rs` counts it).

use mcpspec_def::{
    DemoCallDef, ErrorDef, ExampleDef, ExpectDef, ServerDef, SkillDef, SkillFileDef, StartupJobDef,
};

use std::collections::BTreeMap;

use crate::intern::{list, opt, text, texts};
use crate::ir;

/// The runtime's definition of `spec`, leaked so that it lives as long as compiled tables.
pub fn server_def(spec: &crate::Spec) -> &'static ServerDef {
    server(&spec.ir)
}

/// The runtime's definition of a server's IR: built once per IR (by its digest), then the
/// same definition.
pub(crate) fn server(s: &ir::Server) -> &'static ServerDef {
    use sha2::Digest as _;
    static BUILT: std::sync::Mutex<BTreeMap<[u8; 32], &'static ServerDef>> =
        std::sync::Mutex::new(BTreeMap::new());
    // The IR's Debug form holds every field (positions included), in a fixed order.
    let digest: [u8; 32] = sha2::Sha256::digest(format!("{s:?}").as_bytes()).into();
    let mut built = BUILT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    built.entry(digest).or_insert_with(|| build(s))
}

fn build(s: &ir::Server) -> &'static ServerDef {
    leak(ServerDef {
        name: text(&s.name),
        version: text(&s.version),
        title: opt(s.title.as_deref()),
        instructions: opt(s.instructions.as_deref().map(str::trim_end)),
        spec_file: text(&s.file),
        database: s.database.as_ref().map(|d| d.def.clone()),
        proxy: s.proxy.as_ref().map(|p| p.def.clone()),
        demo: list(&s.demo, |d| DemoCallDef {
            tool: text(&d.tool),
            arguments: text(&d.arguments.to_string()),
            note: opt(d.note.as_deref()),
        }),
        startup: list(&s.startup, |j| StartupJobDef {
            tool: text(&j.tool),
            arguments: text(&j.arguments.to_string()),
        }),
        tools: list(&s.tools, |t| t.def.clone()),
        toolsets: list(&s.toolsets, |(name, tools)| (text(name), texts(tools))),
        error_codes: list(&s.error_codes, |(k, v)| (text(k), text(v))),
        errors: list(&s.errors, ErrorDef::clone),
        resources: list(&s.resources, |r| r.def.clone()),
        prompts: list(&s.prompts, |p| p.def.clone()),
        scopes: texts(&s.scopes),
        issuer: opt(s.issuer.as_deref()),
        examples: list(&s.examples, example),
        embeddings: list(&s.embeddings, |e| e.def.clone()),
        skills: list(&s.skills, skill),
        token_budget: s.token_budget.map(|(b, _)| b),
    })
}

fn skill(k: &ir::Skill) -> SkillDef {
    SkillDef {
        name: text(&k.name),
        description: text(&k.description),
        frontmatter: text(&serde_json::Value::Object(k.frontmatter.clone()).to_string()),
        dir: text(&k.dir),
        files: list(&k.files, |f| SkillFileDef {
            path: text(&f.path),
            mime_type: text(&f.mime_type),
            content: text(&f.content),
            base64: f.base64,
            digest: text(&f.digest),
            size: f.size,
        }),
    }
}

fn leak<T>(v: T) -> &'static T {
    Box::leak(Box::new(v))
}

fn example(e: &ir::Example) -> ExampleDef {
    ExampleDef {
        tool: text(&e.tool),
        arguments: text(&e.arguments.to_string()),
        expect: match &e.expect {
            ir::Expect::Returns(v) => ExpectDef::Returns(text(&v.to_string())),
            ir::Expect::Empty => ExpectDef::Empty,
            ir::Expect::Error(code) => ExpectDef::Error(text(code)),
        },
        sample_rows: e.sample_rows,
        at: text(&e.at),
    }
}
