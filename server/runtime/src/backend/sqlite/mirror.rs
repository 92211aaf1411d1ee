//! A SQLite database mcpspec did not create keeps its schema. The structures a spec derives
//! from the data (`database.derived` and `database.fts`: indexes, side tables, full-text
//! indexes and the triggers that keep them) then live in a *mirror*, a database mcpspec owns
//! under the user's cache directory, never in the application's file.
//!
//! - **What it holds.** A copy of each *source* table (the tables the derived DDL names, see
//!   [`sqlscan::named_in`], and the tables their foreign keys refer to), made from the
//!   application's own `CREATE TABLE` (its keys, indexes and collations with it), with the
//!   derived DDL applied to the copies as is: its triggers keep the derived structures current
//!   as the copies change.
//! - **How it is read.** A reader connection opens the mirror as `main` and attaches the
//!   application's file read-only as `app`. SQLite resolves an unqualified name in `main`
//!   first, then in `app`, so the spec's statements read the source tables and the derived
//!   structures from the mirror and every other table from the application's file, unchanged.
//! - **How it stays current.** Before each job the runtime asks the application's file for
//!   its `PRAGMA data_version`, which changes whenever another connection committed to it.
//!   When it changed, the copies are caught up with the source tables in one transaction
//!   (rows gone, rows changed in any column, rows new, by rowid), which fires the derived
//!   triggers. The call that follows a change pays for the catch-up; a learning another
//!   program wrote is found by the very next call, and no stale row is ever returned, since
//!   every call reads caught-up copies.
//! - **Writes.** A writable server writes to the application's file, as the spec says; its
//!   writer connection attaches the mirror and replays each of its own changes to a source
//!   table into the copy with temporary triggers (which live in that connection only), so a
//!   second write sees the first one's derived rows (counters, say).
//! - **Identity.** A mirror is keyed by the application file's real path and the spec's name;
//!   it records a fingerprint of the derived DDL and of the source tables' definitions and
//!   is rebuilt when they change. Checks (`codegen check --db`, `mcpspec test --db`) build a
//!   scratch mirror in a temporary directory and remove it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use super::open_plain;
use crate::backend::OpenError;
use crate::backend::Placing;
use crate::def::DatabaseDef;

/// The `PRAGMA application_id` of a database `mcpspec init` made ("mcsp"): such a database
/// is mcpspec's own, and its derived structures live in it.
pub const APPLICATION_ID: i32 = 0x6D63_7370;

/// Where a database's derived structures are.
pub enum Placement {
    /// The spec derives nothing.
    Nothing,
    /// In the database itself: it has them all, or mcpspec may add them (its own database,
    /// or the user allowed it); `Some` holds the DDL still to apply.
    InPlace(Option<&'static str>),
    /// In a mirror.
    Mirror(Arc<Mirror>),
    /// Nowhere: the mirror could not be built, for this reason (the database does not fit the
    /// spec, say). The database is served as it is, so that the start-up check names every
    /// statement that needs what is missing, and gives this reason too.
    Unbuilt(String),
}

/// A source table as mirrored: its name and the columns copied (a column that is the
/// table's rowid is copied as the rowid).
#[derive(Debug, Clone)]
struct Source {
    name: String,
    columns: Vec<String>,
}

/// The mirror of one application database.
pub struct Mirror {
    /// The mirror's file.
    path: PathBuf,
    /// The application's database, as a `file:` URI that opens it read-only.
    app_uri: String,
    /// Its file.
    app_file: PathBuf,
    sources: Vec<Source>,
    /// The connection that catches the copies up, and the application's `data_version` it
    /// last caught up to.
    sync: Mutex<(Connection, i64)>,
    /// A scratch mirror's directory, removed with the mirror.
    _scratch: Option<tempfile::TempDir>,
}

/// Decides where the derived structures of `def` live for the database at `app` (opened as
/// `conn`, which may write when the placement is in place).
pub fn place(
    conn: &Connection,
    app: &Path,
    def: &DatabaseDef,
    name: &str,
    how: Placing,
) -> Result<Placement, OpenError> {
    if def.derived.trim().is_empty() {
        return Ok(Placement::Nothing);
    }
    let made =
        derived_objects(def).map_err(|e| fail(app, format!("the spec's derived DDL: {e}")))?;
    let present = objects(conn).map_err(|e| fail(app, e.to_string()))?;
    if made.iter().all(|o| present.contains(o)) {
        return Ok(Placement::InPlace(None));
    }
    let ours = conn
        .query_row("PRAGMA application_id", [], |r| r.get::<_, i32>(0))
        .unwrap_or(0)
        == APPLICATION_ID;
    if !how.scratch && !how.read_only && (ours || how.in_place) {
        return Ok(Placement::InPlace(Some(def.derived)));
    }
    Ok(match Mirror::open(app, def, name, how.scratch) {
        Ok(m) => Placement::Mirror(Arc::new(m)),
        Err(OpenError::Create { reason, .. }) => Placement::Unbuilt(reason),
        Err(e) => return Err(e),
    })
}

fn fail(app: &Path, reason: String) -> OpenError {
    OpenError::Create {
        path: format!(
            "the mirror of {}",
            crate::backend::redact(&app.display().to_string())
        ),
        reason,
    }
}

/// The objects (kind and name) the derived DDL makes, found by running the schema and then
/// the derived DDL in a scratch database.
fn derived_objects(def: &DatabaseDef) -> rusqlite::Result<Vec<(String, String)>> {
    let conn = super::scratch_connection()?;
    conn.execute_batch(def.schema)?;
    let before = objects(&conn)?;
    conn.execute_batch(def.derived)?;
    Ok(objects(&conn)?
        .into_iter()
        .filter(|o| !before.contains(o))
        .collect())
}

/// Every table, index, view and trigger of `main`, as (kind, name), FTS5 shadow tables
/// included.
fn objects(conn: &Connection) -> rusqlite::Result<Vec<(String, String)>> {
    let mut st =
        conn.prepare("SELECT type, name FROM main.sqlite_master WHERE name NOT LIKE 'sqlite_%'")?;
    let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

impl Mirror {
    /// Opens (or builds) the mirror of the database at `app` for the spec `name`, caught up
    /// with it.
    fn open(app: &Path, def: &DatabaseDef, name: &str, scratch: bool) -> Result<Mirror, OpenError> {
        let file = crate::backend::paths::file_of(app);
        let real = std::fs::canonicalize(&file).unwrap_or(file);
        let app_uri = read_only_uri(&real);
        let (dir, scratch_dir) = if scratch {
            let t = tempfile::Builder::new()
                .prefix("mcpspec-mirror-")
                .tempdir()
                .map_err(|e| fail(app, e.to_string()))?;
            (t.path().to_path_buf(), Some(t))
        } else {
            (cache_dir().map_err(|e| fail(app, e))?, None)
        };
        let path = dir.join(format!(
            "{name}-{:016x}.db",
            fnv(real.to_string_lossy().as_bytes())
        ));
        let conn = connect(&path, &app_uri).map_err(|e| fail(app, e.to_string()))?;
        let sources = sources(&conn, def).map_err(|e| fail(app, e))?;
        let fingerprint =
            fingerprint(&conn, def, &sources).map_err(|e| fail(app, e.to_string()))?;
        let built = build(&conn, def, &sources, &fingerprint, &real).map_err(|e| fail(app, e))?;
        tracing::info!(mirror = %path.display(), rebuilt = built, "the derived structures live in a mirror; the database stays as it is");
        if built {
            // The build went through the WAL; the mirror's file holds it now.
            let _ = conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)");
        }
        let version = data_version(&conn).map_err(|e| fail(app, e.to_string()))?;
        let mirror = Mirror {
            path,
            app_uri,
            app_file: real,
            sources,
            sync: Mutex::new((conn, version)),
            _scratch: scratch_dir,
        };
        mirror.catch_up_now().map_err(|e| fail(app, e))?;
        Ok(mirror)
    }

    /// The mirror's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Catches the copies up with the application's tables when another connection has
    /// committed to them since the last time; costs a `PRAGMA` otherwise. Called before
    /// every job.
    pub fn catch_up(&self) -> Result<(), String> {
        let mut sync = self.sync.lock().unwrap_or_else(PoisonError::into_inner);
        let version = data_version(&sync.0).map_err(|e| e.to_string())?;
        if version == sync.1 {
            return Ok(());
        }
        catch_up(&sync.0, &self.sources, &stamp(&self.app_file)).map_err(|e| e.to_string())?;
        sync.1 = version;
        Ok(())
    }

    /// Catches up at start-up, unless the application's file is as it was when the mirror
    /// last caught up (its size, modification time and change counter, and its WAL's).
    fn catch_up_now(&self) -> Result<(), String> {
        let sync = self.sync.lock().unwrap_or_else(PoisonError::into_inner);
        let now = stamp(&self.app_file);
        let recorded: Option<String> = sync
            .0
            .query_row(
                "SELECT value FROM mcpspec_mirror WHERE key = 'stamp'",
                [],
                |r| r.get(0),
            )
            .optional()
            .unwrap_or(None);
        if recorded.as_deref() == Some(now.as_str()) {
            return Ok(());
        }
        catch_up(&sync.0, &self.sources, &now).map_err(|e| e.to_string())
    }

    /// A reader: the mirror as `main`, the application's file read-only as `app`.
    pub fn reader(&self) -> rusqlite::Result<Connection> {
        let conn = open_plain(&self.path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
        conn.pragma_update(None, "foreign_keys", "OFF")?;
        attach(&conn, &self.app_uri, "app")?;
        Ok(conn)
    }

    /// Makes `writer` (the application's file as `main`) keep the mirror current with its
    /// own changes: the mirror attached as `mirror`, and temporary triggers that replay each
    /// change of a source table into its copy.
    pub fn watch_writer(&self, writer: &Connection) -> rusqlite::Result<()> {
        attach(writer, &self.path.to_string_lossy(), "mirror")?;
        for s in &self.sources {
            writer.execute_batch(&replay_triggers(s))?;
        }
        Ok(())
    }
}

/// The application's `data_version`, as the mirror's connection sees it.
fn data_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.prepare_cached("PRAGMA app.data_version")?
        .query_row([], |r| r.get(0))
}

/// A `file:` URI that opens `path` read-only.
fn read_only_uri(path: &Path) -> String {
    let mut uri = String::from("file:");
    for b in path.to_string_lossy().bytes() {
        match b {
            b'%' | b'?' | b'#' => uri.push_str(&format!("%{b:02X}")),
            _ => uri.push(b as char),
        }
    }
    uri.push_str("?mode=ro");
    uri
}

fn attach(conn: &Connection, uri: &str, schema: &str) -> rusqlite::Result<()> {
    conn.execute(&format!("ATTACH DATABASE ?1 AS {schema}"), [uri])
        .map(drop)
}

/// The mirror's own connection: the mirror as `main` (made when missing, in WAL mode), the
/// application's file read-only as `app`.
fn connect(path: &Path, app_uri: &str) -> rusqlite::Result<Connection> {
    let conn = open_plain(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
    )?;
    restrict(path);
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // The copies follow the application's rows as they are, in whatever order they change.
    conn.pragma_update(None, "foreign_keys", "OFF")?;
    attach(&conn, app_uri, "app")?;
    super::confined(conn)
}

/// A mirror holds a copy of the user's data: readable by its owner only.
fn restrict(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
    }
    #[cfg(not(unix))]
    let _ = path;
}

/// Where mirrors are kept: `MCPSPEC_CACHE_DIR`, else the system's cache directory
/// (`$XDG_CACHE_HOME` or `~/.cache` on Linux, `~/Library/Caches` on macOS, `%LOCALAPPDATA%`
/// on Windows), each with `mcpspec/mirrors` below it; made when missing, owner only.
fn cache_dir() -> Result<PathBuf, String> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let base = if let Some(d) = var("MCPSPEC_CACHE_DIR") {
        d
    } else if cfg!(target_os = "macos") {
        var("HOME")
            .map(|h| h.join("Library/Caches/mcpspec"))
            .ok_or("HOME is not set")?
    } else if cfg!(windows) {
        var("LOCALAPPDATA")
            .map(|d| d.join("mcpspec"))
            .ok_or("LOCALAPPDATA is not set")?
    } else {
        var("XDG_CACHE_HOME")
            .or_else(|| var("HOME").map(|h| h.join(".cache")))
            .map(|d| d.join("mcpspec"))
            .ok_or("neither XDG_CACHE_HOME nor HOME is set")?
    };
    let dir = base.join("mirrors");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
    }
    Ok(dir)
}

/// FNV-1a: a stable hash (the same in every process and toolchain) for file names and
/// fingerprints.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The source tables: the application's tables that the derived DDL names, with the columns
/// to copy. A source must be a rowid table.
fn sources(conn: &Connection, def: &DatabaseDef) -> Result<Vec<Source>, String> {
    let tables: Vec<String> = conn
        .prepare(
            "SELECT name FROM app.sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
        )
        .and_then(|mut st| st.query_map([], |r| r.get(0))?.collect())
        .map_err(|e| e.to_string())?;
    let parents = |t: &str| -> Vec<String> {
        conn.prepare("SELECT DISTINCT \"table\" FROM pragma_foreign_key_list(?1, 'app')")
            .and_then(|mut st| st.query_map([t], |r| r.get(0))?.collect())
            .unwrap_or_default()
    };
    let names = sqlscan::sources(def.derived, &tables, parents);
    let mut out = Vec::new();
    for name in &names {
        let name = name.as_str();
        let without_rowid: bool = conn
            .query_row(
                "SELECT wr FROM pragma_table_list WHERE schema = 'app' AND name = ?1",
                [name],
                |r| r.get(0),
            )
            .map_err(|e| e.to_string())?;
        if without_rowid {
            return Err(format!(
                "table `{name}` is WITHOUT ROWID, which a mirror cannot follow; serve with --derive-in-place to build the derived structures in the database itself"
            ));
        }
        // (name, declared type, part of the primary key)
        let cols: Vec<(String, String, i64)> = conn
            .prepare("SELECT name, type, pk FROM pragma_table_info(?1, 'app') ORDER BY cid")
            .and_then(|mut st| {
                st.query_map([name], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                    .collect()
            })
            .map_err(|e| e.to_string())?;
        // A lone INTEGER PRIMARY KEY is the rowid itself, copied as the rowid.
        let keys = cols.iter().filter(|c| c.2 > 0).count();
        let columns = cols
            .into_iter()
            .filter(|(_, ty, pk)| !(keys == 1 && *pk > 0 && ty.eq_ignore_ascii_case("INTEGER")))
            .map(|(c, _, _)| c)
            .collect();
        out.push(Source {
            name: name.to_string(),
            columns,
        });
    }
    Ok(out)
}

/// What the mirror is built from: the derived DDL and each source table's definition.
fn fingerprint(
    conn: &Connection,
    def: &DatabaseDef,
    sources: &[Source],
) -> rusqlite::Result<String> {
    let mut text = String::from(def.derived);
    for s in sources {
        let sql: Option<String> = conn
            .query_row(
                "SELECT sql FROM app.sqlite_master WHERE type = 'table' AND name = ?1",
                [&s.name],
                |r| r.get(0),
            )
            .optional()?
            .flatten();
        text.push_str(&sql.unwrap_or_default());
    }
    Ok(format!("{:016x}", fnv(text.as_bytes())))
}

/// Builds the mirror when it is new or was built from something else (its tables dropped
/// and made again): the copies, their rows, then the derived DDL, whose first run fills
/// the derived structures from the rows at once. Whether it built.
fn build(
    conn: &Connection,
    def: &DatabaseDef,
    sources: &[Source],
    fingerprint: &str,
    app: &Path,
) -> Result<bool, String> {
    let recorded: Option<String> = conn
        .query_row(
            "SELECT value FROM main.sqlite_master m, main.mcpspec_mirror WHERE m.name = 'mcpspec_mirror' AND key = 'fingerprint'",
            [],
            |r| r.get(0),
        )
        .optional()
        .unwrap_or(None);
    if recorded.as_deref() == Some(fingerprint) {
        return Ok(false);
    }
    let run = || -> rusqlite::Result<()> {
        conn.execute_batch("BEGIN IMMEDIATE")?;
        // Whatever an earlier build left goes first.
        let old = objects(conn)?;
        for (kind, name) in old.iter().filter(|(k, _)| k == "table") {
            let _ = kind;
            conn.execute_batch(&format!("DROP TABLE IF EXISTS main.{}", ident(name)))?;
        }
        for s in sources {
            let sql: String = conn.query_row(
                "SELECT sql FROM app.sqlite_master WHERE type = 'table' AND name = ?1",
                [&s.name],
                |r| r.get(0),
            )?;
            conn.execute_batch(&sql)?;
            let cols = column_list(&s.columns);
            conn.execute_batch(&format!(
                "INSERT INTO main.{t} (rowid{sep}{cols}) SELECT rowid{sep}{cols} FROM app.{t};",
                t = ident(&s.name),
                sep = if cols.is_empty() { "" } else { ", " },
            ))?;
            // The application's own indexes, so that the copies are read as the tables are.
            let indexes: Vec<String> = conn
                .prepare(
                    "SELECT sql FROM app.sqlite_master \
                     WHERE type = 'index' AND tbl_name = ?1 AND sql IS NOT NULL",
                )?
                .query_map([&s.name], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            for sql in indexes {
                conn.execute_batch(&sql)?;
            }
        }
        conn.execute_batch(def.derived)?;
        conn.execute_batch(
            "CREATE TABLE mcpspec_mirror (key TEXT PRIMARY KEY, value TEXT NOT NULL);",
        )?;
        conn.execute(
            "INSERT INTO mcpspec_mirror (key, value) VALUES ('fingerprint', ?1), ('app', ?2)",
            [fingerprint, &app.to_string_lossy()],
        )?;
        conn.execute_batch("COMMIT")
    };
    run().map_err(|e| {
        let _ = conn.execute_batch("ROLLBACK");
        super::sqlite_message(&e)
    })?;
    Ok(true)
}

/// What tells an unchanged application file from a changed one without reading its rows:
/// its size, modification time and change counter (bytes 24..28 of its header), and its
/// WAL's size and modification time. Taken before a catch-up reads the file, so that a change
/// made meanwhile is caught at the next start.
fn stamp(file: &Path) -> String {
    use std::io::Read;
    let meta = |p: &Path| {
        std::fs::metadata(p).ok().map(|m| {
            let at = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            format!("{}@{at}", m.len())
        })
    };
    let mut header = [0u8; 28];
    let counter = std::fs::File::open(file)
        .and_then(|mut f| f.read_exact(&mut header))
        .map_or(0, |()| {
            u32::from_be_bytes([header[24], header[25], header[26], header[27]])
        });
    let mut wal = file.as_os_str().to_owned();
    wal.push("-wal");
    format!(
        "{} {counter} {}",
        meta(file).unwrap_or_default(),
        meta(Path::new(&wal)).unwrap_or_default()
    )
}

/// Catches each copy up with its source table in one transaction: rows gone from the source
/// are deleted, rows that differ in any column updated, new rows inserted, each by rowid, so
/// that the derived triggers see each change as it is. Records `stamp`, taken before.
fn catch_up(conn: &Connection, sources: &[Source], stamp: &str) -> rusqlite::Result<()> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let run = || -> rusqlite::Result<()> {
        for s in sources {
            conn.execute_batch(&catch_up_sql(s))?;
        }
        conn.execute(
            "INSERT OR REPLACE INTO mcpspec_mirror (key, value) VALUES ('stamp', ?1)",
            [stamp],
        )?;
        Ok(())
    };
    match run() {
        Ok(()) => conn.execute_batch("COMMIT"),
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

/// The statements that catch one copy up with its source.
fn catch_up_sql(s: &Source) -> String {
    let t = ident(&s.name);
    let cols = column_list(&s.columns);
    let sep = if cols.is_empty() { "" } else { ", " };
    let differs = if s.columns.is_empty() {
        "0".to_string()
    } else {
        s.columns
            .iter()
            .map(|c| format!("m.{0} IS NOT a.{0}", ident(c)))
            .collect::<Vec<_>>()
            .join(" OR ")
    };
    let set = s
        .columns
        .iter()
        .map(|c| format!("{0} = a.{0}", ident(c)))
        .collect::<Vec<_>>()
        .join(", ");
    let update = if s.columns.is_empty() {
        String::new()
    } else {
        format!(
            "UPDATE main.{t} AS m SET {set} FROM app.{t} AS a \
             WHERE a.rowid = m.rowid AND ({differs});\n"
        )
    };
    format!(
        "DELETE FROM main.{t} WHERE rowid NOT IN (SELECT rowid FROM app.{t});\n\
         {update}\
         INSERT INTO main.{t} (rowid{sep}{cols}) SELECT rowid{sep}{cols} FROM app.{t} \
         WHERE rowid NOT IN (SELECT rowid FROM main.{t});"
    )
}

/// The temporary triggers with which a writer replays its changes to source `s` into the
/// copy in the attached mirror.
fn replay_triggers(s: &Source) -> String {
    let t = ident(&s.name);
    let prefix = format!(
        "mcpspec_mirror_{}",
        s.name.replace(|c: char| !c.is_ascii_alphanumeric(), "_")
    );
    let cols = column_list(&s.columns);
    let sep = if cols.is_empty() { "" } else { ", " };
    let new_cols = s
        .columns
        .iter()
        .map(|c| format!("new.{}", ident(c)))
        .collect::<Vec<_>>()
        .join(", ");
    let set = std::iter::once("rowid = new.rowid".to_string())
        .chain(s.columns.iter().map(|c| format!("{0} = new.{0}", ident(c))))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "CREATE TEMP TRIGGER IF NOT EXISTS {prefix}_ai AFTER INSERT ON main.{t} BEGIN\n  \
           INSERT OR REPLACE INTO mirror.{t} (rowid{sep}{cols}) VALUES (new.rowid{sep}{new_cols});\nEND;\n\
         CREATE TEMP TRIGGER IF NOT EXISTS {prefix}_au AFTER UPDATE ON main.{t} BEGIN\n  \
           UPDATE mirror.{t} SET {set} WHERE rowid = old.rowid;\nEND;\n\
         CREATE TEMP TRIGGER IF NOT EXISTS {prefix}_ad AFTER DELETE ON main.{t} BEGIN\n  \
           DELETE FROM mirror.{t} WHERE rowid = old.rowid;\nEND;"
    )
}

fn column_list(columns: &[String]) -> String {
    columns
        .iter()
        .map(|c| ident(c))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `name` as a quoted identifier.
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
