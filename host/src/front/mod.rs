//! What faces a client: the HTTP front (`/mcp`, `/api`, `/metrics`), the
//! operator's console in the browser (served by the HTTP front at `/`) and
//! the MCP server front. Fronts talk only to [`crate::Host`].

pub(crate) mod console;
pub(crate) mod http;
pub(crate) mod mcp;
