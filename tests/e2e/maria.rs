//! A real MariaDB for the tests: a throwaway server from the machine's own binaries
//! (`mariadb-install-db` into a temporary directory, `mariadbd` on a Unix socket only, as the
//! `mysql` user via `runuser` when the tests run as root). No mock and no skip: when MariaDB is
//! not installed the tests fail with how to install it.
//!
//! The server is stopped when the test process ends, also when it is killed: a small shell
//! keeps it and stops it as soon as its standard input (a pipe held by this process) closes,
//! then removes its directory.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

/// How to get MariaDB, in every failure message.
const INSTALL: &str = "the MariaDB tests start a throwaway server with the machine's `mariadb-install-db` and `mariadbd`; install them (Debian/Ubuntu: `apt-get install mariadb-server`; .ci/run does) or put their directories on PATH";

/// The script that owns a server: create its data directory, start it, say `ready` once its
/// socket answers, wait for standard input to close, stop it and remove its directory. `$1` is
/// the directory, `$2` `mariadb-install-db`, `$3` `mariadbd`, `$4` the client, and the rest the
/// command that runs a program as the server's owner (empty when not root). `NETWORK` holds
/// the server's network options (default: none, a socket only); `INSTALL` the install's own
/// options.
const KEEPER: &str = r#"set -e
dir=$1 install=$2 server=$3 client=$4
shift 4
"$@" mkdir "$dir/tmp"
"$@" "$install" --no-defaults --datadir="$dir/data" --tmpdir="$dir/tmp" \
  --auth-root-authentication-method=normal $INSTALL --skip-name-resolve >"$dir/install.log" 2>&1
"$@" "$server" --no-defaults --datadir="$dir/data" --tmpdir="$dir/tmp" --socket="$dir/sock" ${NETWORK:---skip-networking} \
  --pid-file="$dir/pid" --log-error="$dir/server.log" --skip-log-bin \
  --innodb-buffer-pool-size=64M --innodb-log-file-size=16M --innodb-flush-log-at-trx-commit=0 \
  --max-connections=400 >/dev/null 2>&1 &
pid=$!
i=0
until "$client" --no-defaults -S "$dir/sock" -u root -e 'SELECT 1' >/dev/null 2>&1; do
  i=$((i + 1))
  if [ "$i" -gt 300 ] || ! kill -0 "$pid" 2>/dev/null; then echo failed; exit 1; fi
  sleep 0.1
done
echo ready
read -r _ || true
kill "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
rm -rf "$(dirname "$dir")"
"#;

/// A running server.
pub struct Server {
    /// The directory holding the data, the socket and the logs.
    pub dir: PathBuf,
    client: PathBuf,
    /// Closing it stops the server.
    keeper: Mutex<(Child, ChildStdin)>,
    _tmp: tempfile::TempDir,
    next: AtomicU32,
}

/// `name` on PATH, else in the system directories Debian puts MariaDB's programs in.
fn program(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/usr/bin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("MariaDB's `{name}` not found: {INSTALL}"))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

impl Server {
    /// Creates and starts a new server (about two seconds).
    pub fn start() -> Server {
        Server::start_with(|_| String::new())
    }

    /// A server installed as `mariadb-install-db` does by default: with the test database
    /// and the anonymous accounts for `localhost` that come with it, which shadow an account
    /// made for `'%'` when it logs in over the socket.
    pub fn start_default_install() -> Server {
        Server::start_as("", |_| String::new())
    }

    /// A server that also listens on 127.0.0.1 and accepts only TLS connections there
    /// (`require_secure_transport`), with a self-signed certificate; its port.
    pub fn start_tls() -> (Server, u16) {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let server = Server::start_with(|dir| {
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
                    .arg("mysql:")
                    .arg(&cert)
                    .arg(&key)
                    .status();
            }
            format!(
                "--bind-address=127.0.0.1 --port={port} --ssl-cert={} --ssl-key={} --require-secure-transport=ON",
                cert.display(),
                key.display()
            )
        });
        (server, port)
    }

    /// A server whose network options `network` gives, after preparing files in the
    /// server's directory.
    fn start_with(network: impl FnOnce(&PathBuf) -> String) -> Server {
        // No test database, and so none of the anonymous accounts that come with it.
        Server::start_as("--skip-test-db", network)
    }

    /// [`Server::start_with`], installed with `install`'s options.
    fn start_as(install: &str, network: impl FnOnce(&PathBuf) -> String) -> Server {
        mcpspec_testkit::full_tier!("a MariaDB server");
        let tmp = tempfile::Builder::new()
            .prefix("mcpspec-maria")
            .tempdir()
            .expect("a temporary directory");
        let dir = tmp.path().join("m");
        std::fs::create_dir(&dir).expect("create the server directory");
        let owner: &[&str] = if is_root() {
            // The server may not run as root: its directory belongs to `mysql`.
            let chown = Command::new("chown")
                .args(["-R", "mysql:"])
                .arg(&dir)
                .status();
            assert!(
                chown.is_ok_and(|s| s.success()),
                "cannot give {} to the mysql user (does it exist?): {INSTALL}",
                dir.display()
            );
            let _ = Command::new("chmod").arg("755").arg(tmp.path()).status();
            &["runuser", "-u", "mysql", "--"]
        } else {
            &[]
        };
        let client = program("mariadb");
        let network = network(&dir);
        let mut child = Command::new("sh")
            .args(["-c", KEEPER, "sh"])
            .arg(&dir)
            .arg(program("mariadb-install-db"))
            .arg(program("mariadbd"))
            .arg(&client)
            .args(owner)
            .env("NETWORK", network)
            .env("INSTALL", install)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start MariaDB ({e}): {INSTALL}"));
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read the server's start-up");
        if line.trim() != "ready" {
            let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
                + &std::fs::read_to_string(dir.join("install.log")).unwrap_or_default();
            panic!("MariaDB did not start:\n{log}\n{INSTALL}");
        }
        let stdin = child.stdin.take().expect("stdin");
        Server {
            dir,
            client,
            keeper: Mutex::new((child, stdin)),
            _tmp: tmp,
            next: AtomicU32::new(1),
        }
    }

    /// The server every test of this process shares; each test makes its own database.
    pub fn shared() -> &'static Server {
        static SHARED: OnceLock<Server> = OnceLock::new();
        SHARED.get_or_init(Server::start)
    }

    /// The URL of database `name` over the Unix socket, as `root` (no password).
    pub fn url(&self, name: &str) -> String {
        format!(
            "mysql://root@localhost/{name}?socket={}",
            self.socket().display()
        )
    }

    /// The server's socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.join("sock")
    }

    /// Runs SQL in database `db` (a name, or a URL of this server) with the `mariadb` client;
    /// its output, tab-separated without headers. Panics with the client's words on failure.
    pub fn sql(&self, db: &str, sql: &str) -> String {
        let name = database_of(db);
        let out = Command::new(&self.client)
            .args([
                "--no-defaults",
                "--default-character-set=utf8mb4",
                "-N",
                "-B",
                "-S",
            ])
            .arg(self.socket())
            .args(["-u", "root", "-D", name, "-e", sql])
            .output()
            .expect("run the mariadb client");
        assert!(
            out.status.success(),
            "mariadb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// A new, empty database; its URL.
    pub fn create_database(&self) -> String {
        let name = format!(
            "t{}_{}",
            std::process::id(),
            self.next.fetch_add(1, Ordering::Relaxed)
        );
        self.sql("mysql", &format!("CREATE DATABASE {name}"));
        self.url(&name)
    }
}

/// The database a URL of this server names (its path), or `db` itself.
fn database_of(db: &str) -> &str {
    match db.split_once("://") {
        Some((_, rest)) => {
            let path = rest.split_once('/').map_or("", |(_, p)| p);
            path.split('?').next().unwrap_or(path)
        }
        None => db,
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let mut keeper = self
            .keeper
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = keeper.1.write_all(b"\n");
        let _ = keeper.1.flush();
        let _ = keeper.0.wait();
    }
}
