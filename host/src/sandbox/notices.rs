//! What a running call tells its caller before it returns: progress reports
//! (`host.progress`) and log lines (`host.log`), passed on only when the
//! caller asked for them (an MCP client's `progressToken`, its
//! `logging/setLevel`).
//!
//! A guest cannot flood its caller: at most
//! [`MAX_CALL_NOTICES`](crate::limits::MAX_CALL_NOTICES) notices per call
//! are passed on (the rest are dropped, and the host's log says so once), a
//! progress report lower than the last one or not finite is dropped, and
//! every byte the guest passes still counts against the call's hostward
//! bytes.

use tokio::sync::mpsc::UnboundedSender;

use crate::limits::MAX_CALL_NOTICES;

/// Severity of a skill's log line (the WIT `log-level`), least severe
/// first.
///
/// ```
/// use skillhost::GuestLogLevel;
/// assert!(GuestLogLevel::Warn > GuestLogLevel::Info);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GuestLogLevel {
    /// Very detailed diagnostics.
    Trace,
    /// Diagnostics useful while developing a skill.
    Debug,
    /// Normal operational messages.
    Info,
    /// Something unexpected that the skill recovered from.
    Warn,
    /// Something failed.
    Error,
}

/// One log line of a skill, as the caller receives it: already escaped,
/// redacted and cut to length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestLogLine {
    /// Its severity.
    pub level: GuestLogLevel,
    /// The skill that wrote it.
    pub skill: String,
    /// The text.
    pub message: String,
}

/// Where a call's log lines at or above `min` go.
///
/// ```
/// let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
/// let sink = skillhost::LogSink { min: skillhost::GuestLogLevel::Info, lines: tx };
/// assert_eq!(sink.min, skillhost::GuestLogLevel::Info);
/// ```
#[derive(Debug, Clone)]
pub struct LogSink {
    /// The least severe level passed on.
    pub min: GuestLogLevel,
    /// Receives each line.
    pub lines: UnboundedSender<GuestLogLine>,
}

/// The per-call state of progress and log forwarding.
#[derive(Debug, Default)]
pub(crate) struct Notices {
    progress: Option<UnboundedSender<skillhost_mcp::Progress>>,
    log: Option<LogSink>,
    sent: usize,
    last_progress: Option<f64>,
    warned: bool,
}

impl Notices {
    /// Forwarding to `progress` and `log` (each optional).
    pub fn new(
        progress: Option<UnboundedSender<skillhost_mcp::Progress>>,
        log: Option<LogSink>,
    ) -> Notices {
        Notices {
            progress,
            log,
            ..Notices::default()
        }
    }

    /// Whether a log line at `level` would be passed on (so that the
    /// caller need not build it otherwise).
    pub fn wants_log(&self, level: GuestLogLevel) -> bool {
        self.log.as_ref().is_some_and(|s| level >= s.min)
    }

    /// Whether a progress report would be passed on.
    pub fn wants_progress(&self) -> bool {
        self.progress.is_some()
    }

    fn take_slot(&mut self, skill: &str) -> bool {
        if self.sent >= MAX_CALL_NOTICES {
            if !self.warned {
                self.warned = true;
                tracing::warn!(
                    target: "skillhost::guest",
                    skill,
                    "the skill sent more than {MAX_CALL_NOTICES} progress reports and log lines \
                     in one call; the rest are not passed to the caller"
                );
            }
            return false;
        }
        self.sent += 1;
        true
    }

    /// Passes a log line on, if the caller wants it.
    pub fn log(&mut self, level: GuestLogLevel, skill: &str, message: &str) {
        if !self.wants_log(level) || !self.take_slot(skill) {
            return;
        }
        if let Some(sink) = &self.log {
            let _ = sink.lines.send(GuestLogLine {
                level,
                skill: skill.to_string(),
                message: message.to_string(),
            });
        }
    }

    /// Passes a progress report on, if the caller wants it and it goes
    /// forward.
    pub fn progress(
        &mut self,
        skill: &str,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) {
        if !self.wants_progress()
            || !progress.is_finite()
            || total.is_some_and(|t| !t.is_finite())
            || self.last_progress.is_some_and(|last| progress < last)
            || !self.take_slot(skill)
        {
            return;
        }
        self.last_progress = Some(progress);
        if let Some(tx) = &self.progress {
            let _ = tx.send(skillhost_mcp::Progress {
                progress,
                total,
                message,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sinks() -> (
        Notices,
        tokio::sync::mpsc::UnboundedReceiver<skillhost_mcp::Progress>,
        tokio::sync::mpsc::UnboundedReceiver<GuestLogLine>,
    ) {
        let (ptx, prx) = tokio::sync::mpsc::unbounded_channel();
        let (ltx, lrx) = tokio::sync::mpsc::unbounded_channel();
        let n = Notices::new(
            Some(ptx),
            Some(LogSink {
                min: GuestLogLevel::Info,
                lines: ltx,
            }),
        );
        (n, prx, lrx)
    }

    #[test]
    fn log_lines_below_the_level_are_not_passed_on() {
        let (mut n, _p, mut l) = sinks();
        n.log(GuestLogLevel::Debug, "s", "quiet");
        n.log(GuestLogLevel::Warn, "s", "loud");
        assert_eq!(l.try_recv().unwrap().message, "loud");
        assert!(l.try_recv().is_err());
    }

    #[test]
    fn progress_must_go_forward_and_be_finite() {
        let (mut n, mut p, _l) = sinks();
        for (v, t) in [
            (1.0, Some(10.0)),
            (0.5, Some(10.0)),
            (f64::NAN, None),
            (2.0, Some(f64::INFINITY)),
            (f64::INFINITY, None),
            (2.0, None),
        ] {
            n.progress("s", v, t, None);
        }
        let got: Vec<f64> = std::iter::from_fn(|| p.try_recv().ok())
            .map(|p| p.progress)
            .collect();
        assert_eq!(got, vec![1.0, 2.0]);
    }

    #[test]
    fn a_call_passes_on_a_bounded_number_of_notices() {
        let (mut n, mut p, mut l) = sinks();
        for i in 0..MAX_CALL_NOTICES * 2 {
            n.progress("s", i as f64, None, None);
            n.log(GuestLogLevel::Error, "s", "x");
        }
        let sent = std::iter::from_fn(|| p.try_recv().ok()).count()
            + std::iter::from_fn(|| l.try_recv().ok()).count();
        assert_eq!(sent, MAX_CALL_NOTICES);
    }

    #[test]
    fn without_sinks_nothing_is_wanted() {
        let n = Notices::default();
        assert!(!n.wants_progress());
        assert!(!n.wants_log(GuestLogLevel::Error));
    }
}
