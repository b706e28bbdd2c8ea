//! The dual-era handshake of a stdio session, run by the host itself on the
//! transport before rmcp's service takes the transport over.
//!
//! A stdio server may take long to start: `npx -y some-server` fetches the
//! package first, and reads nothing meanwhile (on a cold cache, for as long
//! as the download takes).
//! The whole handshake is therefore bounded by the server's connect timeout
//! (90 s unless configured) and by nothing shorter:
//!
//! 1. `server/discover` (2026-07-28) is sent at once;
//! 2. if it has no answer after [`LEGACY_PROBE_AFTER`] (or half the connect
//!    timeout, if that is shorter), `initialize` is sent too: a legacy
//!    server that drops methods it does not know answers only that;
//! 3. both are waited for until the deadline, in whatever order they come.
//!    A discover result speaking 2026-07-28 makes a modern session; an
//!    `initialize` result makes a legacy one (`initialize` is sent when
//!    the probe says the server is legacy: a JSON-RPC error other than a
//!    2026-07-28 refusal, or a result that is not a discover result). The
//!    answer to the other request is then left to the session, which drops
//!    it: the handshake's ids are strings, which rmcp never uses.
//!
//! A slow 2026-07-28 server thus reads `initialize` after the probe. The
//! Python SDK refuses it (the connection's first request chose its era);
//! an rmcp server answers it as well (the probe opens no lifecycle there),
//! and still serves the requests that follow, which carry the 2026-07-28
//! metadata. Either way the server read the probe first and answered it
//! first, so the session is a 2026-07-28 one.
//!
//! rmcp's own `ClientLifecycleMode::Auto` gives the probe 10 s and then
//! sends `initialize` on the same transport, taking a late answer to the
//! probe for a broken handshake ("uncorrelated error response"): a server
//! that started in 11 s could not be reached.
//!
//! Then [`rmcp::service::serve_directly`] starts the session with the peer
//! information found here; for a 2026-07-28 session it adds the request
//! metadata every request carries, as rmcp's own discovery would.

use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{
    ClientConfig, ClientJsonRpcMessage, ClientNotification, ClientRequest, ClientResult,
    DiscoverRequest, DiscoverRequestParams, ErrorCode, ErrorData, InitializeRequest,
    InitializedNotification, ProtocolVersion, RequestId, RequestMetaObject, ServerJsonRpcMessage,
    ServerPeerInfo, ServerRequest, ServerResult,
};
use rmcp::transport::Transport;
use tokio::time::Instant;

use crate::client::secs_text;

/// How long `server/discover` alone is waited for before `initialize` is
/// sent too (or half the connect timeout, if that is shorter). A legacy
/// server that drops methods it does not know answers only `initialize`;
/// a slow one answers both, in order, and neither answer is lost. 10 s is
/// the wait rmcp's own dual-era client gives the probe.
pub const LEGACY_PROBE_AFTER: Duration = Duration::from_secs(10);

/// The protocol revision of the 2026-07-28 era the host speaks.
pub(crate) const MODERN_VERSION: ProtocolVersion = ProtocolVersion::V_2026_07_28;

/// The id of the handshake's `server/discover`.
const DISCOVER_ID: &str = "skillhost-handshake-discover";
/// The id of the handshake's `initialize`.
const INITIALIZE_ID: &str = "skillhost-handshake-initialize";

/// A JSON-RPC error a 2026-07-28 server refuses a client with (so the
/// server is not legacy, and `initialize` would not help). Other errors to
/// `server/discover` (method not found, invalid request, …) are what a
/// legacy server answers to a method it does not know.
pub(crate) fn is_modern_refusal(code: ErrorCode) -> bool {
    code == ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY || code == ErrorCode::HEADER_MISMATCH
}

/// The handshake's two requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    Discover,
    Initialize,
}

impl Sent {
    fn method(self) -> &'static str {
        match self {
            Sent::Discover => "server/discover",
            Sent::Initialize => "initialize",
        }
    }

    fn id(self) -> RequestId {
        match self {
            Sent::Discover => RequestId::String(DISCOVER_ID.into()),
            Sent::Initialize => RequestId::String(INITIALIZE_ID.into()),
        }
    }
}

/// How the handshake failed. Its text says what happened; the caller adds
/// what it knows of the process (its exit, its last stderr lines).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum HandshakeError {
    /// Nothing conclusive came before the deadline.
    #[error("{}", no_answer_text(*timeout, *initialize_after, discover.as_deref(), refused.as_deref()))]
    NoAnswer {
        /// The connect timeout.
        timeout: Duration,
        /// When `initialize` was sent, if it was.
        initialize_after: Option<Duration>,
        /// What `server/discover` got, if it was answered (as a legacy
        /// server answers it, `initialize` then going unanswered).
        discover: Option<String>,
        /// How `initialize` was refused while `server/discover` went
        /// unanswered, if it was.
        refused: Option<String>,
    },
    /// The server's output ended before the handshake did.
    #[error("the server ended the session during the handshake, after {}", secs_text(*after))]
    Closed {
        /// Time from the start to the end of the output.
        after: Duration,
    },
    /// A request could not be written to the server.
    #[error("cannot send {method} to the server: {why}")]
    Send {
        /// The method.
        method: &'static str,
        /// Why.
        why: String,
    },
    /// The server answered, refusing the handshake.
    #[error("the server refused the handshake: {0}")]
    Refused(String),
}

/// [`HandshakeError::NoAnswer`]'s text: what went unanswered, what was
/// sent when.
fn no_answer_text(
    timeout: Duration,
    initialize_after: Option<Duration>,
    discover: Option<&str>,
    refused: Option<&str>,
) -> String {
    let within = secs_text(timeout);
    match (discover, initialize_after, refused) {
        (Some(got), _, _) => format!(
            "no answer to initialize within {within} (server/discover got {got}, as from a \
             server older than 2026-07-28)"
        ),
        (None, None, _) => {
            format!("no answer to the handshake within {within} (server/discover sent at once)")
        }
        (None, Some(after), None) => format!(
            "no answer to the handshake within {within} (server/discover sent at once, \
             initialize after {})",
            secs_text(after)
        ),
        (None, Some(after), Some(why)) => format!(
            "no answer to the handshake within {within} (server/discover sent at once, \
             initialize after {}, which it refused: {why})",
            secs_text(after)
        ),
    }
}

/// What one request got.
type Reply = Result<ServerResult, ErrorData>;

/// A reply as text, for error messages: the JSON-RPC error, or the kind of
/// result that was not the one asked for.
fn reply_text(reply: &Reply) -> String {
    match reply {
        Err(e) => format!("JSON-RPC error {}: {}", e.code.0, e.message),
        Ok(ServerResult::DiscoverResult(r)) => {
            let versions: Vec<&str> = r.supported_versions.iter().map(|v| v.as_str()).collect();
            format!("it speaks {} only", versions.join(", "))
        }
        Ok(other) => {
            let shown = serde_json::to_string(other).unwrap_or_default();
            let cut: String = shown.chars().take(200).collect();
            format!("the result {cut}")
        }
    }
}

/// What the server said so far.
#[derive(Default)]
struct Replies {
    discover: Option<Reply>,
    initialize: Option<Reply>,
    /// When `initialize` was sent (from the start), if it was.
    initialize_sent: Option<Duration>,
}

/// What to do next.
enum Step {
    /// Keep waiting.
    Wait,
    /// The probe says legacy: send `initialize` (if not yet sent).
    Initialize,
    /// Done, by the answer to this request.
    Peer(Box<ServerPeerInfo>, Sent),
    Fail(HandshakeError),
}

impl Replies {
    /// What the replies so far decide.
    fn next_step(&self) -> Step {
        match &self.discover {
            Some(Ok(ServerResult::DiscoverResult(result)))
                if result.supported_versions.contains(&MODERN_VERSION) =>
            {
                return Step::Peer(
                    Box::new(ServerPeerInfo::from_discover_result(
                        MODERN_VERSION,
                        result.clone(),
                    )),
                    Sent::Discover,
                );
            }
            Some(Err(e)) if is_modern_refusal(e.code) => {
                return Step::Fail(HandshakeError::Refused(format!(
                    "server/discover: {}",
                    reply_text(&Err(e.clone()))
                )));
            }
            // Anything else the probe got says legacy (an error to a method
            // it does not know, a result that is not a discover result) or
            // speaks no revision in common: `initialize` decides.
            _ => {}
        }
        match (&self.discover, &self.initialize) {
            (_, Some(Ok(ServerResult::InitializeResult(result)))) => {
                Step::Peer(Box::new(result.clone().into()), Sent::Initialize)
            }
            (Some(probe), Some(refused)) => Step::Fail(HandshakeError::Refused(format!(
                "server/discover: {}; initialize: {}",
                reply_text(probe),
                reply_text(refused)
            ))),
            (Some(_), None) => Step::Initialize,
            // `initialize` refused while the probe is unanswered: a
            // 2026-07-28 server refuses it after `server/discover`, whose
            // answer is still to come.
            (None, _) => Step::Wait,
        }
    }

    /// Takes `reply` for `id` (an error without an id answers the oldest
    /// request unanswered, as the server reads them in order). A reply to
    /// nothing the handshake asked is dropped.
    fn take(&mut self, id: Option<&RequestId>, reply: Reply) {
        let to = match id {
            Some(id) if *id == Sent::Discover.id() => Sent::Discover,
            Some(id) if *id == Sent::Initialize.id() => Sent::Initialize,
            None if self.discover.is_none() => Sent::Discover,
            None => Sent::Initialize,
            Some(id) => {
                tracing::debug!(%id, "dropped an answer to no request of the handshake");
                return;
            }
        };
        let slot = match to {
            Sent::Discover => &mut self.discover,
            Sent::Initialize if self.initialize_sent.is_some() => &mut self.initialize,
            Sent::Initialize => return,
        };
        if slot.is_none() {
            *slot = Some(reply);
        }
    }
}

/// When the handshake's timers run from, and until.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadlines {
    /// When the server was started.
    pub started: Instant,
    /// The connect timeout, from `started`.
    pub timeout: Duration,
    /// When `initialize` goes out if `server/discover` has no answer yet,
    /// from `started`.
    pub legacy_probe_after: Duration,
}

impl Deadlines {
    /// The deadlines of a server started at `started` with the connect
    /// timeout `timeout`: `initialize` after [`LEGACY_PROBE_AFTER`], or
    /// half the timeout if that is shorter.
    pub(crate) fn new(started: Instant, timeout: Duration) -> Deadlines {
        Deadlines {
            started,
            timeout,
            legacy_probe_after: LEGACY_PROBE_AFTER.min(timeout / 2),
        }
    }
}

/// Runs the handshake on `transport` with `client` (the host's name,
/// version and capabilities) within `deadlines`; returns the server's peer
/// information (a 2026-07-28 one when it speaks that revision).
///
/// `transport.receive()` must be cancel-safe (a channel's `recv`, as the
/// stdio transport's is): it is raced against the timers.
pub(crate) async fn handshake<T>(
    transport: &mut T,
    client: &ClientConfig,
    deadlines: Deadlines,
) -> Result<ServerPeerInfo, HandshakeError>
where
    T: Transport<RoleClient>,
{
    let Deadlines {
        started,
        timeout,
        legacy_probe_after,
    } = deadlines;
    let deadline = started + timeout;
    let probe_at = started + legacy_probe_after;
    let mut discover = DiscoverRequest::new(DiscoverRequestParams {});
    discover
        .extensions
        .insert(RequestMetaObject::with_client_context(
            MODERN_VERSION,
            client.client_info.clone(),
            client.capabilities.clone(),
        ));
    send(
        transport,
        Sent::Discover,
        ClientRequest::DiscoverRequest(discover),
    )
    .await?;
    let mut replies = Replies::default();
    loop {
        match replies.next_step() {
            Step::Wait => {}
            Step::Peer(peer, via) => {
                if via == Sent::Initialize {
                    let done = ClientNotification::InitializedNotification(
                        InitializedNotification::default(),
                    );
                    transport
                        .send(ClientJsonRpcMessage::notification(done))
                        .await
                        .map_err(|e| HandshakeError::Send {
                            method: "notifications/initialized",
                            why: e.to_string(),
                        })?;
                }
                return Ok(*peer);
            }
            Step::Fail(e) => return Err(e),
            Step::Initialize => {
                if replies.initialize_sent.is_none() {
                    let now = started.elapsed();
                    send_initialize(transport, client, &mut replies, now).await?;
                }
            }
        }
        tokio::select! {
            message = transport.receive() => {
                let Some(message) = message else {
                    return Err(HandshakeError::Closed { after: started.elapsed() });
                };
                read(transport, message, &mut replies).await?;
            }
            _ = tokio::time::sleep_until(probe_at), if replies.initialize_sent.is_none() => {
                send_initialize(transport, client, &mut replies, legacy_probe_after).await?;
            }
            _ = tokio::time::sleep_until(deadline) => {
                return Err(HandshakeError::NoAnswer {
                    timeout,
                    initialize_after: replies.initialize_sent,
                    discover: replies.discover.as_ref().map(reply_text),
                    refused: replies.initialize.as_ref().map(reply_text),
                });
            }
        }
    }
}

async fn send<T: Transport<RoleClient>>(
    transport: &mut T,
    what: Sent,
    request: ClientRequest,
) -> Result<(), HandshakeError> {
    transport
        .send(ClientJsonRpcMessage::request(request, what.id()))
        .await
        .map_err(|e| HandshakeError::Send {
            method: what.method(),
            why: e.to_string(),
        })
}

/// Sends `initialize`, `after` the start.
async fn send_initialize<T: Transport<RoleClient>>(
    transport: &mut T,
    client: &ClientConfig,
    replies: &mut Replies,
    after: Duration,
) -> Result<(), HandshakeError> {
    let request = ClientRequest::InitializeRequest(InitializeRequest::new(client.clone()));
    send(transport, Sent::Initialize, request).await?;
    replies.initialize_sent = Some(after);
    Ok(())
}

/// Takes one message of the server's during the handshake: an answer is
/// kept, a ping answered, any other request refused (nothing is set up to
/// answer it yet), a notification dropped (no call is in flight to take a
/// log line).
async fn read<T: Transport<RoleClient>>(
    transport: &mut T,
    message: ServerJsonRpcMessage,
    replies: &mut Replies,
) -> Result<(), HandshakeError> {
    let answer = match message {
        ServerJsonRpcMessage::Response(r) => {
            replies.take(Some(&r.id), Ok(r.result));
            return Ok(());
        }
        ServerJsonRpcMessage::Error(e) => {
            replies.take(e.id.as_ref(), Err(e.error));
            return Ok(());
        }
        ServerJsonRpcMessage::Notification(_) => return Ok(()),
        ServerJsonRpcMessage::Request(r) => match r.request {
            ServerRequest::PingRequest(_) => {
                ClientJsonRpcMessage::response(ClientResult::empty(()), r.id)
            }
            _ => ClientJsonRpcMessage::error(
                ErrorData::invalid_request(
                    "skillhost answers requests of a server once the handshake is done",
                    None,
                ),
                Some(r.id),
            ),
        },
    };
    transport
        .send(answer)
        .await
        .map_err(|e| HandshakeError::Send {
            method: "an answer",
            why: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{
        DiscoverResult, Implementation, InitializeResult, PingRequest, ServerCapabilities,
    };
    use tokio::sync::mpsc;

    /// A transport whose other end is the test, playing the server.
    struct Pipe {
        from_server: mpsc::UnboundedReceiver<ServerJsonRpcMessage>,
        to_server: mpsc::UnboundedSender<ClientJsonRpcMessage>,
    }

    impl Transport<RoleClient> for Pipe {
        type Error = std::io::Error;

        fn send(
            &mut self,
            item: ClientJsonRpcMessage,
        ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
            let sent = self
                .to_server
                .send(item)
                .map_err(|_| std::io::Error::other("the server is gone"));
            async move { sent }
        }

        fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
            self.from_server.recv()
        }

        async fn close(&mut self) -> Result<(), Self::Error> {
            Ok(())
        }
    }

    /// The test's end: what the client sent, and a way to answer.
    struct Server {
        to_client: Option<mpsc::UnboundedSender<ServerJsonRpcMessage>>,
        from_client: mpsc::UnboundedReceiver<ClientJsonRpcMessage>,
    }

    impl Server {
        /// The next message the client sent, within `within`.
        async fn next(&mut self, within: Duration) -> Option<ClientJsonRpcMessage> {
            tokio::time::timeout(within, self.from_client.recv())
                .await
                .ok()
                .flatten()
        }

        /// The method and id of the next request the client sent.
        async fn request(&mut self, within: Duration) -> (String, RequestId) {
            match self.next(within).await {
                Some(ClientJsonRpcMessage::Request(r)) => {
                    let value = serde_json::to_value(&r.request).unwrap();
                    (value["method"].as_str().unwrap().to_string(), r.id)
                }
                other => panic!("expected a request, got {other:?}"),
            }
        }

        fn answer(&self, message: ServerJsonRpcMessage) {
            self.to_client.as_ref().unwrap().send(message).unwrap();
        }

        fn result(&self, id: RequestId, result: ServerResult) {
            self.answer(ServerJsonRpcMessage::response(result, id));
        }

        fn error(&self, id: Option<RequestId>, code: ErrorCode, message: &str) {
            self.answer(ServerJsonRpcMessage::error(
                ErrorData::new(code, message.to_string(), None),
                id,
            ));
        }
    }

    /// Short stand-ins for the connect timeout and the probe's wait.
    const TIMEOUT: Duration = Duration::from_secs(20);
    const PROBE: Duration = Duration::from_millis(300);
    /// Longer than `PROBE`, as a slow server's start is longer than 10 s.
    const SLOW: Duration = Duration::from_millis(600);
    /// What a loaded machine may add to a timer.
    const SLACK: Duration = Duration::from_millis(900);

    type Outcome = (Result<ServerPeerInfo, HandshakeError>, Duration);

    /// Starts a handshake against the test's server.
    fn start(timeout: Duration) -> (tokio::task::JoinHandle<Outcome>, Server) {
        let (to_client, from_server) = mpsc::unbounded_channel();
        let (to_server, from_client) = mpsc::unbounded_channel();
        let mut pipe = Pipe {
            from_server,
            to_server,
        };
        let deadlines = Deadlines {
            started: Instant::now(),
            timeout,
            legacy_probe_after: PROBE,
        };
        let client =
            ClientConfig::new(Default::default(), Implementation::new("skillhost", "test"))
                .with_protocol_version(ProtocolVersion::V_2025_11_25);
        let task = tokio::spawn(async move {
            let out = handshake(&mut pipe, &client, deadlines).await;
            (out, deadlines.started.elapsed())
        });
        let server = Server {
            to_client: Some(to_client),
            from_client,
        };
        (task, server)
    }

    fn discovered() -> ServerResult {
        let r = DiscoverResult::new(vec![MODERN_VERSION], ServerCapabilities::default())
            .with_server_info(Implementation::new("modern", "1.0.0"));
        ServerResult::DiscoverResult(r)
    }

    fn initialized() -> ServerResult {
        ServerResult::InitializeResult(
            InitializeResult::new(ServerCapabilities::default())
                .with_protocol_version(ProtocolVersion::V_2025_11_25)
                .with_server_info(Implementation::new("legacy", "1.0.0")),
        )
    }

    fn is_initialized_notification(m: &ClientJsonRpcMessage) -> bool {
        matches!(
            m,
            ClientJsonRpcMessage::Notification(n)
                if matches!(n.notification, ClientNotification::InitializedNotification(_))
        )
    }

    #[tokio::test]
    async fn a_modern_server_answering_at_once_gets_discover_only() {
        let (task, mut server) = start(TIMEOUT);
        let (method, id) = server.request(SLACK).await;
        assert_eq!(method, "server/discover");
        server.result(id, discovered());
        let (peer, took) = task.await.unwrap();
        let peer = peer.unwrap();
        assert_eq!(peer.protocol_version, MODERN_VERSION);
        assert_eq!(peer.server_info.unwrap().name, "modern");
        assert!(took < PROBE, "{took:?}");
        // Nothing else was sent: no `initialize`.
        assert!(server.next(PROBE * 2).await.is_none());
    }

    #[tokio::test]
    async fn a_slow_modern_server_is_modern_whatever_it_says_to_initialize() {
        let (task, mut server) = start(TIMEOUT);
        let (_, discover) = server.request(SLACK).await;
        let (method, initialize) = server.request(PROBE + SLACK).await;
        assert_eq!(method, "initialize");
        tokio::time::sleep(SLOW).await;
        // Refused first (a server answering out of order), then discovered.
        server.error(
            Some(initialize),
            ErrorCode::UNSUPPORTED_PROTOCOL_VERSION,
            "this connection serves 2026-07-28",
        );
        server.result(discover, discovered());
        let (peer, took) = task.await.unwrap();
        assert_eq!(peer.unwrap().protocol_version, MODERN_VERSION);
        assert!(took >= SLOW, "{took:?}");
    }

    #[tokio::test]
    async fn a_slow_legacy_server_answering_both_in_order_is_legacy() {
        let (task, mut server) = start(TIMEOUT);
        let (_, discover) = server.request(SLACK).await;
        let (_, initialize) = server.request(PROBE + SLACK).await;
        tokio::time::sleep(SLOW).await;
        server.error(
            Some(discover),
            ErrorCode::METHOD_NOT_FOUND,
            "Method not found",
        );
        server.result(initialize, initialized());
        let (peer, took) = task.await.unwrap();
        assert_eq!(
            peer.unwrap().protocol_version,
            ProtocolVersion::V_2025_11_25
        );
        assert!(took >= SLOW, "{took:?}");
        // The handshake ends as the legacy one does, with one `initialize`.
        let done = server.next(SLACK).await.unwrap();
        assert!(is_initialized_notification(&done), "{done:?}");
        assert!(server.next(PROBE).await.is_none());
    }

    #[tokio::test]
    async fn a_legacy_server_answering_at_once_gets_initialize_at_once() {
        let (task, mut server) = start(TIMEOUT);
        let _ = server.request(SLACK).await;
        // An error without an id answers the request the server read first.
        server.error(None, ErrorCode::INVALID_REQUEST, "unknown method");
        let (method, initialize) = server.request(PROBE / 2).await;
        assert_eq!(method, "initialize");
        server.result(initialize, initialized());
        let (peer, took) = task.await.unwrap();
        assert!(peer.is_ok());
        assert!(took < PROBE, "{took:?}");
        assert!(is_initialized_notification(
            &server.next(SLACK).await.unwrap()
        ));
    }

    #[tokio::test]
    async fn a_legacy_server_answering_discover_with_an_empty_result_is_legacy() {
        let (task, mut server) = start(TIMEOUT);
        let (_, discover) = server.request(SLACK).await;
        server.result(discover, ServerResult::empty(()));
        let (_, initialize) = server.request(PROBE / 2).await;
        server.result(initialize, initialized());
        assert!(task.await.unwrap().0.is_ok());
    }

    #[tokio::test]
    async fn a_modern_server_speaking_other_revisions_only_gets_initialize() {
        let (task, mut server) = start(TIMEOUT);
        let (_, discover) = server.request(SLACK).await;
        let other = DiscoverResult::new(
            vec![ProtocolVersion::V_2025_11_25],
            ServerCapabilities::default(),
        );
        server.result(discover, ServerResult::DiscoverResult(other));
        let (method, initialize) = server.request(PROBE / 2).await;
        assert_eq!(method, "initialize");
        server.error(Some(initialize), ErrorCode::INTERNAL_ERROR, "no");
        let (err, _) = task.await.unwrap();
        assert_eq!(
            err.unwrap_err().to_string(),
            "the server refused the handshake: server/discover: it speaks 2025-11-25 only; \
             initialize: JSON-RPC error -32603: no"
        );
    }

    #[tokio::test]
    async fn a_server_silent_on_discover_connects_with_initialize() {
        let (task, mut server) = start(TIMEOUT);
        let _ = server.request(SLACK).await;
        let (method, initialize) = server.request(PROBE + SLACK).await;
        assert_eq!(method, "initialize");
        server.result(initialize, initialized());
        let (peer, took) = task.await.unwrap();
        assert!(peer.is_ok());
        assert!(took >= PROBE && took < PROBE + SLACK, "{took:?}");
    }

    #[tokio::test]
    async fn pings_are_answered_and_other_requests_refused_meanwhile() {
        let (task, mut server) = start(TIMEOUT);
        let (_, discover) = server.request(SLACK).await;
        server.answer(ServerJsonRpcMessage::request(
            ServerRequest::PingRequest(PingRequest::default()),
            RequestId::Number(7),
        ));
        match server.next(SLACK).await {
            Some(ClientJsonRpcMessage::Response(r)) => assert_eq!(r.id, RequestId::Number(7)),
            other => panic!("{other:?}"),
        }
        server.answer(ServerJsonRpcMessage::request(
            ServerRequest::ListRootsRequest(Default::default()),
            RequestId::Number(8),
        ));
        match server.next(SLACK).await {
            Some(ClientJsonRpcMessage::Error(e)) => {
                assert_eq!(e.id, Some(RequestId::Number(8)));
                assert_eq!(e.error.code, ErrorCode::INVALID_REQUEST);
            }
            other => panic!("{other:?}"),
        }
        // An answer to an id the handshake never used changes nothing.
        server.error(
            Some(RequestId::Number(0)),
            ErrorCode::METHOD_NOT_FOUND,
            "stray",
        );
        server.result(discover, discovered());
        let (peer, _) = task.await.unwrap();
        assert_eq!(peer.unwrap().protocol_version, MODERN_VERSION);
    }

    #[tokio::test]
    async fn silence_fails_at_the_timeout_saying_what_was_sent() {
        let timeout = Duration::from_secs(1);
        let (task, mut server) = start(timeout);
        let _ = server.request(SLACK).await;
        let (err, took) = task.await.unwrap();
        assert!(took >= timeout && took < timeout + SLACK, "{took:?}");
        assert_eq!(
            err.unwrap_err().to_string(),
            "no answer to the handshake within 1s (server/discover sent at once, initialize \
             after 0.3s)"
        );
    }

    #[tokio::test]
    async fn an_initialize_refused_while_discover_is_unanswered_is_told_at_the_timeout() {
        let timeout = Duration::from_secs(1);
        let (task, mut server) = start(timeout);
        let _ = server.request(SLACK).await;
        let (_, initialize) = server.request(PROBE + SLACK).await;
        server.error(
            Some(initialize),
            ErrorCode::UNSUPPORTED_PROTOCOL_VERSION,
            "not on this connection",
        );
        let (err, took) = task.await.unwrap();
        assert!(took >= timeout, "{took:?}");
        assert_eq!(
            err.unwrap_err().to_string(),
            "no answer to the handshake within 1s (server/discover sent at once, initialize \
             after 0.3s, which it refused: JSON-RPC error -32022: not on this connection)"
        );
    }

    #[tokio::test]
    async fn an_unanswered_initialize_after_a_legacy_probe_is_told_at_the_timeout() {
        let timeout = Duration::from_secs(1);
        let (task, mut server) = start(timeout);
        let (_, discover) = server.request(SLACK).await;
        server.error(
            Some(discover),
            ErrorCode::METHOD_NOT_FOUND,
            "Method not found",
        );
        let (method, _) = server.request(PROBE / 2).await;
        assert_eq!(method, "initialize");
        let (err, took) = task.await.unwrap();
        assert!(took >= timeout, "{took:?}");
        assert_eq!(
            err.unwrap_err().to_string(),
            "no answer to initialize within 1s (server/discover got JSON-RPC error -32601: \
             Method not found, as from a server older than 2026-07-28)"
        );
    }

    #[tokio::test]
    async fn refusals_say_what_each_request_got() {
        // A 2026-07-28 refusal: no `initialize`.
        let (task, mut server) = start(TIMEOUT);
        let (_, discover) = server.request(SLACK).await;
        server.error(
            Some(discover),
            ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
            "needs sampling",
        );
        let (err, _) = task.await.unwrap();
        assert_eq!(
            err.unwrap_err().to_string(),
            "the server refused the handshake: server/discover: JSON-RPC error -32021: needs \
             sampling"
        );
        assert!(server.next(PROBE * 2).await.is_none());
        // Legacy, then `initialize` refused too.
        let (task, mut server) = start(TIMEOUT);
        let (_, discover) = server.request(SLACK).await;
        server.error(
            Some(discover),
            ErrorCode::METHOD_NOT_FOUND,
            "Method not found",
        );
        let (_, initialize) = server.request(PROBE / 2).await;
        server.error(Some(initialize), ErrorCode::INTERNAL_ERROR, "broken");
        let (err, _) = task.await.unwrap();
        assert_eq!(
            err.unwrap_err().to_string(),
            "the server refused the handshake: server/discover: JSON-RPC error -32601: Method \
             not found; initialize: JSON-RPC error -32603: broken"
        );
    }

    #[tokio::test]
    async fn an_output_that_ends_fails_at_once() {
        let (task, mut server) = start(TIMEOUT);
        let _ = server.request(SLACK).await;
        server.to_client = None;
        let (err, took) = task.await.unwrap();
        assert!(took < PROBE, "{took:?}");
        assert!(matches!(err, Err(HandshakeError::Closed { .. })), "{err:?}");
    }
}
