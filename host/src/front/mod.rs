//! What faces a client: the HTTP front (`/mcp`, `/api`, `/metrics`) and
//! the MCP server front. Fronts talk only to [`crate::Host`].

pub(crate) mod http;
pub(crate) mod mcp;
