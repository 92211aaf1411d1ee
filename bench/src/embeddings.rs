//! Search by meaning, measured (issue 58), every figure beside what it is compared with in
//! the same run:
//!
//! - the static model (WordLlama's 256 dimensions) embedding texts in this process, against
//!   the `wordllama` Python package's own `embed()` on the same texts;
//! - a server's cold start with the model and without: to its `initialize` answer, and to the
//!   answer of its first `kb_add` (which waits for the model);
//! - `kb_add` with the static model and without, sequential stdio calls;
//! - `kb_search` at `--rows` entries (semantic, hybrid, keyword) on SQLite and, given
//!   `--pg`, PostgreSQL with pgvector, each beside its floor: the same statement with the same
//!   vector through the engine's driver in this process;
//! - retrieval quality: recall@5 of each mode on `bench/quality/knowledge.json`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use mcpspec::__internal::StaticModel;
use mcpspec::client::StdioClient;
use serde_json::{Value, json};

use crate::postgres::{stdio, time};
use crate::stats::Summary;

/// What the command measures with.
pub struct Setup {
    pub mcpspec: PathBuf,
    pub model: PathBuf,
    pub python: Option<PathBuf>,
    pub pg: Option<String>,
    pub rows: usize,
    pub calls: usize,
}

/// The model id the server stores for the model in `dir`.
fn model_id(dir: &Path) -> String {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("static:{name}@256")
}

/// Runs every measurement; the report as Markdown.
pub fn run(setup: &Setup) -> Result<String> {
    let mut md = String::new();
    writeln!(md, "# Search by meaning: measured\n")?;
    writeln!(
        md,
        "`bench/embeddings` ({} entries, {} calls per path; one machine, one run). Every ratio is to a figure measured in the same run.\n",
        setup.rows, setup.calls
    )?;
    model_speed(setup, &mut md)?;
    cold_start(setup, &mut md)?;
    adds(setup, &mut md)?;
    search(setup, &mut md)?;
    quality(setup, &mut md)?;
    Ok(md)
}

/// A deterministic pseudo-random number generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// The words texts are made of: the quality set's, so that they are English.
fn vocabulary() -> Result<Vec<String>> {
    let set: Value = serde_json::from_str(
        &std::fs::read_to_string(quality_file()).context("bench/quality/knowledge.json")?,
    )?;
    let mut words: Vec<String> = set["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["content"].as_str())
        .flat_map(|c| c.split(|ch: char| !ch.is_alphanumeric()))
        .filter(|w| w.len() > 2)
        .map(str::to_lowercase)
        .collect();
    words.sort();
    words.dedup();
    Ok(words)
}

/// `n` texts of about `chars` characters each, from `words`, each different.
fn texts(words: &[String], n: usize, chars: usize, seed: u64) -> Vec<String> {
    let mut rng = Rng(seed | 1);
    (0..n)
        .map(|i| {
            let mut t = format!("entry {i}");
            while t.len() < chars {
                t.push(' ');
                t.push_str(&words[(rng.next() % words.len() as u64) as usize]);
            }
            let end = t.char_indices().nth(chars).map_or(t.len(), |(at, _)| at);
            t.truncate(end);
            t
        })
        .collect()
}

fn quality_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("quality/knowledge.json")
}

/// The static model against the Python package, on short texts and 10,000-character ones.
fn model_speed(setup: &Setup, md: &mut String) -> Result<()> {
    let words = vocabulary()?;
    writeln!(
        md,
        "## The static model against the `wordllama` Python package\n"
    )?;
    writeln!(
        md,
        "WordLlama's `l2_supercat` at 256 dimensions, the same texts (each different, each with a number of its own) on one thread. mcpspec: `StaticModel::embed` per text, on a freshly loaded model (its piece cache empty: every word is new to it), and on a model that embedded 10,000 other texts of the same words first (a server in use); Python: `WordLlama.embed(texts)` on the whole list (its batches of 64; its tokenizer spreads a batch over the cores), best of three.\n"
    )?;
    writeln!(
        md,
        "| texts | mcpspec, new model (µs/text) | mcpspec, in use (µs/text) | Python (µs/text) | Python / new | Python / in use |\n|---|---|---|---|---|---|"
    )?;
    for (label, n, chars) in [
        ("10,000 short (about 60 characters)", 10_000, 60),
        ("50 of 10,000 characters", 50, 10_000),
    ] {
        let set = texts(&words, n, chars, 58 + chars as u64);
        let other = texts(&words, 10_000, chars.min(200), 7 + chars as u64);
        let pass = |model: &StaticModel, set: &[String]| {
            let t = Instant::now();
            for s in set {
                std::hint::black_box(model.embed(s));
            }
            t.elapsed().as_secs_f64() * 1e6 / set.len() as f64
        };
        let fresh = StaticModel::open(&setup.model).map_err(anyhow::Error::msg)?;
        let new = pass(&fresh, &set);
        let used = StaticModel::open(&setup.model).map_err(anyhow::Error::msg)?;
        pass(&used, &other);
        let in_use = pass(&used, &set);
        let (py, a, b) = match &setup.python {
            Some(py) => {
                let p = python_speed(py, &set)?;
                (
                    format!("{p:.1}"),
                    format!("{:.1}x", p / new),
                    format!("{:.1}x", p / in_use),
                )
            }
            None => ("not measured".into(), "-".into(), "-".into()),
        };
        writeln!(
            md,
            "| {label} | {new:.1} | {in_use:.1} | {py} | {a} | {b} |"
        )?;
    }
    writeln!(md)?;
    Ok(())
}

/// The Python package's µs per text on `set`, best of three.
fn python_speed(python: &Path, set: &[String]) -> Result<f64> {
    let file = tempfile::NamedTempFile::new()?;
    std::fs::write(file.path(), serde_json::to_vec(set)?)?;
    let script = r#"
import json, shutil, sys, tempfile, time
from pathlib import Path
import wordllama
from wordllama import WordLlama
cache = Path(tempfile.mkdtemp())
(cache / "tokenizers").mkdir()
shutil.copy(Path(wordllama.__file__).parent / "tokenizers" / "l2_supercat_tokenizer_config.json", cache / "tokenizers")
model = WordLlama.load("l2_supercat", dim=256, cache_dir=cache, disable_download=True)
texts = json.load(open(sys.argv[1]))
best = None
for _ in range(3):
    t = time.perf_counter()
    model.embed(texts)
    took = (time.perf_counter() - t) * 1e6 / len(texts)
    best = took if best is None else min(best, took)
print(best)
"#;
    let out = Command::new(python)
        .args(["-c", script])
        .arg(file.path())
        .output()
        .context("run the wordllama package")?;
    ensure!(
        out.status.success(),
        "wordllama: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).trim().parse()?)
}

/// A knowledge database with its sample rows, made by `mcpspec init`.
fn sample(exe: &Path, dir: &Path, name: &str) -> Result<PathBuf> {
    let db = dir.join(name);
    let out = Command::new(exe)
        .args(["init", "knowledge", "--sample", "--db"])
        .arg(&db)
        .output()?;
    ensure!(
        out.status.success(),
        "init: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(db)
}

/// The knowledge server over stdio on `db`, with the model when `model` is given.
fn server(exe: &Path, db: &str, model: Option<&Path>) -> Command {
    let mut c = Command::new(exe);
    c.args(["serve", "knowledge", "--db", db])
        .env("MCPSPEC_STARTUP_JOBS", "off")
        .env_remove("KNOWLEDGE_EMBEDDINGS");
    if let Some(m) = model {
        c.env("KNOWLEDGE_EMBEDDINGS", format!("static:{}", m.display()));
    }
    c
}

/// Cold starts with the model and without, alternating: to `initialize` and to the first
/// `kb_add`'s answer.
fn cold_start(setup: &Setup, md: &mut String) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let db = sample(&setup.mcpspec, dir.path(), "cold.db")?;
    let db = db.to_str().context("utf-8")?;
    let (mut init, mut first) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    for round in 0..30 {
        for (k, model) in [None, Some(setup.model.as_path())].into_iter().enumerate() {
            let started = Instant::now();
            let mut c =
                StdioClient::spawn(server(&setup.mcpspec, db, model).stderr(Stdio::null()))?;
            c.initialize()?;
            let initialized = started.elapsed();
            let r = c.call_tool(
                "kb_add",
                json!({"content": format!("cold start {round} {k}"), "role": "dev"}),
            )?;
            ensure!(r["result"]["isError"] == json!(false), "{r}");
            let added = started.elapsed();
            drop(c);
            if round >= 5 {
                init[k].push(initialized.as_secs_f64() * 1e3);
                first[k].push(added.as_secs_f64() * 1e3);
            }
        }
    }
    let m = |v: &[f64]| Summary::of(v).median;
    writeln!(md, "## Cold start\n")?;
    writeln!(
        md,
        "A fresh `serve knowledge` process over stdio, 25 starts each (after 5 discarded), alternating. The model is read on a thread of its own: `initialize` does not wait for it, the first call that embeds does.\n"
    )?;
    writeln!(
        md,
        "| to the answer of | without a provider (ms) | with the static model (ms) | ratio |\n|---|---|---|---|"
    )?;
    for (label, v) in [("`initialize`", &init), ("the first `kb_add`", &first)] {
        let (a, b) = (m(&v[0]), m(&v[1]));
        writeln!(md, "| {label} | {a:.1} | {b:.1} | {:.2}x |", b / a)?;
    }
    writeln!(md)?;
    Ok(())
}

/// `kb_add` with the static model and without.
fn adds(setup: &Setup, md: &mut String) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let words = vocabulary()?;
    let set = texts(&words, setup.calls + setup.calls / 10, 200, 7);
    let mut rows = Vec::new();
    for (label, model) in [
        ("without a provider", None),
        ("with the static model", Some(setup.model.as_path())),
    ] {
        let db = sample(
            &setup.mcpspec,
            dir.path(),
            &format!("add-{}.db", rows.len()),
        )?;
        let mut c = stdio(&mut server(
            &setup.mcpspec,
            db.to_str().context("utf-8")?,
            model,
        ))?;
        let mut i = 0;
        let s = time(setup.calls, || {
            let r = c.call_tool("kb_add", json!({"content": set[i], "role": "dev"}))?;
            i += 1;
            ensure!(r["result"]["isError"] == json!(false), "{r}");
            Ok(())
        })?;
        rows.push((label, s));
    }
    writeln!(md, "## `kb_add`\n")?;
    writeln!(
        md,
        "Sequential stdio calls (request, blocking read, next request), each a different 200-character text, on SQLite.\n"
    )?;
    writeln!(md, "| server | median (µs) | p99 (µs) |\n|---|---|---|")?;
    for (label, s) in &rows {
        writeln!(md, "| {label} | {:.1} | {:.1} |", s.median, s.p99)?;
    }
    writeln!(
        md,
        "\nWith the model / without: {:.2}x (median).\n",
        rows[1].1.median / rows[0].1.median
    )?;
    Ok(())
}

/// The questions searched for: the quality set's, cycled.
fn questions() -> Result<Vec<String>> {
    let set: Value = serde_json::from_str(&std::fs::read_to_string(quality_file())?)?;
    Ok(set["queries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|q| q["query"].as_str().map(str::to_string))
        .collect())
}

/// kb_search at `rows` entries on SQLite and PostgreSQL, against the driver floors.
fn search(setup: &Setup, md: &mut String) -> Result<()> {
    let model = StaticModel::open(&setup.model).map_err(anyhow::Error::msg)?;
    let id = model_id(&setup.model);
    let words = vocabulary()?;
    let contents = texts(&words, setup.rows, 160, 99);
    let questions = questions()?;
    let vectors: Vec<Vec<f32>> = questions.iter().map(|q| model.embed(q).to_vec()).collect();
    writeln!(md, "## `kb_search` at {} entries\n", setup.rows)?;
    writeln!(
        md,
        "Sequential stdio calls, limit 10, the quality set's questions in turn. The floor is kb_search's own statement for the engine, prepared once and run through the driver in this process with the question's vector already made: what the database alone costs. Keyword search looks for the question's words (every one required); semantic for its meaning; hybrid for both.\n"
    )?;
    writeln!(
        md,
        "| engine | path | median (ms) | p99 (ms) | / floor | / keyword |\n|---|---|---|---|---|---|"
    )?;
    let dir = tempfile::tempdir()?;
    let db = sample(&setup.mcpspec, dir.path(), "search.db")?;
    fill_sqlite(&db, &model, &contents, &id)?;
    let sqlite_floor = floor_sqlite(&db, &questions, &vectors, &id, setup.calls)?;
    measure(
        setup,
        "SQLite",
        db.to_str().context("utf-8")?,
        &questions,
        sqlite_floor,
        md,
    )?;
    if let Some(url) = &setup.pg {
        crate::engines::init_at(&setup.mcpspec, url)?;
        fill_postgres(url, &model, &contents, &id)?;
        let floor = floor_postgres(url, &questions, &vectors, &id, setup.calls)?;
        measure(
            setup,
            "PostgreSQL + pgvector (HNSW)",
            url,
            &questions,
            floor,
            md,
        )?;
    }
    writeln!(md)?;
    Ok(())
}

/// The three modes through the server on `db`, beside `floor` (semantic's).
fn measure(
    setup: &Setup,
    engine: &str,
    db: &str,
    questions: &[String],
    floor: Summary,
    md: &mut String,
) -> Result<()> {
    let mut c = stdio(&mut server(&setup.mcpspec, db, Some(&setup.model)))?;
    let mut results = Vec::new();
    for mode in ["semantic", "hybrid", "keyword"] {
        let mut i = 0;
        let s = time(setup.calls, || {
            let q = &questions[i % questions.len()];
            i += 1;
            let r = c.call_tool("kb_search", json!({"query": q, "mode": mode}))?;
            ensure!(r["result"]["isError"] == json!(false), "{r}");
            Ok(())
        })?;
        results.push((mode, s));
    }
    let keyword = results[2].1.median;
    writeln!(
        md,
        "| {engine} | floor: semantic through the driver | {:.2} | {:.2} | 1.00x | {:.2}x |",
        floor.median / 1e3,
        floor.p99 / 1e3,
        floor.median / keyword
    )?;
    for (mode, s) in &results {
        writeln!(
            md,
            "| {engine} | kb_search {mode} | {:.2} | {:.2} | {} | {:.2}x |",
            s.median / 1e3,
            s.p99 / 1e3,
            if *mode == "semantic" {
                format!("{:.2}x", s.median / floor.median)
            } else {
                "-".into()
            },
            s.median / keyword
        )?;
    }
    Ok(())
}

/// `contents` as entries with their vectors in the SQLite database `db`.
fn fill_sqlite(db: &Path, model: &StaticModel, contents: &[String], id: &str) -> Result<()> {
    let mut conn = rusqlite::Connection::open(db)?;
    let tx = conn.transaction()?;
    {
        let mut st = tx.prepare(
            "INSERT INTO knowledge_entries (id, content, role, tags, created_at, updated_at, embedding, embedding_model)
             VALUES (?1, ?2, ?3, NULL, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z', ?4, ?5)",
        )?;
        for (n, c) in contents.iter().enumerate() {
            let v = model.embed(c);
            let blob: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            st.execute((
                format!("bulk-{n:07}"),
                c,
                ["pm", "dev", "qa", "all"][n % 4],
                blob,
                id,
            ))?;
        }
    }
    tx.commit()?;
    Ok(())
}

/// `contents` as entries with their vectors at `url`, the HNSW index built after the rows.
fn fill_postgres(url: &str, model: &StaticModel, contents: &[String], id: &str) -> Result<()> {
    use std::io::Write as _;
    let mut client = postgres::Client::connect(url, postgres::NoTls)?;
    client.batch_execute("DROP INDEX knowledge_entries_embedding")?;
    let mut w = client.copy_in(
        "COPY knowledge_entries (id, content, role, embedding, embedding_model) FROM STDIN",
    )?;
    for (n, c) in contents.iter().enumerate() {
        let v = model.embed(c);
        let text: Vec<String> = v.iter().map(|x| x.to_string()).collect();
        writeln!(
            w,
            "bulk-{n:07}\t{c}\t{}\t[{}]\t{id}",
            ["pm", "dev", "qa", "all"][n % 4],
            text.join(",")
        )?;
    }
    w.finish()?;
    client.batch_execute(
        "CREATE INDEX knowledge_entries_embedding ON knowledge_entries USING hnsw (embedding vector_cosine_ops);
         ANALYZE knowledge_entries;",
    )?;
    Ok(())
}

/// A vector bound as pgvector's binary `vector`.
#[derive(Debug)]
struct PgVector(Vec<f32>);

impl postgres::types::ToSql for PgVector {
    fn to_sql(
        &self,
        _: &postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> Result<postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        use bytes::BufMut as _;
        out.put_u16(u16::try_from(self.0.len())?);
        out.put_u16(0);
        for x in &self.0 {
            out.put_f32(*x);
        }
        Ok(postgres::types::IsNull::No)
    }

    fn accepts(ty: &postgres::types::Type) -> bool {
        ty.name() == "vector"
    }

    postgres::types::to_sql_checked!();
}

/// kb_search's statement on `engine`, and its parameters' names in order (for `$n`).
fn kb_search(engine: &str) -> Result<(String, Vec<&'static str>)> {
    let def = server::server("knowledge").context("the knowledge server")?;
    let st = def
        .tool("kb_search")
        .and_then(|t| t.binding.statements().first())
        .context("kb_search's statement")?;
    Ok(match st.text(engine) {
        Some(t) => (t.sql.to_string(), t.params.to_vec()),
        None => (st.sql.to_string(), st.params.to_vec()),
    })
}

/// The semantic kb_search statement through rusqlite, the vector made already.
fn floor_sqlite(
    db: &Path,
    questions: &[String],
    vectors: &[Vec<f32>],
    id: &str,
    calls: usize,
) -> Result<Summary> {
    mcpspec_sqlite::setup();
    let conn = rusqlite::Connection::open(db)?;
    let (sql, _) = kb_search("sqlite")?;
    let mut i = 0;
    time(calls, || {
        let (q, v) = (&questions[i % questions.len()], &vectors[i % vectors.len()]);
        i += 1;
        let blob: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        let mut st = conn.prepare_cached(&sql)?;
        for n in 1..=st.parameter_count() {
            let name = st
                .parameter_name(n)
                .unwrap_or("")
                .trim_start_matches(':')
                .to_string();
            match sqlscan::sqlite_param(&name).as_ref() {
                "query" => st.raw_bind_parameter(
                    n,
                    mcpspec::__internal::fts5(&mcpspec::__internal::words(q), false),
                )?,
                "mode" => st.raw_bind_parameter(n, "semantic")?,
                "limit" => st.raw_bind_parameter(n, 10)?,
                "query_vector" => st.raw_bind_parameter(n, &blob)?,
                "embeddings.knowledge.model" => st.raw_bind_parameter(n, id)?,
                _ => st.raw_bind_parameter(n, rusqlite::types::Null)?,
            }
        }
        let mut rows = st.raw_query();
        let mut found = 0;
        while rows.next()?.is_some() {
            found += 1;
        }
        ensure!(found > 0, "the floor found nothing");
        Ok(())
    })
}

/// The semantic kb_search statement through `postgres`, prepared once.
fn floor_postgres(
    url: &str,
    questions: &[String],
    vectors: &[Vec<f32>],
    id: &str,
    calls: usize,
) -> Result<Summary> {
    let mut client = postgres::Client::connect(url, postgres::NoTls)?;
    let (sql, names) = kb_search("postgres")?;
    let st = client.prepare(&sql)?;
    let mut i = 0;
    time(calls, || {
        let (q, v) = (&questions[i % questions.len()], &vectors[i % vectors.len()]);
        i += 1;
        let query = mcpspec::__internal::fts5(&mcpspec::__internal::words(q), false);
        let values: Vec<Box<dyn postgres::types::ToSql + Sync>> = names
            .iter()
            .zip(st.params())
            .map(
                |(name, ty)| -> Result<Box<dyn postgres::types::ToSql + Sync>> {
                    Ok(match *name {
                        "query" => Box::new(query.clone()),
                        "mode" => Box::new("semantic".to_string()),
                        "limit" if *ty == postgres::types::Type::INT4 => Box::new(10i32),
                        "limit" => Box::new(10i64),
                        "query_vector" => Box::new(PgVector(v.clone())),
                        "embeddings.knowledge.model" => Box::new(id.to_string()),
                        "role" => Box::new(None::<String>),
                        other => bail!("kb_search binds {other}"),
                    })
                },
            )
            .collect::<Result<_>>()?;
        let refs: Vec<&(dyn postgres::types::ToSql + Sync)> = values.iter().map(|b| &**b).collect();
        let rows = client.query(&st, &refs)?;
        ensure!(!rows.is_empty(), "the floor found nothing");
        Ok(())
    })
}

/// recall@5 of each mode on the quality set, through the server on SQLite.
fn quality(setup: &Setup, md: &mut String) -> Result<()> {
    let set: Value = serde_json::from_str(&std::fs::read_to_string(quality_file())?)?;
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("quality.db");
    let out = Command::new(&setup.mcpspec)
        .args(["init", "knowledge", "--db"])
        .arg(&db)
        .output()?;
    ensure!(
        out.status.success(),
        "init: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut c = stdio(&mut server(
        &setup.mcpspec,
        db.to_str().context("utf-8")?,
        Some(&setup.model),
    ))?;
    let mut ids = std::collections::HashMap::new();
    for e in set["entries"].as_array().context("entries")? {
        let r = c.call_tool(
            "kb_add",
            json!({"content": e["content"], "role": e["role"]}),
        )?;
        let id = r["result"]["structuredContent"]["id"]
            .as_str()
            .context("an id")?;
        ids.insert(
            id.to_string(),
            e["id"].as_str().unwrap_or_default().to_string(),
        );
    }
    let queries = set["queries"].as_array().context("queries")?;
    writeln!(md, "## Retrieval quality\n")?;
    writeln!(
        md,
        "`bench/quality/knowledge.json` (made by `bench/quality/make.py`): {} entries, {} questions each with one answer; {} of the questions share no word with their answer. recall@5: the share of questions whose answer is among the first five results. WordLlama's static model, on SQLite.\n",
        ids.len(),
        queries.len(),
        queries
            .iter()
            .filter(|q| q["shares_no_word"] == true)
            .count()
    )?;
    writeln!(
        md,
        "| mode | recall@5, all questions | recall@5, questions sharing no word | recall@5, the others |\n|---|---|---|---|"
    )?;
    for mode in ["keyword", "semantic", "hybrid"] {
        let (mut hit, mut hit_none, mut none, mut hit_some, mut some) = (0, 0, 0, 0, 0);
        for q in queries {
            let r = c.call_tool(
                "kb_search",
                json!({"query": q["query"], "mode": mode, "limit": 5}),
            )?;
            let found = r["result"]["structuredContent"]["results"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|row| ids.get(row["id"].as_str()?))
                .any(|id| Some(id.as_str()) == q["answer"].as_str());
            hit += usize::from(found);
            if q["shares_no_word"] == true {
                none += 1;
                hit_none += usize::from(found);
            } else {
                some += 1;
                hit_some += usize::from(found);
            }
        }
        let pct = |a: usize, b: usize| 100.0 * a as f64 / b.max(1) as f64;
        writeln!(
            md,
            "| {mode} | {:.0} % ({hit}/{}) | {:.0} % ({hit_none}/{none}) | {:.0} % ({hit_some}/{some}) |",
            pct(hit, queries.len()),
            queries.len(),
            pct(hit_none, none),
            pct(hit_some, some)
        )?;
    }
    writeln!(md)?;
    Ok(())
}
