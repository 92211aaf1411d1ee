//! `migrate` and what a server checks before it starts on a database: a spec with migrations
//! is served only on a database that has all of them (or, with `serve --migrate`, after
//! applying the missing ones to a database that is new or that mcpspec's migrations made).
//! The decisions are the runtime's [`backend::migrate`](crate::backend::migrate); this module
//! says what happened and what to run.

use anyhow::{Result, anyhow};

use crate::backend::migrate::{self, Ask, Report, Status};
use crate::backend::{self, Location};
use crate::def::DatabaseDef;

/// How a command names the server when it tells the user what to run: the binary and the
/// server's name or `--spec FILE`, e.g. `mcpspec migrate --spec spec/notes.yaml`.
#[derive(Debug, Clone)]
pub(super) struct Command(pub String);

impl Command {
    /// The `migrate` command for the database at `location`.
    fn migrate(&self, location: &Location) -> String {
        format!("{} --db {}", self.0, shell_word(&location.display()))
    }
}

/// A word as a shell reads it: quoted when it holds anything but plain characters.
fn shell_word(s: &str) -> String {
    let plain = s
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/._-:@=+,".contains(&b));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// `mcpspec migrate`: applies what the database lacks (nothing with `dry_run`) and prints
/// what it did.
pub(super) fn run(
    server: &str,
    def: &DatabaseDef,
    location: &Location,
    ask: Ask,
    out: &mut dyn std::io::Write,
) -> Result<()> {
    let mut m = backend::migrator(location, server, def, !ask.dry_run)?;
    if def.migrations.is_empty() {
        // A team's database still gets mcpspec's own tables up to date.
        let added = match ask.dry_run {
            false => migrate::system_only(&mut *m)?,
            true => None,
        };
        let Some(added) = added else {
            return Err(anyhow!(
                "the `{server}` spec declares no migrations (`database.migrations`); its database is made by `init` from the schema"
            ));
        };
        let shown = location.display();
        match added.as_slice() {
            [] => writeln!(
                out,
                "{shown}: mcpspec's own tables are up to date (the `{server}` spec declares no migrations)"
            )?,
            added => writeln!(
                out,
                "{shown}: added {} to mcpspec's own tables (the `{server}` spec declares no migrations)",
                added.join(", ")
            )?,
        }
        return Ok(());
    }
    let report = migrate::migrate(&mut *m, def, location.dialect().name, ask)?;
    say(&report, def, location, ask.dry_run, out)?;
    Ok(())
}

/// What a run did, one line per step.
fn say(
    report: &Report,
    def: &DatabaseDef,
    location: &Location,
    dry_run: bool,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let shown = location.display();
    let name = |v: u32| {
        def.migrations
            .iter()
            .find(|x| x.version == v)
            .map_or_else(String::new, |x| format!("{v:04}_{}", x.name))
    };
    if let Some(at) = report.baselined {
        let verb = if dry_run { "would record" } else { "recorded" };
        let recorded = match at {
            1 => name(1),
            _ => format!("{} to {}", name(1), name(at)),
        };
        let at = name(at);
        let found = match report.baseline_checked {
            None => format!("its schema is that of migration {at}"),
            Some(true) => {
                format!(
                    "it holds what the migrations up to {at} make, as --baseline says (checked)"
                )
            }
            Some(false) => format!(
                "--baseline says it is at migration {at}, which was not checked: this engine cannot compare a schema with a migration's"
            ),
        };
        writeln!(
            out,
            "{shown} had no migrations table; {found} ({verb} {recorded} as applied)"
        )?;
    }
    let verb = if dry_run { "would apply" } else { "applied" };
    for (v, _) in &report.applied {
        writeln!(out, "{verb} {}", name(*v))?;
    }
    if report.applied.is_empty() {
        writeln!(
            out,
            "{shown} is at migration {}: nothing to apply",
            name(report.at)
        )?;
    } else if !dry_run {
        writeln!(out, "{shown} is at migration {}", name(report.at))?;
    }
    Ok(())
}

/// Checks, before a server starts, that the database has every migration of the spec;
/// applies the missing ones when `apply` (`serve --migrate`). Returns whether the database
/// is one without a migrations table, which is then served as it is (the start-up check of
/// its tables decides).
pub(super) fn before_start(
    server: &str,
    def: &DatabaseDef,
    location: &Location,
    apply: bool,
    command: &Command,
) -> Result<bool> {
    if def.migrations.is_empty() {
        return Ok(false);
    }
    let dialect = location.dialect().name;
    let status = {
        let mut m = backend::migrator(location, server, def, false)?;
        migrate::status(&mut *m, def, dialect)?
    };
    let shown = location.display();
    let last = def.migrations.len();
    match status {
        Status::Current => Ok(false),
        Status::Unversioned(tables) if !tables.is_empty() && !apply => Ok(true),
        Status::Behind { at, pending } if !apply => Err(anyhow!(
            "the database at {shown} is at migration {at} of {last}; not applied: {}\n  run: {}\n  or start the server with --migrate",
            pending.join(", "),
            command.migrate(location)
        )),
        Status::Unversioned(_) if !apply => Err(anyhow!(
            "the database at {shown} is empty; create the schema with: {}\n  or start the server with --migrate",
            command.migrate(location)
        )),
        _ => {
            let ask = Ask {
                only_own: true,
                ..Ask::default()
            };
            let mut m = backend::migrator(location, server, def, true)?;
            let report = migrate::migrate(&mut *m, def, dialect, ask)?;
            for (v, name) in &report.applied {
                tracing::info!(server, db = %shown, "applied migration {v:04}_{name}");
            }
            Ok(false)
        }
    }
}

/// A start-up failure on a database without a migrations table, with how to bring it up to
/// date if an older version of the server made it.
pub(super) fn unversioned_hint(
    e: anyhow::Error,
    server: &str,
    location: &Location,
    command: &Command,
) -> anyhow::Error {
    anyhow!(
        "{e:#}\n  the database has no record of the spec's migrations; if an older version of `{server}` made it, bring it up to date with: {}",
        command.migrate(location)
    )
}
