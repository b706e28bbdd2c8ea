//! Attacks on `skillhost serve` and the CLI, one module per finding of the
//! security review, each driving the real binary the way the attacker did.
//! (The MCP client side's attacks are in the `skillhost-e2e` crate's `attack` suite.)

mod approval_spoof;
mod client;
mod cookie_replay;
mod http_lane;
mod listen_streams;
mod private_files;
mod secret_echo;
mod secrets;
mod self_approval;
mod sessions;
mod sign_in_flood;
mod slow_connections;
mod stalled_bodies;
mod terminal_escapes;
mod upload_flood;
mod waiting_runs;
