//! The runtime's settings as the generated docs name them: each environment variable and its
//! default. The runtime's own defaults are these (its `Limits::default` reads them), so the
//! reference cannot state a wrong name or value.

/// One setting of the runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// The environment variable.
    pub var: &'static str,
    /// The default, in the variable's unit.
    pub default: u64,
    /// The default as the docs say it.
    pub shown: &'static str,
}

/// The largest arguments object accepted, in bytes.
pub const MAX_ARGUMENT_BYTES: Setting = Setting {
    var: "MCPSPEC_MAX_ARGUMENT_BYTES",
    default: 4 * 1024 * 1024,
    shown: "4 MiB",
};

/// The largest result returned, in bytes.
pub const MAX_RESULT_BYTES: Setting = Setting {
    var: "MCPSPEC_MAX_RESULT_BYTES",
    default: 8 * 1024 * 1024,
    shown: "8 MiB",
};

/// How long one call may run, in milliseconds.
pub const CALL_TIMEOUT_MS: Setting = Setting {
    var: "MCPSPEC_CALL_TIMEOUT_MS",
    default: 30_000,
    shown: "30 s",
};

/// How long a destructive call waits for the person's confirmation, in seconds.
pub const CONFIRM_TIMEOUT_SECS: Setting = Setting {
    var: "MCPSPEC_CONFIRM_TIMEOUT_SECS",
    default: 300,
    shown: "300 s",
};

/// How long a SQL or content call of a `task:` tool may run before it becomes a task, in
/// milliseconds; 0 makes every such call a task at once.
pub const TASK_AFTER_MS: Setting = Setting {
    var: "MCPSPEC_TASK_AFTER_MS",
    default: 1000,
    shown: "1 s",
};

impl Setting {
    /// "`VAR` (DEFAULT by default)", as the docs write it.
    pub fn cited(&self) -> String {
        format!("`{}` ({} by default)", self.var, self.shown)
    }
}
