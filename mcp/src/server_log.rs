//! Log lines an upstream server sends (`notifications/message`), passed to
//! the call in flight when it is the only one on its session (the
//! notification does not say which call it belongs to) and its caller asked
//! for them (`CallHooks::log`).

use serde_json::Value;

/// Severity of a server's log line (the MCP logging levels, syslog's
/// order), least severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerLogLevel {
    /// Debugging detail.
    Debug,
    /// Informational.
    Info,
    /// Normal but significant.
    Notice,
    /// Warning.
    Warning,
    /// Error.
    Error,
    /// Critical.
    Critical,
    /// Action must be taken.
    Alert,
    /// The system is unusable.
    Emergency,
}

#[allow(deprecated)] // SEP-2577 deprecates logging; servers still send it
impl From<ServerLogLevel> for rmcp::model::LoggingLevel {
    fn from(l: ServerLogLevel) -> Self {
        use rmcp::model::LoggingLevel as L;
        match l {
            ServerLogLevel::Debug => L::Debug,
            ServerLogLevel::Info => L::Info,
            ServerLogLevel::Notice => L::Notice,
            ServerLogLevel::Warning => L::Warning,
            ServerLogLevel::Error => L::Error,
            ServerLogLevel::Critical => L::Critical,
            ServerLogLevel::Alert => L::Alert,
            ServerLogLevel::Emergency => L::Emergency,
        }
    }
}

/// Where a call's server log lines go, from which level up (a 2026-07-28
/// server is asked for that level with the call's `_meta`
/// `io.modelcontextprotocol/logLevel`; a legacy one sends what it sends,
/// and lines below `min` are dropped).
#[derive(Debug, Clone)]
pub struct ServerLogSink {
    /// The least severe level wanted.
    pub min: ServerLogLevel,
    /// Receives each line.
    pub lines: tokio::sync::mpsc::UnboundedSender<ServerLogLine>,
}

#[allow(deprecated)] // SEP-2577 deprecates logging; servers still send it
impl From<rmcp::model::LoggingLevel> for ServerLogLevel {
    fn from(l: rmcp::model::LoggingLevel) -> Self {
        use rmcp::model::LoggingLevel as L;
        match l {
            L::Debug => ServerLogLevel::Debug,
            L::Info => ServerLogLevel::Info,
            L::Notice => ServerLogLevel::Notice,
            L::Warning => ServerLogLevel::Warning,
            L::Error => ServerLogLevel::Error,
            L::Critical => ServerLogLevel::Critical,
            L::Alert => ServerLogLevel::Alert,
            L::Emergency => ServerLogLevel::Emergency,
        }
    }
}

/// A log line a server sent (`notifications/message`).
#[derive(Debug, Clone, PartialEq)]
pub struct ServerLogLine {
    /// The server's config name.
    pub server: String,
    /// Its severity.
    pub level: ServerLogLevel,
    /// The logger the server names, if any.
    pub logger: Option<String>,
    /// What it logged (any JSON).
    pub data: Value,
}
