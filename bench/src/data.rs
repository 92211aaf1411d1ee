//! The data generator: a studio database (schema from `mcpspec init studio`) filled with
//! projects, cycles, decisions and a chosen number of learnings of realistic text and tags.
//! Everything is derived from a fixed seed, so a given row count always gives the same file.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};
use rusqlite::{Connection, params};

use crate::rng::Rng;

/// The seed of the generated data.
pub const DATA_SEED: u64 = 0x5EED_DA7A;

/// How many projects (and cycles per project) the generated database holds.
pub const PROJECTS: usize = 20;
const CYCLES_PER_PROJECT: usize = 4;

/// Technologies: each is also a tag.
pub const TECH: &[&str] = &[
    "postgres",
    "sqlite",
    "docker",
    "kubernetes",
    "railway",
    "fastapi",
    "react",
    "typescript",
    "rust",
    "tokio",
    "python",
    "pydantic",
    "redis",
    "nginx",
    "terraform",
    "github-actions",
    "vite",
    "node",
    "go",
    "graphql",
    "grpc",
    "kafka",
    "s3",
    "cloudflare",
    "jwt",
    "oauth",
    "celery",
    "django",
    "nextjs",
    "tailwind",
];

/// Topic tags, added to one to three learnings in four.
pub const TOPICS: &[&str] = &[
    "performance",
    "errors",
    "deployment",
    "testing",
    "security",
    "config",
    "database",
    "ci",
    "caching",
    "migrations",
    "env-vars",
    "logging",
    "auth",
    "concurrency",
    "health-check",
];

const SYMPTOMS: &[&str] = &[
    "times out",
    "returns a 502 from the gateway",
    "leaks memory until the pod is killed",
    "deadlocks under concurrent writes",
    "fails silently and logs nothing",
    "loses writes made during shutdown",
    "drops idle connections",
    "panics on startup",
    "serves stale data from the cache",
    "rejects valid input with a validation error",
    "reports the wrong timezone",
    "retries forever on a permanent error",
    "builds locally but not in CI",
    "ignores the environment variable",
];

const CONTEXTS: &[&str] = &[
    "under load",
    "after a deploy",
    "on a cold start",
    "in CI only",
    "behind the reverse proxy",
    "with payloads over 1 MB",
    "after the schema migration",
    "on macOS only",
    "when the cache is warm",
    "during the nightly batch job",
    "with more than one worker",
    "after upgrading the minor version",
];

const FIXES: &[&str] = &[
    "Set an explicit timeout on the client and surface it in the error message.",
    "Pin the version in the lockfile and upgrade deliberately.",
    "Add an index on the foreign key column used by the join.",
    "Retry with exponential backoff and give up after five attempts.",
    "Move the secret into the platform's environment settings and restart.",
    "Run the migration in its own transaction before the app starts.",
    "Use a connection pool with a health check on checkout.",
    "Flush buffered writes in the shutdown handler before exiting.",
    "Invalidate the cache key when the row changes instead of waiting for the TTL.",
    "Store timestamps in UTC and convert at the edge.",
    "Increase the proxy's read timeout to match the slowest endpoint.",
    "Validate at the boundary and pass typed values inward.",
    "Run the job with a lock so that two workers never overlap.",
    "Enable WAL mode so that readers do not block the writer.",
];

const VERBS: &[&str] = &[
    "Configure",
    "Pin",
    "Index",
    "Retry",
    "Cache",
    "Validate",
    "Migrate",
    "Profile",
    "Limit",
    "Harden",
    "Split",
    "Batch",
];

const NOUNS: &[&str] = &[
    "connection pool",
    "health endpoint",
    "build cache",
    "session tokens",
    "background jobs",
    "schema migrations",
    "request timeouts",
    "log output",
    "static assets",
    "rate limits",
    "webhooks",
    "file uploads",
];

/// One learning's text, tags and relations, drawn from `rng`.
struct Learning {
    title: String,
    problem: String,
    solution: String,
    tags: String,
    project: Option<usize>,
    cycle: Option<usize>,
    session: Option<String>,
}

fn learning(rng: &mut Rng) -> Learning {
    let tech = *rng.pick(TECH);
    let title = format!("{} {} {}", rng.pick(VERBS), tech, rng.pick(NOUNS));
    let problem = format!(
        "The {} {} {} {}. {}",
        tech,
        rng.pick(NOUNS),
        rng.pick(SYMPTOMS),
        rng.pick(CONTEXTS),
        if rng.chance(50) {
            format!("It also {} {}.", rng.pick(SYMPTOMS), rng.pick(CONTEXTS))
        } else {
            "Restarting only hides it for a while.".to_string()
        }
    );
    let solution = format!(
        "{} {}{}",
        rng.pick(FIXES),
        rng.pick(FIXES),
        if rng.chance(30) {
            format!(" Checked with {} in staging.", rng.pick(TECH))
        } else {
            String::new()
        }
    );
    let mut tags = vec![tech];
    if rng.chance(40) {
        tags.push(*rng.pick(TECH));
    }
    if rng.chance(75) {
        for _ in 0..=rng.below(3) {
            tags.push(*rng.pick(TOPICS));
        }
    }
    let mut seen = Vec::new();
    tags.retain(|t| {
        let fresh = !seen.contains(t);
        seen.push(*t);
        fresh
    });
    let project = (!rng.chance(15)).then(|| rng.below(PROJECTS));
    let cycle = project
        .filter(|_| rng.chance(50))
        .map(|p| p * CYCLES_PER_PROJECT + rng.below(CYCLES_PER_PROJECT));
    let session = rng.chance(40).then(|| format!("sess-{}", rng.below(5000)));
    Learning {
        title,
        problem,
        solution,
        tags: serde_json::to_string(&tags).expect("tags serialise"),
        project,
        cycle,
        session,
    }
}

/// The id of the `n`th learning (from 1), as `capture_learning` in spec/studio.yaml numbers them.
pub fn learning_id(n: usize) -> String {
    format!("L-{n:03}")
}

/// Creates `out` with `mcpspec init studio` and fills it with `rows` learnings.
pub fn generate(mcpspec: &Path, rows: usize, out: &Path) -> Result<()> {
    if out.exists() {
        std::fs::remove_file(out).with_context(|| format!("removing {}", out.display()))?;
    }
    let status = Command::new(mcpspec)
        .args(["init", "studio", "--db"])
        .arg(out)
        .stdout(std::process::Stdio::null())
        .status()
        .with_context(|| format!("running {} init", mcpspec.display()))?;
    if !status.success() {
        bail!("{} init studio failed", mcpspec.display());
    }
    let mut conn = Connection::open(out)?;
    // WAL is a property of the file: every contender opens the same journal mode.
    conn.pragma_update(None, "journal_mode", "WAL")?;
    fill(&mut conn, rows)?;
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")?;
    Ok(())
}

/// A Project Studio database as the application itself makes it: its own tables and
/// constraints (the columns the seed's queries read, a column and a table of its own), the
/// default rollback journal, and nothing of mcpspec's.
pub const APP_DDL: &str = "
CREATE TABLE projects (id TEXT PRIMARY KEY, name TEXT NOT NULL, description TEXT, repo_path TEXT,
  tech_stack TEXT, status TEXT NOT NULL DEFAULT 'active', archived INTEGER NOT NULL DEFAULT 0,
  created_at TEXT);
CREATE TABLE cycles (id TEXT PRIMARY KEY, project_id TEXT NOT NULL REFERENCES projects(id),
  name TEXT NOT NULL, intent TEXT, status TEXT, created_at TEXT);
CREATE TABLE learnings (id TEXT PRIMARY KEY, project_id TEXT REFERENCES projects(id),
  cycle_id TEXT REFERENCES cycles(id), session_id TEXT, title TEXT NOT NULL, problem TEXT NOT NULL,
  solution TEXT NOT NULL, tags TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE TABLE decisions (id TEXT PRIMARY KEY, project_id TEXT, title TEXT NOT NULL, decision TEXT,
  created_at TEXT);
CREATE TABLE app_settings (key TEXT PRIMARY KEY, value TEXT);";

/// Creates `out` as the application would ([`APP_DDL`], never `mcpspec init`) and fills it
/// with the same `rows` learnings as [`generate`].
pub fn generate_untouched(rows: usize, out: &Path) -> Result<()> {
    for f in [out.to_path_buf(), out.with_extension("db-journal")] {
        if f.exists() {
            std::fs::remove_file(&f).with_context(|| format!("removing {}", f.display()))?;
        }
    }
    let mut conn = Connection::open(out)?;
    conn.execute_batch(APP_DDL)?;
    fill(&mut conn, rows)?;
    Ok(())
}

/// Fills a studio database with the projects, cycles, decisions and `rows` learnings.
fn fill(conn: &mut Connection, rows: usize) -> Result<()> {
    let mut rng = Rng::new(DATA_SEED);
    let tx = conn.transaction()?;
    // Timestamps start at 2023-01-01 and advance ten minutes per learning.
    const EPOCH: i64 = 1_672_531_200;
    {
        let mut p = tx.prepare(
            "INSERT INTO projects (id, name, description, repo_path, tech_stack, status, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, strftime('%Y-%m-%dT%H:%M:%SZ', ?7, 'unixepoch'))",
        )?;
        let mut c = tx.prepare(
            "INSERT INTO cycles (id, project_id, name, intent, status, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, strftime('%Y-%m-%dT%H:%M:%SZ', ?6, 'unixepoch'))",
        )?;
        let mut d = tx.prepare(
            "INSERT INTO decisions (id, project_id, title, decision, created_at)
             VALUES (?1, ?2, ?3, ?4, strftime('%Y-%m-%dT%H:%M:%SZ', ?5, 'unixepoch'))",
        )?;
        for i in 0..PROJECTS {
            let (a, b) = (*rng.pick(TECH), *rng.pick(TECH));
            p.execute(params![
                format!("proj-{:03}", i + 1),
                format!("Project {} {}", rng.pick(NOUNS), i + 1),
                format!("A service built on {a} and {b}"),
                format!("/home/dev/code/project-{}", i + 1),
                format!(r#"{{"backend":"{a}","database":"{b}"}}"#),
                if i % 5 == 4 { "paused" } else { "active" },
                EPOCH - 86_400 * (PROJECTS - i) as i64,
            ])?;
            for j in 0..CYCLES_PER_PROJECT {
                c.execute(params![
                    format!("cycle-{:03}", i * CYCLES_PER_PROJECT + j + 1),
                    format!("proj-{:03}", i + 1),
                    format!("{} the {}", rng.pick(VERBS), rng.pick(NOUNS)),
                    format!("Stop the {} that {}", rng.pick(NOUNS), rng.pick(SYMPTOMS)),
                    if j + 1 == CYCLES_PER_PROJECT {
                        "in_progress"
                    } else {
                        "done"
                    },
                    EPOCH + 3_600 * (i * CYCLES_PER_PROJECT + j) as i64,
                ])?;
                d.execute(params![
                    format!("D-{:03}", i * CYCLES_PER_PROJECT + j + 1),
                    format!("proj-{:03}", i + 1),
                    format!("{} over {}", rng.pick(TECH), rng.pick(TECH)),
                    format!("{}", rng.pick(FIXES)),
                    EPOCH + 7_200 * (i * CYCLES_PER_PROJECT + j) as i64,
                ])?;
            }
        }
        let mut l = tx.prepare(
            "INSERT INTO learnings (id, title, problem, solution, tags, project_id, cycle_id,
                                    session_id, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8,
                     strftime('%Y-%m-%dT%H:%M:%SZ', ?9, 'unixepoch'),
                     strftime('%Y-%m-%dT%H:%M:%SZ', ?9, 'unixepoch'))",
        )?;
        for n in 1..=rows {
            let x = learning(&mut rng);
            l.execute(params![
                learning_id(n),
                x.title,
                x.problem,
                x.solution,
                x.tags,
                x.project.map(|p| format!("proj-{:03}", p + 1)),
                x.cycle.map(|c| format!("cycle-{:03}", c + 1)),
                x.session,
                EPOCH + 600 * n as i64,
            ])?;
        }
    }
    tx.commit()?;
    // No ANALYZE: a studio database made by `mcpspec init` has no statistics tables either.
    Ok(())
}
