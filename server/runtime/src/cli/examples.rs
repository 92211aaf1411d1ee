//! `test`: runs a server's `examples:` through the engine, on a scratch database made from the
//! spec's schema and sample rows, or on a live database with every write rolled back.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};

use super::Server;
use crate::backend::Location;
use crate::engine::Engine;
use crate::examples::Outcome;

/// Runs every example of `server` and prints each outcome; fails when one did not hold.
pub fn run(server: Server, db: Option<&Path>, out: &mut dyn std::io::Write) -> Result<ExitCode> {
    let Server { def, handlers } = server;
    let limits = super::limits()?;
    let scratch = tempfile::tempdir().context("creating a scratch directory")?;
    let on_sample_rows = db.is_none();
    let (engine, on) = match db {
        Some(flag) => {
            let location = super::locate(def.name, database_of(def)?, Some(flag))?;
            let shown = location.display();
            let engine = Engine::start_rehearsal(def, &location, limits, handlers)?;
            (engine, format!("{shown}, every write rolled back"))
        }
        None => {
            let location = scratch_database(def, scratch.path())?;
            let engine = Engine::start_at(def, location.as_ref(), false, limits, handlers)?;
            let on = match location {
                Some(_) => "a scratch database with the sample rows".to_string(),
                None => format!("the project in {}", engine.dir().display()),
            };
            (engine, on)
        }
    };
    let outcomes = crate::examples::run_all(&engine, on_sample_rows);
    let skipped = def.examples.len() - outcomes.len();
    if skipped > 0 {
        writeln!(
            out,
            "{skipped} examples need the sample rows and do not run on a live database"
        )?;
    }
    report(def.name, &on, &outcomes, out)?;
    Ok(if outcomes.iter().all(|o| o.failure.is_none()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn database_of(def: &crate::def::ServerDef) -> Result<&crate::def::DatabaseDef> {
    def.database.as_ref().ok_or_else(|| {
        anyhow::anyhow!(
            "the `{}` server has no database; run `test` without --db",
            def.name
        )
    })
}

/// A new SQLite file in `dir` holding the spec's schema and sample rows; `None` for a server
/// without a database.
pub fn scratch_database(def: &crate::def::ServerDef, dir: &Path) -> Result<Option<Location>> {
    let Some(database) = &def.database else {
        return Ok(None);
    };
    let path = dir.join(format!("{}.db", def.name));
    let at = Location::File(path);
    crate::backend::create(&at, def.name, database, true)?;
    Ok(Some(at))
}

fn report(
    server: &str,
    on: &str,
    outcomes: &[Outcome],
    out: &mut dyn std::io::Write,
) -> Result<()> {
    writeln!(
        out,
        "running {} examples of `{server}` on {on}",
        outcomes.len()
    )?;
    for o in outcomes {
        writeln!(out, "{o}")?;
    }
    let failed = outcomes.iter().filter(|o| o.failure.is_some()).count();
    writeln!(
        out,
        "{}: {} passed, {failed} failed",
        if failed == 0 { "ok" } else { "FAILED" },
        outcomes.len() - failed
    )?;
    Ok(())
}
