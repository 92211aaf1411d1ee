//! The Skills extension (SEP-2640) as a client meets it: the knowledge server's skill over
//! stdio and Streamable HTTP in both protocol eras (capability, `skills/list`, `skills/get`,
//! `resources/read` of every file against its digest and the file in `spec/`, directory reads,
//! the SEP's errors), the lessons server's skill, and `mcpspec skills` writing a skill that
//! a spec's `skills:` accepts and a server then serves.

use std::path::Path;
use std::process::Command;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::common::{EXE, Transport, sample_db, start, start_over};
use crate::content::ok;

/// The knowledge seed's skill, on disk.
const KNOWLEDGE_SKILL: &str = "../spec/skills/knowledge-base";

/// A request's JSON-RPC error: in the response, or (over HTTP, for params the server refuses
/// before any session work) in the body of a 400.
fn error(s: &mut crate::common::Session, method: &str, params: Value) -> Value {
    let r = match s.client.request(method, params) {
        Ok(r) => r,
        Err(mcpspec_testkit::ClientError::Status { status: 400, body }) => {
            serde_json::from_str(&body).expect("a JSON-RPC error body")
        }
        Err(e) => panic!("{method}: {e:?}"),
    };
    assert!(r.get("error").is_some(), "{method} should fail: {r}");
    r["error"].clone()
}

/// The bytes of a `resources/read` result's one content.
fn bytes(result: &Value) -> Vec<u8> {
    let c = &result["contents"][0];
    match (c["text"].as_str(), c["blob"].as_str()) {
        (Some(text), _) => text.as_bytes().to_vec(),
        (_, Some(blob)) => base64::engine::general_purpose::STANDARD
            .decode(blob)
            .expect("base64"),
        _ => panic!("no text or blob: {result}"),
    }
}

/// `SKILL.md`'s front matter as JSON, read from the file itself.
fn front_matter(dir: &str) -> Value {
    let text = std::fs::read_to_string(Path::new(dir).join("SKILL.md")).unwrap();
    let yaml = text
        .strip_prefix("---\n")
        .and_then(|t| t.split_once("\n---\n"))
        .expect("front matter")
        .0;
    serde_saphyr::from_str(yaml).expect("YAML front matter")
}

#[test]
fn the_knowledge_skill_is_listed_got_and_read_in_both_eras() {
    for transport in [Transport::Stdio, Transport::Http, Transport::HttpPerRequest] {
        let mut s = start_over(transport, sample_db("knowledge"), "knowledge", &[]);
        let list = ok(&mut s, "skills/list", json!({}));
        let skills = list["skills"].as_array().expect("skills");
        assert_eq!(skills.len(), 1, "{list}");
        let skill = &skills[0];
        assert_eq!(skill["uri"], "skill://knowledge-base/SKILL.md");
        assert_eq!(skill["frontmatter"], front_matter(KNOWLEDGE_SKILL));
        // The cache hints are 2026-07-28's; the older era has no such fields.
        let era_2026 = matches!(transport, Transport::HttpPerRequest);
        assert_eq!(list["ttlMs"].is_u64(), era_2026, "{transport:?} {list}");
        assert_eq!(list["cacheScope"].is_string(), era_2026, "{list}");
        let files = skill["resources"].as_array().expect("a manifest");
        let uris: Vec<&str> = files.iter().filter_map(|f| f["uri"].as_str()).collect();
        assert_eq!(
            uris,
            [
                "skill://knowledge-base/SKILL.md",
                "skill://knowledge-base/references/search.md"
            ]
        );
        for f in files {
            let uri = f["uri"].as_str().unwrap();
            let read = ok(&mut s, "resources/read", json!({"uri": uri}));
            let got = bytes(&read);
            let on_disk = std::fs::read(
                Path::new(KNOWLEDGE_SKILL)
                    .join(uri.strip_prefix("skill://knowledge-base/").unwrap()),
            )
            .unwrap();
            assert_eq!(got, on_disk, "{uri}");
            let entry = rmcp::model::SkillResource::new(
                uri,
                f["digest"].as_str().unwrap(),
                f["size"].as_u64().unwrap(),
            );
            entry.verify(&got).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(read["contents"][0]["mimeType"], "text/markdown", "{read}");
        }
        let got = ok(
            &mut s,
            "skills/get",
            json!({"uri": "skill://knowledge-base/SKILL.md"}),
        );
        assert_eq!(&got["skill"], skill);
        directories_and_errors(&mut s);
        let listed = ok(&mut s, "resources/list", json!({}));
        assert!(
            listed["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["uri"] == "skill://knowledge-base/SKILL.md"
                    && r["mimeType"] == "text/markdown"),
            "{listed}"
        );
        s.finish();
    }
}

/// `resources/directory/read` a level at a time, and the SEP's `-32602` for what is not
/// served.
fn directories_and_errors(s: &mut crate::common::Session) {
    let root = ok(
        s,
        "resources/directory/read",
        json!({"uri": "skill://knowledge-base"}),
    );
    let children: Vec<(&str, &str)> = root["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["uri"].as_str().unwrap(), r["mimeType"].as_str().unwrap()))
        .collect();
    assert_eq!(
        children,
        [
            ("skill://knowledge-base/SKILL.md", "text/markdown"),
            ("skill://knowledge-base/references", "inode/directory")
        ]
    );
    let refs = ok(
        s,
        "resources/directory/read",
        json!({"uri": "skill://knowledge-base/references"}),
    );
    assert_eq!(
        refs["resources"][0]["uri"],
        "skill://knowledge-base/references/search.md"
    );
    for (method, uri, says) in [
        (
            "skills/get",
            "skill://nothing/SKILL.md",
            "no skill is served at",
        ),
        (
            "skills/get",
            "skill://knowledge-base/references/search.md",
            "SKILL.md",
        ),
        (
            "resources/read",
            "skill://knowledge-base/nope.md",
            "no skill file",
        ),
        (
            "resources/directory/read",
            "skill://knowledge-base/SKILL.md",
            "is not a directory resource",
        ),
        (
            "resources/directory/read",
            "skill://nothing",
            "no directory",
        ),
    ] {
        let e = error(s, method, json!({"uri": uri}));
        assert_eq!(e["code"], -32602, "{method} {uri}: {e}");
        assert!(
            e["message"].as_str().unwrap().contains(says),
            "{method} {uri}: {e}"
        );
    }
    // Params that do not parse: invalid params naming the field, not an unknown method.
    let e = error(s, "skills/get", json!({"uri": 7}));
    assert_eq!(e["code"], -32602, "{e}");
    assert_eq!(e["data"]["field"], "uri", "{e}");
}

/// The capability a client sees at initialize: the extension with directory reads, beside
/// the resources capability its files are read through. A server without skills has none.
#[test]
fn the_extension_is_declared_only_by_servers_with_skills() {
    for (server, declared) in [("knowledge", true), ("studio", false)] {
        let db = sample_db(server);
        let mut c = mcpspec_testkit::StdioClient::spawn(
            Command::new(EXE)
                .args(["serve", server, "--db"])
                .arg(&db.path)
                .env("MCPSPEC_STARTUP_JOBS", "off"),
        )
        .expect("spawn");
        let init = c.initialize().expect("initialize");
        let capabilities = &init["result"]["capabilities"];
        let skills = &capabilities["extensions"]["io.modelcontextprotocol/skills"];
        if declared {
            assert_eq!(skills, &json!({"directoryRead": true}), "{init}");
            assert!(capabilities["resources"].is_object(), "{init}");
        } else {
            assert!(skills.is_null(), "{init}");
            let e = c.request("skills/list", json!({})).expect("skills/list");
            assert_eq!(e["error"]["code"], -32601, "{e}");
        }
        let status = c.finish(std::time::Duration::from_secs(10));
        assert!(status.is_some_and(|s| s.success()), "{server}: {status:?}");
    }
}

#[test]
fn the_lessons_server_ships_its_skill() {
    let mut s = start("lessons", &[]);
    let list = ok(&mut s, "skills/list", json!({}));
    assert_eq!(
        list["skills"][0]["frontmatter"],
        front_matter("../spec/skills/lessons-learned")
    );
    let read = ok(
        &mut s,
        "resources/read",
        json!({"uri": "skill://lessons-learned/SKILL.md"}),
    );
    assert!(
        String::from_utf8(bytes(&read))
            .unwrap()
            .contains("lessons_add"),
        "{read}"
    );
    s.finish();
}

/// `mcpspec skills studio --out DIR` writes a skill from the spec's tools that a spec's
/// `skills:` accepts (its compiler checks it) and a server then serves; a second run without
/// `--force` keeps the (possibly edited) file.
#[test]
fn mcpspec_skills_writes_a_skill_a_spec_accepts_and_a_server_serves() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(EXE)
        .args(["skills", "studio", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = dir.path().join("studio-tools/SKILL.md");
    let text = std::fs::read_to_string(&file).unwrap();
    for tool in server::server("studio").unwrap().tools {
        assert!(text.contains(&format!("### `{}`", tool.name)), "{text}");
    }
    assert!(text.contains("Examples:"), "{text}");
    let again = Command::new(EXE)
        .args(["skills", "studio", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
    // A spec beside it that serves it.
    let spec = dir.path().join("parts.yaml");
    let parts = std::fs::read_to_string("../tests/dist/parts.yaml").unwrap();
    std::fs::write(&spec, parts + "\nskills:\n  - studio-tools\n").unwrap();
    let db = dir.path().join("parts.db");
    // Compiling the spec reads the skill and checks it as `check` does.
    let init = Command::new(EXE)
        .args(["init", "--spec"])
        .arg(&spec)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    let mut c = mcpspec_testkit::StdioClient::spawn(
        Command::new(EXE)
            .args(["serve", "--spec"])
            .arg(&spec)
            .arg("--db")
            .arg(&db),
    )
    .expect("spawn");
    c.initialize().expect("initialize");
    let list = c.request("skills/list", json!({})).expect("skills/list");
    assert_eq!(
        list["result"]["skills"][0]["uri"], "skill://studio-tools/SKILL.md",
        "{list}"
    );
    let read = c
        .request(
            "resources/read",
            json!({"uri": "skill://studio-tools/SKILL.md"}),
        )
        .expect("read");
    assert_eq!(read["result"]["contents"][0]["text"], text, "{read}");
    let status = c.finish(std::time::Duration::from_secs(10));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
}
