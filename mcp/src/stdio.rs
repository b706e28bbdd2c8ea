//! The stdio transport: newline-delimited JSON-RPC over a child's
//! stdin/stdout, with every line bounded.
//!
//! A line longer than [`MAX_MESSAGE_BYTES`] ends the transport with a fault
//! (the server is then marked failed by the supervisor) instead of growing
//! memory. Lines that are not JSON-RPC are skipped with a warning (the
//! first few are logged, the rest counted), like stray prints of a server
//! that writes to stdout by mistake.

use std::sync::{Arc, Mutex};

use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::mpsc;

/// The largest message accepted from or sent to a server, in bytes (one
/// stdio line, one SSE event, one HTTP response body).
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// Why a transport ended, kept for the server's status.
pub(crate) type Fault = Arc<Mutex<Option<String>>>;

/// Ids of requests written to the child's stdin (they may have been
/// read). A request that failed without being written was never delivered
/// and may be retried on a new session.
pub(crate) type Delivered = Arc<Mutex<std::collections::HashSet<rmcp::model::RequestId>>>;

pub(crate) fn set_fault(fault: &Fault, msg: String) {
    let mut f = fault.lock().unwrap_or_else(|e| e.into_inner());
    if f.is_none() {
        *f = Some(msg);
    }
}

/// The transport handed to rmcp.
pub(crate) struct StdioTransport {
    rx: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    tx: Option<mpsc::Sender<TxJsonRpcMessage<RoleClient>>>,
}

impl StdioTransport {
    pub fn new(
        stdin: ChildStdin,
        stdout: ChildStdout,
        fault: Fault,
        delivered: Delivered,
        max: usize,
    ) -> StdioTransport {
        let (in_tx, in_rx) = mpsc::channel(256);
        let (out_tx, out_rx) = mpsc::channel(256);
        tokio::spawn(read_lines(stdout, in_tx, fault.clone(), max));
        tokio::spawn(write_lines(stdin, out_rx, fault, delivered));
        StdioTransport {
            rx: in_rx,
            tx: Some(out_tx),
        }
    }
}

async fn read_lines(
    stdout: ChildStdout,
    tx: mpsc::Sender<RxJsonRpcMessage<RoleClient>>,
    fault: Fault,
    max: usize,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut line: Vec<u8> = Vec::with_capacity(4096);
    let mut skipped: u64 = 0;
    loop {
        line.clear();
        // Read one line without letting it grow past `max`.
        let ended = loop {
            let buf = match reader.fill_buf().await {
                Ok(b) => b,
                Err(e) => {
                    set_fault(&fault, format!("reading the server's stdout failed: {e}"));
                    return;
                }
            };
            if buf.is_empty() {
                break true;
            }
            let (take, done) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            if line.len() + take > max + 1 {
                set_fault(
                    &fault,
                    format!(
                        "the server wrote a line longer than {} MiB on stdout; it is treated as failed",
                        max / (1024 * 1024)
                    ),
                );
                return;
            }
            line.extend_from_slice(&buf[..take]);
            reader.consume(take);
            if done {
                break false;
            }
        };
        if ended && line.is_empty() {
            set_fault(&fault, "the server closed its stdout".into());
            return;
        }
        while matches!(line.last(), Some(b'\n' | b'\r')) {
            line.pop();
        }
        if !line.iter().all(u8::is_ascii_whitespace) {
            match serde_json::from_slice::<RxJsonRpcMessage<RoleClient>>(&line) {
                Ok(msg) => {
                    if tx.send(msg).await.is_err() {
                        return;
                    }
                }
                Err(e) => {
                    skipped += 1;
                    if skipped <= 5 {
                        let shown: String = String::from_utf8_lossy(&line[..line.len().min(120)])
                            .chars()
                            .map(|c| if c.is_control() { '?' } else { c })
                            .collect();
                        tracing::warn!(
                            "skipping a line that is not a JSON-RPC message ({e}): {shown}"
                        );
                    } else if skipped.is_power_of_two() {
                        tracing::warn!("{skipped} lines on the server's stdout were not JSON-RPC");
                    }
                }
            }
        }
        if ended {
            set_fault(&fault, "the server closed its stdout".into());
            return;
        }
    }
}

async fn write_lines(
    mut stdin: ChildStdin,
    mut rx: mpsc::Receiver<TxJsonRpcMessage<RoleClient>>,
    fault: Fault,
    delivered: Delivered,
) {
    while let Some(msg) = rx.recv().await {
        let mut bytes = match serde_json::to_vec(&msg) {
            Ok(b) => b,
            Err(e) => {
                tracing::error!("cannot serialise a message for the server: {e}");
                continue;
            }
        };
        bytes.push(b'\n');
        // Recorded before the write: once the line is out the server may act
        // on it and exit before this task runs again, and the call must then
        // not be sent a second time. A failed write never completed the line,
        // so the server cannot have read the request.
        let request = match &msg {
            rmcp::model::JsonRpcMessage::Request(r) => Some(r.id.clone()),
            _ => None,
        };
        if let Some(id) = &request {
            delivered
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(id.clone());
        }
        if let Err(e) = stdin.write_all(&bytes).await {
            if let Some(id) = &request {
                delivered
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(id);
            }
            set_fault(&fault, format!("writing to the server's stdin failed: {e}"));
            return;
        }
        if let Err(e) = stdin.flush().await {
            set_fault(&fault, format!("writing to the server's stdin failed: {e}"));
            return;
        }
    }
    // Every sender is gone: closing stdin is the first step of a stop.
    let _ = stdin.shutdown().await;
}

impl rmcp::transport::Transport<RoleClient> for StdioTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let tx = self.tx.clone();
        async move {
            match tx {
                Some(tx) => tx.send(item).await.map_err(|_| {
                    std::io::Error::new(
                        std::io::ErrorKind::BrokenPipe,
                        "the server's stdin is closed",
                    )
                }),
                None => Err(std::io::Error::new(
                    std::io::ErrorKind::BrokenPipe,
                    "the transport is closed",
                )),
            }
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.rx.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.tx = None;
        self.rx.close();
        Ok(())
    }
}
