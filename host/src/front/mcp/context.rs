//! What a call needs from the request that carries it: whether to stop,
//! the client's protocol era and capabilities, and the session's peer when
//! there is one to talk to while the call runs.
//!
//! rmcp hands its handlers a `RequestContext`, which always has a peer; a
//! request answered outside rmcp (the HTTP lane, `front/http/lane.rs`) has
//! none, and rmcp offers no way to make one. So the call path reads this
//! instead, made from either.

use rmcp::model::{ClientCapabilities, ProtocolVersion, RequestMetaObject};
use rmcp::service::{Peer, RequestContext, RoleServer};
use tokio_util::sync::CancellationToken;

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
