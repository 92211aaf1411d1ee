//! The SQLite floor: the same SQL as the `get_learning` tool run directly through rusqlite,
//! with no MCP server around it, to show how much of a round trip is the database's.
//!
//! It also counts how often SQLite re-prepares the cached statement. SQLite marks a statement
//! for re-preparation when a new value is bound to a parameter the planner looked at; the
//! query-planner stability guarantee (`SQLITE_DBCONFIG_ENABLE_QPSG`) turns that off.

use std::path::Path;
use std::time::Instant;

use anyhow::Result;
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags, StatementStatus};
use serde_json::{Value, json};

use crate::rng::Rng;

/// spec/studio.yaml's `get_learning` statement.
pub const GET_LEARNING: &str =
    "SELECT l.id, l.title, l.problem, l.solution, l.tags, l.project_id, p.name AS project_name,
       l.cycle_id, c.name AS cycle_name, l.session_id, l.created_at, l.updated_at
FROM learnings l
LEFT JOIN projects p ON l.project_id = p.id
LEFT JOIN cycles c ON l.cycle_id = c.id
WHERE l.id = :id
";

/// How the lookups use the connection.
#[derive(Clone, Copy)]
struct Variant {
    /// Set `SQLITE_DBCONFIG_ENABLE_QPSG`.
    qpsg: bool,
    /// Take the statement from rusqlite's cache on every call, as mcpspec's engine does
    /// (returning it resets it and clears its bindings).
    cached_per_call: bool,
    /// Install and remove a progress handler around every call, as mcpspec's engine does.
    progress: bool,
}

/// Runs `calls` primary-key lookups on one connection; returns µs per call and re-prepares.
fn lookups(db: &Path, rows: usize, calls: usize, v: Variant) -> Result<(f64, i32)> {
    let mut conn = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, v.qpsg)?;
    let mut rng = Rng::new(11);
    let mut next_id = move || crate::data::learning_id(1 + rng.below(rows));
    let run = |stmt: &mut rusqlite::Statement<'_>, id: String| -> Result<()> {
        let mut r = stmt.query(rusqlite::named_params! {":id": id})?;
        while let Some(row) = r.next()? {
            std::hint::black_box(row.get_ref(1)?);
        }
        Ok(())
    };
    let start = Instant::now();
    let reprepares = if v.cached_per_call {
        for _ in 0..calls {
            if v.progress {
                let deadline = Instant::now() + std::time::Duration::from_secs(30);
                let _ = conn.progress_handler(10_000, Some(move || Instant::now() > deadline));
            }
            let mut stmt = conn.prepare_cached(GET_LEARNING)?;
            run(&mut stmt, next_id())?;
            drop(stmt);
            if v.progress {
                let _ = conn.progress_handler(0, None::<fn() -> bool>);
            }
        }
        conn.prepare_cached(GET_LEARNING)?
            .get_status(StatementStatus::RePrepare)
    } else {
        let mut held = conn.prepare(GET_LEARNING)?;
        for _ in 0..calls {
            run(&mut held, next_id())?;
        }
        held.get_status(StatementStatus::RePrepare)
    };
    let us = start.elapsed().as_secs_f64() * 1e6 / calls as f64;
    Ok((us, reprepares))
}

pub fn run(db: &Path, rows: usize, calls: usize) -> Result<Value> {
    let mut out = serde_json::Map::new();
    for (name, v) in [
        (
            "held statement",
            Variant {
                qpsg: false,
                cached_per_call: false,
                progress: false,
            },
        ),
        (
            "held statement, QPSG",
            Variant {
                qpsg: true,
                cached_per_call: false,
                progress: false,
            },
        ),
        (
            "prepare_cached per call",
            Variant {
                qpsg: false,
                cached_per_call: true,
                progress: false,
            },
        ),
        (
            "prepare_cached + progress handler per call (mcpspec today)",
            Variant {
                qpsg: false,
                cached_per_call: true,
                progress: true,
            },
        ),
        (
            "the same with QPSG",
            Variant {
                qpsg: true,
                cached_per_call: true,
                progress: true,
            },
        ),
    ] {
        let (us, re) = lookups(db, rows, calls, v)?;
        out.insert(
            name.into(),
            json!({"us_per_call": crate::stats::round(us), "reprepares": re}),
        );
    }
    Ok(json!({"calls": calls, "variants": out}))
}
