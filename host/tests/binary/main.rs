//! The tests of the `skillhost` binary: one test binary (one link, one
//! compile of the shared helpers) whose modules drive the real binary: the
//! CLI, `serve` over stdio and HTTP, the console in Chromium, replicas
//! on PostgreSQL, and the attacks of the security review (`attack`).
//!
//! Run one module with `cargo test -p skillhost --test binary MODULE::`.
//! `common` holds what every module shares: the binary against a temp data
//! dir, free ports, the peers, and the two-database matrix
//! (`on_each_database!`).

#[macro_use]
mod common;

mod attack;
mod author;
mod bundles;
mod cli;
mod console;
mod durability;
mod front_oauth;
mod installs;
mod mcp_cli;
mod oauth_upstream;
mod permissions;
mod replicas;
mod scripts;
mod serve;
mod serve_api;
mod serve_ask;
mod serve_confirm;
mod serve_conformance;
mod serve_http;
mod serve_metrics;
mod serve_stdio;
mod serve_upstream_log;
mod serve_upstream_questions;
mod serve_upstream_reach;
mod state;
mod workspace;
