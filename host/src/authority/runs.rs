//! Runs, approvals, events and refs, through the host.
//!
//! A call that needs confirmation stops in `waiting_approval` with its
//! arguments recorded (`super::call`); [`Host::approve`] runs exactly those
//! arguments once, as the run's caller, through the same call path, and
//! [`Host::deny`] ends it. A decision is taken in one transaction on a run
//! that is still pending, so two deciders never both win.

use serde::Serialize;
use serde_json::Value;

use super::{CallRequest, Caller, Host, HostInner, RunReport, lock};
use crate::error::{ApprovalError, RefError, StateError};
use crate::limits::{DENY_REASON_MAX_CHARS, RUN_DETAIL_MAX_CHILDREN, RUN_DETAIL_MAX_EVENTS};
use crate::state::refs::{RefBlobs, RefInfo};
use crate::state::runs::{Approval, HostEvent, Outcome, RunFilter, RunPage, RunRecord, now_ms};

impl HostInner {
    /// On a database replicas share: makes ref `id` readable here, fetching
    /// its bytes from the database (checked against the recorded sha256)
    /// when another replica stored it. A no-op when it is here already, and
    /// on SQLite.
    pub(crate) fn fetch_ref(&self, id: &str) -> anyhow::Result<()> {
        if !self.data.database.is_shared() || self.refs.has(id) {
            return Ok(());
        }
        let (record, bytes) = {
            let store = lock(&self.store);
            let Some(record) = store.ref_record(id)? else {
                anyhow::bail!("unknown ref id {id:?}: it may have expired, store the file again");
            };
            let bytes = store.blob(&record.sha256)?;
            (record, bytes)
        };
        let Some(bytes) = bytes else {
            anyhow::bail!("ref {id:?} is recorded but its bytes are not in the database");
        };
        {
            use sha2::Digest as _;
            anyhow::ensure!(
                hex::encode(sha2::Sha256::digest(&bytes)) == record.sha256,
                "ref {id:?}: the stored bytes do not match its sha256"
            );
        }
        self.refs.restore(id, &bytes)
    }

    /// Marks every pending run past its expiry as expired (at build and
    /// before runs are listed, so no expired run is shown as waiting).
    pub(crate) fn expire_pending(&self) {
        let pending = {
            let store = lock(&self.store);
            store.runs(&RunFilter {
                pending_only: true,
                limit: 10_000,
                ..Default::default()
            })
        };
        let Ok(pending) = pending else { return };
        let now = now_ms();
        for r in pending {
            if r.expires_at_ms.is_some_and(|t| t <= now) {
                let _ = self.decide(&r.run_id, Approval::Expired, EXPIRY, None);
            }
        }
    }

    /// Records a decision on a pending run and its event, with who took
    /// it (`decided_by`: a [`Decider`] or [`EXPIRY`]).
    fn decide(
        &self,
        run_id: &str,
        decision: Approval,
        decided_by: &str,
        reason: Option<&str>,
    ) -> Result<Option<RunRecord>, StateError> {
        let error = match (decision, reason) {
            (Approval::Denied, Some(reason)) => Some(format!("denied ({decided_by}): {reason}")),
            (Approval::Denied, None) => Some(format!("denied ({decided_by})")),
            (Approval::Expired, _) => {
                Some("the approval expired before anyone approved it".to_string())
            }
            (Approval::Pending | Approval::Approved, _) => None,
        };
        let before =
            lock(&self.store).decide_run(run_id, decision, decided_by, error.as_deref())?;
        if let Some(r) = &before {
            let outcome = if decision == Approval::Approved {
                Outcome::Running
            } else {
                Outcome::Denied
            };
            self.emit(HostEvent {
                at_ms: now_ms(),
                kind: "approval".into(),
                run_id: Some(r.run_id.clone()),
                persona: r.persona.clone(),
                tool: Some(r.tool.clone()),
                server: Some(r.server.clone()),
                outcome: Some(outcome),
                duration_ms: None,
                detail: match reason {
                    Some(reason) => serde_json::json!({
                        "decision": decision, "decided_by": decided_by, "reason": reason,
                    }),
                    None => serde_json::json!({ "decision": decision, "decided_by": decided_by }),
                },
            });
        }
        Ok(before)
    }
}

/// How an expired approval is recorded as decided.
pub(crate) const EXPIRY: &str = "expiry";

/// Who decides an approval, as recorded with the decision (`decided_by`
/// of the run and of its `approval` event).
///
/// ```
/// assert_eq!(skillhost::Decider::operator("cli").to_string(), "operator:cli");
/// assert_eq!(skillhost::Decider::Client("ana".into()).to_string(), "client:ana");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decider {
    /// The operator, and how they decided (`cli`, `admin-token`,
    /// `library`).
    Operator(String),
    /// A persona's own MCP client, which may decide only where the operator
    /// allowed client-side approval for that persona
    /// ([`Host::set_client_approval`]); `operator` for the operator's
    /// client (the admin token).
    Client(String),
}

impl Decider {
    /// The operator, deciding by `how`.
    ///
    /// ```
    /// let d = skillhost::Decider::operator("admin-token");
    /// ```
    pub fn operator(how: &str) -> Decider {
        Decider::Operator(how.to_string())
    }

    /// The client of `caller` (a persona's, or the operator's).
    fn client(caller: &Caller) -> Decider {
        Decider::Client(caller.persona_id().unwrap_or("operator").to_string())
    }
}

impl std::fmt::Display for Decider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Decider::Operator(how) => write!(f, "operator:{how}"),
            Decider::Client(who) => write!(f, "client:{who}"),
        }
    }
}

/// The answer a client gives to a confirmation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAnswer {
    /// Run it.
    Approve,
    /// Do not run it.
    Deny,
}

/// The prefix of a resume state (its format's version).
const RESUME_PREFIX: &str = "rs1.";

/// The message for every refused resume state, whatever was wrong, so a
/// client learns nothing about other callers' runs.
fn unusable_state(tool: &str) -> ApprovalError {
    ApprovalError::Refused(format!(
        "this requestState does not let you answer a confirmation of `{}` (it was not \
         handed to you for a run waiting for your answer, was used already, or expired): call \
         the tool again",
        crate::escape::escape_control(tool, 128, false)
    ))
}

/// # Approvals, runs, events and refs
///
/// Deciding waiting calls, reading the run history and its audit events,
/// retention, and the input refs calls may read.
impl Host {
    /// Approves a run waiting for approval, as the operator, and executes
    /// exactly the approved arguments, once, as its caller (authorization
    /// is checked again). Approving twice, after a denial or after expiry
    /// is an error that says which. Recorded as decided by
    /// `operator:library`; fronts say how with [`Host::approve_by`].
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host) -> Result<(), skillhost::ApprovalError> {
    /// let run = host.approve("run_0123").await?;
    /// # Ok(()) }
    /// ```
    pub async fn approve(&self, run_id: &str) -> Result<RunReport, ApprovalError> {
        self.approve_by(run_id, &Decider::operator("library")).await
    }

    /// [`Host::approve`], recorded as decided by `decider`.
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host) -> Result<(), skillhost::ApprovalError> {
    /// let run = host.approve_by("run_0123", &skillhost::Decider::operator("cli")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn approve_by(
        &self,
        run_id: &str,
        decider: &Decider,
    ) -> Result<RunReport, ApprovalError> {
        self.approve_with(run_id, decider, None, None).await
    }

    /// [`Host::approve_by`] with the approving request's cancellation and
    /// progress sink (the MCP front's confirmation by elicitation).
    pub(crate) async fn approve_with(
        &self,
        run_id: &str,
        decider: &Decider,
        cancel: Option<tokio_util::sync::CancellationToken>,
        progress: Option<tokio::sync::mpsc::UnboundedSender<skillhost_mcp::Progress>>,
    ) -> Result<RunReport, ApprovalError> {
        let run = self.pending(run_id)?;
        let decided_by = decider.to_string();
        let Some(before) = self
            .inner
            .decide(run_id, Approval::Approved, &decided_by, None)?
        else {
            return Err(decided_meanwhile(run_id));
        };
        let caller = match &run.persona {
            Some(p) => Caller::Persona(p.clone()),
            None => Caller::Operator,
        };
        let req = CallRequest {
            input_refs: before.input_refs.clone(),
            cancel,
            progress,
            ..Default::default()
        };
        let args = before
            .args
            .clone()
            .unwrap_or(Value::Object(Default::default()));
        // On a database replicas share, this replica holds a lease on the
        // run while it executes: one that dies mid-call stops renewing it,
        // and another marks the run interrupted (`Store::renew_lease`).
        let renewing = self.inner.data.database.is_shared().then(|| {
            let inner = std::sync::Arc::downgrade(&self.inner);
            let run_id = before.run_id.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(crate::limits::RUN_LEASE / 3).await;
                    let Some(inner) = inner.upgrade() else { return };
                    match lock(&inner.store).renew_lease(&run_id) {
                        Ok(true) => {}
                        Ok(false) => return,
                        Err(e) => tracing::warn!("cannot renew the lease on {run_id}: {e}"),
                    }
                }
            })
        });
        let report = self
            .inner
            .call(
                &caller,
                &before.tool,
                args,
                &req,
                None,
                Some((before.run_id, before.created_at_ms)),
            )
            .await;
        if let Some(task) = renewing {
            task.abort();
        }
        Ok(report)
    }

    /// Denies a run waiting for approval.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::ApprovalError> {
    /// host.deny("run_0123")?;
    /// # Ok(()) }
    /// ```
    pub fn deny(&self, run_id: &str) -> Result<RunRecord, ApprovalError> {
        self.deny_by(run_id, &Decider::operator("library"))
    }

    /// [`Host::deny`], recorded as decided by `decider`.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::ApprovalError> {
    /// host.deny_by("run_0123", &skillhost::Decider::operator("cli"))?;
    /// # Ok(()) }
    /// ```
    pub fn deny_by(&self, run_id: &str, decider: &Decider) -> Result<RunRecord, ApprovalError> {
        self.deny_because(run_id, decider, None)
    }

    /// [`Host::deny_by`] with the operator's reason, which the run's error
    /// (what the agent reads), its `approval` event and the console carry.
    /// A blank reason counts as none; one longer than
    /// [`DENY_REASON_MAX_CHARS`] or holding control characters other than
    /// line breaks and tabs is refused before anything is decided.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::ApprovalError> {
    /// let op = skillhost::Decider::operator("cli");
    /// host.deny_because("run_0123", &op, Some("that folder holds customer data"))?;
    /// # Ok(()) }
    /// ```
    pub fn deny_because(
        &self,
        run_id: &str,
        decider: &Decider,
        reason: Option<&str>,
    ) -> Result<RunRecord, ApprovalError> {
        let reason = deny_reason(reason)?;
        self.pending(run_id)?;
        let decided_by = decider.to_string();
        if self
            .inner
            .decide(run_id, Approval::Denied, &decided_by, reason.as_deref())?
            .is_none()
        {
            return Err(decided_meanwhile(run_id));
        }
        self.flush();
        lock(&self.inner.store)
            .run(run_id)?
            .ok_or_else(|| ApprovalError::NotFound(format!("run {run_id} vanished")))
    }

    /// The run if it is pending and not expired; otherwise an error saying
    /// where it stands (an expired one is marked so).
    fn pending(&self, run_id: &str) -> Result<RunRecord, ApprovalError> {
        self.flush();
        let Some(run) = lock(&self.inner.store).run(run_id)? else {
            return Err(ApprovalError::NotFound(format!(
                "there is no run {run_id:?} (`skillhost runs list` shows runs)"
            )));
        };
        let decided = |m: String| Err(ApprovalError::Decided(m));
        match run.approval {
            Some(Approval::Pending) => {}
            Some(Approval::Approved) => {
                return decided(format!(
                    "run {run_id} was already approved and ran once (outcome {}); an approval \
                     runs the call once",
                    run.outcome
                ));
            }
            Some(Approval::Denied) => {
                return decided(format!(
                    "run {run_id} was denied; call the tool again to ask anew"
                ));
            }
            Some(Approval::Expired) => return decided(expired(run_id)),
            None => {
                return decided(format!(
                    "run {run_id} did not wait for approval (outcome {}); only waiting_approval \
                     runs can be approved or denied",
                    run.outcome
                ));
            }
        }
        if run.expires_at_ms.is_some_and(|t| t <= now_ms()) {
            self.inner.decide(run_id, Approval::Expired, EXPIRY, None)?;
            return decided(expired(run_id));
        }
        Ok(run)
    }

    /// How many runs wait for approval now (expired ones not counted): the
    /// console's badge, one indexed count.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::StateError> {
    /// println!("{} waiting", host.pending_approvals()?);
    /// # Ok(()) }
    /// ```
    pub fn pending_approvals(&self) -> Result<u64, StateError> {
        // Waiting runs and decisions are written at once, not through the
        // writer: no flush needed.
        Ok(lock(&self.inner.store).pending_run_count(now_ms())?)
    }

    /// Whether `caller`'s MCP client may answer the confirmation of its
    /// own calls: the operator's always; a persona's only where the
    /// operator allowed it ([`Host::set_client_approval`]).
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::PersonaError> {
    /// let asks = host.client_may_decide(&skillhost::Caller::persona("ana"))?;
    /// # Ok(()) }
    /// ```
    pub fn client_may_decide(&self, caller: &Caller) -> Result<bool, crate::PersonaError> {
        let Some(persona) = caller.persona_id() else {
            return Ok(true);
        };
        lock(&self.inner.store)
            .client_approval(persona)?
            .ok_or_else(|| {
                crate::PersonaError::NotFound(format!(
                    "there is no persona `{persona}` (`skillhost personas list` shows them)"
                ))
            })
    }

    /// A resume state for waiting run `run_id` of `caller`: opaque,
    /// good for one answer by that caller's client, until the run's
    /// approval expires. Handing out a new one voids the old. Refused where
    /// the client may not decide.
    pub(crate) fn resume_state(
        &self,
        run_id: &str,
        caller: &Caller,
    ) -> Result<String, ApprovalError> {
        if !self.client_may_decide(caller).unwrap_or(false) {
            return Err(ApprovalError::Refused(
                "client-side approval is off for this persona".into(),
            ));
        }
        let mut nonce = [0u8; 32];
        getrandom::fill(&mut nonce).map_err(|e| {
            ApprovalError::State(anyhow::anyhow!("cannot read random bytes: {e}").into())
        })?;
        let nonce = hex::encode(nonce);
        if !lock(&self.inner.store).set_resume_digest(run_id, &digest(&nonce))? {
            return Err(ApprovalError::Decided(format!(
                "run {run_id} does not wait for approval"
            )));
        }
        Ok(format!("{RESUME_PREFIX}{run_id}.{nonce}"))
    }

    /// Decides the run a resume state names, as `caller`'s client
    /// answered: only a state this host handed out for a run of `caller`
    /// for `tool` that still waits, once, and only where the client may
    /// decide. Every refusal is an audit event. Approved, the run executes
    /// as [`Host::approve_by`] runs it; denied, the record of the run.
    pub(crate) async fn resume(
        &self,
        state: &str,
        caller: &Caller,
        tool: &str,
        answer: ClientAnswer,
        cancel: Option<tokio_util::sync::CancellationToken>,
        progress: Option<tokio::sync::mpsc::UnboundedSender<skillhost_mcp::Progress>>,
    ) -> Result<Resumed, ApprovalError> {
        let checked = self.check_resume(state, caller, tool, true);
        let run_id = match checked {
            Ok(id) => id,
            Err((e, why)) => {
                self.refused(caller, tool, "resume", &why);
                return Err(e);
            }
        };
        let decider = Decider::client(caller);
        match answer {
            ClientAnswer::Approve => Ok(Resumed::Ran(
                self.approve_with(&run_id, &decider, cancel, progress)
                    .await?,
            )),
            ClientAnswer::Deny => Ok(Resumed::Denied(self.deny_by(&run_id, &decider)?)),
        }
    }

    /// The run a resume state names, if the state is usable for an answer
    /// of `caller`'s client about `tool` (as [`Host::resume`] checks it),
    /// without using it up: for an answer that decides nothing (the user
    /// dismissed the question). A refusal is an audit event.
    pub(crate) fn peek_resume(
        &self,
        state: &str,
        caller: &Caller,
        tool: &str,
    ) -> Result<RunRecord, ApprovalError> {
        match self.check_resume(state, caller, tool, false) {
            Ok(run_id) => self
                .run(&run_id)?
                .ok_or_else(|| ApprovalError::NotFound(format!("run {run_id} vanished"))),
            Err((e, why)) => {
                self.refused(caller, tool, "resume", &why);
                Err(e)
            }
        }
    }

    /// The run id of a usable resume state (used up now when `take`), or
    /// why not.
    fn check_resume(
        &self,
        state: &str,
        caller: &Caller,
        tool: &str,
        take: bool,
    ) -> Result<String, (ApprovalError, String)> {
        let refuse = |why: &str| (unusable_state(tool), why.to_string());
        if !self.client_may_decide(caller).unwrap_or(false) {
            return Err((
                ApprovalError::Refused(format!(
                    "client-side approval is off for persona `{}`: an operator decides its \
                     confirmations (`skillhost runs approve RUN`, or the HTTP API)",
                    caller.persona_id().unwrap_or("operator")
                )),
                "client-side approval is off".into(),
            ));
        }
        let Some((run_id, nonce)) = state
            .strip_prefix(RESUME_PREFIX)
            .and_then(|s| s.rsplit_once('.'))
            .filter(|(id, n)| id.len() <= 64 && n.len() == 64)
        else {
            return Err(refuse("not a resume state this host handed out"));
        };
        self.flush();
        let run = lock(&self.inner.store)
            .run(run_id)
            .map_err(|e| (ApprovalError::State(e.into()), "state unreadable".into()))?;
        let Some(run) = run else {
            return Err(refuse("no such run"));
        };
        if run.persona.as_deref() != caller.persona_id() {
            return Err(refuse("another caller's run"));
        }
        if run.tool != tool {
            return Err(refuse("another tool's run"));
        }
        if run.approval != Some(Approval::Pending) {
            return Err(refuse("the run does not wait for approval"));
        }
        if run.expires_at_ms.is_some_and(|t| t <= now_ms()) {
            return Err(refuse("the approval expired"));
        }
        let store = lock(&self.inner.store);
        let digest = digest(nonce);
        let usable = if take {
            store.take_resume_digest(run_id, &digest)
        } else {
            store
                .resume_digest(run_id)
                .map(|d| d.as_deref() == Some(&digest))
        }
        .map_err(|e| (ApprovalError::State(e.into()), "state unreadable".into()))?;
        if !usable {
            return Err(refuse("the state was used already or replaced"));
        }
        Ok(run_id.to_string())
    }

    /// Records that `caller`'s request `what` (about `tool`, where there is
    /// one: empty otherwise) was refused, and why (an audit event of kind
    /// `refused`).
    pub(crate) fn refused(&self, caller: &Caller, tool: &str, what: &str, why: &str) {
        self.inner.emit(HostEvent {
            at_ms: now_ms(),
            kind: "refused".into(),
            run_id: None,
            persona: caller.persona_id().map(str::to_string),
            tool: (!tool.is_empty()).then(|| crate::escape::escape_control(tool, 128, false)),
            server: None,
            outcome: Some(Outcome::Denied),
            duration_ms: None,
            detail: serde_json::json!({ "request": what, "reason": why }),
        });
    }

    /// Records in one `refused` event that `count` of `caller`'s requests
    /// `what` from `peer` were refused, and why: a flood is counted, not
    /// written a row each.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn refused_repeatedly(
        &self,
        caller: &Caller,
        what: &str,
        why: &str,
        peer: &str,
        count: u64,
    ) {
        self.inner.emit(HostEvent {
            at_ms: now_ms(),
            kind: "refused".into(),
            run_id: None,
            persona: caller.persona_id().map(str::to_string),
            tool: None,
            server: None,
            outcome: Some(Outcome::Denied),
            duration_ms: None,
            detail: serde_json::json!({
                "request": what,
                "reason": why,
                "peer": peer,
                "count": count,
            }),
        });
    }

    /// One page of runs matching `filter`, newest first, and the cursor of
    /// the next page (pass it back as `filter.cursor`).
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::StateError> {
    /// let page = host.run_page(&skillhost::RunFilter { limit: 50, ..Default::default() })?;
    /// # Ok(()) }
    /// ```
    pub fn run_page(&self, filter: &RunFilter) -> Result<RunPage, StateError> {
        self.flush();
        self.inner.expire_pending();
        Ok(lock(&self.inner.store).run_page(filter)?)
    }

    /// One page of recorded events, newest first: at most `limit`, older
    /// than `cursor` (the `next` of the page before). Recorded as
    /// [`Host::recent_events`] says.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::StateError> {
    /// let page = host.event_page(100, None)?;
    /// # Ok(()) }
    /// ```
    pub fn event_page(&self, limit: usize, cursor: Option<&str>) -> Result<EventPage, StateError> {
        self.flush();
        let before = cursor.and_then(|c| c.parse::<i64>().ok());
        let mut rows = lock(&self.inner.store).event_page(limit.saturating_add(1), before)?;
        let more = rows.len() > limit;
        rows.truncate(limit);
        let next = more
            .then(|| rows.last().map(|(id, _)| id.to_string()))
            .flatten();
        Ok(EventPage {
            events: rows.into_iter().map(|(_, e)| e).collect(),
            next,
        })
    }

    /// Forgets what is older than `older_than`: decided runs (never one
    /// that waits or runs), events, and ref blobs no remaining run names;
    /// then gives the freed space back to the file system.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::StateError> {
    /// let done = host.gc(std::time::Duration::from_secs(30 * 86_400))?;
    /// println!("{} runs, {} events, {} refs", done.runs, done.events, done.refs);
    /// # Ok(()) }
    /// ```
    pub fn gc(&self, older_than: std::time::Duration) -> Result<GcReport, StateError> {
        self.flush();
        let size = || {
            ["", "-wal"]
                .iter()
                .filter_map(|ext| {
                    std::fs::metadata(
                        self.inner
                            .root
                            .join(format!("{}{ext}", crate::state::DB_FILE)),
                    )
                    .ok()
                })
                .map(|m| m.len())
                .sum::<u64>()
        };
        let before = size();
        let cutoff =
            now_ms().saturating_sub(i64::try_from(older_than.as_millis()).unwrap_or(i64::MAX));
        let forgotten = lock(&self.inner.store).forget_before(cutoff)?;
        lock(&self.inner.store).forget_unnamed_blobs()?;
        for id in &forgotten.refs {
            if let Err(e) = self.inner.refs.remove(id) {
                tracing::warn!("cannot remove ref blob {id}: {e:#}");
            }
        }
        lock(&self.inner.store).reclaim()?;
        Ok(GcReport {
            runs: forgotten.runs,
            events: forgotten.events,
            refs: forgotten.refs.len(),
            db_bytes_before: before,
            db_bytes_after: size(),
        })
    }

    /// Runs, newest first.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::StateError> {
    /// let pending = host.runs(&skillhost::RunFilter { pending_only: true, ..Default::default() })?;
    /// # Ok(()) }
    /// ```
    pub fn runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>, StateError> {
        self.flush();
        self.inner.expire_pending();
        Ok(lock(&self.inner.store).runs(filter)?)
    }

    /// One run.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::StateError> {
    /// let run = host.run("run_0123")?;
    /// # Ok(()) }
    /// ```
    pub fn run(&self, run_id: &str) -> Result<Option<RunRecord>, StateError> {
        self.flush();
        self.inner.expire_pending();
        Ok(lock(&self.inner.store).run(run_id)?)
    }

    /// A run with what surrounds it: its events (decisions, outbound
    /// requests, questions; at most [`RUN_DETAIL_MAX_EVENTS`]), the runs it
    /// invoked (at most [`RUN_DETAIL_MAX_CHILDREN`]) and the refs it was
    /// handed. `None` when there is no such run.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::StateError> {
    /// if let Some(d) = host.run_detail("run_0123")? {
    ///     for e in &d.events { println!("{} {}", e.at_ms, e.kind); }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn run_detail(&self, run_id: &str) -> Result<Option<RunDetail>, StateError> {
        let Some(run) = self.run(run_id)? else {
            return Ok(None);
        };
        let store = lock(&self.inner.store);
        let events = store.run_events(run_id, RUN_DETAIL_MAX_EVENTS)?;
        let children = store.child_runs(run_id, RUN_DETAIL_MAX_CHILDREN)?;
        let refs = run
            .input_refs
            .iter()
            .map(|id| {
                Ok(InputRef {
                    ref_id: id.clone(),
                    stored: store.ref_record(id)?,
                })
            })
            .collect::<crate::state::db::Result<_>>()?;
        Ok(Some(RunDetail {
            run,
            events,
            children,
            refs,
        }))
    }

    /// What happened over the last `minutes` minutes, from the recorded
    /// runs (at most [`ACTIVITY_MAX_RUNS`] of the newest): calls per minute
    /// by outcome and durations by tool.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::StateError> {
    /// let a = host.activity(60)?;
    /// println!("{} calls in the last hour", a.per_minute.iter().map(|m| m.total()).sum::<u64>());
    /// # Ok(()) }
    /// ```
    pub fn activity(&self, minutes: usize) -> Result<Activity, StateError> {
        self.flush();
        let now = now_ms();
        let since = now - (minutes as i64) * 60_000;
        let mut tally = Tally::new(now, minutes);
        lock(&self.inner.store).run_activity(
            since,
            ACTIVITY_MAX_RUNS,
            |at, tool, outcome, d| tally.add(at, tool, outcome, d),
        )?;
        Ok(tally.finish())
    }

    /// The events of this host as they happen (calls, approvals). A slow
    /// receiver misses events rather than slowing calls (it sees
    /// `Lagged`); every event is also recorded in the database.
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host) {
    /// let mut events = host.events();
    /// while let Ok(e) = events.recv().await { println!("{} {:?}", e.kind, e.outcome); }
    /// # }
    /// ```
    pub fn events(&self) -> tokio::sync::broadcast::Receiver<HostEvent> {
        self.inner.events.subscribe()
    }

    /// Recorded events, newest first. A call that ended ok on its own (no
    /// approval, not invoked by another run, no error) has no recorded
    /// event: its run ([`Host::runs`]) is its record. [`Host::events`]
    /// publishes every event, those included.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::StateError> {
    /// for e in host.recent_events(20)? { println!("{:?}", e.run_id); }
    /// # Ok(()) }
    /// ```
    pub fn recent_events(&self, limit: usize) -> Result<Vec<HostEvent>, StateError> {
        self.flush();
        Ok(lock(&self.inner.store).recent_events(limit)?)
    }

    /// Stores a blob and returns its ref (`label` is kept for listing; pass
    /// a file name, not a path).
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::RefError> {
    /// let r = host.add_ref(&mut &b"hello"[..], "greeting.txt")?;
    /// println!("{}", r.ref_id);
    /// # Ok(()) }
    /// ```
    pub fn add_ref(
        &self,
        reader: &mut dyn std::io::Read,
        label: &str,
    ) -> Result<RefInfo, RefError> {
        let label = crate::escape::escape_control(
            label.rsplit(['/', '\\']).next().unwrap_or(label),
            200,
            false,
        );
        // Shared: a cleanup in another process starting now waits for this
        // blob to be recorded.
        let _adding = self.inner.refs.lock_shared()?;
        let blob = self.inner.refs.put(reader)?;
        let info = RefInfo {
            ref_id: blob.id,
            sha256: blob.sha256,
            size: blob.size,
            label,
            created_at: now_ms() / 1000,
        };
        // On a database replicas share, the bytes go there too: a call
        // through another replica reads them from it.
        let shared = if self.inner.data.database.is_shared() {
            self.inner
                .refs
                .read_all(&info.ref_id)
                .and_then(|bytes| Ok(lock(&self.inner.store).put_blob(&info.sha256, &bytes)?))
        } else {
            Ok(())
        };
        let recorded = shared.and_then(|()| Ok(lock(&self.inner.store).add_ref_record(&info)?));
        if let Err(e) = recorded {
            let _ = self.inner.refs.remove(&info.ref_id);
            return Err(StateError::from(e).into());
        }
        Ok(info)
    }

    /// Every stored ref, newest first.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::StateError> {
    /// for r in host.refs()? { println!("{} {}", r.ref_id, r.label); }
    /// # Ok(()) }
    /// ```
    pub fn refs(&self) -> Result<Vec<RefInfo>, StateError> {
        Ok(lock(&self.inner.store).ref_records()?)
    }

    /// Removes a ref and its blob.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::RefError> {
    /// host.remove_ref("ref_00000000000000000000000000000000")?;
    /// # Ok(()) }
    /// ```
    pub fn remove_ref(&self, ref_id: &str) -> Result<(), RefError> {
        if !RefBlobs::valid_id(ref_id) || !lock(&self.inner.store).remove_ref_record(ref_id)? {
            return Err(RefError::NotFound(format!(
                "there is no ref {ref_id:?} (`skillhost refs list` shows them)"
            )));
        }
        lock(&self.inner.store).forget_unnamed_blobs()?;
        Ok(self.inner.refs.remove(ref_id)?)
    }
}

/// A run with what surrounds it ([`Host::run_detail`]).
///
/// ```no_run
/// # fn f(d: skillhost::RunDetail) {
/// println!("{} invoked {} runs", d.run.run_id, d.children.len());
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunDetail {
    /// The run (serialized flat: the run's fields, then `events`,
    /// `children` and `refs`).
    #[serde(flatten)]
    pub run: RunRecord,
    /// Its events other than the `call` event its row already holds
    /// (`approval`, `outbound`, `question_asked`…), oldest first.
    pub events: Vec<HostEvent>,
    /// The runs it invoked through `host.invoke`, oldest first.
    pub children: Vec<RunRecord>,
    /// The refs it was handed, in the order given.
    pub refs: Vec<InputRef>,
}

/// A ref a run was handed, and its record if it is still stored.
///
/// ```
/// let r = skillhost::InputRef { ref_id: "ref_0".into(), stored: None };
/// assert!(r.stored.is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InputRef {
    /// The ref's id.
    pub ref_id: String,
    /// Its record; `None` when it was removed since (`refs rm`, `gc`).
    pub stored: Option<RefInfo>,
}

/// An operator's reason for a denial, checked: trimmed, `None` when
/// blank; refused when too long or holding control characters (other than
/// line breaks and tabs) that would garble a log line or a terminal.
fn deny_reason(reason: Option<&str>) -> Result<Option<String>, ApprovalError> {
    let Some(reason) = reason.map(str::trim).filter(|r| !r.is_empty()) else {
        return Ok(None);
    };
    let chars = reason.chars().count();
    if chars > DENY_REASON_MAX_CHARS {
        return Err(ApprovalError::Invalid(format!(
            "the reason is {chars} characters; at most {DENY_REASON_MAX_CHARS} are kept, so \
             shorten it (nothing was decided)"
        )));
    }
    if let Some(c) = reason
        .chars()
        .find(|c| c.is_control() && !matches!(c, '\n' | '\t' | '\r'))
    {
        return Err(ApprovalError::Invalid(format!(
            "the reason holds the control character U+{:04X}; write it as plain text \
             (nothing was decided)",
            c as u32
        )));
    }
    Ok(Some(reason.to_string()))
}

/// A decision lost to another decider.
fn decided_meanwhile(run_id: &str) -> ApprovalError {
    ApprovalError::Decided(format!(
        "run {run_id} was decided by someone else meanwhile (`skillhost runs show {run_id}`)"
    ))
}

fn expired(run_id: &str) -> String {
    format!("run {run_id} expired unapproved; call the tool again to ask anew")
}

/// What a client's answer through a resume state came to.
#[derive(Debug)]
pub(crate) enum Resumed {
    /// Approved: the run executed.
    Ran(RunReport),
    /// Denied: the run as recorded.
    Denied(RunRecord),
}

/// The sha256 (hex) a resume nonce is kept as.
fn digest(nonce: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(nonce.as_bytes()))
}

/// One page of recorded events and the cursor of the next one.
///
/// ```no_run
/// # fn f(host: skillhost::Host) -> Result<(), skillhost::StateError> {
/// let page = host.event_page(10, None)?;
/// println!("{} events, more: {}", page.events.len(), page.next.is_some());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EventPage {
    /// The events, newest first.
    pub events: Vec<HostEvent>,
    /// The cursor of the next page, if there are more.
    pub next: Option<String>,
}

/// What [`Host::gc`] forgot, and the database's size before and after.
///
/// ```
/// let r = skillhost::GcReport::default();
/// assert_eq!(r.runs, 0);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct GcReport {
    /// Runs deleted.
    pub runs: usize,
    /// Events deleted.
    pub events: usize,
    /// Ref blobs deleted.
    pub refs: usize,
    /// The database's bytes (with its write-ahead log) before.
    pub db_bytes_before: u64,
    /// And after.
    pub db_bytes_after: u64,
}

/// The most runs [`Host::activity`] reads: at a very high call rate the
/// charts show the newest ones (and say so) rather than reading the whole
/// hour.
pub const ACTIVITY_MAX_RUNS: usize = 200_000;

/// Calls over a window, from the recorded runs ([`Host::activity`]).
#[derive(Debug, Clone, Default)]
pub struct Activity {
    /// One entry per minute, oldest first.
    pub per_minute: Vec<MinuteCounts>,
    /// Each tool called in the window, most called first.
    pub tools: Vec<ToolLatency>,
    /// Whether [`ACTIVITY_MAX_RUNS`] cut the window short.
    pub truncated: bool,
}

/// The calls of one minute, by how they ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MinuteCounts {
    /// Ended `ok`.
    pub ok: u64,
    /// Ended `error`, `timeout` or `trapped`.
    pub failed: u64,
    /// Denied (refused, denied by an operator, expired).
    pub denied: u64,
    /// Still waiting, running, or asking their caller.
    pub open: u64,
}

impl MinuteCounts {
    /// Every call of the minute.
    pub fn total(&self) -> u64 {
        self.ok + self.failed + self.denied + self.open
    }
}

/// One tool's calls and durations over a window.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolLatency {
    /// The tool.
    pub tool: String,
    /// Its calls.
    pub calls: u64,
    /// Median duration of the calls that ran, in ms.
    pub p50_ms: i64,
    /// 95th percentile, in ms.
    pub p95_ms: i64,
    /// 99th percentile, in ms.
    pub p99_ms: i64,
}

/// [`Activity`] being counted, one run at a time (no run is kept).
pub(crate) struct Tally {
    now_ms: i64,
    per_minute: Vec<MinuteCounts>,
    /// Per tool: its runs, and how many took each duration (ms).
    tools: std::collections::HashMap<String, (u64, std::collections::HashMap<i64, u64>)>,
    runs: usize,
}

impl Tally {
    /// An empty tally of `minutes` minutes ending at `now_ms`.
    pub(crate) fn new(now_ms: i64, minutes: usize) -> Tally {
        Tally {
            now_ms,
            per_minute: vec![MinuteCounts::default(); minutes],
            tools: Default::default(),
            runs: 0,
        }
    }

    /// Counts one run: created at `at` (Unix ms), of `tool`, ended so.
    pub(crate) fn add(&mut self, at: i64, tool: &str, outcome: Outcome, duration: Option<i64>) {
        self.runs += 1;
        let minutes = self.per_minute.len();
        let ago = ((self.now_ms - at).max(0) / 60_000) as usize;
        if ago < minutes {
            let m = &mut self.per_minute[minutes - 1 - ago];
            match outcome {
                Outcome::Ok => m.ok += 1,
                Outcome::Error | Outcome::Timeout | Outcome::Trapped | Outcome::Interrupted => {
                    m.failed += 1
                }
                Outcome::Denied => m.denied += 1,
                Outcome::WaitingApproval | Outcome::Running | Outcome::InputRequired => m.open += 1,
            }
        }
        let entry = match self.tools.get_mut(tool) {
            Some(e) => e,
            None => self.tools.entry(tool.to_string()).or_default(),
        };
        entry.0 += 1;
        if let Some(d) = duration {
            *entry.1.entry(d).or_default() += 1;
        }
    }

    /// The activity counted.
    pub(crate) fn finish(self) -> Activity {
        let mut tools: Vec<ToolLatency> = self
            .tools
            .into_iter()
            .map(|(tool, (calls, histogram))| {
                let mut d: Vec<(i64, u64)> = histogram.into_iter().collect();
                d.sort_unstable();
                let n: u64 = d.iter().map(|(_, c)| c).sum();
                let pct = |p: f64| {
                    if n == 0 {
                        return 0;
                    }
                    // The value at rank round((n - 1) p), as in a sorted list.
                    let rank = (((n - 1) as f64) * p).round() as u64;
                    let mut seen = 0;
                    for (ms, count) in &d {
                        seen += count;
                        if seen > rank {
                            return *ms;
                        }
                    }
                    d.last().map(|(ms, _)| *ms).unwrap_or(0)
                };
                ToolLatency {
                    tool,
                    calls,
                    p50_ms: pct(0.50),
                    p95_ms: pct(0.95),
                    p99_ms: pct(0.99),
                }
            })
            .collect();
        tools.sort_by(|a, b| b.calls.cmp(&a.calls).then_with(|| a.tool.cmp(&b.tool)));
        Activity {
            per_minute: self.per_minute,
            tools,
            truncated: self.runs >= ACTIVITY_MAX_RUNS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_fall_in_their_minute_and_tools_get_percentiles() {
        let now = 10 * 60_000;
        let runs = [
            (now - 1_000, "a", Outcome::Ok, Some(10)),
            (now - 2_000, "a", Outcome::Error, Some(30)),
            (now - 61_000, "b", Outcome::Denied, None),
            (now - 9 * 60_000 - 1, "a", Outcome::WaitingApproval, None),
            (now - 11 * 60_000, "c", Outcome::Ok, Some(1)),
        ];
        let mut tally = Tally::new(now, 10);
        for (at, tool, outcome, d) in runs {
            tally.add(at, tool, outcome, d);
        }
        let a = tally.finish();
        assert_eq!(a.per_minute.len(), 10);
        assert_eq!(
            a.per_minute[9],
            MinuteCounts {
                ok: 1,
                failed: 1,
                denied: 0,
                open: 0
            }
        );
        assert_eq!(a.per_minute[8].denied, 1);
        assert_eq!(a.per_minute[0].open, 1);
        assert_eq!(a.tools[0].tool, "a");
        assert_eq!(a.tools[0].calls, 3);
        assert_eq!((a.tools[0].p50_ms, a.tools[0].p99_ms), (30, 30));
        assert!(!a.truncated);
    }

    #[test]
    fn percentiles_from_the_histogram_match_a_sorted_list() {
        let durations: Vec<i64> = (0..1000).map(|i| (i * 7919) % 97).collect();
        let mut tally = Tally::new(0, 1);
        for d in &durations {
            tally.add(0, "t", Outcome::Ok, Some(*d));
        }
        let a = tally.finish();
        let mut sorted = durations.clone();
        sorted.sort_unstable();
        let at = |p: f64| sorted[(999.0 * p).round() as usize];
        let t = &a.tools[0];
        assert_eq!(
            (t.p50_ms, t.p95_ms, t.p99_ms),
            (at(0.50), at(0.95), at(0.99))
        );
        assert_eq!(t.calls, 1000);
    }

    #[test]
    fn a_denial_reason_is_trimmed_bounded_and_plain_text() {
        assert_eq!(deny_reason(None).expect("none"), None);
        assert_eq!(deny_reason(Some("  \n ")).expect("blank"), None);
        assert_eq!(
            deny_reason(Some(" too broad\n\tsee the ticket ")).expect("ok"),
            Some("too broad\n\tsee the ticket".to_string())
        );
        let at_limit = "é".repeat(DENY_REASON_MAX_CHARS);
        assert!(
            deny_reason(Some(&at_limit)).is_ok(),
            "characters, not bytes"
        );
        let over = "x".repeat(DENY_REASON_MAX_CHARS + 1);
        let e = deny_reason(Some(&over)).expect_err("too long");
        assert!(matches!(e, ApprovalError::Invalid(_)), "{e:?}");
        assert!(e.to_string().contains("501 characters"), "{e}");
        for bad in ["a\u{1b}[2Jb", "a\u{0}b", "a\u{7f}b", "a\u{85}b"] {
            let e = deny_reason(Some(bad)).expect_err("control character");
            assert!(e.to_string().contains("control character"), "{e}");
        }
    }
}
