//! What the host keeps of each outbound request: one [`OutboundRecord`],
//! allowed or refused, with method, origin, status, bytes, duration and a
//! typed outcome. Never the path, query, headers or body.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::address::AddressClass;

/// What a record holds in place of a method or origin that failed its
/// checks (over its limit, not a token, not a URL the host can reach):
/// the guest's value is never recorded then.
///
/// ```
/// assert_eq!(skillhost::INVALID_OUTBOUND_FIELD, "(invalid)");
/// ```
pub const INVALID_OUTBOUND_FIELD: &str = "(invalid)";

/// Why a request was refused before anything was sent.
///
/// ```
/// assert_eq!(skillhost::DenyReason::Origin.as_str(), "origin");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case", tag = "reason", content = "class")]
pub enum DenyReason {
    /// The call has no outbound policy: every request is refused.
    NoNetwork,
    /// The scheme, host or port matches no allowed origin.
    Origin,
    /// The name resolved to an address of this class, which is not listed
    /// as an IP-literal origin.
    Address(AddressClass),
    /// The request is malformed (no host, a scheme other than http or
    /// https, a host name or method over its limit, a method that is not
    /// an RFC 9110 token, an invalid header). An invalid method or origin
    /// is recorded as [`INVALID_OUTBOUND_FIELD`], never as the guest
    /// wrote it.
    Invalid,
}

impl DenyReason {
    /// The reason as a metrics label.
    ///
    /// ```
    /// use skillhost::{AddressClass, DenyReason};
    /// assert_eq!(DenyReason::Address(AddressClass::Loopback).as_str(), "address");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            DenyReason::NoNetwork => "no-network",
            DenyReason::Origin => "origin",
            DenyReason::Address(_) => "address",
            DenyReason::Invalid => "invalid",
        }
    }
}

/// Which per-call outbound limit a request reached; each is a field of
/// [`OutboundLimits`](crate::OutboundLimits).
///
/// ```
/// assert_eq!(skillhost::OutboundLimit::ResponseBody.as_str(), "response-body");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutboundLimit {
    /// `max_requests`: requests one call may make.
    Requests,
    /// `max_concurrent`: requests in flight at once.
    Concurrent,
    /// `max_request_body_bytes`.
    RequestBody,
    /// `max_response_body_bytes`.
    ResponseBody,
    /// `max_response_header_bytes`.
    ResponseHeaders,
}

impl OutboundLimit {
    /// The limit as a metrics label.
    ///
    /// ```
    /// assert_eq!(skillhost::OutboundLimit::Requests.as_str(), "requests");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            OutboundLimit::Requests => "requests",
            OutboundLimit::Concurrent => "concurrent",
            OutboundLimit::RequestBody => "request-body",
            OutboundLimit::ResponseBody => "response-body",
            OutboundLimit::ResponseHeaders => "response-headers",
        }
    }
}

/// How one outbound request ended.
///
/// ```
/// use skillhost::{OutboundLimit, OutboundOutcome};
/// assert_eq!(OutboundOutcome::Limit(OutboundLimit::Requests).as_str(), "limit");
/// assert_eq!(
///     serde_json::to_value(OutboundOutcome::Limit(OutboundLimit::Requests)).unwrap(),
///     serde_json::json!({"kind": "limit", "reason": "requests"})
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "reason")]
pub enum OutboundOutcome {
    /// A response came back (whatever its status).
    Ok,
    /// Refused by policy before anything was sent.
    Denied(DenyReason),
    /// Stopped by a per-call limit.
    Limit(OutboundLimit),
    /// The per-request timeout (or the call's deadline, if earlier) passed.
    Timeout,
    /// DNS, connection, TLS or protocol failure; or the call ended before
    /// the response came.
    Failed,
}

impl OutboundOutcome {
    /// The outcome as a metrics label.
    ///
    /// ```
    /// assert_eq!(skillhost::OutboundOutcome::Timeout.as_str(), "timeout");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            OutboundOutcome::Ok => "ok",
            OutboundOutcome::Denied(_) => "denied",
            OutboundOutcome::Limit(_) => "limit",
            OutboundOutcome::Timeout => "timeout",
            OutboundOutcome::Failed => "failed",
        }
    }
}

impl fmt::Display for OutboundOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OutboundOutcome::Denied(r) => write!(f, "denied ({})", r.as_str()),
            OutboundOutcome::Limit(l) => write!(f, "limit ({})", l.as_str()),
            other => f.write_str(other.as_str()),
        }
    }
}

/// One outbound request a call made, allowed or refused. It holds no
/// path, query, header or body, so no secret can reach it.
///
/// `bytes_received` counts response body bytes the guest's stream pulled
/// from the connection: what the guest read, plus at most one frame that
/// wasmtime reads ahead, and never more than the response body cap (the
/// frame that passes it is counted up to the cap and not delivered).
/// `bytes_sent` counts request body bytes handed to the connection.
///
/// ```
/// use skillhost::{OutboundOutcome, OutboundRecord};
/// let r = OutboundRecord {
///     method: "GET".into(),
///     origin: "https://api.example.com:443".into(),
///     status: Some(200),
///     bytes_sent: 0,
///     bytes_received: 512,
///     duration: std::time::Duration::from_millis(12),
///     outcome: OutboundOutcome::Ok,
///     detail: String::new(),
/// };
/// assert_eq!(serde_json::to_value(&r).unwrap()["duration_us"], 12_000);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutboundRecord {
    /// The method, as the guest sent it: an RFC 9110 token of at most
    /// [`MAX_OUTBOUND_METHOD_BYTES`](crate::MAX_OUTBOUND_METHOD_BYTES)
    /// bytes, or [`INVALID_OUTBOUND_FIELD`].
    pub method: String,
    /// `scheme://host:port` with the port always written, the host
    /// lower-cased; never a path. [`INVALID_OUTBOUND_FIELD`] for a URL
    /// that failed its checks.
    pub origin: String,
    /// The response status, when a response came.
    pub status: Option<u16>,
    /// Request body bytes sent.
    pub bytes_sent: u64,
    /// Response body bytes received (see above).
    pub bytes_received: u64,
    /// From the guest's request to the end of its response body (or the
    /// refusal, or the end of the call).
    #[serde(rename = "duration_us", serialize_with = "serialize_micros")]
    pub duration: Duration,
    /// How it ended.
    pub outcome: OutboundOutcome,
    /// Why, for the operator (escaped, no secrets); empty when `Ok`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

fn serialize_micros<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// A record being written: its start and whether it has its final outcome.
struct Entry {
    record: OutboundRecord,
    started: Instant,
    finished: bool,
}

/// The records of one call, shared by the hook and the bodies it returns.
#[derive(Clone, Default)]
pub(crate) struct Recorder {
    entries: Arc<Mutex<Vec<Entry>>>,
}

impl Recorder {
    fn lock(&self) -> MutexGuard<'_, Vec<Entry>> {
        // A poisoned lock means a hook panicked mid-update; the records are
        // still whole values.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts a record; the returned handle updates it.
    pub fn start(&self, method: String, origin: String) -> Slot {
        let mut entries = self.lock();
        entries.push(Entry {
            record: OutboundRecord {
                method,
                origin,
                status: None,
                bytes_sent: 0,
                bytes_received: 0,
                duration: Duration::ZERO,
                outcome: OutboundOutcome::Failed,
                detail: String::new(),
            },
            started: Instant::now(),
            finished: false,
        });
        Slot {
            recorder: self.clone(),
            index: entries.len() - 1,
        }
    }

    /// Every record so far. One still in flight is reported as it stands:
    /// `Ok` if its response came (the guest did not read it all), `Failed`
    /// if not (the call ended first).
    pub fn snapshot(&self) -> Vec<OutboundRecord> {
        let now = Instant::now();
        self.lock()
            .iter()
            .map(|e| {
                let mut r = e.record.clone();
                if !e.finished {
                    r.duration = now.saturating_duration_since(e.started);
                    if r.status.is_some() {
                        r.outcome = OutboundOutcome::Ok;
                    } else {
                        r.outcome = OutboundOutcome::Failed;
                        r.detail = "the call ended before the response came".into();
                    }
                }
                r
            })
            .collect()
    }
}

/// A handle on one record.
#[derive(Clone)]
pub(crate) struct Slot {
    recorder: Recorder,
    index: usize,
}

impl Slot {
    fn with(&self, f: impl FnOnce(&mut Entry)) {
        if let Some(e) = self.recorder.lock().get_mut(self.index) {
            f(e);
        }
    }

    pub fn sent(&self, n: u64) {
        self.with(|e| e.record.bytes_sent = e.record.bytes_sent.saturating_add(n));
    }

    pub fn received(&self, n: u64) {
        self.with(|e| e.record.bytes_received = e.record.bytes_received.saturating_add(n));
    }

    pub fn status(&self, status: u16) {
        self.with(|e| e.record.status = Some(status));
    }

    /// Sets the final outcome, once: the first one set stays.
    pub fn finish(&self, outcome: OutboundOutcome, detail: impl Into<String>) {
        self.with(|e| {
            if !e.finished {
                e.finished = true;
                e.record.outcome = outcome;
                e.record.detail = detail.into();
                e.record.duration = e.started.elapsed();
            }
        });
    }

    /// Replaces the detail of a finished record (the count of refusals
    /// after the request limit).
    pub fn set_detail(&self, detail: String) {
        self.with(|e| e.record.detail = detail);
    }
}
