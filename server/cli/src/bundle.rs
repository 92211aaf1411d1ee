//! `mcpspec bundle SERVER | --spec FILE`: an MCP Bundle (`.mcpb`, a zip with `manifest.json`,
//! the binary and the spec) that MCP hosts such as Claude Desktop install with one click, and a
//! `server.json` that describes it for the MCP registry.
//!
//! The manifest lists the server's tools and prompts from the one definition the engine serves,
//! asks the user for the database (`user_config.database`, defaulting to the spec's path for
//! the platform) and starts `server/<binary> serve ...` with it. A spec file is served from its
//! YAML, so the bundled binary is this one; a compiled server is bundled with the binary that
//! has it compiled in.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use clap::{Arg, ArgMatches, Command};
use mcpspec::def::{MessageBodyDef, ServerDef};
use serde_json::{Value, json};
use sha2::Digest as _;

/// The MCP Bundle manifest version written, as `mcpb validate` 2.x checks it.
const MANIFEST_VERSION: &str = "0.3";

/// The registry's `server.json` schema the file says it follows.
const SERVER_SCHEMA: &str =
    "https://static.modelcontextprotocol.io/schemas/2025-09-29/server.schema.json";

/// The `bundle` subcommand.
pub fn command() -> mcpspec::cli::Extra {
    let command = Command::new("bundle")
        .about("Write an MCP Bundle (.mcpb) of a server and a server.json for the MCP registry")
        .arg(Arg::new("server").value_name("SERVER").help("A compiled server's name, as in `list`"))
        .arg(
            Arg::new("spec")
                .long("spec")
                .value_name("FILE")
                .conflicts_with("server")
                .required_unless_present("server")
                .value_parser(clap::value_parser!(PathBuf))
                .help("A spec file, bundled with this binary, which serves it from its YAML"),
        )
        .arg(
            Arg::new("out")
                .long("out")
                .value_name("DIR")
                .default_value(".")
                .value_parser(clap::value_parser!(PathBuf))
                .help("Where the .mcpb and server.json go"),
        )
        .arg(
            Arg::new("registry-name")
                .long("registry-name")
                .value_name("NAME")
                .help("The server's name in the MCP registry, e.g. io.github.you/notes (default: local.mcpspec/SERVER)"),
        )
        .arg(
            Arg::new("url")
                .long("url")
                .value_name("URL")
                .help("Where the .mcpb will be downloaded from (default: its file name; set it before publishing)"),
        )
        .arg(
            Arg::new("author")
                .long("author")
                .value_name("NAME")
                .help("The bundle's author (default: the server's title)"),
        );
    mcpspec::cli::Extra {
        command,
        run,
        serves: false,
    }
}

/// What goes into a bundle: the definition, and the spec file when it is served from YAML.
struct Source {
    def: &'static ServerDef,
    spec: Option<(PathBuf, String)>,
    /// The files the spec names beside it (its migrations, skills and apps' HTML), by path
    /// relative to the spec's directory, with their bytes.
    files: Vec<(PathBuf, Vec<u8>)>,
}

/// The files the spec file `spec` reads beside it, which its bundle carries at the same
/// places beside the bundled spec; a place outside the spec's directory is refused.
fn beside(spec: &Path, text: &str) -> Result<Vec<(PathBuf, Vec<u8>)>> {
    let compiled = codegen::compile(spec, text).map_err(|d| anyhow::anyhow!("{d}"))?;
    // The compiler has already refused a skill directory or an app's file outside the spec's.
    let mut out = compiled.skill_files();
    out.extend(
        compiled
            .app_files()
            .into_iter()
            .map(|(rel, html)| (rel, html.as_bytes().to_vec())),
    );
    for (rel, text) in compiled.migration_files() {
        let inside = rel
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !inside {
            bail!(
                "{}: a bundle carries migrations under the spec's directory, and `database.migrations` names {}",
                spec.display(),
                rel.parent().unwrap_or(&rel).display()
            );
        }
        out.push((rel, text.as_bytes().to_vec()));
    }
    Ok(out)
}

fn run(m: &ArgMatches, mut servers: Vec<mcpspec::Server>) -> Result<ExitCode> {
    let source = match (m.get_one::<PathBuf>("spec"), m.get_one::<String>("server")) {
        (Some(spec), _) => {
            // Resolved and refused as `serve --spec` resolves and refuses it.
            let server = mcpspec::cli::from_spec(&mut servers, spec, codegen::live::COMPILE)?;
            mcpspec::cli::servable(&server, spec)?;
            let text = codegen::read_spec(spec)
                .with_context(|| format!("cannot read {}", spec.display()))?;
            let files = beside(spec, &text)?;
            Source {
                def: server.def(),
                spec: Some((spec.clone(), text)),
                files,
            }
        }
        (None, Some(name)) => match servers.iter().find(|s| s.def().name == name) {
            Some(s) => Source {
                def: s.def(),
                spec: None,
                files: Vec::new(),
            },
            None => bail!("no compiled server named `{name}`; bundle a spec file with --spec FILE"),
        },
        (None, None) => bail!("name a compiled server or give --spec FILE"),
    };
    let out = m.get_one::<PathBuf>("out").expect("clap has a default");
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let exe = std::env::current_exe().context("locating this binary")?;
    let layout = Layout::new(&exe, source.def.name);
    let author = m
        .get_one::<String>("author")
        .cloned()
        .unwrap_or_else(|| source.def.title.unwrap_or(source.def.name).to_string());
    let manifest = manifest(source.def, &layout, source.spec.is_some(), &author);
    let file = out.join(format!("{}-{}.mcpb", source.def.name, source.def.version));
    let sha = write_bundle(&file, &manifest, &exe, &layout, &source)?;
    let name = m
        .get_one::<String>("registry-name")
        .cloned()
        .unwrap_or_else(|| format!("local.mcpspec/{}", source.def.name));
    let url = m.get_one::<String>("url").cloned().unwrap_or_else(|| {
        file.file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    let registry = server_json(source.def, &name, &url, &sha);
    let json_path = out.join("server.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&registry)? + "\n")
        .with_context(|| format!("writing {}", json_path.display()))?;
    println!(
        "wrote {} ({} tools, {} prompts)",
        file.display(),
        source.def.tools.len(),
        source.def.prompts.len()
    );
    println!("wrote {} (sha256 {sha})", json_path.display());
    Ok(ExitCode::SUCCESS)
}

/// Where things are inside the bundle.
struct Layout {
    /// The binary, e.g. `server/mcpspec`.
    binary: String,
    /// The spec file, e.g. `server/notes.yaml`, when one is bundled.
    spec: String,
}

impl Layout {
    fn new(exe: &Path, server: &str) -> Layout {
        let file = exe
            .file_name()
            .map_or_else(|| "mcpspec".into(), |f| f.to_string_lossy().into_owned());
        Layout {
            binary: format!("server/{file}"),
            spec: format!("server/{server}.yaml"),
        }
    }
}

/// The bundle's `manifest.json` (pure).
fn manifest(def: &ServerDef, layout: &Layout, from_spec: bool, author: &str) -> Value {
    let mut args: Vec<String> = vec!["serve".into()];
    if from_spec {
        args.extend(["--spec".into(), format!("${{__dirname}}/{}", layout.spec)]);
    } else {
        args.push(def.name.into());
    }
    let mut user_config = serde_json::Map::new();
    if let Some(db) = &def.database {
        args.extend(["--db".into(), "${user_config.database}".into()]);
        let mut field = json!({
            "type": "string",
            "title": "Database",
            "description": "The SQLite file to serve, or a postgres:// or mysql:// URL",
            "required": true,
        });
        if let Some(default) = default_path(db) {
            field["default"] = json!(default.replacen('~', "${HOME}", 1));
        }
        user_config.insert("database".into(), field);
    }
    let description = def
        .instructions
        .or(def.title)
        .unwrap_or("An MCP server made with mcpspec")
        .to_string();
    let mut m = json!({
        "manifest_version": MANIFEST_VERSION,
        "name": def.name,
        "display_name": def.title.unwrap_or(def.name),
        "version": def.version,
        "description": description,
        "author": {"name": author},
        "server": {
            "type": "binary",
            "entry_point": layout.binary,
            "mcp_config": {
                "command": format!("${{__dirname}}/{}", layout.binary),
                "args": args,
                "env": {"MCPSPEC_LOG": "warn"},
            },
        },
        "tools": def.tools.iter().map(|t| json!({"name": t.name, "description": t.description})).collect::<Vec<_>>(),
        "prompts": def.prompts.iter().map(prompt).collect::<Vec<_>>(),
        "compatibility": {"platforms": [platform()]},
    });
    if !user_config.is_empty() {
        m["user_config"] = Value::Object(user_config);
    }
    m
}

/// A prompt as a manifest lists it: its text is its messages' text.
fn prompt(p: &mcpspec::def::PromptDef) -> Value {
    let text: Vec<&str> = p
        .messages
        .iter()
        .filter_map(|m| match m.body {
            MessageBodyDef::Text(t) => Some(t),
            _ => None,
        })
        .collect();
    let mut v = json!({
        "name": p.name,
        "arguments": p.arguments.iter().map(|a| a.name).collect::<Vec<_>>(),
        "text": text.join("\n\n"),
    });
    if let Some(d) = p.description {
        v["description"] = json!(d);
    }
    v
}

/// The spec's default database path on this platform.
fn default_path(db: &mcpspec::def::DatabaseDef) -> Option<&'static str> {
    match platform() {
        "darwin" => db.default_macos,
        "win32" => db.default_windows,
        _ => db.default_linux,
    }
}

/// This platform as the manifest names it; the bundle holds this platform's binary.
fn platform() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        "windows" => "win32",
        _ => "linux",
    }
}

/// The registry's `server.json` for the bundle at `url` whose SHA-256 is `sha` (pure).
fn server_json(def: &ServerDef, name: &str, url: &str, sha: &str) -> Value {
    // The registry allows at most 100 characters of description.
    let description: String = def
        .title
        .or(def.instructions)
        .unwrap_or(def.name)
        .chars()
        .take(100)
        .collect();
    json!({
        "$schema": SERVER_SCHEMA,
        "name": name,
        "description": description,
        "version": def.version,
        "packages": [{
            "registryType": "mcpb",
            "identifier": url,
            "version": def.version,
            "fileSha256": sha,
            "transport": {"type": "stdio"},
        }],
    })
}

/// Writes the zip at `file` and returns its SHA-256 in hexadecimal.
fn write_bundle(
    file: &Path,
    manifest: &Value,
    exe: &Path,
    layout: &Layout,
    source: &Source,
) -> Result<String> {
    use zip::write::SimpleFileOptions;
    let out =
        std::fs::File::create(file).with_context(|| format!("creating {}", file.display()))?;
    let mut zip = zip::ZipWriter::new(out);
    let text = SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .unix_permissions(0o644);
    zip.start_file("manifest.json", text)?;
    zip.write_all(serde_json::to_string_pretty(manifest)?.as_bytes())?;
    if let Some((_, spec)) = &source.spec {
        zip.start_file(layout.spec.as_str(), text)?;
        zip.write_all(spec.as_bytes())?;
    }
    for (rel, body) in &source.files {
        let name = format!("server/{}", rel.to_string_lossy().replace('\\', "/"));
        zip.start_file(name, text)?;
        zip.write_all(body)?;
    }
    // Large binaries are written in 64-bit form; the permissions keep it executable.
    let binary = text.unix_permissions(0o755).large_file(true);
    zip.start_file(layout.binary.as_str(), binary)?;
    let mut exe_file =
        std::fs::File::open(exe).with_context(|| format!("reading {}", exe.display()))?;
    std::io::copy(&mut exe_file, &mut zip)?;
    zip.finish()?;
    let bytes = std::fs::read(file)?;
    Ok(sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}
