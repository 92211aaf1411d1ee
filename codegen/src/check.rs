//! SQL and schema checks that need SQLite and a JSON Schema validator (`codegen check`).
//!
//! Every statement is prepared against an in-memory database built from the spec's own DDL,
//! and the declared result columns and read/write classification are compared with what
//! SQLite reports. Input schemas are checked against the JSON Schema meta-schema and their
//! defaults against the schemas themselves. With a live database, its tables and columns are
//! compared with the declared ones. [`check_repo`] is the whole of `codegen check`: it adds the
//! contract and staleness comparisons of [`drift`] and reads the committed files.

use std::path::{Path, PathBuf};

use mcpspec::backend::Location;

use crate::Spec;
use crate::diag::{Diagnostic, Diagnostics, Pos};
use crate::drift::{self, Kind, Report};
pub use crate::sqlcheck::check_sql;
use crate::sqlcheck::finding;

/// Everything `codegen check` does, over the workspace at `root` with its specs in `spec_dir`
/// (relative to `root`): every spec compiles, every input schema and default is valid, every
/// statement prepares (against `live` too: a server's name and where its live database is,
/// a file or a URL, checked read-only), every contract matches its snapshot, and the
/// committed docs are fresh.
pub fn check_repo(root: &Path, spec_dir: &Path, live: Option<(&str, &Location)>) -> Report {
    let mut report = Report::default();
    let read = |rel: &Path| crate::read_spec(&root.join(rel)).ok();
    let specs = match crate::load_dir(&root.join(spec_dir), spec_dir) {
        Ok(s) => s,
        Err(d) => {
            report.extend(Kind::Spec, &d);
            Vec::new()
        }
    };
    report.specs = specs.len();
    if let Some((name, _)) = live
        && !specs.iter().any(|s| s.name() == name)
    {
        let names: Vec<&str> = specs.iter().map(crate::Spec::name).collect();
        report.findings.push(drift::Finding::from_diagnostic(
            Kind::Sql,
            &Diagnostic {
                file: spec_dir.to_path_buf(),
                pos: Pos { line: 1, column: 1 },
                message: format!("--db names server `{name}`, which no spec declares"),
                label: None,
                help: Some(format!("use one of {}", names.join(", "))),
            },
        ));
    }
    report.tools = specs.iter().map(|s| s.ir.tools.len()).sum();
    for spec in &specs {
        report.extend(Kind::Sql, &check_schemas(spec));
        report.extend(Kind::Sql, &check_sql(spec));
        report.extend(Kind::Sql, &crate::migcheck::check_migrations(spec));
        if let Some((_, location)) = live.filter(|(name, _)| *name == spec.name()) {
            report.extend(Kind::Sql, &live_findings(spec, location));
        }
        let lock = spec.lock_path();
        if let Some(f) = drift::contract_drift(spec, read(&lock).as_deref()) {
            report.findings.push(f);
        }
        budget_warnings(spec, &mut report);
    }
    // The docs describe every server, so they are compared only when every spec compiled; the
    // editor schema does not depend on the specs.
    let rendered = match crate::render_docs(&specs) {
        Ok(r) => r,
        Err(e) => {
            report.findings.push(drift::Finding::from_diagnostic(
                Kind::Stale,
                &Diagnostic {
                    file: PathBuf::from("templates/server.md.j2"),
                    pos: Pos { line: 1, column: 1 },
                    message: e.to_string(),
                    label: None,
                    help: Some("fix the template".into()),
                },
            ));
            return report;
        }
    };
    let all_compiled = report.findings.iter().all(|f| f.kind != Kind::Spec);
    for (path, fresh) in rendered {
        if !all_compiled {
            continue;
        }
        let shown = path.to_string_lossy().replace('\\', "/");
        if let Some(f) = drift::stale(&shown, read(&path).as_deref(), &fresh, crate::DOCS_COMMAND) {
            report.findings.push(f);
        }
    }
    report
}

/// The findings of `spec`'s statements on its live database at `location`; one finding when
/// it cannot be opened.
fn live_findings(spec: &crate::Spec, location: &Location) -> Diagnostics {
    // The definition is built once: the live database and its migrations are read through it.
    let def = crate::defs::server_def(spec);
    match crate::livecheck::open(def, location) {
        Ok(db) => {
            let mut out = crate::migcheck::check_live_migrations(spec, def, location);
            out.extend(crate::livecheck::check_live(spec, &db));
            out
        }
        Err(e) => {
            let mut out = Diagnostics::default();
            out.items.push(finding(
                spec,
                Pos::default(),
                format!("cannot check the live database {}: {e}", location.display()),
                "check --db, and that the database answers",
            ));
            out
        }
    }
}

/// Checks every input schema against the meta-schema, compiles it as the runtime will (its
/// patterns with the validator's own regular-expression engine and limits), and checks every
/// default against its property.
pub fn check_schemas(spec: &Spec) -> Diagnostics {
    let mut out = Diagnostics::default();
    check_fixed_calls(spec, &mut out);
    for tool in &spec.ir.tools {
        if let Err(e) = jsonschema::meta::validate(&tool.input_schema) {
            out.items.push(finding(
                spec,
                tool.pos,
                format!(
                    "tool `{}`: the input schema is not valid JSON Schema: {e}",
                    tool.name
                ),
                "fix the schema under `input`",
            ));
            continue;
        }
        if let Err(e) = jsonschema::validator_for(&tool.input_schema) {
            out.items.push(finding(
                spec,
                tool.pos,
                format!(
                    "tool `{}`: the input schema does not compile{}: {}",
                    tool.name,
                    failing_pattern(&tool.input_schema).map_or_else(String::new, |(name, p)| {
                        format!(" (property `{name}`, pattern `{p}`)")
                    }),
                    crate::sqlcheck::lower(&e.to_string())
                ),
                "every call of the tool would fail: simplify the pattern (the validator bounds a pattern's size and backtracking)",
            ));
            continue;
        }
        for (name, default) in &tool.defaults {
            let Some(prop) = tool.input_schema["properties"].get(name) else {
                continue;
            };
            match jsonschema::validator_for(prop) {
                Ok(v) => {
                    if let Some(err) = v.iter_errors(default).next() {
                        out.items.push(finding(
                            spec,
                            tool.pos,
                            format!(
                                "tool `{}`: the default of `{name}` violates its own schema: {err}",
                                tool.name
                            ),
                            "change the default or the constraint so they agree",
                        ));
                    }
                }
                Err(e) => out.items.push(finding(
                    spec,
                    tool.pos,
                    format!(
                        "tool `{}`: property `{name}` is not valid JSON Schema: {e}",
                        tool.name
                    ),
                    "",
                )),
            }
        }
    }
    out
}

/// The first property of `schema` whose `pattern` the validator cannot compile, and the
/// pattern.
fn failing_pattern(schema: &serde_json::Value) -> Option<(&str, &str)> {
    let properties = schema.get("properties")?.as_object()?;
    properties.iter().find_map(|(name, p)| {
        let pattern = p.get("pattern")?.as_str()?;
        jsonschema::validator_for(&serde_json::json!({"pattern": pattern}))
            .is_err()
            .then_some((name.as_str(), pattern))
    })
}

/// The arguments of demo calls, start-up jobs and examples must pass the tool's input schema, as they
/// will when the calls run (with the schema's defaults filled in first, as the runtime does).
fn check_fixed_calls(spec: &Spec, out: &mut Diagnostics) {
    // Calls meant to fail validation, under the runtime's name or this server's.
    let invalid = spec
        .ir
        .error_codes
        .iter()
        .find(|(builtin, _)| builtin == "INVALID_ARGUMENTS")
        .map_or("INVALID_ARGUMENTS", |(_, renamed)| renamed.as_str());
    let meant_to_fail =
        |code: Option<&str>| code.is_some_and(|c| c == "INVALID_ARGUMENTS" || c == invalid);
    let calls = spec
        .ir
        .demo
        .iter()
        .filter(|d| !meant_to_fail(d.error.as_deref()))
        .map(|d| ("demo call", &d.tool, &d.arguments, d.pos))
        .chain(
            spec.ir
                .startup
                .iter()
                .map(|j| ("start-up job", &j.tool, &j.arguments, j.pos)),
        )
        .chain(
            spec.ir
                .examples
                .iter()
                .filter(|e| match &e.expect {
                    crate::ir::Expect::Error(code) => !meant_to_fail(Some(code)),
                    _ => true,
                })
                .map(|e| ("example", &e.tool, &e.arguments, e.pos)),
        );
    for (what, tool_name, arguments, pos) in calls {
        let Some(tool) = spec.ir.tools.iter().find(|t| t.name == tool_name) else {
            continue;
        };
        let Ok(validator) = jsonschema::validator_for(&tool.input_schema) else {
            continue;
        };
        let mut args = arguments.clone();
        if let Some(o) = args.as_object_mut() {
            for (k, v) in &tool.defaults {
                o.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        let errors: Vec<String> = validator
            .iter_errors(&args)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("`{}` {e}", at.trim_start_matches('/').replace('/', "."))
                }
            })
            .collect();
        if !errors.is_empty() {
            out.items.push(finding(
                spec,
                pos,
                format!(
                    "the {what} of `{tool_name}` has arguments its input schema refuses: {}",
                    errors.join("; ")
                ),
                "fix the arguments, or the call fails with INVALID_ARGUMENTS when it runs",
            ));
        }
    }
}

/// Runs the examples of server `name` on its live database (`--db`), through the runtime's
/// engine with every write rolled back: a finding at each example that does not return what
/// it says. Examples of handler tools are left to `mcpspec test`, which has the handlers, and
/// examples that need the sample rows to the scratch run ([`check_examples_on_samples`]).
#[cfg(feature = "live")]
pub fn check_examples(root: &Path, spec_dir: &Path, name: &str, db: &Path) -> Report {
    let mut report = Report::default();
    let Ok(specs) = crate::load_dir(&root.join(spec_dir), spec_dir) else {
        return report;
    };
    let Some(spec) = specs.iter().find(|s| s.name() == name) else {
        return report;
    };
    let def = crate::defs::server_def(spec);
    let Ok(location) = mcpspec::backend::Location::parse(db.as_os_str()) else {
        // The command line refuses such a location before it gets here.
        return report;
    };
    let shown = location.display();
    let engine = match mcpspec::engine::Engine::start_rehearsal(
        def,
        &location,
        mcpspec::engine::Limits::default(),
        Some(Box::new(mcpspec::handler::NoHandlers(def.name))),
    ) {
        Ok(e) => e,
        // Drift is what the statement checks above report, at each statement.
        Err(_) => return report,
    };
    let on = format!("{shown}\n  (its writes were rolled back: the database is as it was)");
    run_examples(spec, def, &engine, &on, false, &mut report);
    report
}

/// Runs every spec's examples on a scratch database made from its schema and sample rows,
/// as `mcpspec test` does, so that a statement that no longer returns what its example says
/// fails `codegen check` itself, at the example. Examples of handler tools are left to
/// `mcpspec test`, which has the handlers.
#[cfg(feature = "live")]
pub fn check_examples_on_samples(root: &Path, spec_dir: &Path) -> Report {
    let mut report = Report::default();
    let Ok(specs) = crate::load_dir(&root.join(spec_dir), spec_dir) else {
        return report;
    };
    for spec in &specs {
        examples_on_samples(spec, &mut report);
    }
    report
}

/// Runs `spec`'s examples on a scratch database with its schema and sample rows.
#[cfg(feature = "live")]
fn examples_on_samples(spec: &crate::Spec, report: &mut Report) {
    let def = crate::defs::server_def(spec);
    if def.examples.is_empty() {
        return;
    }
    let Ok(dir) = tempfile::tempdir() else {
        return;
    };
    let Ok(location) = mcpspec::cli::examples::scratch_database(def, dir.path()) else {
        // The statement checks report a schema that does not load, at the schema.
        return;
    };
    let Ok(engine) = mcpspec::engine::Engine::start_at(
        def,
        location.as_ref(),
        false,
        mcpspec::engine::Limits::default(),
        Some(Box::new(mcpspec::handler::NoHandlers(def.name))),
    ) else {
        return;
    };
    run_examples(
        spec,
        def,
        &engine,
        "a scratch database with the sample rows",
        true,
        report,
    );
}

/// What `check --spec FILE` does for one spec file outside a project: it compiles, its input
/// schemas and defaults are valid, its statements prepare (against `live` too, read-only), and
/// its examples hold on the sample rows. A lone file has no contract snapshot or docs to
/// compare; `codegen check` in a project adds those.
#[cfg(feature = "live")]
pub fn check_file(path: &Path, live: Option<&Location>) -> Report {
    let mut report = Report::default();
    let spec = match crate::read_spec(path) {
        Err(e) => {
            report.extend(
                Kind::Spec,
                &Diagnostics {
                    items: vec![Diagnostic {
                        file: path.to_path_buf(),
                        pos: Pos { line: 1, column: 1 },
                        message: format!("cannot read the spec: {}", e.to_string().to_lowercase()),
                        label: None,
                        help: Some("give the path of a spec file".into()),
                    }],
                },
            );
            return report;
        }
        Ok(text) => match crate::compile(path, &text) {
            Ok(spec) => spec,
            Err(d) => {
                report.extend(Kind::Spec, &d);
                return report;
            }
        },
    };
    report.specs = 1;
    report.tools = spec.ir.tools.len();
    report.extend(Kind::Sql, &check_schemas(&spec));
    report.extend(Kind::Sql, &check_sql(&spec));
    report.extend(Kind::Sql, &crate::migcheck::check_migrations(&spec));
    if let Some(location) = live {
        report.extend(Kind::Sql, &live_findings(&spec, location));
    }
    if report.is_ok() {
        examples_on_samples(&spec, &mut report);
    }
    budget_warnings(&spec, &mut report);
    report
}

/// A warning at `server.token_budget` for each list a client may receive (every tool, each
/// toolset) whose `tools/list` costs more than it, as `mcpspec tokens` measures them.
fn budget_warnings(spec: &crate::Spec, report: &mut Report) {
    let Some((budget, pos)) = spec.ir.token_budget else {
        return;
    };
    let def = crate::defs::server_def(spec);
    for (set, cost) in mcpspec::cli::list_costs(def) {
        if cost.tokens as u64 <= budget {
            continue;
        }
        let list = set.map_or_else(
            || format!("the tool list of `{}`", spec.ir.name),
            |s| format!("toolset `{s}`"),
        );
        report.warnings.push(drift::Finding::from_diagnostic(
            Kind::Budget,
            &Diagnostic {
                file: PathBuf::from(&spec.ir.file),
                pos,
                message: format!(
                    "{list} costs about {} tokens ({} tools, {} bytes of `tools/list`), past the budget of {budget}",
                    cost.tokens, cost.tools, cost.bytes
                ),
                label: Some("the budget".into()),
                help: Some(
                    "shorten descriptions and schemas, offer fewer tools with `toolsets:` and `serve --toolset`, or raise the budget; `mcpspec tokens` says what each tool costs".into(),
                ),
            },
        ));
    }
}

/// Runs `spec`'s examples on `engine` (on `on`, as findings say it), those that need the
/// sample rows only when `samples`: a finding at each one that does not hold.
#[cfg(feature = "live")]
fn run_examples(
    spec: &crate::Spec,
    def: &'static mcpspec::def::ServerDef,
    engine: &mcpspec::engine::Engine,
    on: &str,
    samples: bool,
    report: &mut Report,
) {
    for (example, ir) in def.examples.iter().zip(&spec.ir.examples) {
        let handler = def
            .tool(example.tool)
            .is_some_and(|t| matches!(t.binding, mcpspec::def::BindingDef::Handler));
        if handler || (example.sample_rows && !samples) {
            continue;
        }
        if let Some(why) = engine.example_failure(example) {
            let (on, note) = on.split_once('\n').unwrap_or((on, ""));
            report.findings.push(drift::Finding::from_diagnostic(
                Kind::Example,
                &Diagnostic {
                    file: PathBuf::from(spec.file()),
                    pos: ir.pos,
                    message: format!("the example of `{}` does not hold on {on}", example.tool),
                    label: Some("this example".into()),
                    help: Some(format!(
                        "{}{}{note}",
                        why.trim_start().replace("\n", "\n  "),
                        if note.is_empty() { "" } else { "\n" }
                    )),
                },
            ));
        }
    }
}
