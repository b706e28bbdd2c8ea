//! The end-to-end suites across crates, in one test binary (each test
//! binary links the whole host again, so a new suite is a module here, not
//! a new binary): `cargo test -p skillhost-e2e --test e2e sandbox::`.
//!
//! - `sandbox`: hostile components against the sandbox's limits and policy;
//! - `outbound`: outbound HTTP from skills (origins, addresses, secrets);
//! - `invoke`: skills calling tools through the host;
//! - `polyglot`: Python and JavaScript skills;
//! - `scripts`: skill scripts in the built-in Python runtime (and the
//!   hostile ones);
//! - `registry`: the authorization matrix over both databases;
//! - `mcp_client`, `mcp_sessions`, `mcp_hostile`, `mcp_conformance`: the
//!   MCP client against real and hostile servers and the conformance suite;
//! - `peers_smoke`: the real peers the suites rely on;
//! - `attack`: attacks of the security reviews.

mod attack;
mod invoke;
mod mcp_client;
mod mcp_conformance;
mod mcp_hostile;
mod mcp_sessions;
mod outbound;
mod peers_smoke;
mod polyglot;
mod registry;
mod sandbox;
mod scripts;
