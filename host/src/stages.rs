//! Optional timing of the call path by stage, for the fast-path bench
//! (`host/benches/fast_path.rs`): off unless `SKILLHOST_STAGE_TIMES` is set
//! when the process starts. Then every call records how long each stage
//! took, and [`report`] sums them up (`serve --stdio` prints it to stderr as
//! one `stage-times {…}` line when its session ends). Off, a stage costs one
//! load of a flag.

use std::sync::{LazyLock, Mutex};
use std::time::Instant;

/// A stage of a call, in path order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The MCP front's whole `tools/call` handling, from the parsed
    /// request to the result it hands back to the transport.
    Handler,
    /// Registry snapshot, authorization (grants, persona), tool lookup.
    Lookup,
    /// The arguments checked against the input schema.
    Check,
    /// A fresh sandbox store (limits, WASI context, reach).
    Store,
    /// The component instantiated in it.
    Instantiate,
    /// The guest's `call`.
    Guest,
    /// The guest's output: read, parsed, checked against the output schema.
    Output,
    /// The store dropped (the instance's memory reset).
    Teardown,
    /// The run finished: outcome, metrics, the record queued.
    Record,
}

/// Every stage, in path order.
pub const ALL: [Stage; 9] = [
    Stage::Handler,
    Stage::Lookup,
    Stage::Check,
    Stage::Store,
    Stage::Instantiate,
    Stage::Guest,
    Stage::Output,
    Stage::Teardown,
    Stage::Record,
];

impl Stage {
    /// The stage's name in [`report`]'s object (`handler`, `guest`, …).
    pub fn name(self) -> &'static str {
        match self {
            Stage::Handler => "handler",
            Stage::Lookup => "lookup",
            Stage::Check => "check",
            Stage::Store => "store",
            Stage::Instantiate => "instantiate",
            Stage::Guest => "guest",
            Stage::Output => "output",
            Stage::Teardown => "teardown",
            Stage::Record => "record",
        }
    }
}

/// The most samples kept per stage (the first ones; a bench run makes far
/// fewer): 8 MiB at most.
const MAX_SAMPLES: usize = 1 << 20;

static ON: LazyLock<bool> = LazyLock::new(|| std::env::var_os("SKILLHOST_STAGE_TIMES").is_some());
static SAMPLES: LazyLock<Mutex<Vec<Vec<u32>>>> =
    LazyLock::new(|| Mutex::new(vec![Vec::new(); ALL.len()]));

/// A stopwatch: `None` when timing is off.
pub fn start() -> Option<Instant> {
    (*ON).then(Instant::now)
}

/// Records the time since `clock` for `stage` and restarts the clock (no-op
/// when timing is off).
pub fn lap(stage: Stage, clock: &mut Option<Instant>) {
    if let Some(t) = clock {
        let now = Instant::now();
        let ns = u32::try_from((now - *t).as_nanos()).unwrap_or(u32::MAX);
        *t = now;
        let mut s = SAMPLES.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = s.get_mut(ALL.iter().position(|a| *a == stage).unwrap_or(0))
            && v.len() < MAX_SAMPLES
        {
            v.push(ns);
        }
    }
}

/// Forgets every sample recorded so far (a bench timing one phase of its
/// run).
pub fn reset() {
    let mut s = SAMPLES.lock().unwrap_or_else(|e| e.into_inner());
    for v in s.iter_mut() {
        v.clear();
    }
}

/// Each stage's count and p50/p90/p99 in nanoseconds, as a JSON object in
/// path order; `None` when timing is off.
pub fn report() -> Option<String> {
    if !*ON {
        return None;
    }
    let s = SAMPLES.lock().unwrap_or_else(|e| e.into_inner());
    let mut out = serde_json::Map::new();
    for (stage, samples) in ALL.iter().zip(s.iter()) {
        if samples.is_empty() {
            continue;
        }
        let mut v = samples.clone();
        v.sort_unstable();
        let at = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
        out.insert(
            stage.name().into(),
            serde_json::json!({"n": v.len(), "p50_ns": at(0.5), "p90_ns": at(0.9), "p99_ns": at(0.99)}),
        );
    }
    Some(serde_json::Value::Object(out).to_string())
}
