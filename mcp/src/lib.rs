//! # skillhost-mcp
//!
//! The MCP client side of skillhost: server configuration
//! (`mcp_servers.json`), the stdio supervisor, the three transports
//! (stdio, streamable HTTP, legacy SSE), tool discovery and classification,
//! and tool calls with timeouts and cancellation.
//!
//! This crate speaks MCP and manages processes; it knows nothing of
//! WebAssembly, personas or the host's database. The `skillhost` crate
//! builds on it.
//!
//! Every message is bounded by [`MAX_MESSAGE_BYTES`] (16 MiB): a longer
//! stdio line or SSE event ends the session and the server is treated as
//! failed, instead of memory growing.

#![deny(missing_docs)]

mod client;
mod config;
mod elicit;
mod handshake;
mod import;
mod in_flight;
mod manager;
pub mod oauth;
mod policy;
mod proc_table;
mod process;
mod redirect;
mod server_log;
pub mod sse;
mod stderr_log;
mod stdio;
mod tools;

pub use client::{
    CallError, CallErrorKind, Era, MAX_INPUT_ROUNDS, Progress, SessionInfo, text_content,
};
pub use config::{
    CONFIG_FILE, ConfigError, DEFAULT_CONNECT_TIMEOUT, DEFAULT_MUTATING_TIMEOUT,
    DEFAULT_READ_ONLY_TIMEOUT, GLOBAL_ALL, McpConfig, Secret, ServerConfig, Timeouts, ToolOverride,
    TransportKind, valid_server_name,
};
pub use elicit::{
    ElicitQuestion, ElicitReply, ElicitReplyFuture, ForwardFuture, UpstreamElicitor, apply_defaults,
};
pub use handshake::LEGACY_PROBE_AFTER;
pub use import::{import_desktop_config, merge_imported};
pub use manager::{
    CallHooks, ManagerOptions, McpManager, MemoryPins, PinStore, RegisteredTool, RestartPolicy,
    ServerState, ServerStatus, TestReport, TestStep, register_discovered, server_dir, test_server,
};
pub use oauth::{
    Browser, HeadlessBrowser, LOGIN_WAIT, LoopbackBrowser, MAX_SIGN_IN_ATTEMPTS, OAuthSettings,
    SignInReport, SignInState, TOKEN_FILE, TokenHome, TokenVault, sign_in_state,
};
pub use policy::{
    ALLOW_ARBITRARY_STDIO_ENV, DEFAULT_STDIO_ALLOWLIST, StdioPolicy, code_loading_env,
};
pub use proc_table::{ProcEntry, group_members};
pub use process::SERVER_TAG_ENV;
pub use rmcp::model::CallToolResult;
pub use server_log::{ServerLogLevel, ServerLogLine, ServerLogSink};
pub use stderr_log::{CONTEXT_LINES, LOG_FILE, LOG_FILE_BYTES, RING_BYTES, StderrLog};
pub use stdio::MAX_MESSAGE_BYTES;
pub use tools::{McpTool, classify_tools, definition_hash};

/// Creates `path` and its missing parents, private to this user (mode
/// 0700): a server's folder holds its stderr log and working files.
pub(crate) fn private_dir_all(path: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
}
