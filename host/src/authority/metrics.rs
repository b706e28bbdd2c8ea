//! The host's metrics, in the Prometheus text exposition format (0.0.4).
//!
//! Each [`crate::Host`] owns one [`Metrics`] (no global registry: two hosts
//! in one process count apart). The call path only increments atomic
//! counters resolved when the host is built and observes one histogram
//! (an uncontended lock per tool kind), so recording a call costs well
//! under a microsecond. Values that live in the store or the MCP manager
//! (pending approvals, servers by state, restarts) are read when the text
//! is made, never kept in step on the hot path.
//!
//! Series, all prefixed `skillhost_`:
//!
//! | series | type | labels |
//! | --- | --- | --- |
//! | `tool_calls_total` | counter | `kind`, `outcome` |
//! | `tool_call_duration_seconds` | histogram | `kind` (`wasm`, `mcp`) |
//! | `traps_total` | counter | `reason` |
//! | `timeouts_total` | counter | `kind` (`wasm`, `mcp`) |
//! | `approvals_pending` | gauge | |
//! | `mcp_servers` | gauge | `state` |
//! | `mcp_restarts_total` | counter | `server` |
//! | `build_info` | gauge (always 1) | `version` |
//!
//! Labels take values from fixed sets only, except `server`: the names of
//! the MCP servers the operator configured. There is no per-tool label on
//! purpose: an MCP server chooses its own tool names and how many it lists,
//! so a per-tool label would let a server outside the operator's control
//! grow the series without bound; the runs (`skillhost runs list`) and the
//! events already say which tool did what.

use std::fmt::Write as _;
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use skillhost_mcp::{ServerState, ServerStatus};

use super::{Host, lock};
use crate::registry::Provider;
use crate::sandbox::TrapReason;
use crate::state::runs::{Outcome, now_ms};

/// The `Content-Type` of the text [`crate::Host::metrics_text`] makes (the
/// Prometheus text exposition format, version 0.0.4), which `GET /metrics`
/// of `skillhost serve --http` answers with.
///
/// ```
/// assert!(skillhost::METRICS_CONTENT_TYPE.starts_with("text/plain; version=0.0.4"));
/// ```
pub const METRICS_CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Every series' name starts with this and `_`.
const PREFIX: &str = "skillhost";

/// Upper bounds of the call duration buckets, in seconds: from the tens of
/// microseconds a small WASM call takes up to the 60 s of a mutating MCP
/// tool's timeout (the sandbox's default deadline is 10 s, a read-only MCP
/// tool's timeout 20 s).
const DURATION_BUCKETS: [f64; 17] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0,
    30.0, 60.0,
];

/// What kind of tool a call went to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum CallKind {
    /// A skill's tool, run in the sandbox.
    Wasm,
    /// A tool of an MCP server.
    Mcp,
    /// No registered tool (an unknown name, or the state could not be read).
    Unknown,
}

impl CallKind {
    const ALL: [CallKind; 3] = [CallKind::Wasm, CallKind::Mcp, CallKind::Unknown];

    /// The kind of a run's provider (`None` when no tool was found).
    pub(crate) fn of(provider: Option<&Provider>) -> CallKind {
        match provider {
            Some(Provider::Skill(_)) => CallKind::Wasm,
            Some(Provider::Mcp(_)) => CallKind::Mcp,
            None => CallKind::Unknown,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            CallKind::Wasm => "wasm",
            CallKind::Mcp => "mcp",
            CallKind::Unknown => "unknown",
        }
    }

    /// The index of the kinds that execute (and so have a duration or a
    /// timeout).
    fn executed(self) -> Option<usize> {
        match self {
            CallKind::Wasm => Some(0),
            CallKind::Mcp => Some(1),
            CallKind::Unknown => None,
        }
    }
}

impl EncodeLabelValue for CallKind {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        encoder.write_str(self.as_str())
    }
}

/// How a call ended, as counted: the run's outcome, except that a call
/// that failed because its caller cancelled it is `cancelled`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum CallOutcome {
    Ok,
    Error,
    Timeout,
    Denied,
    WaitingApproval,
    Trapped,
    Cancelled,
    InputRequired,
}

impl CallOutcome {
    const ALL: [CallOutcome; 8] = [
        CallOutcome::Ok,
        CallOutcome::Error,
        CallOutcome::Timeout,
        CallOutcome::Denied,
        CallOutcome::WaitingApproval,
        CallOutcome::Trapped,
        CallOutcome::Cancelled,
        CallOutcome::InputRequired,
    ];

    /// The counted outcome of a run that ended with `outcome`; `cancelled`
    /// when the caller's cancellation fired (it only matters for a call that
    /// did not end `ok`).
    pub(crate) fn of(outcome: Outcome, cancelled: bool) -> CallOutcome {
        match outcome {
            Outcome::Ok => CallOutcome::Ok,
            _ if cancelled => CallOutcome::Cancelled,
            Outcome::Error => CallOutcome::Error,
            Outcome::Timeout => CallOutcome::Timeout,
            Outcome::Denied => CallOutcome::Denied,
            Outcome::WaitingApproval => CallOutcome::WaitingApproval,
            Outcome::Trapped => CallOutcome::Trapped,
            Outcome::InputRequired => CallOutcome::InputRequired,
            // Not an end: a finished call never has it.
            Outcome::Running => CallOutcome::Error,
            // Set by another host after this one's call stopped: never
            // counted by the host that ran it.
            Outcome::Interrupted => CallOutcome::Error,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Ok => "ok",
            CallOutcome::Error => "error",
            CallOutcome::Timeout => "timeout",
            CallOutcome::Denied => "denied",
            CallOutcome::WaitingApproval => "waiting_approval",
            CallOutcome::Trapped => "trapped",
            CallOutcome::Cancelled => "cancelled",
            CallOutcome::InputRequired => "input_required",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl EncodeLabelValue for CallOutcome {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        encoder.write_str(self.as_str())
    }
}

/// Every trap reason, in the order of the `traps` counters.
const TRAP_REASONS: [TrapReason; 7] = [
    TrapReason::Fuel,
    TrapReason::Deadline,
    TrapReason::Memory,
    TrapReason::Stack,
    TrapReason::Panic,
    TrapReason::OutputTooLarge,
    TrapReason::Other,
];

fn trap_index(reason: TrapReason) -> usize {
    match reason {
        TrapReason::Fuel => 0,
        TrapReason::Deadline => 1,
        TrapReason::Memory => 2,
        TrapReason::Stack => 3,
        TrapReason::Panic => 4,
        TrapReason::OutputTooLarge => 5,
        TrapReason::Other => 6,
    }
}

/// A trap reason as a label value (its JSON spelling: `fuel`, `deadline`,
/// `memory`, `stack`, `panic`, `output-too-large`, `other`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct TrapLabel(TrapReason);

impl EncodeLabelValue for TrapLabel {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        encoder.write_str(self.0.as_str())
    }
}

fn state_str(state: ServerState) -> &'static str {
    match state {
        ServerState::Disabled => "disabled",
        ServerState::Starting => "starting",
        ServerState::Ready => "ready",
        ServerState::Degraded => "degraded",
        ServerState::Failed => "failed",
        ServerState::NeedsSignIn => "needs_sign_in",
    }
}

const SERVER_STATES: [ServerState; 6] = [
    ServerState::Disabled,
    ServerState::Starting,
    ServerState::Ready,
    ServerState::Degraded,
    ServerState::Failed,
    ServerState::NeedsSignIn,
];

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct CallLabels {
    kind: CallKind,
    outcome: CallOutcome,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct KindLabels {
    kind: CallKind,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct TrapLabels {
    reason: TrapLabel,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StateLabels {
    state: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ServerLabels {
    server: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct VersionLabels {
    version: &'static str,
}

fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

/// What the text reads at scrape time from outside the counters.
#[derive(Debug, Default)]
pub(crate) struct Scraped<'a> {
    /// Runs waiting for approval and not yet expired (`None`: the store
    /// could not be read, so the series is left out).
    pub pending_approvals: Option<u64>,
    /// Every MCP server the host supervises.
    pub servers: &'a [ServerStatus],
}

/// One host's registry and the counters the call path increments.
pub(crate) struct Metrics {
    registry: Registry,
    /// `[kind][outcome]`, resolved from the family once.
    calls: [[Counter; CallOutcome::ALL.len()]; CallKind::ALL.len()],
    /// By executed kind (wasm, mcp).
    durations: [Histogram; 2],
    timeouts: [Counter; 2],
    traps: [Counter; TRAP_REASONS.len()],
    /// Outbound HTTP requests of skills, by skill and outcome.
    outbound: Family<OutboundLabels, Counter>,
    /// Outbound HTTP body bytes of skills, by skill and direction.
    outbound_bytes: Family<OutboundBytesLabels, Counter>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OutboundLabels {
    skill: String,
    outcome: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OutboundBytesLabels {
    skill: String,
    direction: &'static str,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// A registry with every series the call path counts, all at zero.
    pub(crate) fn new() -> Metrics {
        let mut registry = Registry::with_prefix(PREFIX);

        let calls_family = Family::<CallLabels, Counter>::default();
        let calls = CallKind::ALL.map(|kind| {
            CallOutcome::ALL.map(|outcome| {
                calls_family
                    .get_or_create(&CallLabels { kind, outcome })
                    .clone()
            })
        });
        registry.register(
            "tool_calls",
            "Tool calls by tool kind (wasm: a skill's tool in the sandbox; mcp: an MCP server's \
             tool; unknown: no such tool registered) and outcome (a call that stopped in \
             waiting_approval counts again with its final outcome once approved)",
            calls_family,
        );

        let durations_family =
            Family::<KindLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                duration_histogram,
            );
        let durations = [CallKind::Wasm, CallKind::Mcp]
            .map(|kind| durations_family.get_or_create(&KindLabels { kind }).clone());
        registry.register_with_unit(
            "tool_call_duration",
            "Time from a call's start to its end, for calls to a registered tool (a call waiting \
             for approval is measured when it runs)",
            Unit::Seconds,
            durations_family,
        );

        let timeouts_family = Family::<KindLabels, Counter>::default();
        let timeouts = [CallKind::Wasm, CallKind::Mcp]
            .map(|kind| timeouts_family.get_or_create(&KindLabels { kind }).clone());
        registry.register(
            "timeouts",
            "Calls that ran out of time: the sandbox's deadline (wasm) or the MCP tool timeout (mcp)",
            timeouts_family,
        );

        let traps_family = Family::<TrapLabels, Counter>::default();
        let traps = TRAP_REASONS.map(|r| {
            traps_family
                .get_or_create(&TrapLabels {
                    reason: TrapLabel(r),
                })
                .clone()
        });
        registry.register(
            "traps",
            "Calls the sandbox stopped, by the limit or fault that stopped them (deadline: the \
             wall-clock limit, also counted in timeouts)",
            traps_family,
        );

        let build = Family::<VersionLabels, Gauge>::default();
        build
            .get_or_create(&VersionLabels {
                version: env!("CARGO_PKG_VERSION"),
            })
            .set(1);
        registry.register("build_info", "The skillhost version (always 1)", build);

        let outbound = Family::<OutboundLabels, Counter>::default();
        registry.register(
            "outbound_requests",
            "Outbound HTTP requests skills made, by skill and outcome (ok: a response came; \
             denied: refused by the skill's approved origins or the address check; limit: a \
             per-call limit; timeout; failed: DNS, connection, TLS or protocol)",
            outbound.clone(),
        );
        let outbound_bytes = Family::<OutboundBytesLabels, Counter>::default();
        registry.register_with_unit(
            "outbound_body",
            "Outbound HTTP body bytes of skills, by skill and direction (sent, received)",
            Unit::Bytes,
            outbound_bytes.clone(),
        );

        Metrics {
            registry,
            calls,
            durations,
            timeouts,
            traps,
            outbound,
            outbound_bytes,
        }
    }

    /// Counts one outbound request of `skill`. The labels are the
    /// skill's name (its manifest's, approved by the operator) and the
    /// outcome's kind (a fixed word): never the method, origin or detail
    /// the guest chose, which could hold a secret an API echoed back and
    /// would make a series per value.
    pub(crate) fn record_outbound(&self, skill: &str, r: &crate::sandbox::OutboundRecord) {
        self.outbound
            .get_or_create(&OutboundLabels {
                skill: skill.to_string(),
                outcome: r.outcome.as_str(),
            })
            .inc();
        for (direction, n) in [("sent", r.bytes_sent), ("received", r.bytes_received)] {
            if n > 0 {
                self.outbound_bytes
                    .get_or_create(&OutboundBytesLabels {
                        skill: skill.to_string(),
                        direction,
                    })
                    .inc_by(n);
            }
        }
    }

    /// Counts one call that ended (or stopped in `waiting_approval`):
    /// its outcome, the trap that stopped it, and how long it took
    /// (`None`: not executed yet, as for `waiting_approval`).
    pub(crate) fn record_call(
        &self,
        kind: CallKind,
        outcome: CallOutcome,
        trap: Option<TrapReason>,
        duration: Option<Duration>,
    ) {
        let k = kind as usize;
        self.calls[k][outcome.index()].inc();
        if let Some(r) = trap {
            self.traps[trap_index(r)].inc();
        }
        if let Some(e) = kind.executed() {
            if outcome == CallOutcome::Timeout {
                self.timeouts[e].inc();
            }
            if let Some(d) = duration {
                self.durations[e].observe(d.as_secs_f64());
            }
        }
    }

    /// The exposition text: the counters, then the values read at scrape
    /// time.
    pub(crate) fn encode(&self, scraped: &Scraped<'_>) -> String {
        let mut now = Registry::with_prefix(PREFIX);
        if let Some(n) = scraped.pending_approvals {
            let pending = Gauge::<i64>::default();
            pending.set(i64::try_from(n).unwrap_or(i64::MAX));
            now.register(
                "approvals_pending",
                "Calls waiting for an operator's approval that have not expired",
                pending,
            );
        }
        let states = Family::<StateLabels, Gauge>::default();
        for state in SERVER_STATES {
            let n = scraped.servers.iter().filter(|s| s.state == state).count();
            states
                .get_or_create(&StateLabels {
                    state: state_str(state),
                })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        now.register(
            "mcp_servers",
            "MCP servers this host supervises, by state (servers started on demand appear once \
             a call needed them)",
            states,
        );
        // A family with no series is left out by the encoder; the
        // restarts counter is declared below by hand when no server is
        // known yet (before the supervisor has read its configuration),
        // so that a scrape always names the same families.
        let restarts = Family::<ServerLabels, Counter>::default();
        for s in scraped.servers {
            restarts
                .get_or_create(&ServerLabels {
                    server: s.name.clone(),
                })
                .inc_by(s.restarts_total);
        }
        now.register("mcp_restarts", RESTARTS_HELP, restarts);

        let mut text = String::new();
        for registry in [&self.registry, &now] {
            // Writing to a String cannot fail; an error here would be a
            // bug of the encoder, and a scrape must still answer.
            if let Err(e) =
                prometheus_client::encoding::prometheus_text::encode(&mut text, registry)
            {
                tracing::warn!("cannot encode the metrics: {e}");
            }
        }
        if scraped.servers.is_empty() {
            text.push_str(&format!(
                "# HELP {PREFIX}_mcp_restarts_total {RESTARTS_HELP}.\n\
                 # TYPE {PREFIX}_mcp_restarts_total counter\n"
            ));
        }
        text
    }
}

/// The help text of `mcp_restarts_total`.
const RESTARTS_HELP: &str = "Times the supervisor restarted an MCP server after its session \
                             ended, since this host began supervising it";

/// # Metrics
///
/// The host's metrics in Prometheus text format.
impl Host {
    /// This host's metrics in the Prometheus text exposition format
    /// (version 0.0.4, [`crate::METRICS_CONTENT_TYPE`]), as `GET /metrics`
    /// of `skillhost serve --http` serves them. Every series starts with
    /// `skillhost_`:
    ///
    /// - `tool_calls_total{kind, outcome}`: every call through
    ///   [`Host::call`] (and the calls skills make with `invoke`), by
    ///   `kind` (`wasm`, `mcp`, or `unknown` for a tool that is not
    ///   registered) and `outcome` (`ok`, `error`, `timeout`, `denied`,
    ///   `waiting_approval`, `trapped`, `cancelled`). A call that waits for
    ///   approval counts as `waiting_approval`, then once more with how it
    ///   ended when an operator approves it in this process;
    /// - `tool_call_duration_seconds{kind}`: a histogram of the executed
    ///   calls' durations (`wasm`, `mcp`);
    /// - `traps_total{reason}`: calls the sandbox stopped (`fuel`,
    ///   `deadline`, `memory`, `stack`, `panic`, `output-too-large`,
    ///   `other`);
    /// - `timeouts_total{kind}`: calls that ran out of time;
    /// - `approvals_pending`: runs waiting for approval, not expired (read
    ///   from the data dir, so runs of other processes count too; left out
    ///   if the database cannot be read);
    /// - `mcp_servers{state}` and `mcp_restarts_total{server}`: the MCP
    ///   servers this host supervises;
    /// - `build_info{version}`: always 1.
    ///
    /// Counters count what this `Host` did since it was built: another
    /// `Host` (in this process or another, such as a CLI call) counts
    /// apart.
    ///
    /// ```no_run
    /// # async fn f() -> anyhow::Result<()> {
    /// use skillhost::{Caller, HostBuilder};
    /// let host = HostBuilder::new("data").build().await?;
    /// host.call(&Caller::Operator, "text.word_count",
    ///     serde_json::json!({"text": "a b"}), &Default::default()).await;
    /// let text = host.metrics_text();
    /// assert!(text.contains(r#"skillhost_tool_calls_total{kind="wasm",outcome="ok"} 1"#));
    /// # Ok(()) }
    /// ```
    pub fn metrics_text(&self) -> String {
        let pending = lock(&self.inner.store).pending_run_count(now_ms());
        let pending_approvals = match pending {
            Ok(n) => Some(n),
            Err(e) => {
                tracing::warn!("metrics: cannot count the pending approvals: {e}");
                None
            }
        };
        let servers = self.inner.mcp.statuses();
        self.inner.metrics.encode(&Scraped {
            pending_approvals,
            servers: &servers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authority::{Caller, HostBuilder};

    /// The value of the sample `series` (name and labels exactly as
    /// printed), if the text has it.
    fn sample(text: &str, series: &str) -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    fn status(name: &str, state: ServerState, restarts_total: u64) -> ServerStatus {
        ServerStatus {
            name: name.into(),
            state,
            last_error: None,
            restarts: 0,
            restarts_total,
            pid: None,
            session: None,
            tools: 0,
        }
    }

    #[test]
    fn a_new_registry_shows_every_series_at_zero() {
        let text = Metrics::new().encode(&Scraped::default());
        for kind in ["wasm", "mcp", "unknown"] {
            for outcome in [
                "ok",
                "error",
                "timeout",
                "denied",
                "waiting_approval",
                "trapped",
                "cancelled",
            ] {
                let series =
                    format!("skillhost_tool_calls_total{{kind=\"{kind}\",outcome=\"{outcome}\"}}");
                assert_eq!(sample(&text, &series), Some(0.0), "{series} in\n{text}");
            }
        }
        for reason in [
            "fuel",
            "deadline",
            "memory",
            "stack",
            "panic",
            "output-too-large",
            "other",
        ] {
            let series = format!("skillhost_traps_total{{reason=\"{reason}\"}}");
            assert_eq!(sample(&text, &series), Some(0.0), "{series} in\n{text}");
        }
        assert!(
            text.contains("# TYPE skillhost_tool_calls_total counter\n"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE skillhost_tool_call_duration_seconds histogram\n"),
            "{text}"
        );
        assert!(
            text.contains("# HELP skillhost_tool_calls_total Tool calls by tool kind"),
            "{text}"
        );
        let version = format!(
            "skillhost_build_info{{version=\"{}\"}}",
            env!("CARGO_PKG_VERSION")
        );
        assert_eq!(sample(&text, &version), Some(1.0), "{text}");
        // No store value: no pending series rather than a wrong 0.
        assert!(!text.contains("approvals_pending"), "{text}");
    }

    #[test]
    fn calls_count_by_kind_outcome_trap_and_duration() {
        let m = Metrics::new();
        let ms = |n| Some(Duration::from_millis(n));
        m.record_call(CallKind::Wasm, CallOutcome::Ok, None, ms(2));
        m.record_call(CallKind::Wasm, CallOutcome::Ok, None, ms(3));
        m.record_call(
            CallKind::Wasm,
            CallOutcome::Trapped,
            Some(TrapReason::Fuel),
            ms(40),
        );
        m.record_call(
            CallKind::Wasm,
            CallOutcome::Timeout,
            Some(TrapReason::Deadline),
            ms(1500),
        );
        m.record_call(CallKind::Mcp, CallOutcome::Timeout, None, ms(20_000));
        m.record_call(CallKind::Mcp, CallOutcome::WaitingApproval, None, None);
        m.record_call(CallKind::Unknown, CallOutcome::Error, None, ms(0));
        let text = m.encode(&Scraped::default());
        let calls = |kind: &str, outcome: &str| {
            sample(
                &text,
                &format!("skillhost_tool_calls_total{{kind=\"{kind}\",outcome=\"{outcome}\"}}"),
            )
        };
        assert_eq!(calls("wasm", "ok"), Some(2.0), "{text}");
        assert_eq!(calls("wasm", "trapped"), Some(1.0));
        assert_eq!(calls("wasm", "timeout"), Some(1.0));
        assert_eq!(calls("mcp", "timeout"), Some(1.0));
        assert_eq!(calls("mcp", "waiting_approval"), Some(1.0));
        assert_eq!(calls("unknown", "error"), Some(1.0));
        assert_eq!(calls("mcp", "ok"), Some(0.0));
        assert_eq!(
            sample(&text, "skillhost_traps_total{reason=\"fuel\"}"),
            Some(1.0)
        );
        assert_eq!(
            sample(&text, "skillhost_traps_total{reason=\"deadline\"}"),
            Some(1.0)
        );
        assert_eq!(
            sample(&text, "skillhost_timeouts_total{kind=\"wasm\"}"),
            Some(1.0)
        );
        assert_eq!(
            sample(&text, "skillhost_timeouts_total{kind=\"mcp\"}"),
            Some(1.0)
        );
        // Four wasm calls observed; the waiting one and the unknown one not.
        let h = "skillhost_tool_call_duration_seconds";
        assert_eq!(
            sample(&text, &format!("{h}_count{{kind=\"wasm\"}}")),
            Some(4.0)
        );
        assert_eq!(
            sample(&text, &format!("{h}_count{{kind=\"mcp\"}}")),
            Some(1.0)
        );
        assert_eq!(
            sample(&text, &format!("{h}_bucket{{kind=\"wasm\",le=\"0.005\"}}")),
            Some(2.0)
        );
        assert_eq!(
            sample(&text, &format!("{h}_bucket{{kind=\"wasm\",le=\"2.5\"}}")),
            Some(4.0)
        );
        assert_eq!(
            sample(&text, &format!("{h}_bucket{{kind=\"mcp\",le=\"+Inf\"}}")),
            Some(1.0)
        );
        let sum = sample(&text, &format!("{h}_sum{{kind=\"wasm\"}}")).expect("sum");
        assert!((sum - 1.545).abs() < 1e-9, "{sum}");
    }

    #[test]
    fn cancellation_and_kinds_are_classified() {
        let skill = Provider::Skill("text-tools".into());
        assert_eq!(CallKind::of(Some(&skill)), CallKind::Wasm);
        let server = Provider::Mcp("everything".into());
        assert_eq!(CallKind::of(Some(&server)), CallKind::Mcp);
        assert_eq!(CallKind::of(None), CallKind::Unknown);
        assert_eq!(CallOutcome::of(Outcome::Ok, true), CallOutcome::Ok);
        assert_eq!(
            CallOutcome::of(Outcome::Error, true),
            CallOutcome::Cancelled
        );
        assert_eq!(CallOutcome::of(Outcome::Error, false), CallOutcome::Error);
        assert_eq!(
            CallOutcome::of(Outcome::Trapped, false),
            CallOutcome::Trapped
        );
        for (i, o) in CallOutcome::ALL.iter().enumerate() {
            assert_eq!(o.index(), i);
        }
        for (i, r) in TRAP_REASONS.iter().enumerate() {
            assert_eq!(trap_index(*r), i);
        }
        for (i, k) in CallKind::ALL.iter().enumerate() {
            assert_eq!(*k as usize, i);
        }
    }

    #[test]
    fn scrape_time_values_are_shown() {
        let servers = [
            status("everything", ServerState::Ready, 2),
            status("flaky", ServerState::Degraded, 5),
            status("other", ServerState::Ready, 0),
        ];
        let text = Metrics::new().encode(&Scraped {
            pending_approvals: Some(3),
            servers: &servers,
        });
        assert_eq!(
            sample(&text, "skillhost_approvals_pending"),
            Some(3.0),
            "{text}"
        );
        assert_eq!(
            sample(&text, "skillhost_mcp_servers{state=\"ready\"}"),
            Some(2.0)
        );
        assert_eq!(
            sample(&text, "skillhost_mcp_servers{state=\"degraded\"}"),
            Some(1.0)
        );
        assert_eq!(
            sample(&text, "skillhost_mcp_servers{state=\"failed\"}"),
            Some(0.0)
        );
        assert_eq!(
            sample(&text, "skillhost_mcp_restarts_total{server=\"flaky\"}"),
            Some(5.0)
        );
        assert_eq!(
            sample(&text, "skillhost_mcp_restarts_total{server=\"everything\"}"),
            Some(2.0)
        );
        assert!(
            text.contains("# TYPE skillhost_mcp_restarts_total counter\n"),
            "{text}"
        );
    }

    #[test]
    fn the_restarts_family_is_declared_before_any_server_is_known() {
        let text = Metrics::new().encode(&Scraped {
            pending_approvals: Some(0),
            servers: &[],
        });
        assert_eq!(
            text.matches("# TYPE skillhost_mcp_restarts_total counter\n")
                .count(),
            1,
            "{text}"
        );
        let with = Metrics::new().encode(&Scraped {
            pending_approvals: Some(0),
            servers: &[status("a", ServerState::Ready, 1)],
        });
        let help = |t: &str| {
            t.lines()
                .find(|l| l.starts_with("# HELP skillhost_mcp_restarts_total "))
                .map(str::to_owned)
        };
        assert!(help(&text).is_some(), "{text}");
        assert_eq!(help(&text), help(&with));
        assert_eq!(
            with.matches("# TYPE skillhost_mcp_restarts_total counter\n")
                .count(),
            1,
            "{with}"
        );
    }

    #[test]
    fn every_line_is_exposition_grammar() {
        let m = Metrics::new();
        m.record_call(
            CallKind::Wasm,
            CallOutcome::Ok,
            None,
            Some(Duration::from_micros(80)),
        );
        let servers = [status("a-b_c", ServerState::Ready, 1)];
        let text = m.encode(&Scraped {
            pending_approvals: Some(0),
            servers: &servers,
        });
        assert!(text.ends_with('\n'), "{text}");
        let name_ok = |n: &str| {
            n.starts_with("skillhost_")
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        };
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let name = rest.split(' ').next().unwrap_or_default();
                assert!(name_ok(name), "{line}");
                continue;
            }
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let mut parts = rest.split(' ');
                assert!(name_ok(parts.next().unwrap_or_default()), "{line}");
                assert!(
                    matches!(parts.next(), Some("counter" | "gauge" | "histogram")),
                    "{line}"
                );
                continue;
            }
            let (series, value) = line.rsplit_once(' ').expect("a sample has a value");
            let name = series.split('{').next().unwrap_or_default();
            assert!(name_ok(name), "{line}");
            assert!(
                value == "+Inf" || value.parse::<f64>().is_ok(),
                "value of {line}"
            );
            if let Some(labels) = series.strip_prefix(name).filter(|l| !l.is_empty()) {
                assert!(labels.starts_with('{') && labels.ends_with('}'), "{line}");
            }
        }
    }

    /// Two hosts in one process count apart, and each counts its own
    /// calls by kind and outcome.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_host_counts_its_own_calls() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let a = HostBuilder::new(tmp.path().join("a"))
            .build()
            .await
            .expect("host a");
        let b = HostBuilder::new(tmp.path().join("b"))
            .build()
            .await
            .expect("host b");
        let args = serde_json::json!({"text": "one two"});
        for _ in 0..2 {
            let run = a
                .call(
                    &Caller::Operator,
                    "text.word_count",
                    args.clone(),
                    &Default::default(),
                )
                .await;
            assert_eq!(run.outcome, Outcome::Ok, "{run:?}");
        }
        let run = a
            .call(
                &Caller::persona("nobody"),
                "text.word_count",
                args.clone(),
                &Default::default(),
            )
            .await;
        assert_eq!(run.outcome, Outcome::Denied, "{run:?}");
        let run = a
            .call(
                &Caller::Operator,
                "no.such_tool",
                args.clone(),
                &Default::default(),
            )
            .await;
        assert_eq!(run.outcome, Outcome::Error, "{run:?}");

        let series = |kind: &str, outcome: &str| {
            format!("skillhost_tool_calls_total{{kind=\"{kind}\",outcome=\"{outcome}\"}}")
        };
        let text = a.metrics_text();
        assert_eq!(sample(&text, &series("wasm", "ok")), Some(2.0), "{text}");
        assert_eq!(
            sample(&text, &series("wasm", "denied")),
            Some(1.0),
            "{text}"
        );
        assert_eq!(
            sample(&text, &series("unknown", "error")),
            Some(1.0),
            "{text}"
        );
        assert_eq!(
            sample(
                &text,
                "skillhost_tool_call_duration_seconds_count{kind=\"wasm\"}"
            ),
            Some(3.0),
            "{text}"
        );
        assert_eq!(
            sample(&text, "skillhost_approvals_pending"),
            Some(0.0),
            "{text}"
        );
        let text = b.metrics_text();
        assert_eq!(sample(&text, &series("wasm", "ok")), Some(0.0), "{text}");
        a.shutdown().await;
        b.shutdown().await;
    }
}
