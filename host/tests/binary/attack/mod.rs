//! Attacks on `skillhost serve` and the CLI, one module per finding of the
//! security review, each driving the real binary the way the attacker did.
//! (The MCP client side's attacks are in the `skillhost-e2e` crate's `attack` suite.)

mod client;
mod http_lane;
mod listen_streams;
mod private_files;
mod secrets;
mod self_approval;
mod sessions;
mod slow_connections;
mod stalled_bodies;
mod terminal_escapes;
mod waiting_runs;
