//! What faces a client: the HTTP front (`/mcp`, `/api`, `/metrics`), the
//! operator's console in the browser (served by the HTTP front at `/`) and
//! the MCP server front. Fronts talk only to [`crate::Host`].
//!
//! The MCP front is part of every build; the HTTP front comes with the
//! `http` feature, the console with `console` (host/Cargo.toml).

#[cfg(feature = "console")]
pub(crate) mod console;
#[cfg(feature = "http")]
pub(crate) mod http;
pub(crate) mod mcp;
