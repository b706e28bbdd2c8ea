//! What a call needs from the request that carries it: whether to stop,
//! the client's protocol era and capabilities, and the session's peer when
//! there is one to talk to while the call runs.
//!
//! rmcp hands its handlers a `RequestContext`, which always has a peer; a
//! request answered outside rmcp (the HTTP lane, `front/http/lane.rs`) has
//! none, and rmcp offers no way to make one. So the call path reads this
//! instead, made from either.

use std::borrow::Cow;

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ProtocolVersion, RequestId, RequestMetaObject,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

/// A `tools/call` request as the lanes read it (`stdio.rs`,
/// `front/http/lane.rs`): the envelope's fields borrowed, the parameters
/// as rmcp's handler takes them. Anything else in the message is ignored,
/// as rmcp ignores it.
#[derive(Deserialize)]
pub(crate) struct LaneCall<'a> {
    /// `"2.0"` for a JSON-RPC 2.0 request (the lanes check it).
    #[serde(borrow)]
    pub jsonrpc: Cow<'a, str>,
    /// The request's id.
    pub id: RequestId,
    /// `"tools/call"` for a call (the lanes check it).
    #[serde(borrow)]
    pub method: Cow<'a, str>,
    /// The call.
    pub params: CallToolRequestParams,
}

impl LaneCall<'_> {
    /// Whether this is a JSON-RPC 2.0 `tools/call` request.
    pub fn is_call(&self) -> bool {
        self.jsonrpc == "2.0" && self.method == "tools/call"
    }
}

/// Whether a call's `_meta` is one the lanes serve: the 2026-07-28 era's,
/// with every key it requires, asking for no progress and no log level (a
/// call with notices stays on rmcp's path: its answer must not overtake
/// them; an older or unknown version is rmcp's to refuse).
pub(crate) fn plain_meta(meta: &RequestMetaObject) -> bool {
    meta.protocol_version() == Some(ProtocolVersion::V_2026_07_28)
        && meta
            .missing_required_keys(&ProtocolVersion::V_2026_07_28)
            .is_empty()
        && meta.get_progress_token().is_none()
        && meta.log_level().is_none()
}

/// The request around one `tools/call`.
pub(crate) struct CallContext {
    /// Cancelled when the client cancels the request or leaves.
    pub ct: CancellationToken,
    /// Whether the client speaks the 2026-07-28 era (per-request `_meta`,
    /// answers by retry) rather than a legacy session.
    pub modern: bool,
    /// What the client declared it can do.
    pub caps: Option<ClientCapabilities>,
    /// The session's peer, to ask the client while the call waits; `None`
    /// when the request is answered with one message and nothing else.
    pub peer: Option<Peer<RoleServer>>,
}

impl CallContext {
    /// The context of a request rmcp (or the stdio lane) hands the front.
    pub fn of(context: &RequestContext<RoleServer>) -> CallContext {
        CallContext {
            ct: context.ct.clone(),
            modern: is_modern(context.protocol_version().as_ref()),
            caps: context.client_capabilities(),
            peer: Some(context.peer.clone()),
        }
    }

    /// The context of a 2026-07-28 request answered with one message: what
    /// its `_meta` declares, and no peer.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub fn stateless(meta: &RequestMetaObject, ct: CancellationToken) -> CallContext {
        CallContext {
            ct,
            modern: is_modern(meta.protocol_version().as_ref()),
            caps: meta.client_capabilities(),
            peer: None,
        }
    }
}

fn is_modern(version: Option<&ProtocolVersion>) -> bool {
    version.is_some_and(|v| *v >= ProtocolVersion::V_2026_07_28)
}
