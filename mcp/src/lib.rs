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

#![deny(missing_docs)]

pub mod sse;
