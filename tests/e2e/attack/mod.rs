//! Attacks on the host, one module per finding of a security review: each
//! test drives the real path an attacker would use (the host's API, the MCP
//! manager, a real child process or a real HTTP server on loopback) and
//! asserts the attack fails with a clear error and leaves nothing behind.

mod redirects;
mod setsid;
mod stdio_policy;
