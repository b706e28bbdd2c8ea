//! How a component's `host.invoke` import reaches other tools.
//!
//! The sandbox knows nothing of skills, registries or personas: whoever
//! starts a call passes an [`Invoker`] that decides what `invoke` may reach.

use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

use super::outcome::ToolError;

/// Deepest chain of `invoke` calls (a tool calling a tool calling…).
pub const MAX_INVOKE_DEPTH: u32 = 4;

/// One `host.invoke` from a running component.
#[derive(Debug, Clone)]
pub struct InvokeRequest {
    /// `name@version` of the calling skill.
    pub caller: String,
    /// The tool asked for.
    pub tool: String,
    /// Its arguments, JSON text as the guest sent it.
    pub arguments_json: String,
    /// Depth of the call being made (the outermost call has depth 0, so this
    /// is at least 1).
    pub depth: u32,
    /// The caller's deadline; the invoked call must end before it.
    pub deadline: Instant,
}

/// A boxed future returned by an [`Invoker`].
pub type InvokeFuture = Pin<Box<dyn Future<Output = Result<String, ToolError>> + Send + 'static>>;

/// Decides and performs what a component's `host.invoke` reaches.
///
/// ```
/// use skillhost::{InvokeFuture, InvokeRequest, Invoker, ToolError};
/// struct DenyAll;
/// impl Invoker for DenyAll {
///     fn invoke(&self, req: InvokeRequest) -> InvokeFuture {
///         Box::pin(async move { Err(ToolError::Denied(format!("`{}` is not reachable", req.tool))) })
///     }
/// }
/// ```
pub trait Invoker: Send + Sync {
    /// Runs one invocation.
    fn invoke(&self, request: InvokeRequest) -> InvokeFuture;
}

/// Reads the blobs passed to one call by reference (`host.read-ref`).
///
/// Whoever starts a call decides which refs it may read; a reader that is
/// not given denies every ref.
///
/// ```
/// use skillhost::{RefReader, ToolError};
/// struct NoRefs;
/// impl RefReader for NoRefs {
///     fn read(&self, reference: &str, _offset: u64, _len: u32) -> Result<Vec<u8>, ToolError> {
///         Err(ToolError::Denied(format!("reference `{reference}` was not passed to this call")))
///     }
/// }
/// ```
pub trait RefReader: Send + Sync {
    /// Up to `len` bytes at `offset` of `reference`; empty at the end.
    fn read(&self, reference: &str, offset: u64, len: u32) -> Result<Vec<u8>, ToolError>;
}
