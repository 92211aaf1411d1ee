//! The mcpspec runtime: everything a server compiled from a YAML spec needs to run as an MCP
//! server. It knows no particular server: a binary hands it the generated definitions
//! ([`def::ServerDef`]) and its handlers, and [`cli::main`] serves them.
//!
//! The public API is what a crate of one's own needs:
//! - [`cli`]: the command line a server binary runs (`serve`, `call`, `init`, `test`, `demo`,
//!   `list`, and `--spec` when the binary has a spec compiler), with the registry of
//!   [`Server`]s it serves; [`include_specs!`] includes what the build script generated.
//! - [`def`]: the table types the generated code fills; [`handler`]: what Rust handlers
//!   receive and return; [`confine`] keeps handlers' paths inside their project.
//! - [`engine`]: validates arguments and runs calls, in process; [`backend`]: the database
//!   seam ([`backend::Database`], [`backend::Location`]); its engines' internals are the
//!   crate's own.
//!
//! What this workspace's other crates and the generated code call beyond that is exported by
//! two hidden modules alone, outside the semver promise: `__internal` (the runtime's internals
//! they reach, the engines' among them) and `__private` (the crates generated code names).
//! - [`client`]: a small MCP client over stdio, for demos, tests and benchmarks.
//!
//! Everything else is the crate's own (the list in `public-api.txt`, beside `Cargo.toml`, is
//! what `cargo xtask check` holds the sources to): `params` (arguments to the values
//! statements bind), `content` (resources and prompts), `templates`, `transform` (derived
//! parameters), `startup` (a spec's start-up jobs), `examples` (running and judging a spec's
//! examples), `embed` (text to vectors), `auth` (tokens and callers), `protocol` (the MCP
//! surface on rmcp, with `protocol::jsonrpc` for messages that do not parse), `transport`
//! (stdio and HTTP), `proxy` (downstream servers and a spec's interceptor), `calllog` and
//! `logsafe` (the call log, and quoting what a caller sent), `shutdown`, `confirm` (asking
//! the person before destructive calls), `numbers`, `telemetry`.

// Generated code names this crate as `::mcpspec` so that it compiles both here and in users'
// crates.
extern crate self as mcpspec;

pub(crate) mod apps;
pub(crate) mod auth;
pub mod backend;
pub(crate) mod bound;
pub(crate) mod calllog;
pub mod cli;
pub mod client;
pub(crate) mod clock;
pub mod confine;
pub(crate) mod confirm;
pub(crate) mod content;
pub(crate) mod cursor;
pub(crate) mod embed;
pub mod engine;
pub(crate) mod examples;
pub mod handler;
pub(crate) mod logsafe;
#[cfg(feature = "http")]
pub(crate) mod metrics;
pub(crate) mod numbers;
pub(crate) mod params;
pub(crate) mod pool_use;
pub(crate) mod protocol;
pub(crate) mod proxy;
pub(crate) mod questions;
#[cfg(any(feature = "otel", feature = "embeddings"))]
pub(crate) mod roots;
mod rows;
pub(crate) mod shutdown;
pub(crate) mod skills;
pub(crate) mod startup;
pub(crate) mod telemetry;
pub(crate) mod templates;
pub(crate) mod tool_error;
pub(crate) mod transform;
pub(crate) mod transport;
pub(crate) mod uri_template;
pub(crate) mod watch;
pub(crate) mod workbench;

pub use cli::Server;

/// The definition tables (the `mcpspec-def` crate): what the generated code and the spec
/// compiler's builder fill in, and the runtime interprets.
pub use mcpspec_def as def;

/// Includes what [`codegen::compile_specs`](../codegen/fn.compile_specs.html) generated in a
/// build script: one module per spec and `SERVERS`, the list of every definition.
///
/// ```text
/// mod generated {
///     mcpspec::include_specs!();
/// }
/// ```
#[macro_export]
macro_rules! include_specs {
    () => {
        include!(concat!(env!("OUT_DIR"), "/generated/mod.rs"));
    };
}

/// Crates the generated code refers to through this crate, so users need not depend on them.
#[doc(hidden)]
pub mod __private {
    pub use serde;
    pub use serde_json;
}

/// What this workspace's other crates reach inside the runtime and no user should: the seed
/// servers' binary (`setup` finds a proxy's config file; a seed quotes a text cut short), the
/// spec compiler's live checks and the bench (the telemetry path, the search transforms, the
/// static embedding model, timed on their own), and the engines' own ([`__internal::backend`]).
/// Not part of the API and under no semver promise: hidden from the docs, listed apart in
/// `public-api.txt`, and kept to these names. The one way into the runtime's internals.
#[doc(hidden)]
pub mod __internal {
    #[cfg(feature = "embeddings")]
    pub use crate::embed::StaticModel;
    pub use crate::embed::columns::no_vectors_here;
    pub use crate::proxy::config_path;
    pub use crate::telemetry::{Parent, Request, RequestInfo, install, on as telemetry_on};
    pub use crate::transform::{fts5, truncate, words};

    /// The engines' own that the workspace's crates call: `init`, `migrate` and their checks
    /// (the spec compiler), database paths (the seeds' setup, the cli's `doctor`), and the
    /// connections the seeds' `pm` opens on a database server to administer it.
    pub mod backend {
        pub use crate::backend::ops::{confine_spec_sql, create, migrator, redact};

        /// `migrate`'s steps and what they find.
        pub mod migrate {
            pub use crate::backend::migrate::{
                Applied, Ask, Found, MigrateError, Migrator, Report, Status, TABLE, migrate, status,
            };
        }

        /// Where a server's SQLite file is by default, and the file a location names.
        pub mod paths {
            pub use crate::backend::paths::{PathSource, expand, file_of, resolve};
        }

        /// PostgreSQL connections as the engine makes them (TLS, deadlines, messages).
        #[cfg(feature = "postgres")]
        pub mod postgres {
            pub use crate::backend::postgres::{bounded, connect, is_url, message};
        }

        /// MariaDB/MySQL connections as the engine makes them.
        #[cfg(feature = "mysql")]
        pub mod mysql {
            pub use crate::backend::mysql::{describe, is_url, opts};
        }
    }
}

/// The `basic` golden, a server this crate's tests can start without knowing any seed.
#[cfg(test)]
#[allow(clippy::all, dead_code)]
mod basic {
    include!("../../../tests/fixtures/basic/expected/basic.rs");
}

#[cfg(all(test, feature = "sqlite"))]
mod goldens;
