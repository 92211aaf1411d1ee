//! The codegen goldens compile against the runtime: each expected file under
//! `tests/fixtures/*/expected/` is included here as a module (the `basic` one is the crate's
//! [`crate::basic`]) and its tables are served by the engine in process: calls, resources,
//! examples, error rules, handlers. Tests of the crate, so that they reach what only the crate
//! may (they were e2e tests, for which the modules they use had to be public).

// A generated module is public API of the crate that includes it; here only some of the
// argument structs of each are used.
use crate::basic;

#[allow(dead_code)]
mod names {
    include!("../../../tests/fixtures/names/expected/names.rs");
}

#[allow(dead_code)]
mod rules {
    include!("../../../tests/fixtures/rules/expected/rules.rs");
}

#[allow(dead_code)]
mod files {
    include!("../../../tests/fixtures/handlers/expected/files.rs");
}

#[allow(dead_code)]
mod content {
    include!("../../../tests/fixtures/content/expected/content.rs");
}

#[allow(dead_code)]
mod notes {
    include!("../../../tests/fixtures/aliases/expected/notes.rs");
}

#[allow(dead_code)]
mod startup {
    include!("../../../tests/fixtures/startup/expected/startup.rs");
}

#[allow(dead_code)]
mod gateway {
    include!("../../../tests/fixtures/proxy/expected/gateway.rs");
}

#[allow(dead_code)]
mod identity {
    include!("../../../tests/fixtures/identity/expected/identity.rs");
}

#[allow(dead_code)]
mod recall {
    include!("../../../tests/fixtures/embeddings/expected/recall.rs");
}

/// A hand-written implementation of the aliases golden: `notes.get` and `notes.touch` return
/// the same type, so one function serves both.
struct Notes;

fn the_note() -> notes::outputs::NotesGet {
    notes::outputs::NotesGet {
        note: notes::outputs::NotesGetNote {
            id: 1,
            text: "x".into(),
            tags: Some(vec![notes::outputs::NotesGetNoteTagsItem {
                name: "t".into(),
            }]),
        },
    }
}

impl notes::NotesGetHandler for Notes {
    fn get_note(
        &self,
        _ctx: &mcpspec::handler::Context,
        _args: notes::args::NotesGet,
    ) -> Result<notes::outputs::NotesGet, mcpspec::handler::HandlerError> {
        Ok(the_note())
    }
}

impl notes::NotesTouchHandler for Notes {
    fn touch_note(
        &self,
        _ctx: &mcpspec::handler::Context,
        _args: notes::args::NotesTouch,
    ) -> Result<notes::outputs::NotesTouch, mcpspec::handler::HandlerError> {
        Ok(the_note())
    }
}

impl notes::NotesCountHandler for Notes {
    fn count_notes(
        &self,
        _ctx: &mcpspec::handler::Context,
        _args: notes::args::NotesCount,
    ) -> Result<notes::outputs::NotesCount, mcpspec::handler::HandlerError> {
        Ok(notes::outputs::NotesCount { note: 3 })
    }
}

/// Tools whose output schemas are the same (a YAML anchor) share one Rust type: a value built
/// for one is the other's result as it is, nested structs included.
#[test]
fn reused_output_schemas_are_one_type() {
    let got = the_note();
    let touched: notes::outputs::NotesTouch = got.clone();
    let note: notes::outputs::NotesTouchNote = got.note.clone();
    assert_eq!(note.id, 1);
    let nested: notes::outputs::NotesTouchNoteTagsItem = got.note.tags.clone().unwrap()[0].clone();
    assert_eq!(touched, got);
    assert_eq!(nested.name, "t");
    let d = notes::dispatcher(Notes);
    let ctx = mcpspec::handler::Context::new(".");
    let args = serde_json::Map::new();
    let get = d.call("notes.get", &ctx, &args).expect("notes.get");
    let touch = d.call("notes.touch", &ctx, &args).expect("notes.touch");
    assert_eq!(get, touch);
    assert_eq!(get["note"]["tags"][0]["name"], "t");
    let count = d.call("notes.count", &ctx, &args).expect("notes.count");
    assert_eq!(count, serde_json::json!({"note": 3}));
    assert_eq!(notes::SERVER.tools.len(), 3);
}

/// A hand-written implementation of the golden's handler traits, as a user would write it.
struct Files;

impl files::FilesListHandler for Files {
    fn list_files(
        &self,
        _ctx: &mcpspec::handler::Context,
        _args: files::args::FilesList,
    ) -> Result<files::outputs::FilesList, mcpspec::handler::HandlerError> {
        Ok(files::outputs::FilesList {
            files: vec![files::outputs::FilesListFilesItem {
                name: "a".into(),
                bytes: None,
            }],
            total: Some(1),
        })
    }
}

impl files::FilesDeleteHandler for Files {
    fn delete_file(
        &self,
        _ctx: &mcpspec::handler::Context,
        args: files::args::FilesDelete,
    ) -> Result<files::outputs::FilesDelete, mcpspec::handler::HandlerError> {
        match args.name.as_str() {
            "secret" => Err(mcpspec::handler::HandlerError::internal(
                "open /home/someone/.ssh/id_rsa: permission denied",
            )),
            "busy" => Err(mcpspec::handler::HandlerError::new("BUSY")
                .message("try later")
                .with("retry", 5)),
            "gone" => Ok(files::outputs::FilesDelete { deleted: true }),
            _ => Err(mcpspec::handler::HandlerError::new("NOT_ALLOWED").with("name", args.name)),
        }
    }
}

impl files::FileResourceHandler for Files {
    fn read_file(
        &self,
        _ctx: &mcpspec::handler::Context,
        uri: &str,
        vars: &mcpspec::handler::ResourceVars,
    ) -> Result<mcpspec::handler::ResourceBody, mcpspec::handler::HandlerError> {
        use mcpspec::handler::{HandlerError, ResourceBody};
        match vars.get("name").unwrap_or_default() {
            "secret" => Err(HandlerError::internal(
                "open /home/someone/.ssh/id_rsa: permission denied",
            )),
            "missing" => Err(HandlerError::resource_not_found("no file 'missing'")),
            "locked" => Err(HandlerError::new("NOT_ALLOWED").with("name", "locked")),
            "busy" => Err(HandlerError::new("BUSY").message("try later")),
            "notes" => {
                Ok(ResourceBody::text(format!("the notes at {uri}"))
                    .with_mime_type("text/markdown"))
            }
            name => Ok(ResourceBody::blob(name.as_bytes())),
        }
    }
}

/// A handler resource read through the engine: text and bytes with the spec's or the
/// handler's MIME type, and each kind of failure as the JSON-RPC error a client sees.
#[test]
fn golden_resource_handlers_are_read_through_the_engine() {
    use mcpspec::engine::{Engine, Limits};
    use rmcp::model::{ErrorData, ResourceContents};
    let engine = Engine::start(
        &files::SERVER,
        None,
        false,
        Limits::default(),
        Some(files::dispatcher(Files)),
    )
    .unwrap();
    let read = |uri: &str| mcpspec::content::read(&engine, uri);
    match read("files://file/abc").expect("blob") {
        ResourceContents::BlobResourceContents {
            blob, mime_type, ..
        } => {
            assert_eq!(blob, "YWJj");
            assert_eq!(mime_type.as_deref(), Some("application/octet-stream"));
        }
        other => panic!("expected a blob: {other:?}"),
    }
    match read("files://file/notes").expect("text") {
        ResourceContents::TextResourceContents {
            text, mime_type, ..
        } => {
            assert_eq!(text, "the notes at files://file/notes");
            assert_eq!(mime_type.as_deref(), Some("text/markdown"));
        }
        other => panic!("expected text: {other:?}"),
    }
    let error = |uri: &str| ErrorData::from(read(uri).expect_err(uri));
    let e = error("files://file/missing");
    assert_eq!(
        (e.code.0, e.message.as_ref()),
        (-32002, "no file 'missing'")
    );
    assert_eq!(
        e.data,
        Some(serde_json::json!({"uri": "files://file/missing"}))
    );
    let e = error("files://file/locked");
    assert_eq!(
        (e.code.0, e.message.as_ref()),
        (-32005, "'locked' is not allowed")
    );
    assert_eq!(
        e.data,
        Some(serde_json::json!({"code": "NOT_ALLOWED", "name": "locked"}))
    );
    let e = error("files://file/secret");
    assert_eq!(e.code.0, -32603);
    assert!(!e.message.contains("/home"), "{e:?}");
    assert!(e.message.contains("details are in the server log"), "{e:?}");
    let e = error("files://file/busy");
    assert_eq!((e.code.0, e.message.as_ref()), (-32603, "try later"));
}

#[test]
fn golden_handler_dispatcher_decodes_calls_and_serialises() {
    let d = files::dispatcher(Files);
    let ctx = mcpspec::handler::Context::new(".");
    let out = d
        .call("files.list", &ctx, &serde_json::Map::new())
        .expect("list");
    // Absent optional fields are left out, so the output matches its schema.
    assert_eq!(
        out,
        serde_json::json!({"files": [{"name": "a"}], "total": 1})
    );
    let mut args = serde_json::Map::new();
    args.insert("name".into(), serde_json::json!("x"));
    args.insert("confirm".into(), serde_json::json!(true));
    let e = d.call("files.delete", &ctx, &args).expect_err("refused");
    assert_eq!(e.name(), "NOT_ALLOWED");
    assert_eq!(e.fields()["name"], "x");
    let e = d.call("files.nope", &ctx, &args).expect_err("unknown");
    assert_eq!(e.name(), mcpspec::handler::INTERNAL);
    let t = &files::SERVER.tools[1];
    assert!(
        t.annotations.destructive,
        "a confirmation rule makes a tool destructive"
    );
    assert_eq!(t.confirm.as_ref().map(|c| c.argument), Some("confirm"));
    assert_eq!(files::SERVER.errors[0].code, -32003);
}

#[test]
fn golden_tables_are_usable_by_the_runtime() {
    assert_eq!(basic::SERVER.name, "basic");
    assert_eq!(basic::SERVER.tools.len(), 5);
    // Top-level composition reaches the generated table whole (the runtime decides per
    // protocol revision what to list).
    let find = &basic::SERVER.tools[2];
    assert_eq!(find.name, "find_note");
    let schema: serde_json::Value = serde_json::from_str(find.input_schema).unwrap();
    assert_eq!(schema["oneOf"][1]["required"][0], "body", "{schema}");
    let t = &basic::SERVER.tools[0];
    let mut args = serde_json::Map::new();
    args.insert("q".into(), serde_json::json!("x"));
    args.insert("limit".into(), serde_json::json!(3));
    let params = mcpspec::params::bind(&t.bind, &args, None);
    assert_eq!(params.len(), 2);
    // Wire names that are Rust keywords or clash after sanitising still decode: `projectId`
    // sorts first and keeps `project_id`, the later `project_id` becomes `project_id_2`.
    assert_eq!(names::SERVER.tools[1].name, "Type");
    let mut args = serde_json::Map::new();
    for (k, v) in [
        ("type", "a"),
        ("self", "b"),
        ("projectId", "c"),
        ("project_id", "d"),
    ] {
        args.insert(k.into(), serde_json::json!(v));
    }
    let a: names::args::Type = mcpspec::def::decode(&args).expect("decode");
    assert_eq!(
        (
            a.type_.as_str(),
            a.self_.as_str(),
            a.project_id.as_str(),
            a.project_id_2.as_str()
        ),
        ("a", "b", "c", "d")
    );
}

/// A tool's icons reach `tools/list` as MCP 2025-11-25 writes them; a tool without any lists
/// no `icons` key.
#[test]
fn golden_tool_icons_are_listed() {
    let listed = serde_json::to_value(crate::protocol::tools(&basic::SERVER)).expect("JSON");
    assert_eq!(listed[1]["name"], "delete_note");
    assert_eq!(
        listed[1]["icons"],
        serde_json::json!([
            {"src": "https://example.com/notes-48.png", "mimeType": "image/png",
             "sizes": ["48x48", "96x96"], "theme": "light"},
            {"src": "data:image/svg+xml;base64,PHN2Zy8+", "sizes": ["any"]}
        ])
    );
    assert!(listed[0].get("icons").is_none(), "{}", listed[0]);
}

/// A proxy's own downstream servers and static interceptor rules reach the runtime's tables.
#[test]
fn golden_proxy_tables_carry_downstreams_and_rules() {
    let proxy = gateway::SERVER.proxy.as_ref().expect("a proxy");
    let files = &proxy.servers[0];
    assert_eq!((files.name, files.command), ("files", "npx"));
    assert_eq!(files.env, &[("NODE_OPTIONS", "--max-old-space-size=256")]);
    let guard = &proxy.rules[0];
    assert_eq!(guard.action, mcpspec::def::InterceptAction::Guard);
    assert_eq!(guard.tools, &["Read"]);
    assert_eq!(proxy.params, &["tool", "file_path"]);
    assert_eq!(gateway::SERVER.tools[0].timeout_ms, Some(2000));
}

/// The golden's `examples:` run through the engine on a scratch database with its sample
/// rows and hold; the same examples judged against other rows fail and say where and why.
#[test]
fn golden_examples_run_on_the_sample_rows() {
    use mcpspec::engine::{Engine, Limits};
    let dir = tempfile::tempdir().unwrap();
    let at = mcpspec::cli::examples::scratch_database(&basic::SERVER, dir.path()).unwrap();
    let engine =
        Engine::start_at(&basic::SERVER, at.as_ref(), false, Limits::default(), None).unwrap();
    let outcomes = mcpspec::examples::run_all(&engine, true);
    assert_eq!(outcomes.len(), 5);
    for o in &outcomes {
        assert!(o.failure.is_none(), "{o}");
    }
    // The delete example ran, so the search example now finds nothing: it fails, naming its
    // place in the spec and the difference.
    let again = mcpspec::examples::run(&engine, &basic::SERVER.examples[0]);
    let shown = again.to_string();
    assert!(
        shown.starts_with("FAILED  search_notes (tests/fixtures/basic/spec.yaml:29:9)"),
        "{shown}"
    );
    assert!(
        shown.contains("result.notes has 0 elements, not 1"),
        "{shown}"
    );
}

/// Error rules for SQL tools, run through the engine on a real database: a constraint failure,
/// a missing row, a write that changed nothing and a failing field become the declared
/// JSON-RPC errors; tools and failures without a rule keep their tool errors.
#[test]
fn golden_error_rules_map_sql_failures_to_declared_errors() {
    use mcpspec::engine::{CallError, Engine, Limits};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.db");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(rules::SERVER.database.as_ref().unwrap().schema)
        .unwrap();
    let engine =
        Engine::start(&rules::SERVER, Some(&path), false, Limits::default(), None).unwrap();
    let call = |tool: &str, args: serde_json::Value| engine.call(tool, Some(&args));
    let rpc = |r: Result<mcpspec::engine::Success, CallError>| match r {
        Err(CallError::Rpc(e)) => {
            serde_json::json!({"code": e.code, "message": e.message, "data": e.data})
        }
        other => panic!("expected a declared error, got {other:?}"),
    };
    call("add", serde_json::json!({"name": "a"})).unwrap();
    assert_eq!(
        rpc(call("add", serde_json::json!({"name": "a"}))),
        serde_json::json!({"code": -32020, "message": "an item named 'a' exists", "data": {"code": "DUPLICATE", "name": "a"}})
    );
    match call("add_loose", serde_json::json!({"name": "a"})) {
        Err(CallError::Tool(e)) => assert_eq!(e.code, "CONSTRAINT_VIOLATION"),
        other => panic!("a tool outside the rule keeps its tool error: {other:?}"),
    }
    assert_eq!(
        rpc(call("get", serde_json::json!({"id": 9}))),
        serde_json::json!({"code": -32021, "message": "no item 9", "data": {"code": "NO_ITEM", "id": 9}})
    );
    assert_eq!(
        rpc(call("rename", serde_json::json!({"id": 9, "name": "b"}))),
        serde_json::json!({"code": -32021, "message": "no item 9", "data": {"code": "NO_ITEM", "id": 9}})
    );
    call("rename", serde_json::json!({"id": 1, "name": "b"})).unwrap();
    let deleted = call("delete", serde_json::json!({"id": 9})).unwrap();
    assert_eq!(
        deleted.structured["changes"], 0,
        "no rule: changing nothing succeeds"
    );
    assert_eq!(
        rpc(call("get", serde_json::json!({"id": 0}))),
        serde_json::json!({"code": -32022, "message": "bad id: 0", "data": {"code": "BAD_ID", "field": "id", "value": 0}})
    );
    // Another field's failure, and a missing `id`, keep the tool error.
    for args in [
        serde_json::json!({"id": 1}),
        serde_json::json!({"name": "c"}),
    ] {
        match call("rename", args) {
            Err(CallError::Tool(e)) => assert_eq!(e.code, "INVALID_ARGUMENTS", "{e:?}"),
            other => panic!("{other:?}"),
        }
    }
}

/// A handler server through the engine: confirmation first, then the field rule, then the
/// handler; a declared error name is a JSON-RPC error, another name a tool error, and an
/// internal failure a sanitised tool error whose detail only the log sees.
#[test]
fn golden_handler_errors_through_the_engine() {
    use mcpspec::engine::{CallError, Engine, Limits};
    let engine = Engine::start(
        &files::SERVER,
        None,
        false,
        Limits::default(),
        Some(files::dispatcher(Files)),
    )
    .unwrap();
    let call = |args: serde_json::Value| engine.call("files.delete", Some(&args));
    match call(serde_json::json!({"name": "x"})) {
        Err(CallError::Tool(e)) => assert_eq!(e.code, "CONFIRMATION_REQUIRED"),
        other => panic!("{other:?}"),
    }
    match call(serde_json::json!({"name": "X!", "confirm": true})) {
        Err(CallError::Rpc(e)) => assert_eq!(
            (e.code, e.message.as_str(), e.data),
            (
                -32003,
                "invalid name 'X!'",
                serde_json::json!({"code": "BAD_NAME", "field": "name", "value": "X!"})
            )
        ),
        other => panic!("{other:?}"),
    }
    match call(serde_json::json!({"name": "x", "confirm": true})) {
        Err(CallError::Rpc(e)) => assert_eq!(
            (e.code, e.message.as_str(), e.data),
            (
                -32005,
                "'x' is not allowed",
                serde_json::json!({"code": "NOT_ALLOWED", "name": "x"})
            )
        ),
        other => panic!("{other:?}"),
    }
    match call(serde_json::json!({"name": "busy", "confirm": true})) {
        Err(CallError::Tool(e)) => {
            assert_eq!((e.code, e.message.as_str()), ("BUSY", "try later"));
            assert_eq!(e.data, Some(serde_json::json!({"retry": 5})));
        }
        other => panic!("{other:?}"),
    }
    match call(serde_json::json!({"name": "secret", "confirm": true})) {
        Err(CallError::Tool(e)) => {
            assert_eq!(e.code, "INTERNAL_ERROR");
            assert!(e.message.contains("request "), "{}", e.message);
            assert!(
                !format!("{e:?}").contains(".ssh"),
                "the detail is logged only: {e:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    let ok = call(serde_json::json!({"name": "gone", "confirm": true})).unwrap();
    assert_eq!(ok.structured, serde_json::json!({"deleted": true}));
    assert_eq!(
        engine.confirmation(
            "files.delete",
            Some(&serde_json::json!({"name": "gone", "confirm": true}))
        ),
        Some("Delete gone?".to_string())
    );
    assert_eq!(
        engine.confirmation("files.delete", Some(&serde_json::json!({"name": "gone"}))),
        None
    );
    // Without its handlers a server with handler tools does not start.
    assert!(Engine::start(&files::SERVER, None, false, Limits::default(), None).is_err());
}

#[test]
fn golden_resources_and_prompts_render_through_the_runtime() {
    use mcpspec::engine::{Engine, Limits};
    let def = &content::SERVER;
    assert_eq!(def.resources.len(), 2);
    assert!(!def.resources[0].templated && def.resources[1].templated);
    assert_eq!(def.resources[0].mime_type, "application/json");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("content.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(def.database.as_ref().unwrap().schema)
        .unwrap();
    conn.execute_batch(
        "INSERT INTO notes (title, body) VALUES ('One', 'first'), ('Two', 'second');",
    )
    .unwrap();
    let engine = Engine::start(def, Some(&path), false, Limits::default(), None).unwrap();
    let text = |c: rmcp::model::ResourceContents| match c {
        rmcp::model::ResourceContents::TextResourceContents { text, .. } => text,
        other => panic!("expected text, got {other:?}"),
    };
    let all: serde_json::Value = serde_json::from_str(&text(
        mcpspec::content::read(&engine, "notes://all").unwrap(),
    ))
    .unwrap();
    assert_eq!(
        all,
        serde_json::json!({"rows": [{"id": 1, "title": "One"}, {"id": 2, "title": "Two"}]})
    );
    assert_eq!(
        text(mcpspec::content::read(&engine, "notes://2").unwrap()),
        "# Two\n\nsecond"
    );
    let mut args = serde_json::Map::new();
    args.insert("id".into(), serde_json::json!("1"));
    let summarize = mcpspec::content::prompt(engine.def, "summarize").unwrap();
    let no_answers = serde_json::Map::new();
    let prompt = mcpspec::content::get_prompt(&engine, summarize, Some(&args), no_answers).unwrap();
    let messages = serde_json::to_value(&prompt.messages).unwrap();
    assert_eq!(messages[0]["content"]["text"], "Summarize this note.");
    assert_eq!(messages[1]["content"]["resource"]["text"], "# One\n\nfirst");
    assert_eq!(messages[2]["role"], "assistant");
}

/// The start-up jobs of a golden run through the engine in order: a job that fails (its
/// arguments break the tool's schema) is logged, and the jobs after it still run.
#[test]
fn golden_startup_jobs_run_in_order_past_a_failure() {
    use mcpspec::engine::{Engine, Limits};
    assert_eq!(startup::SERVER.startup.len(), 4);
    assert_eq!(startup::SERVER.startup[0].tool, "record_start");
    assert_eq!(
        startup::SERVER.startup[0].arguments,
        r#"{"note":"started"}"#
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("startup.db");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(startup::SERVER.database.as_ref().unwrap().schema)
        .unwrap();
    let engine = Engine::start(
        &startup::SERVER,
        Some(&path),
        false,
        Limits::default(),
        None,
    )
    .unwrap();
    mcpspec::startup::spawn(engine.clone()).join();
    let notes: Vec<String> = rusqlite::Connection::open(&path)
        .unwrap()
        .prepare("SELECT note FROM starts ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(notes, ["started", "after a failed job"]);
}

/// The identity golden's tables carry the issuer, each scope list and how the caller binds:
/// `:auth.sub` as the subject, `:auth.claims.team` as a claim of the declared type, and the
/// SQLite text with SQLite's own names for them.
#[test]
fn golden_identity_carries_scopes_issuer_and_the_callers_parameters() {
    use mcpspec::def::{ClaimKind, ParamKind};
    let def = &identity::SERVER;
    assert_eq!(def.issuer, Some("https://id.example.com"));
    assert_eq!(def.scopes, ["notes:read"]);
    let tool = def.tool("team_notes").unwrap();
    assert_eq!(tool.scopes, ["notes:team"]);
    assert_eq!(
        tool.bind.0,
        [
            ("auth.sub", ParamKind::AuthSub),
            ("auth.claims.team", ParamKind::AuthClaim(ClaimKind::Text)),
        ]
    );
    assert!(
        tool.binding.statements()[0]
            .sql
            .contains("owner = :auth$sub AND team = :auth$claims$team"),
        "{}",
        tool.binding.statements()[0].sql
    );
    assert_eq!(def.resources[0].scopes, ["notes:guide"]);
    assert_eq!(def.prompts[0].scopes, ["notes:prompts"]);
}

/// The embeddings golden served by the engine: the provider chosen by the environment is off
/// (its model NULL, its health `off`), the declared dimensions bind, and a backfill with
/// nothing to do stores nothing and names the HTTP provider's model, without a request.
#[test]
fn the_embeddings_golden_serves_its_providers() {
    use mcpspec::engine::{Engine, Limits};
    assert_eq!(recall::SERVER.embeddings.len(), 2);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("recall.db");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(recall::SERVER.database.as_ref().unwrap().schema)
        .unwrap();
    let engine = Engine::start(&recall::SERVER, Some(&db), false, Limits::default(), None).unwrap();
    let provider = engine
        .call("provider", Some(&serde_json::json!({})))
        .unwrap();
    assert_eq!(
        provider.structured["dimensions"], 8,
        "{:?}",
        provider.structured
    );
    assert!(
        provider.structured.get("model").is_none(),
        "{:?}",
        provider.structured
    );
    assert_eq!(provider.structured["health"]["state"], "off");
    let newest = engine.call("recall", Some(&serde_json::json!({}))).unwrap();
    assert_eq!(newest.structured["rows"], serde_json::json!([]));
    let reembed = engine
        .call("reembed", Some(&serde_json::json!({})))
        .unwrap();
    assert_eq!(
        reembed.structured,
        serde_json::json!({"embedded": 0, "batches": 0, "remaining": 0, "model": "openai:text-embedding-3-small@8"})
    );
}

/// The content golden's skill, served from its tables: listed with a digest and size a file,
/// `SKILL.md` first and the dot file left out; each file read back as the bytes on disk (the
/// image as a blob); the directories listed a level at a time; unknown URIs refused.
#[test]
fn the_content_golden_serves_its_skill_as_its_files_are() {
    use base64::Engine as _;
    use rmcp::model::{ResourceContents, SkillResources};
    let def = &content::SERVER;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/content/skills/notes-help");
    let skills = crate::skills::list(def);
    assert_eq!(skills.len(), 1);
    let skill = &skills[0];
    assert_eq!(skill.uri, "skill://notes-help/SKILL.md");
    assert_eq!(skill.frontmatter.name, "notes-help");
    assert_eq!(
        skill.frontmatter.extra["metadata"],
        serde_json::json!({"owner": "goldens"})
    );
    let SkillResources::Files(files) = &skill.resources else {
        panic!("a manifest: {skill:?}");
    };
    let uris: Vec<&str> = files.iter().map(|f| f.uri.as_str()).collect();
    assert_eq!(
        uris,
        [
            "skill://notes-help/SKILL.md",
            "skill://notes-help/assets/dot.png",
            "skill://notes-help/references/guide.md"
        ]
    );
    for f in files {
        let path = f.uri.strip_prefix("skill://notes-help/").unwrap();
        let on_disk = std::fs::read(dir.join(path)).unwrap();
        f.verify(&on_disk).unwrap();
        let read = match crate::skills::read(def, &f.uri).unwrap() {
            ResourceContents::TextResourceContents { text, .. } => text.into_bytes(),
            ResourceContents::BlobResourceContents { blob, .. } => {
                base64::engine::general_purpose::STANDARD
                    .decode(blob)
                    .unwrap()
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(read, on_disk, "{}", f.uri);
    }
    assert_eq!(crate::skills::get(def, &skill.uri).as_ref(), Some(skill));
    assert!(crate::skills::get(def, "skill://other/SKILL.md").is_none());
    assert!(crate::skills::read(def, "skill://notes-help/.hidden").is_none());
    let names = |uri: &str| -> Vec<(String, String)> {
        crate::skills::directory(def, uri)
            .unwrap()
            .into_iter()
            .map(|r| (r.name.clone(), r.mime_type.clone().unwrap_or_default()))
            .collect()
    };
    let pair = |n: &str, m: &str| (n.to_string(), m.to_string());
    assert_eq!(
        names("skill://notes-help"),
        [
            pair("SKILL.md", "text/markdown"),
            pair("assets", "inode/directory"),
            pair("references", "inode/directory")
        ]
    );
    assert_eq!(
        names("skill://notes-help/references"),
        [pair("guide.md", "text/markdown")]
    );
    use crate::skills::NotADirectory;
    assert_eq!(
        crate::skills::directory(def, "skill://notes-help/SKILL.md").unwrap_err(),
        NotADirectory::File
    );
    for unknown in ["skill://notes-help/nope", "skill://other", "notes://all"] {
        assert_eq!(
            crate::skills::directory(def, unknown).unwrap_err(),
            NotADirectory::Unknown,
            "{unknown}"
        );
    }
}

/// The content golden's `count_notes` (`app: table`) names its view in `tools/list`, alone of
/// its tools, and the view is served as SEP-1865 says: its MIME type, a CSP declaring no
/// origin, an HTML document; a view no tool has is unknown.
#[test]
fn the_content_golden_names_and_serves_its_table_view() {
    use rmcp::model::ResourceContents;
    let def = &content::SERVER;
    let tools = crate::protocol::tools(def);
    let with_views: Vec<&str> = tools
        .iter()
        .filter(|t| t.meta.is_some())
        .map(|t| t.name.as_ref())
        .collect();
    assert_eq!(with_views, ["count_notes"]);
    let meta = tools[0].meta.as_ref().unwrap();
    assert_eq!(
        meta.0["ui"],
        serde_json::json!({"resourceUri": "ui://content/count_notes"})
    );
    let Some(ResourceContents::TextResourceContents {
        text,
        mime_type,
        meta: Some(meta),
        ..
    }) = crate::apps::read(def, "ui://content/count_notes")
    else {
        panic!("no view served");
    };
    assert_eq!(mime_type.as_deref(), Some("text/html;profile=mcp-app"));
    assert!(text.starts_with("<!DOCTYPE html>"), "{text}");
    assert_eq!(
        meta.0["ui"]["csp"],
        serde_json::json!({"connectDomains": [], "resourceDomains": []})
    );
    assert!(crate::apps::read(def, "ui://content/nothing").is_none());
    let listed = crate::apps::resources(def);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].uri, "ui://content/count_notes");
}
