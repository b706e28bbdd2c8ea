//! A stdio session (`serve --stdio`): rmcp serves the protocol, and a lean
//! lane takes the plain `tools/call` off rmcp's path.
//!
//! Every line the client writes is read here (at most
//! [`MCP_STDIO_MAX_LINE_BYTES`]; a longer one is dropped and logged, as rmcp
//! does). A line that is a `tools/call` request, in a session rmcp has
//! begun and that has no logging level set, goes to the front's own
//! [`ServerHandler::call_tool`] with a request context on rmcp's peer when
//! it has either no `_meta` (a legacy session's call: no progress token,
//! no per-request version) or a 2026-07-28 `_meta` that names that version
//! with every key the era requires and asks for no progress and no log
//! level (moved into the context, as rmcp does). It is the same handler
//! rmcp would call, so authorization, confirmation (by elicitation in a
//! legacy session, by `input_required` in the 2026-07-28 era) and a
//! skill's questions to the client behave as through rmcp. Its answer is written as one line. Everything else — the
//! handshake, every other method, the client's answers to the server's own
//! requests, notifications, malformed lines — goes to rmcp unchanged
//! through an in-memory pipe, and rmcp's output is copied to the client
//! line by line. Both writers take one lock per line, so lines never
//! interleave. A `notifications/cancelled` naming a call of the lane
//! cancels it, and, as rmcp does, its answer is then not sent. A call
//! whose id is already in flight in the lane is refused (`-32600`) rather
//! than let it take the other one's answer.
//!
//! Why: per call, the lane skips rmcp's decoding of its whole message enum,
//! the hop to its service loop, its per-request task and the hop back to
//! its writer (see `BENCHMARKS.md`, the fast path).
//!
//! Calls with a logging level or a progress token stay on rmcp's path: their
//! notices are written by rmcp, and the answer must not overtake them.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use rmcp::model::{JsonRpcMessage, RequestId, ServerJsonRpcMessage, ServerResult};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::{ServerHandler, ServiceExt};
use serde::Deserialize;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

use super::McpFront;
use super::context::{LaneCall, plain_meta};
use crate::limits::MCP_STDIO_MAX_LINE_BYTES;

/// Bytes buffered in the pipe between this session and rmcp, each way.
const PIPE_BYTES: usize = 256 << 10;

/// Why a stdio session ended in error.
///
/// ```
/// let e = skillhost::StdioSessionError::Handshake("the client left".into());
/// assert!(e.to_string().contains("handshake"));
/// ```
#[derive(Debug, thiserror::Error)]
pub enum StdioSessionError {
    /// The client's handshake failed: its first message was not
    /// `initialize`, or it left before the session began.
    #[error("the MCP client's handshake failed: {0}")]
    Handshake(String),
    /// The session ended with an error after it began.
    #[error("the MCP session ended with an error: {0}")]
    Session(String),
}

/// A `notifications/cancelled`, as the lane reads it.
#[derive(Deserialize)]
struct CancelLine<'a> {
    #[serde(borrow)]
    method: Cow<'a, str>,
    params: CancelParams,
}

#[derive(Deserialize)]
struct CancelParams {
    #[serde(rename = "requestId")]
    request_id: RequestId,
}

/// The lane's calls in flight, by request id: cancelling one removes it,
/// and a call answers only if it is still here when it ends.
type InFlight = Arc<Mutex<HashMap<RequestId, CancellationToken>>>;

/// The client's side of the session, written a whole line at a time.
type Out<W> = Arc<tokio::sync::Mutex<W>>;

impl McpFront {
    /// Serves one MCP session over a byte stream pair (the process's stdin
    /// and stdout for `serve --stdio`): newline-delimited JSON-RPC, until
    /// the client closes `input` (the lane's calls in flight are answered
    /// first) or the session fails.
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host) -> Result<(), skillhost::StdioSessionError> {
    /// let front = skillhost::McpFront::new(host, skillhost::Caller::persona("support"));
    /// let (input, output) = rmcp::transport::stdio_pipes();
    /// front.serve_stdio(input, output).await?;
    /// # Ok(()) }
    /// ```
    pub async fn serve_stdio<R, W>(self, input: R, output: W) -> Result<(), StdioSessionError>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let out: Out<W> = Arc::new(tokio::sync::Mutex::new(output));
        let (ours, theirs) = tokio::io::duplex(PIPE_BYTES);
        let (from_rmcp, to_rmcp) = tokio::io::split(ours);
        let peer: Arc<OnceLock<Peer<RoleServer>>> = Arc::default();
        let copying = tokio::spawn(copy_lines(BufReader::new(from_rmcp), out.clone()));
        let reading = tokio::spawn(read_lines(
            BufReader::new(input),
            to_rmcp,
            Lane {
                front: self.clone(),
                peer: peer.clone(),
                out,
                in_flight: InFlight::default(),
            },
        ));
        let running = match self.serve(tokio::io::split(theirs)).await {
            Ok(r) => r,
            Err(e) => {
                reading.abort();
                copying.abort();
                return Err(StdioSessionError::Handshake(e.to_string()));
            }
        };
        let _ = peer.set(running.peer().clone());
        let ended = running.waiting().await;
        // rmcp has stopped: what the client still sends has nowhere to go.
        reading.abort();
        // Its last lines reach the client before the session ends (rmcp
        // closed its side of the pipe as it stopped; the wait is bounded in
        // case it did not).
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), copying).await;
        ended
            .map(|_| ())
            .map_err(|e| StdioSessionError::Session(e.to_string()))
    }
}

/// What the lane needs to answer a call.
struct Lane<W> {
    front: McpFront,
    /// rmcp's peer, once the handshake is done (the lane is closed before).
    peer: Arc<OnceLock<Peer<RoleServer>>>,
    out: Out<W>,
    in_flight: InFlight,
}

/// Reads the client's lines: the lane's, or passed on to rmcp. At the end
/// of the input, waits for the lane's calls, then closes rmcp's input.
async fn read_lines<R, P, W>(mut input: R, mut to_rmcp: P, lane: Lane<W>)
where
    R: AsyncBufRead + Unpin,
    P: AsyncWrite + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let mut line = Vec::new();
    let mut calls = tokio::task::JoinSet::new();
    loop {
        // Forget the calls that ended (a finished task stays in the set,
        // holding memory, until it is joined).
        while calls.try_join_next().is_some() {}
        match read_line(&mut input, &mut line).await {
            Ok(Some(Fits::Yes)) => {}
            Ok(Some(Fits::No)) => {
                tracing::error!(
                    "a message from the MCP client exceeded {MCP_STDIO_MAX_LINE_BYTES} bytes; \
                     it was dropped"
                );
                continue;
            }
            Ok(None) => break,
            Err(e) => {
                tracing::error!("cannot read from the MCP client: {e}");
                break;
            }
        }
        if lane.take(&line, &mut calls) {
            continue;
        }
        line.push(b'\n');
        if to_rmcp.write_all(&line).await.is_err() {
            break;
        }
    }
    while calls.join_next().await.is_some() {}
    let _ = to_rmcp.shutdown().await;
}

/// Whether a line read fits the limit.
enum Fits {
    Yes,
    No,
}

/// Reads one line (without its `\n`) into `line`, never holding more than
/// [`MCP_STDIO_MAX_LINE_BYTES`]; `None` at the end of the input. A line that
/// does not fit is read to its end and reported as [`Fits::No`].
async fn read_line<R: AsyncBufRead + Unpin>(
    input: &mut R,
    line: &mut Vec<u8>,
) -> std::io::Result<Option<Fits>> {
    line.clear();
    let mut fits = true;
    loop {
        let (used, done) = {
            let buf = input.fill_buf().await?;
            if buf.is_empty() {
                // A last line without `\n` is incomplete: nothing to deliver.
                return Ok(None);
            }
            let end = buf.iter().position(|b| *b == b'\n');
            let chunk = &buf[..end.unwrap_or(buf.len())];
            if fits && line.len() + chunk.len() <= MCP_STDIO_MAX_LINE_BYTES {
                line.extend_from_slice(chunk);
            } else {
                fits = false;
                line.clear();
            }
            (end.map_or(buf.len(), |e| e + 1), end.is_some())
        };
        input.consume(used);
        if done {
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok(Some(if fits { Fits::Yes } else { Fits::No }));
        }
    }
}

impl<W: AsyncWrite + Unpin + Send + 'static> Lane<W> {
    /// Takes `line` if it is the lane's: a plain `tools/call` (then
    /// spawned into `calls`) or the cancellation of one of the lane's calls.
    fn take(&self, line: &[u8], calls: &mut tokio::task::JoinSet<()>) -> bool {
        let Some(peer) = self.peer.get() else {
            return false;
        };
        if contains(line, b"\"notifications/cancelled\"") {
            return self.cancel(line);
        }
        if !contains(line, b"\"tools/call\"") || self.front.log_level.get().is_some() {
            return false;
        }
        let Ok(call) = serde_json::from_slice::<LaneCall<'_>>(line) else {
            return false;
        };
        if !call.is_call() || !call.params.meta.as_ref().is_none_or(plain_meta) {
            return false;
        }
        let ct = CancellationToken::new();
        {
            let mut in_flight = lock(&self.in_flight);
            if in_flight.contains_key(&call.id) {
                // JSON-RPC ids are unique among requests in flight; a second
                // one would take the first one's answer or cancellation.
                let error = rmcp::model::ErrorData::invalid_request(
                    format!(
                        "request id {} is already used by a call in flight; use a new id",
                        call.id
                    ),
                    None,
                );
                let message: ServerJsonRpcMessage = JsonRpcMessage::error(error, Some(call.id));
                let out = self.out.clone();
                if let Ok(bytes) = serde_json::to_vec(&message) {
                    calls.spawn(async move { write_line(&out, bytes).await });
                }
                return true;
            }
            in_flight.insert(call.id.clone(), ct.clone());
        }
        let mut context = RequestContext::new(call.id.clone(), peer.clone());
        context.ct = ct;
        let (id, mut params) = (call.id, call.params);
        if let Some(meta) = params.meta.take() {
            context.meta = meta;
        }
        let front = self.front.clone();
        let out = self.out.clone();
        let in_flight = self.in_flight.clone();
        calls.spawn(async move {
            let result = ServerHandler::call_tool(&front, params, context).await;
            if lock(&in_flight).remove(&id).is_none() {
                // Cancelled: the client expects no answer.
                return;
            }
            let message: ServerJsonRpcMessage = match result {
                Ok(response) => JsonRpcMessage::response(ServerResult::from(response), id),
                Err(error) => JsonRpcMessage::error(error, Some(id)),
            };
            match serde_json::to_vec(&message) {
                Ok(bytes) => write_line(&out, bytes).await,
                Err(e) => tracing::error!("cannot encode an answer: {e}"),
            }
        });
        true
    }

    /// Cancels the lane's call `line` names; false (rmcp's then) when it
    /// names none of them.
    fn cancel(&self, line: &[u8]) -> bool {
        let Ok(c) = serde_json::from_slice::<CancelLine<'_>>(line) else {
            return false;
        };
        if c.method != "notifications/cancelled" {
            return false;
        }
        match lock(&self.in_flight).remove(&c.params.request_id) {
            Some(ct) => {
                ct.cancel();
                true
            }
            None => false,
        }
    }
}

/// Copies rmcp's output to the client, a line at a time.
async fn copy_lines<R, W>(mut from_rmcp: R, out: Out<W>)
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut line = Vec::new();
    loop {
        line.clear();
        match from_rmcp.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        write_line(&out, std::mem::take(&mut line)).await;
    }
}

/// Writes one line to the client and flushes it.
async fn write_line<W: AsyncWrite + Unpin>(out: &Out<W>, mut bytes: Vec<u8>) {
    bytes.push(b'\n');
    let mut out = out.lock().await;
    if let Err(e) = out.write_all(&bytes).await {
        tracing::debug!("cannot write to the MCP client: {e}");
        return;
    }
    let _ = out.flush().await;
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::RequestMetaObject;

    async fn lines(input: &[u8]) -> Vec<Result<String, ()>> {
        let mut input = input;
        let mut line = Vec::new();
        let mut got = Vec::new();
        while let Some(fits) = read_line(&mut input, &mut line).await.expect("read") {
            got.push(match fits {
                Fits::Yes => Ok(String::from_utf8_lossy(&line).into_owned()),
                Fits::No => Err(()),
            });
        }
        got
    }

    #[tokio::test]
    async fn lines_end_at_newlines_and_a_last_line_without_one_is_dropped() {
        assert_eq!(
            lines(b"{\"a\":1}\n\r\n{\"b\":2}\r\n{\"c\"").await,
            vec![
                Ok("{\"a\":1}".into()),
                Ok(String::new()),
                Ok("{\"b\":2}".into())
            ]
        );
    }

    #[tokio::test]
    async fn a_line_over_the_limit_is_dropped_and_the_next_one_is_read() {
        let mut input = vec![b'x'; MCP_STDIO_MAX_LINE_BYTES + 1];
        input.extend_from_slice(b"\n{\"ok\":true}\n");
        let mut exact = vec![b'y'; MCP_STDIO_MAX_LINE_BYTES];
        exact.push(b'\n');
        input.extend_from_slice(&exact);
        let got = lines(&input).await;
        assert_eq!(got.len(), 3);
        assert_eq!(got[0], Err(()));
        assert_eq!(got[1], Ok("{\"ok\":true}".into()));
        assert!(matches!(&got[2], Ok(l) if l.len() == MCP_STDIO_MAX_LINE_BYTES));
    }

    #[test]
    fn the_lane_reads_calls_and_cancellations_and_nothing_else() {
        let call: LaneCall<'_> = serde_json::from_slice(
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":{"x":1}}}"#,
        )
        .expect("a call");
        assert_eq!(call.params.name, "t");
        assert!(call.params.meta.is_none());
        let meta = |m: &str| -> RequestMetaObject {
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{{"name":"t","_meta":{m}}}}}"#
            );
            let call: LaneCall<'_> = serde_json::from_str(&line).expect("a call with _meta");
            call.params.meta.expect("its _meta")
        };
        let era = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}"#;
        assert!(plain_meta(&meta(&format!("{{{era}}}"))));
        for left_to_rmcp in [
            r#"{"progressToken":1}"#.to_string(),
            format!(r#"{{{era},"progressToken":1}}"#),
            format!(r#"{{{era},"io.modelcontextprotocol/logLevel":"info"}}"#),
            format!("{{{}}}", era.replace("2026-07-28", "2025-11-25")),
            format!("{{{}}}", era.replace("2026-07-28", "2099-01-01")),
            r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#.to_string(),
        ] {
            assert!(!plain_meta(&meta(&left_to_rmcp)), "{left_to_rmcp}");
        }
        for not_a_call in [
            &br#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t"}}"#[..],
            br#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}"#,
        ] {
            assert!(
                serde_json::from_slice::<LaneCall<'_>>(not_a_call).is_err(),
                "{}",
                String::from_utf8_lossy(not_a_call)
            );
        }
        let c: CancelLine<'_> = serde_json::from_slice(
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"x"}}"#,
        )
        .expect("a cancellation");
        assert_eq!(c.params.request_id, call.id);
        assert!(contains(b"ab\"tools/call\"cd", b"\"tools/call\""));
        assert!(!contains(b"tools/call", b"\"tools/call\""));
    }
}
