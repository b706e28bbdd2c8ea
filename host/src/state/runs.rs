//! The `runs` and `events` tables: one run per call, with its outcome and,
//! for a call that needs confirmation, its approval; the audit events.
//!
//! A run that stops in `waiting_approval` is written synchronously (another
//! process may approve it); every other run and every event is written by
//! the batching writer (`crate::state::writer`).

use std::time::{SystemTime, UNIX_EPOCH};

use crate::state::db::{self, Dialect, Owned, params};
use serde::Serialize;

use crate::state::{Store, now};

/// How a run ended (or where it stands).
///
/// ```
/// assert_eq!(skillhost::Outcome::WaitingApproval.as_str(), "waiting_approval");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The tool returned a valid result.
    Ok,
    /// The tool (or validation) failed.
    Error,
    /// The call ran out of time (an MCP timeout or a sandbox deadline).
    Timeout,
    /// Not authorized, refused by the operator, or its approval expired.
    Denied,
    /// Stopped until an operator approves or denies it.
    WaitingApproval,
    /// Approved and executing.
    Running,
    /// The sandbox stopped the component (fuel, memory, stack, panic, …).
    Trapped,
    /// The skill asked its caller's client a question that the client
    /// answers by calling again (MCP `input_required`); this round ended
    /// there.
    InputRequired,
    /// Approved and executing when the process running it stopped (a
    /// crash, a kill -9, a replica that died): whether the tool ran, and
    /// how far, is unknown. Set by the next host to look (on one machine,
    /// when the process is gone; across replicas, when its lease on the
    /// run expired).
    Interrupted,
}

impl Outcome {
    /// The outcome as spelled in JSON and the database.
    ///
    /// ```
    /// assert_eq!(skillhost::Outcome::Trapped.as_str(), "trapped");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::Timeout => "timeout",
            Outcome::Denied => "denied",
            Outcome::WaitingApproval => "waiting_approval",
            Outcome::Running => "running",
            Outcome::Trapped => "trapped",
            Outcome::InputRequired => "input_required",
            Outcome::Interrupted => "interrupted",
        }
    }

    /// Every outcome, in the order a list of them shows.
    ///
    /// ```
    /// assert!(skillhost::Outcome::ALL.contains(&skillhost::Outcome::Ok));
    /// ```
    pub const ALL: [Outcome; 9] = [
        Outcome::Ok,
        Outcome::Error,
        Outcome::Timeout,
        Outcome::Denied,
        Outcome::WaitingApproval,
        Outcome::Running,
        Outcome::Trapped,
        Outcome::InputRequired,
        Outcome::Interrupted,
    ];

    fn parse(s: &str) -> Outcome {
        match s {
            "ok" => Outcome::Ok,
            "timeout" => Outcome::Timeout,
            "denied" => Outcome::Denied,
            "waiting_approval" => Outcome::WaitingApproval,
            "running" => Outcome::Running,
            "trapped" => Outcome::Trapped,
            "input_required" => Outcome::InputRequired,
            "interrupted" => Outcome::Interrupted,
            _ => Outcome::Error,
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a run that needed confirmation stands.
///
/// ```
/// assert_eq!(skillhost::Approval::Pending.as_str(), "pending");
/// assert_eq!(serde_json::to_value(skillhost::Approval::Expired).unwrap(), "expired");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Approval {
    /// Waiting for an operator (or, where allowed, the client) to decide.
    Pending,
    /// Approved: the call ran (or runs) once with the recorded arguments.
    Approved,
    /// Denied: the call never ran.
    Denied,
    /// Nobody decided before the approval's expiry: the call never ran.
    Expired,
}

impl Approval {
    /// The state as spelled in JSON and the database.
    ///
    /// ```
    /// assert_eq!(skillhost::Approval::Denied.as_str(), "denied");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Approval::Pending => "pending",
            Approval::Approved => "approved",
            Approval::Denied => "denied",
            Approval::Expired => "expired",
        }
    }

    /// The state spelled `s` (as the database keeps it), if it is one.
    pub(crate) fn parse(s: &str) -> Option<Approval> {
        match s {
            "pending" => Some(Approval::Pending),
            "approved" => Some(Approval::Approved),
            "denied" => Some(Approval::Denied),
            "expired" => Some(Approval::Expired),
            _ => None,
        }
    }
}

impl std::fmt::Display for Approval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One run as recorded.
///
/// ```no_run
/// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
/// for run in host.runs(&Default::default())? {
///     println!("{} {} {} {}", run.run_id, run.tool, run.outcome, run.duration_ms.unwrap_or(0));
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRecord {
    /// The run's id.
    pub run_id: String,
    /// The run that invoked this one through `host.invoke`, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<String>,
    /// The persona, or `None` for the operator.
    pub persona: Option<String>,
    /// The registered tool name.
    pub tool: String,
    /// `skill:<name>` or the MCP server.
    pub server: String,
    /// Where it stands.
    pub outcome: Outcome,
    /// For calls that needed confirmation, where the approval stands.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<Approval>,
    /// The arguments, kept while approval is pending and for the record
    /// (`record_arguments`); of a skill's `run_script` run whose arguments
    /// are not recorded, `{"script": …}` alone: which script ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<serde_json::Value>,
    /// Refs passed to the call.
    pub input_refs: Vec<String>,
    /// The error, for runs that did not end `ok`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Unix milliseconds.
    pub created_at_ms: i64,
    /// Unix milliseconds of the last change.
    pub updated_at_ms: i64,
    /// Until when an approval is accepted (Unix ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<i64>,
    /// Who decided the approval: `operator:<how>` (`operator:cli`,
    /// `operator:admin-token`, `operator:library`), `client:<persona>` for
    /// the persona's own MCP client where the operator allowed that, or
    /// `expiry`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// How long the call took.
    pub duration_ms: Option<i64>,
}

/// Which runs to list.
///
/// ```
/// let f = skillhost::RunFilter { tool: Some("text.word_count".into()), limit: 10, ..Default::default() };
/// ```
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    /// Only this persona (`Some("operator")` is not special: use
    /// `operator_only`).
    pub persona: Option<String>,
    /// Only the operator's runs.
    pub operator_only: bool,
    /// Only this tool.
    pub tool: Option<String>,
    /// Only runs waiting for approval.
    pub pending_only: bool,
    /// Only runs with this outcome.
    pub outcome: Option<Outcome>,
    /// At most this many, newest first (0: 100).
    pub limit: usize,
    /// Only runs older than this cursor: the `next` of the page before
    /// (see [`RunPage`]).
    pub cursor: Option<String>,
}

/// One page of runs and the cursor of the next one (`None`: the last
/// page).
///
/// ```no_run
/// # fn f(host: skillhost::Host) -> Result<(), skillhost::StateError> {
/// let mut filter = skillhost::RunFilter { limit: 100, ..Default::default() };
/// loop {
///     let page = host.run_page(&filter)?;
///     for r in &page.runs { println!("{}", r.run_id); }
///     let Some(next) = page.next else { break };
///     filter.cursor = Some(next);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunPage {
    /// The runs, newest first.
    pub runs: Vec<RunRecord>,
    /// The cursor of the next page, if there are more.
    pub next: Option<String>,
}

/// A run cursor: the creation time and id of the last run of a page.
fn run_cursor(r: &RunRecord) -> String {
    format!("{}.{}", r.created_at_ms, r.run_id)
}

/// Parses a run cursor; `None` for a malformed one.
pub(crate) fn parse_run_cursor(c: &str) -> Option<(i64, String)> {
    let (ms, id) = c.split_once('.')?;
    let ms = ms.parse().ok()?;
    (id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        .then(|| (ms, id.to_string()))
}

/// One audit event, as recorded and as streamed by `Host::events`.
///
/// Never holds arguments, results or secrets: only who called what, where,
/// how it ended and how long it took, and an error message built by the
/// host (with every configured secret value redacted).
///
/// ```
/// let e = skillhost::HostEvent { at_ms: 0, kind: "call".into(), run_id: Some("run_1".into()),
///     persona: None, tool: Some("t".into()), server: Some("s".into()), outcome: Some(skillhost::Outcome::Ok),
///     duration_ms: Some(1), detail: serde_json::json!({}) };
/// assert_eq!(serde_json::to_value(&e).unwrap()["outcome"], "ok");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostEvent {
    /// Unix milliseconds.
    pub at_ms: i64,
    /// `call`, `approval`, …
    pub kind: String,
    /// The run, for call events.
    pub run_id: Option<String>,
    /// The persona (`None`: the operator).
    pub persona: Option<String>,
    /// The tool the event is about (full name), if any.
    pub tool: Option<String>,
    /// The MCP server or `skill:<name>` the event is about, if any.
    pub server: Option<String>,
    /// The outcome.
    pub outcome: Option<Outcome>,
    /// Duration of the call.
    pub duration_ms: Option<i64>,
    /// Extra fields (an error message, the parent run, a trap reason).
    pub detail: serde_json::Value,
}

/// Unix milliseconds now.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The digits of a run id, in ASCII order so that ids of one length sort
/// as the numbers they spell.
const RUN_ID_DIGITS: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// How many base-62 digits a run id's 96 bits take (62^17 > 2^96).
const RUN_ID_LEN: usize = 17;

/// A new run id: `run_` and 17 base-62 digits spelling 96 bits: the time
/// in seconds (32), a random tag of this process (32) and the process's
/// count of runs (32).
///
/// Ids increase within a process: each new run's key lands at the end of
/// the runs table's primary-key index, on the leaf page the previous run
/// dirtied, so the writer's commit of a burst writes a few pages. With
/// random digits after the time (as before), the keys of one second spread
/// over every leaf of that second (some 160 pages at 16 000 calls/s), and a
/// commit of 32 runs wrote some 32 leaf pages: about 4 KiB of log per run.
/// The tag keeps processes apart (two processes started in the same second
/// share one with odds of 1 in 2^32); the count, within a process (it
/// would take 2^32 runs in one second to repeat). Base 62 rather than hex
/// keeps the id at 21 characters instead of 28: the id is stored twice per
/// run (the row and its key's index), 14 bytes of every recorded call.
/// The digits are letters and numbers only, so a double click selects a
/// whole id. Run ids are names, not secrets: every use of one is
/// authorized on its own.
pub(crate) fn new_run_id() -> String {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU32, Ordering};
    static TAG: OnceLock<u32> = OnceLock::new();
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let tag = *TAG.get_or_init(|| {
        let mut rnd = [0u8; 4];
        // getrandom only fails on platforms without a source of
        // randomness; the time and process id still keep ids apart there.
        if getrandom::fill(&mut rnd).is_err() {
            // The low 32 bits of the time in milliseconds.
            return (now_ms() as u32).rotate_left(16) ^ std::process::id();
        }
        u32::from_le_bytes(rnd)
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let secs = (now_ms() / 1000) as u32;
    run_id_of(secs, tag, n)
}

/// The run id that spells `secs`, `tag` and `n` (see [`new_run_id`]).
fn run_id_of(secs: u32, tag: u32, n: u32) -> String {
    let mut v = (u128::from(secs) << 64) | (u128::from(tag) << 32) | u128::from(n);
    let mut digits = [b'0'; RUN_ID_LEN];
    for d in digits.iter_mut().rev() {
        *d = RUN_ID_DIGITS[(v % 62) as usize];
        v /= 62;
    }
    let mut id = String::with_capacity(4 + RUN_ID_LEN);
    id.push_str("run_");
    id.extend(digits.iter().map(|&b| char::from(b)));
    id
}

/// What [`Store::forget_before`] deleted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Forgotten {
    pub runs: usize,
    pub events: usize,
    pub refs: Vec<String>,
}

/// A run row to write (insert or replace).
#[derive(Debug, Clone)]
pub(crate) struct RunRow {
    pub run_id: String,
    pub parent_run_id: Option<String>,
    pub persona: Option<String>,
    pub tool: String,
    pub server: String,
    pub outcome: Outcome,
    pub approval: Option<Approval>,
    pub args: Option<String>,
    pub input_refs: Vec<String>,
    pub error: Option<String>,
    pub created_at_ms: i64,
    pub expires_at_ms: Option<i64>,
    pub duration_ms: Option<i64>,
}

impl RunRow {
    /// Whether this row says all that `e`, the event of its end, says: a
    /// call that ended ok on its own (no approval, not invoked by another
    /// run, no error) with nothing in its event's detail. Such an event is
    /// published live but not recorded: the run is the call's record (see
    /// `Host::recent_events`).
    pub fn says_all_of(&self, e: &HostEvent) -> bool {
        self.outcome == Outcome::Ok
            && self.approval.is_none()
            && self.parent_run_id.is_none()
            && self.error.is_none()
            && e.kind == "call"
            && e.run_id.as_deref() == Some(self.run_id.as_str())
            && e.detail.as_object().is_some_and(serde_json::Map::is_empty)
    }
}

impl Store {
    /// Inserts or replaces a run.
    pub(crate) fn put_run(&self, r: &RunRow) -> db::Result<()> {
        put_run_on(self.db(), r)
    }

    /// One run.
    pub fn run(&self, run_id: &str) -> db::Result<Option<RunRecord>> {
        self.db().query_opt(
            &format!("SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?1"),
            params![run_id],
            run_from_row,
        )
    }

    /// Runs matching `filter`, newest first (a malformed cursor reads as
    /// the start).
    pub fn runs(&self, filter: &RunFilter) -> db::Result<Vec<RunRecord>> {
        Ok(self.run_page(filter)?.runs)
    }

    /// One page of runs matching `filter`, newest first.
    pub fn run_page(&self, filter: &RunFilter) -> db::Result<RunPage> {
        // A limit past what SQL can count means all of them (one less than
        // the largest, so that one more still counts).
        let limit = if filter.limit == 0 { 100 } else { filter.limit };
        let limit = i64::try_from(limit).unwrap_or(i64::MAX).min(i64::MAX - 1);
        let (before_ms, before_id) = filter
            .cursor
            .as_deref()
            .and_then(parse_run_cursor)
            .map(|(ms, id)| (Some(ms), Some(id)))
            .unwrap_or((None, None));
        // Only the filters given, with the pending one as a literal: a
        // condition like `(?4 = 0 OR approval = 'pending')` keeps SQLite
        // from the partial index of waiting runs and scans the history
        // (tens of ms at 100k runs, where the index answers in 0.1 ms).
        let outcome = filter.outcome.map(Outcome::as_str);
        let limit_plus = limit + 1;
        // Each `?` of a condition is the next parameter.
        fn bind<'a>(
            conditions: &mut Vec<String>,
            bound: &mut Vec<&'a dyn db::Param>,
            condition: &str,
            values: &[&'a dyn db::Param],
        ) {
            let mut text = String::new();
            for (i, part) in condition.split('?').enumerate() {
                if i > 0 {
                    text.push_str(&format!("?{}", bound.len() + 1));
                    bound.push(values[i - 1]);
                }
                text.push_str(part);
            }
            conditions.push(text);
        }
        let mut conditions: Vec<String> = Vec::new();
        let mut bound: Vec<&dyn db::Param> = Vec::new();
        let (c, b) = (&mut conditions, &mut bound);
        if let Some(p) = &filter.persona {
            bind(c, b, "persona = ?", &[p]);
        }
        if filter.operator_only {
            bind(c, b, "persona IS NULL", &[]);
        }
        if let Some(t) = &filter.tool {
            bind(c, b, "tool = ?", &[t]);
        }
        if filter.pending_only {
            bind(c, b, "approval = 'pending'", &[]);
        }
        if let Some(o) = &outcome {
            bind(c, b, "outcome = ?", &[o]);
        }
        if let (Some(ms), Some(id)) = (&before_ms, &before_id) {
            bind(
                c,
                b,
                "(created_at_ms < ? OR (created_at_ms = ? AND run_id < ?))",
                &[ms, ms, id],
            );
        }
        let filter_sql = if conditions.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", conditions.join(" AND "))
        };
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM runs {filter_sql}
             ORDER BY created_at_ms DESC, run_id DESC LIMIT ?{}",
            bound.len() + 1
        );
        bound.push(&limit_plus);
        let mut runs: Vec<RunRecord> = self.db().query_map(&sql, &bound, run_from_row)?;
        let more = runs.len() as i64 > limit;
        runs.truncate(limit as usize);
        let next = more.then(|| runs.last().map(run_cursor)).flatten();
        Ok(RunPage { runs, next })
    }

    /// Hands `each` the runs created at or after `since_ms`, newest first,
    /// at most `cap`: when each was created, its tool, outcome and duration
    /// (the console's activity charts; read from the time index alone,
    /// nothing kept per run).
    pub(crate) fn run_activity(
        &self,
        since_ms: i64,
        cap: usize,
        mut each: impl FnMut(i64, &str, Outcome, Option<i64>),
    ) -> db::Result<()> {
        self.db().query_each(
            "SELECT created_at_ms, tool, outcome, duration_ms FROM runs
             WHERE created_at_ms >= ?1 ORDER BY created_at_ms DESC LIMIT ?2",
            params![since_ms, cap as i64],
            |r| {
                let outcome = Outcome::parse(r.get_str(2)?);
                each(r.get(0)?, r.get_str(1)?, outcome, r.get(3)?);
                Ok(())
            },
        )
    }

    /// How many runs of `persona` (`None`: the operator) wait for approval
    /// and have not expired at `now_ms`.
    pub(crate) fn pending_count_of(&self, persona: Option<&str>, now_ms: i64) -> db::Result<u64> {
        self.db()
            .query_row(
                "SELECT COUNT(*) FROM runs WHERE approval = 'pending'
                 AND persona IS NOT DISTINCT FROM ?1
                 AND (expires_at_ms IS NULL OR expires_at_ms > ?2)",
                params![persona, now_ms],
                |r| r.get::<i64>(0),
            )
            .map(|n| u64::try_from(n).unwrap_or(0))
    }

    /// How many runs wait for approval and have not expired at `now_ms`
    /// (a count over the pending index, for the metrics).
    pub(crate) fn pending_run_count(&self, now_ms: i64) -> db::Result<u64> {
        self.db()
            .query_row(
                "SELECT COUNT(*) FROM runs WHERE approval = 'pending'
                 AND (expires_at_ms IS NULL OR expires_at_ms > ?1)",
                params![now_ms],
                |r| r.get::<i64>(0),
            )
            .map(|n| u64::try_from(n).unwrap_or(0))
    }

    /// Takes the decision on a pending run: moves it from `pending` to
    /// `decision` (`approved` with outcome `running`, or `denied`/`expired`
    /// with outcome `denied`) if and only if it is still pending. Returns
    /// the run as it was before, or `None` if no pending run had the id.
    pub(crate) fn decide_run(
        &mut self,
        run_id: &str,
        decision: Approval,
        decided_by: &str,
        error: Option<&str>,
    ) -> db::Result<Option<RunRecord>> {
        // The decision is taken by the one transaction whose update finds
        // the run still pending: of two deciding at once (two processes,
        // two replicas), the other reads `None`.
        self.db().transaction(|tx| {
            let Some(before) = tx.query_opt(
                &format!(
                    "SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?1 AND approval = 'pending'"
                ),
                params![run_id],
                run_from_row,
            )?
            else {
                return Ok(None);
            };
            let outcome = if decision == Approval::Approved {
                Outcome::Running
            } else {
                Outcome::Denied
            };
            let approved = decision == Approval::Approved;
            let runner_pid = approved.then(std::process::id);
            let runner = approved.then(runner_id);
            let lease = approved.then(|| now_ms() + lease_ms());
            let taken = tx.execute(
                "UPDATE runs SET approval = ?2, outcome = ?3, error = ?4, updated_at_ms = ?5,
                 runner_pid = ?6, decided_by = ?7, resume_digest = NULL, runner = ?8,
                 lease_until_ms = ?9
                 WHERE run_id = ?1 AND approval = 'pending'",
                params![
                    run_id,
                    decision.as_str(),
                    outcome.as_str(),
                    error,
                    now_ms(),
                    runner_pid,
                    decided_by,
                    runner,
                    lease
                ],
            )?;
            Ok((taken == 1).then_some(before))
        })
    }

    /// Records the sha256 of the resume state handed to the client of a
    /// pending run (replacing an earlier one); false if the run is not
    /// pending.
    pub(crate) fn set_resume_digest(&self, run_id: &str, digest: &str) -> db::Result<bool> {
        let n = self.db().execute(
            "UPDATE runs SET resume_digest = ?2 WHERE run_id = ?1 AND approval = 'pending'",
            params![run_id, digest],
        )?;
        Ok(n == 1)
    }

    /// The digest of the resume state of a pending run, if one was handed
    /// out.
    pub(crate) fn resume_digest(&self, run_id: &str) -> db::Result<Option<String>> {
        Ok(self
            .db()
            .query_opt(
                "SELECT resume_digest FROM runs WHERE run_id = ?1 AND approval = 'pending'",
                params![run_id],
                |r| r.get::<Option<String>>(0),
            )?
            .flatten())
    }

    /// Uses up the resume state of a pending run: true, and the digest is
    /// gone, if and only if `digest` is the one recorded (so a state is
    /// good for one answer).
    pub(crate) fn take_resume_digest(&self, run_id: &str, digest: &str) -> db::Result<bool> {
        let n = self.db().execute(
            "UPDATE runs SET resume_digest = NULL
             WHERE run_id = ?1 AND approval = 'pending' AND resume_digest = ?2",
            params![run_id, digest],
        )?;
        Ok(n == 1)
    }

    /// Marks every approved run still `running` whose runner is gone as
    /// [`Outcome::Interrupted`], saying so; returns their ids. On SQLite
    /// (one machine) the runner is a process, gone when no process has its
    /// id; on a database replicas share, it is a replica, gone when it
    /// stopped renewing its lease on the run ([`Store::renew_lease`]).
    /// Runs of live runners (another host running them now) are left
    /// alone.
    pub(crate) fn interrupt_orphaned_runs(&self) -> db::Result<Vec<String>> {
        if self.db().dialect() == Dialect::Postgres {
            return self.db().query_map(
                "UPDATE runs SET outcome = 'interrupted', updated_at_ms = ?1, error = ?2
                 WHERE outcome = 'running' AND lease_until_ms < ?1 RETURNING run_id",
                params![now_ms(), INTERRUPTED_BY_LEASE],
                |r| r.get(0),
            );
        }
        let running: Vec<(String, i64)> = self.db().query_map(
            "SELECT run_id, runner_pid FROM runs
             WHERE outcome = 'running' AND runner_pid IS NOT NULL",
            params![],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let mut interrupted = Vec::new();
        for (run_id, pid) in running {
            if pid != i64::from(std::process::id()) && process_alive(pid) {
                continue;
            }
            let changed = self.db().execute(
                "UPDATE runs SET outcome = 'interrupted', updated_at_ms = ?2, error = ?3
                 WHERE run_id = ?1 AND outcome = 'running'",
                params![run_id, now_ms(), INTERRUPTED_BY_EXIT],
            )?;
            if changed > 0 {
                interrupted.push(run_id);
            }
        }
        Ok(interrupted)
    }

    /// Extends this runner's lease on the approved run `run_id` while it
    /// executes; false when the run is no longer this runner's to run
    /// (finished, or taken over as interrupted).
    pub(crate) fn renew_lease(&self, run_id: &str) -> db::Result<bool> {
        let n = self.db().execute(
            "UPDATE runs SET lease_until_ms = ?3
             WHERE run_id = ?1 AND outcome = 'running' AND runner = ?2",
            params![run_id, runner_id(), now_ms() + lease_ms()],
        )?;
        Ok(n == 1)
    }

    /// Recent events, newest first.
    pub fn recent_events(&self, limit: usize) -> db::Result<Vec<HostEvent>> {
        Ok(self
            .event_page(limit, None)?
            .into_iter()
            .map(|(_, e)| e)
            .collect())
    }

    /// Events older than event `before` (all when `None`), newest first,
    /// with their ids.
    pub(crate) fn event_page(
        &self,
        limit: usize,
        before: Option<i64>,
    ) -> db::Result<Vec<(i64, HostEvent)>> {
        self.db().query_map(
            &format!(
                "SELECT {EVENT_COLUMNS} FROM events WHERE (CAST(?2 AS BIGINT) IS NULL OR id < ?2)
                 ORDER BY id DESC LIMIT ?1"
            ),
            params![i64::try_from(limit).unwrap_or(i64::MAX), before],
            event_from_row,
        )
    }

    /// The events of run `run_id` other than its `call` event (which its
    /// row already holds): decisions, outbound requests, questions; oldest
    /// first, at most `limit`. Reads the `events_run` index.
    pub(crate) fn run_events(&self, run_id: &str, limit: usize) -> db::Result<Vec<HostEvent>> {
        self.db().query_map(
            &format!(
                "SELECT {EVENT_COLUMNS} FROM events
                 WHERE run_id = ?1 AND kind <> 'call' AND run_id IS NOT NULL
                 ORDER BY id LIMIT ?2"
            ),
            params![run_id, limit as i64],
            |r| event_from_row(r).map(|(_, e)| e),
        )
    }

    /// The runs run `parent` invoked (`host.invoke`), oldest first, at most
    /// `limit`. Reads the `runs_by_parent` index.
    pub(crate) fn child_runs(&self, parent: &str, limit: usize) -> db::Result<Vec<RunRecord>> {
        self.db().query_map(
            &format!(
                "SELECT {RUN_COLUMNS} FROM runs WHERE parent_run_id = ?1
                 ORDER BY created_at_ms, run_id LIMIT ?2"
            ),
            params![parent, limit as i64],
            run_from_row,
        )
    }

    /// Deletes the runs created before `cutoff_ms` that are decided (not
    /// waiting, not running), the events before it, and the ref records
    /// created before it that no remaining run names; returns what was
    /// deleted (the refs' ids, whose blobs the caller removes).
    pub(crate) fn forget_before(&mut self, cutoff_ms: i64) -> db::Result<Forgotten> {
        // The refs no remaining run names, in each dialect's JSON.
        let unnamed_refs = match self.db().dialect() {
            Dialect::Sqlite => {
                "SELECT ref_id FROM refs WHERE created_at < ?1 AND NOT EXISTS (
                   SELECT 1 FROM runs, json_each(runs.input_refs)
                   WHERE json_each.value = refs.ref_id)"
            }
            Dialect::Postgres => {
                "SELECT ref_id FROM refs WHERE created_at < ?1 AND NOT EXISTS (
                   SELECT 1 FROM runs, jsonb_array_elements_text(runs.input_refs::jsonb) AS named
                   WHERE named = refs.ref_id)"
            }
        };
        self.db().transaction(|tx| {
            let runs = tx.execute(
                "DELETE FROM runs WHERE created_at_ms < ?1
                 AND (approval IS NULL OR approval != 'pending') AND outcome != 'running'",
                params![cutoff_ms],
            )?;
            let events = tx.execute(
                "DELETE FROM events WHERE at < ?1",
                params![cutoff_ms.div_euclid(1000)],
            )?;
            let refs: Vec<String> =
                tx.query_map(unnamed_refs, params![cutoff_ms.div_euclid(1000)], |r| {
                    r.get(0)
                })?;
            for id in &refs {
                tx.execute("DELETE FROM refs WHERE ref_id = ?1", params![id])?;
            }
            Ok(Forgotten { runs, events, refs })
        })
    }

    /// Gives the pages freed by deletions back to the file system.
    pub(crate) fn reclaim(&self) -> db::Result<()> {
        // PostgreSQL's autovacuum does this on its own.
        if self.db().dialect() == Dialect::Postgres {
            return Ok(());
        }
        let mode: i64 = self
            .db()
            .query_row("PRAGMA auto_vacuum", params![], |r| r.get(0))?;
        if mode == 2 {
            // Each step of this pragma frees one page: step it to the end
            // (a single step, as `execute` does, frees one page).
            self.db()
                .query_each("PRAGMA incremental_vacuum", params![], |_| Ok(()))?;
        } else {
            // Turn incremental vacuuming on for next time (takes effect
            // with this VACUUM).
            self.db()
                .execute_batch("PRAGMA auto_vacuum = INCREMENTAL; VACUUM;")?;
        }
        self.db()
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")?;
        Ok(())
    }

    /// Records an event.
    pub fn record_event(
        &self,
        kind: &str,
        server: Option<&str>,
        tool: Option<&str>,
        detail: &serde_json::Value,
    ) -> db::Result<()> {
        self.db().execute(
            "INSERT INTO events (at, kind, server, tool, detail) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![now(), kind, server, tool, detail.to_string()],
        )?;
        Ok(())
    }

    /// Whether an event with exactly these fields was recorded (uses the
    /// `events_kind` index, which leaves out `call` events: never asked
    /// about here).
    pub fn has_event(
        &self,
        kind: &str,
        server: Option<&str>,
        tool: Option<&str>,
        detail: &serde_json::Value,
    ) -> db::Result<bool> {
        self.db().query_row(
            HAS_EVENT,
            params![kind, server, tool, detail.to_string()],
            |r| r.get(0),
        )
    }
}

/// Whether an event of kind ?1 about server ?2 and tool ?3 with detail ?4
/// was recorded.
const HAS_EVENT: &str = "SELECT EXISTS (SELECT 1 FROM events
     WHERE kind = ?1 AND kind <> 'call' AND server IS NOT DISTINCT FROM ?2
       AND tool IS NOT DISTINCT FROM ?3 AND detail = ?4)";

/// The columns `event_from_row` reads, in order.
const EVENT_COLUMNS: &str =
    "at, kind, run_id, persona, tool, server, outcome, duration_ms, detail, id";

/// An event and its id, from a row of [`EVENT_COLUMNS`].
fn event_from_row(r: &db::Row<'_>) -> db::Result<(i64, HostEvent)> {
    let detail: String = r.get(8)?;
    let outcome: Option<String> = r.get(6)?;
    Ok((
        r.get(9)?,
        HostEvent {
            at_ms: r.get::<i64>(0)? * 1000,
            kind: r.get(1)?,
            run_id: r.get(2)?,
            persona: r.get(3)?,
            tool: r.get(4)?,
            server: r.get(5)?,
            outcome: outcome.as_deref().map(Outcome::parse),
            duration_ms: r.get(7)?,
            detail: serde_json::from_str(&detail).unwrap_or_default(),
        },
    ))
}

const RUN_COLUMNS: &str = "run_id, parent_run_id, persona, tool, server, outcome, approval, args, \
     input_refs, error, created_at_ms, updated_at_ms, expires_at_ms, duration_ms, decided_by";

fn run_from_row(r: &db::Row<'_>) -> db::Result<RunRecord> {
    let outcome: String = r.get(5)?;
    let args: Option<String> = r.get(7)?;
    let refs: String = r.get(8)?;
    Ok(RunRecord {
        run_id: r.get(0)?,
        parent_run_id: r.get(1)?,
        persona: r.get(2)?,
        tool: r.get(3)?,
        server: r.get(4)?,
        outcome: Outcome::parse(&outcome),
        approval: r
            .get::<Option<String>>(6)?
            .as_deref()
            .and_then(Approval::parse),
        args: args.and_then(|a| serde_json::from_str(&a).ok()),
        input_refs: serde_json::from_str(&refs).unwrap_or_default(),
        error: r.get(9)?,
        created_at_ms: r.get(10)?,
        updated_at_ms: r.get(11)?,
        expires_at_ms: r.get(12)?,
        duration_ms: r.get(13)?,
        decided_by: r.get(14)?,
    })
}

/// Inserts or updates a run: the parameters of [`run_values`].
pub(super) const PUT_RUN: &str = "INSERT INTO runs (run_id, parent_run_id, persona, tool, server,
       outcome, approval, args, input_refs, error, created_at_ms, updated_at_ms, expires_at_ms,
       duration_ms)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
     ON CONFLICT (run_id) DO UPDATE SET outcome = excluded.outcome,
       approval = COALESCE(excluded.approval, runs.approval),
       error = excluded.error, updated_at_ms = excluded.updated_at_ms,
       duration_ms = excluded.duration_ms";

/// Inserts an event: the parameters of [`event_values`].
pub(super) const PUT_EVENT: &str = "INSERT INTO events (at, kind, server, tool, detail, run_id,
       persona, outcome, duration_ms)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";

/// Hands `f` the parameters of [`PUT_RUN`] for `r`.
fn with_run_params<T>(r: &RunRow, f: impl FnOnce(&[&dyn db::Param]) -> T) -> T {
    let refs = serde_json::to_string(&r.input_refs).unwrap_or_else(|_| "[]".into());
    f(params![
        r.run_id,
        r.parent_run_id,
        r.persona,
        r.tool,
        r.server,
        r.outcome.as_str(),
        r.approval.map(Approval::as_str),
        r.args,
        refs,
        r.error,
        r.created_at_ms,
        now_ms(),
        r.expires_at_ms,
        r.duration_ms,
    ])
}

/// Hands `f` the parameters of [`PUT_EVENT`] for `e`.
fn with_event_params<T>(e: &HostEvent, f: impl FnOnce(&[&dyn db::Param]) -> T) -> T {
    f(params![
        e.at_ms / 1000,
        e.kind,
        e.server,
        e.tool,
        e.detail.to_string(),
        e.run_id,
        e.persona,
        e.outcome.map(Outcome::as_str),
        e.duration_ms,
    ])
}

fn owned(params: &[&dyn db::Param]) -> Vec<Owned> {
    params.iter().map(|p| Owned::of(p.value())).collect()
}

/// The parameters of [`PUT_RUN`] for `r`, owned (a pipelined batch).
pub(super) fn run_values(r: &RunRow) -> Vec<Owned> {
    with_run_params(r, owned)
}

/// The parameters of [`PUT_EVENT`] for `e`, owned (a pipelined batch).
pub(super) fn event_values(e: &HostEvent) -> Vec<Owned> {
    with_event_params(e, owned)
}

/// Inserts or updates a run.
pub(super) fn put_run_on(tx: &db::Db, r: &RunRow) -> db::Result<()> {
    with_run_params(r, |p| tx.execute(PUT_RUN, p)).map(|_| ())
}

/// Inserts an event.
pub(super) fn put_event_on(tx: &db::Db, e: &HostEvent) -> db::Result<()> {
    with_event_params(e, |p| tx.execute(PUT_EVENT, p)).map(|_| ())
}

/// Why a run was interrupted, on one machine.
const INTERRUPTED_BY_EXIT: &str = "interrupted: the process running the approved call stopped \
     before it finished; whether the tool ran is unknown, check its effects before calling it again";

/// Why a run was interrupted, across replicas.
const INTERRUPTED_BY_LEASE: &str = "interrupted: the replica running the approved call stopped \
     renewing its lease before the call finished; whether the tool ran is unknown, check its \
     effects before calling it again";

/// This process as the runner of approved calls: its process id and a
/// random part (process ids repeat across machines and restarts).
pub(crate) fn runner_id() -> &'static str {
    use std::sync::OnceLock;
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        let mut rnd = [0u8; 8];
        let _ = getrandom::fill(&mut rnd);
        format!("{}-{}", std::process::id(), hex::encode(rnd))
    })
}

/// How long a runner's lease on an approved run lasts, in milliseconds.
fn lease_ms() -> i64 {
    i64::try_from(crate::limits::RUN_LEASE.as_millis()).unwrap_or(i64::MAX)
}

/// Whether a process with this id exists (it may belong to another user).
fn process_alive(pid: i64) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists; nothing is sent.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_of_one_process_increase_and_never_repeat() {
        let ids: Vec<String> = (0..10_000).map(|_| new_run_id()).collect();
        for pair in ids.windows(2) {
            assert!(pair[0] < pair[1], "{} then {}", pair[0], pair[1]);
        }
        let id = &ids[0];
        assert_eq!(id.len(), 4 + RUN_ID_LEN, "{id}");
        assert!(id.starts_with("run_"), "{id}");
        assert!(id[4..].bytes().all(|b| b.is_ascii_alphanumeric()), "{id}");
    }

    #[test]
    fn run_ids_sort_as_the_numbers_they_spell() {
        // The extremes: all zero bits and all one bits.
        assert_eq!(run_id_of(0, 0, 0), "run_00000000000000000");
        assert_eq!(
            run_id_of(u32::MAX, u32::MAX, u32::MAX),
            "run_1f2SI9UJPXvb7vdJ1"
        );
        // Each field's carry into the next: ordering follows the number.
        let cases = [
            (0, 0, 1),
            (0, 0, 61),
            (0, 0, 62),
            (0, 0, u32::MAX),
            (0, 1, 0),
            (0, u32::MAX, u32::MAX),
            (1, 0, 0),
            (0x6934_0000, 0xdead_beef, 7),
            (0x6934_0001, 0, 0),
            (u32::MAX, 0, 0),
        ];
        let ids: Vec<String> = cases.iter().map(|&(s, t, n)| run_id_of(s, t, n)).collect();
        for pair in ids.windows(2) {
            assert!(pair[0] < pair[1], "{} then {}", pair[0], pair[1]);
        }
        // Distinct fields give distinct ids.
        assert_ne!(run_id_of(1, 0, 0), run_id_of(0, 1, 0));
        assert_ne!(run_id_of(0, 1, 0), run_id_of(0, 0, 1));
    }

    #[test]
    fn has_event_searches_the_index_that_leaves_calls_out() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let store = Store::open_sqlite(tmp.path()).expect("open");
        let plan: Vec<String> = store
            .db()
            .query_map(
                &format!("EXPLAIN QUERY PLAN {HAS_EVENT}"),
                params!["tool_changed", "s", "t", "{}"],
                |r| r.get(3),
            )
            .expect("plan");
        assert!(
            plan.iter().any(|l| l.contains("USING INDEX events_kind")),
            "{plan:?}"
        );
        let detail = serde_json::json!({"old": "a"});
        store
            .db()
            .execute(
                "INSERT INTO events (at, kind, server, tool, detail) VALUES (1, 'tool_changed', 's', 't', ?1)",
                params![detail.to_string()],
            )
            .expect("insert");
        assert!(
            store
                .has_event("tool_changed", Some("s"), Some("t"), &detail)
                .expect("query")
        );
        assert!(
            !store
                .has_event("tool_changed", Some("s"), Some("u"), &detail)
                .expect("query")
        );
    }

    fn plan(store: &Store, sql: &str) -> Vec<String> {
        store
            .db()
            .query_map(
                &format!("EXPLAIN QUERY PLAN {sql}"),
                params!["run_a", 10i64],
                |r| r.get(3),
            )
            .expect("plan")
    }

    #[test]
    fn a_runs_detail_reads_its_events_and_children_through_indexes() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let store = Store::open_sqlite(tmp.path()).expect("open");
        let events = plan(
            &store,
            &format!(
                "SELECT {EVENT_COLUMNS} FROM events
                 WHERE run_id = ?1 AND kind <> 'call' AND run_id IS NOT NULL ORDER BY id LIMIT ?2"
            ),
        );
        assert!(
            events.iter().any(|l| l.contains("USING INDEX events_run")),
            "{events:?}"
        );
        let children = plan(
            &store,
            &format!(
                "SELECT {RUN_COLUMNS} FROM runs WHERE parent_run_id = ?1
                 ORDER BY created_at_ms, run_id LIMIT ?2"
            ),
        );
        assert!(
            children
                .iter()
                .any(|l| l.contains("USING INDEX runs_by_parent")),
            "{children:?}"
        );

        let event = |kind: &str, run: &str, n: i64| HostEvent {
            at_ms: n * 1000,
            kind: kind.into(),
            run_id: Some(run.into()),
            persona: None,
            tool: Some("t.x".into()),
            server: Some("skill:t".into()),
            outcome: None,
            duration_ms: None,
            detail: serde_json::json!({ "n": n }),
        };
        for e in [
            event("call", "run_a", 1),
            event("approval", "run_a", 2),
            event("approval", "run_b", 3),
            event("outbound", "run_a", 4),
        ] {
            put_event_on(store.db(), &e).expect("event");
        }
        let got = store.run_events("run_a", 10).expect("events");
        let kinds: Vec<&str> = got.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(
            kinds,
            ["approval", "outbound"],
            "oldest first, no call event"
        );
        assert_eq!(store.run_events("run_a", 1).expect("events").len(), 1);

        for (id, parent, at) in [
            ("run_c2", "run_a", 5),
            ("run_c1", "run_a", 4),
            ("run_x", "run_b", 3),
        ] {
            store
                .db()
                .execute(
                    "INSERT INTO runs (run_id, parent_run_id, tool, server, outcome,
                     created_at_ms, updated_at_ms) VALUES (?1, ?2, 't.x', 'skill:t', 'ok', ?3, ?3)",
                    params![id, parent, at],
                )
                .expect("insert");
        }
        let children: Vec<String> = store
            .child_runs("run_a", 10)
            .expect("children")
            .into_iter()
            .map(|r| r.run_id)
            .collect();
        assert_eq!(children, ["run_c1", "run_c2"]);
    }

    fn pending(store: &Store, run_id: &str) {
        store
            .db()
            .execute(
                "INSERT INTO runs (run_id, tool, server, outcome, approval, args,
                 created_at_ms, updated_at_ms, expires_at_ms)
                 VALUES (?1, 't.x', 'skill:t', 'waiting_approval', 'pending', '{}', 1, 1, ?2)",
                params![run_id, now_ms() + 60_000],
            )
            .expect("insert");
    }

    #[test]
    fn approved_runs_of_dead_processes_are_marked_interrupted() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut store = Store::open_sqlite(tmp.path()).expect("open");
        pending(&store, "run_dead");
        pending(&store, "run_alive");
        store
            .decide_run("run_dead", Approval::Approved, "operator:test", None)
            .expect("decide");
        store
            .decide_run("run_alive", Approval::Approved, "operator:test", None)
            .expect("decide");
        // run_dead's runner: a process that has exited and been reaped.
        let mut child = std::process::Command::new("true").spawn().expect("spawn");
        let dead = child.id();
        child.wait().expect("wait");
        // run_alive's runner: a live process other than this one.
        let mut live = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn");
        for (run, pid) in [("run_dead", dead), ("run_alive", live.id())] {
            store
                .db()
                .execute(
                    "UPDATE runs SET runner_pid = ?2 WHERE run_id = ?1",
                    params![run, pid],
                )
                .expect("set pid");
        }
        let interrupted = store.interrupt_orphaned_runs().expect("interrupt");
        let _ = live.kill();
        let _ = live.wait();
        assert_eq!(interrupted, vec!["run_dead".to_string()]);
        let dead = store.run("run_dead").expect("read").expect("exists");
        assert_eq!(dead.outcome, Outcome::Interrupted);
        assert!(
            dead.error
                .as_deref()
                .is_some_and(|e| e.contains("interrupted"))
        );
        let alive = store.run("run_alive").expect("read").expect("exists");
        assert_eq!(alive.outcome, Outcome::Running);
    }

    /// The database file and its log, in bytes.
    fn db_bytes(dir: &std::path::Path) -> u64 {
        ["", "-wal"]
            .iter()
            .filter_map(|ext| {
                std::fs::metadata(dir.join(format!("{}{ext}", crate::state::DB_FILE))).ok()
            })
            .map(|m| m.len())
            .sum()
    }

    #[test]
    fn forgetting_runs_gives_their_pages_back_to_the_file_system() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut store = Store::open_sqlite(tmp.path()).expect("open");
        store.reclaim().expect("reclaim");
        let empty = db_bytes(tmp.path());
        let big = "x".repeat(4000);
        for i in 0..2000 {
            store
                .db()
                .execute(
                    "INSERT INTO runs (run_id, tool, server, outcome, args,
                     created_at_ms, updated_at_ms, expires_at_ms)
                     VALUES (?1, 't.x', 'skill:t', 'ok', ?2, 1, 1, 1)",
                    params![format!("run_{i}"), big],
                )
                .expect("insert");
        }
        store.reclaim().expect("reclaim");
        let full = db_bytes(tmp.path());
        assert!(full > empty + 4_000_000, "{full} after 8 MB of runs");
        let gone = store.forget_before(2).expect("forget");
        assert_eq!(gone.runs, 2000);
        store.reclaim().expect("reclaim");
        let after = db_bytes(tmp.path());
        assert!(
            after < empty + 256 * 1024,
            "{after} bytes left after forgetting every run (empty: {empty})"
        );
    }
}
