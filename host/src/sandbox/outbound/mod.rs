//! Outbound HTTP from a skill: the standard `wasi:http/outgoing-handler`,
//! linked only for components loaded with the `network` capability, every
//! request checked against the caller's allowed origins.
//!
//! - `origin.rs` — [`OriginPattern`]: which `scheme://host:port` may be reached.

mod origin;

pub use origin::{OriginError, OriginPattern, Scheme};
