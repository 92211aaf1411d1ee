//! End-to-end tests: the built `mcpspec` binary driven over real stdio pipes (and loopback
//! HTTP) with real JSON-RPC, on real SQLite files in temporary directories and real PostgreSQL
//! databases in a throwaway cluster the tests start themselves ([`pg`]).

mod common;
mod deps;
mod maria;
mod pg;

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
mod pm;
mod postgres;
mod protocol;
mod proxy;
mod studio;
mod task_bounds;
mod team;
mod untouched;
