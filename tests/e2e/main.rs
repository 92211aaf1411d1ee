//! End-to-end tests: the built `mcpspec` binary driven over real stdio pipes (and loopback
//! HTTP) with real JSON-RPC, on real SQLite files in temporary directories and real PostgreSQL
//! databases in a throwaway cluster the tests start themselves ([`pg`]).
//!
//! Two tiers: without the package's `full` feature (`cargo test`) only the tests that need
//! nothing beyond a Rust toolchain are compiled in: SQLite, stdio, loopback HTTP, the test
//! doubles. With it (`cargo xtask test`) the tests that start PostgreSQL, MariaDB, Prometheus
//! or an OpenID provider, fetch from PyPI or npm, or run a nested cargo build are added. A
//! quick-tier test that reaches for one of those fails at once saying so
//! ([`common::full_tier`]).
// The quick tier compiles the full tier's helpers without their callers.
#![cfg_attr(not(feature = "full"), allow(dead_code, unused_imports))]

mod common;
mod deps;
mod maria;
mod pg;

mod apps;
mod bounded;
mod browser;
mod cli;
mod conformance;
mod content;
mod deadlines;
mod dev;
mod embeddings;
mod examples;
mod goldens;
mod health;
mod http;
mod issuer;
mod knowledge;
mod laminark;
mod lessons;
mod lessons_scan;
mod mariadb;
mod metrics;
mod migrate;
mod new;
mod oauth;
mod oidc;
mod openai;
mod otel;
mod paging;
mod pm;
mod postgres;
mod protocol;
mod proxy;
mod skills;
mod studio;
mod task_bounds;
mod team;
mod untouched;
mod workbench;
