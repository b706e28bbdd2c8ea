//! The calls in flight on one session, for what a server sends on the
//! session rather than on a call: a legacy session's questions
//! (`elicitation/create`) and log lines. Every call is registered, so that
//! something sent while two calls run is never given to one of them: it
//! goes to a call only when that call is the only one in flight.

use std::sync::{Arc, Mutex};

use crate::elicit::UpstreamElicitor;
use crate::server_log::{ServerLogLine, ServerLogSink};

/// One call in flight: who answers its questions, where its log lines go.
struct Listener {
    id: u64,
    elicit: Option<Arc<dyn UpstreamElicitor>>,
    log: Option<ServerLogSink>,
}

/// The calls in flight on one session.
type Listeners = Arc<Mutex<Vec<Listener>>>;

/// The calls in flight on one session.
#[derive(Clone, Default)]
pub(crate) struct InFlight {
    calls: Listeners,
    next: Arc<std::sync::atomic::AtomicU64>,
}

/// Removes its call when dropped.
pub(crate) struct Registered {
    calls: Listeners,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|l| l.id != self.id);
    }
}

impl InFlight {
    /// Registers a call (every call, so that a question is never given to
    /// one call while another is in flight) for as long as the guard
    /// lives.
    pub fn register(
        &self,
        elicit: Option<Arc<dyn UpstreamElicitor>>,
        log: Option<ServerLogSink>,
    ) -> Registered {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Listener { id, elicit, log });
        Registered {
            calls: self.calls.clone(),
            id,
        }
    }

    /// The elicitor a session-level question goes to: the only call in
    /// flight's, or `Err` saying why there is none.
    pub fn only(&self) -> Result<Arc<dyn UpstreamElicitor>, &'static str> {
        let calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        match calls.as_slice() {
            [l] => l
                .elicit
                .clone()
                .ok_or("the call in flight on this session has no one to ask"),
            [] => Err("no call is in flight on this session"),
            _ => Err(
                "several calls are in flight on this session and the question does not say which one it belongs to",
            ),
        }
    }

    /// Passes a session-level log line to the only call in flight, if it
    /// wants lines of that level.
    pub fn log(&self, line: ServerLogLine) {
        let calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        if let [l] = calls.as_slice()
            && let Some(sink) = &l.log
            && line.level >= sink.min
        {
            let _ = sink.lines.send(line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elicit::{ElicitQuestion, ElicitReply, ElicitReplyFuture};

    struct Fixed(ElicitReply);
    impl UpstreamElicitor for Fixed {
        fn ask(&self, _q: ElicitQuestion) -> ElicitReplyFuture {
            let r = self.0.clone();
            Box::pin(async move { r })
        }
    }

    #[test]
    fn a_session_question_goes_only_to_a_lone_call() {
        let f = InFlight::default();
        assert!(f.only().is_err());
        let a = f.register(Some(Arc::new(Fixed(ElicitReply::Decline))), None);
        assert!(f.only().is_ok());
        // A second call, even one that cannot ask: the question could be
        // its, so no one is asked.
        let b = f.register(None, None);
        assert!(matches!(f.only(), Err(why) if why.contains("several")));
        drop(a);
        assert!(matches!(f.only(), Err(why) if why.contains("no one to ask")));
        drop(b);
        assert!(f.only().is_err());
    }

    #[test]
    fn a_session_log_line_goes_only_to_a_lone_call_at_its_level() {
        use crate::server_log::ServerLogLevel as L;
        let line = |level| ServerLogLine {
            server: "s".into(),
            level,
            logger: None,
            data: serde_json::json!("x"),
        };
        let f = InFlight::default();
        f.log(line(L::Error));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let a = f.register(
            None,
            Some(ServerLogSink {
                min: L::Warning,
                lines: tx,
            }),
        );
        f.log(line(L::Info));
        f.log(line(L::Error));
        let b = f.register(None, None);
        f.log(line(L::Alert));
        drop((a, b));
        assert_eq!(rx.try_recv().map(|l| l.level).ok(), Some(L::Error));
        assert!(rx.try_recv().is_err());
    }
}
