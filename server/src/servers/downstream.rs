//! The `downstream` test kit's handlers: a stand-in for a real downstream MCP server (Desktop
//! Commander's tool names) that tests put behind a proxy.
//!
//! Every handler echoes what it received. With `DOWNSTREAM_LOG` set, each call is first
//! appended to that file as a JSON line `{"tool", "arguments"}`, so a test can prove that a
//! blocked call never arrived. `crash` ends the process at once without answering, and so does
//! the call that reaches `DOWNSTREAM_CRASH_AFTER` calls. `DOWNSTREAM_NAME` names the instance.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use crate::generated::downstream::{
    CrashHandler, EchoHandler, LessonsListHandler, ReadFileHandler, StartProcessHandler,
    WriteFileHandler, args, outputs,
};
use mcpspec::handler::{Context, HandlerError};

/// The `downstream` handlers; the only state is the call counter.
#[derive(Debug, Default)]
pub struct Downstream {
    calls: AtomicU64,
}

type Result<T> = std::result::Result<T, HandlerError>;

/// The instance's name, from `DOWNSTREAM_NAME`.
fn instance() -> String {
    std::env::var("DOWNSTREAM_NAME").unwrap_or_else(|_| "downstream".into())
}

impl Downstream {
    /// Logs a call, then ends the process if this call reaches `DOWNSTREAM_CRASH_AFTER`.
    fn receive(&self, tool: &str, arguments: Value) {
        if let Some(path) = std::env::var_os("DOWNSTREAM_LOG") {
            let line = json!({"tool": tool, "arguments": arguments}).to_string();
            let written = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut f| writeln!(f, "{line}"));
            if let Err(e) = written {
                tracing::warn!(error = %e, "cannot append to DOWNSTREAM_LOG");
            }
        }
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let limit = std::env::var("DOWNSTREAM_CRASH_AFTER")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok());
        if limit.is_some_and(|l| n >= l) {
            crash();
        }
    }
}

/// Ends the process at once: no answer, no clean-up, as a crashing server would.
fn crash() -> ! {
    eprintln!("downstream: crashing on purpose");
    std::process::exit(101)
}

impl StartProcessHandler for Downstream {
    fn start_process(&self, _: &Context, a: args::StartProcess) -> Result<outputs::StartProcess> {
        self.receive("start_process", json!({"command": a.command}));
        Ok(outputs::StartProcess {
            command: a.command,
            server: instance(),
        })
    }
}

impl ReadFileHandler for Downstream {
    fn read_file(&self, _: &Context, a: args::ReadFile) -> Result<outputs::ReadFile> {
        self.receive("read_file", json!({"path": a.path}));
        Ok(outputs::ReadFile {
            content: format!("contents of {}", a.path),
            path: a.path,
        })
    }
}

impl WriteFileHandler for Downstream {
    fn write_file(&self, _: &Context, a: args::WriteFile) -> Result<outputs::WriteFile> {
        self.receive("write_file", json!({"path": a.path}));
        Ok(outputs::WriteFile {
            bytes: i64::try_from(a.content.len()).unwrap_or(i64::MAX),
            path: a.path,
        })
    }
}

impl EchoHandler for Downstream {
    fn echo(&self, _: &Context, a: args::Echo) -> Result<outputs::Echo> {
        self.receive("echo", json!({"text": a.text}));
        Ok(outputs::Echo {
            text: a.text,
            server: instance(),
        })
    }
}

impl LessonsListHandler for Downstream {
    fn clash(&self, _: &Context, _: args::LessonsList) -> Result<outputs::LessonsList> {
        self.receive("lessons_list", json!({}));
        Ok(outputs::LessonsList { server: instance() })
    }
}

impl CrashHandler for Downstream {
    fn crash(&self, _: &Context, _: args::Crash) -> Result<outputs::Crash> {
        self.receive("crash", json!({}));
        crash()
    }
}
