//! MCP logging: a session's `logging/setLevel` (or a request's
//! `_meta` `io.modelcontextprotocol/logLevel`, the 2026-07-28 form) asks for
//! log messages at a level or above; during a call the skill's log lines
//! (already escaped and redacted by the sandbox) go to the client as
//! `notifications/message`, the skill named as the logger.
//!
//! rmcp marks logging deprecated (SEP-2577 plans its removal); every
//! revision we serve still has it, and the conformance suite tests it.
#![allow(deprecated)]

use std::sync::{Arc, Mutex};

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::{GuestLogLevel, GuestLogLine, LogSink};

/// The level a session asked for with `logging/setLevel`; `None` until it
/// asks (no log messages are sent then).
#[derive(Debug, Default, Clone)]
pub(super) struct SessionLevel(Arc<Mutex<Option<LoggingLevel>>>);

impl SessionLevel {
    pub fn set(&self, level: LoggingLevel) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(level);
    }

    pub fn get(&self) -> Option<LoggingLevel> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The MCP level of a skill's log line.
fn mcp_level(level: GuestLogLevel) -> LoggingLevel {
    match level {
        GuestLogLevel::Trace | GuestLogLevel::Debug => LoggingLevel::Debug,
        GuestLogLevel::Info => LoggingLevel::Info,
        GuestLogLevel::Warn => LoggingLevel::Warning,
        GuestLogLevel::Error => LoggingLevel::Error,
    }
}

/// The least severe skill level whose lines reach a client that asked for
/// `level`; `None` when no skill line is that severe (critical and above).
fn least_guest_level(level: LoggingLevel) -> Option<GuestLogLevel> {
    match level {
        LoggingLevel::Debug => Some(GuestLogLevel::Trace),
        LoggingLevel::Info => Some(GuestLogLevel::Info),
        LoggingLevel::Notice | LoggingLevel::Warning => Some(GuestLogLevel::Warn),
        LoggingLevel::Error => Some(GuestLogLevel::Error),
        LoggingLevel::Critical | LoggingLevel::Alert | LoggingLevel::Emergency => None,
    }
}

/// A sink whose lines go to the client as `notifications/message`, when
/// the request or the session asked for log messages; `None` otherwise.
/// The forwarding task ends when the call drops the sender.
pub(super) fn log_sink(
    context: &RequestContext<RoleServer>,
    session: &SessionLevel,
    forwarders: &mut super::forward::Forwarders,
) -> Option<LogSink> {
    let level = context.meta.log_level().or_else(|| session.get())?;
    let min = least_guest_level(level)?;
    let (tx, mut rx) = mpsc::unbounded_channel::<GuestLogLine>();
    let peer = context.peer.clone();
    forwarders.add(tokio::spawn(async move {
        while let Some(line) = rx.recv().await {
            let param = LoggingMessageNotificationParam::new(
                mcp_level(line.level),
                Value::String(line.message),
            )
            .with_logger(line.skill);
            if peer.notify_logging_message(param).await.is_err() {
                break;
            }
        }
    }));
    Some(LogSink { min, lines: tx })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_guest_line_at_or_above_the_asked_level_is_sent() {
        let guest = [
            GuestLogLevel::Trace,
            GuestLogLevel::Debug,
            GuestLogLevel::Info,
            GuestLogLevel::Warn,
            GuestLogLevel::Error,
        ];
        let mcp = [
            LoggingLevel::Debug,
            LoggingLevel::Info,
            LoggingLevel::Notice,
            LoggingLevel::Warning,
            LoggingLevel::Error,
            LoggingLevel::Critical,
            LoggingLevel::Alert,
            LoggingLevel::Emergency,
        ];
        // A line is sent exactly when its MCP level is at or above the
        // asked one (MCP levels are declared least severe first).
        let rank = |l: LoggingLevel| mcp.iter().position(|m| *m == l).unwrap();
        for asked in mcp {
            for line in guest {
                let sent = least_guest_level(asked).is_some_and(|min| line >= min);
                assert_eq!(
                    sent,
                    rank(mcp_level(line)) >= rank(asked),
                    "{line:?} at {asked:?}"
                );
            }
        }
    }

    #[test]
    fn a_session_has_no_level_until_it_asks() {
        let s = SessionLevel::default();
        assert_eq!(s.get(), None);
        s.set(LoggingLevel::Warning);
        assert_eq!(s.get(), Some(LoggingLevel::Warning));
    }
}
