//! Runs, approvals, events and refs, through the host.
//!
//! A call that needs confirmation stops in `waiting_approval` with its
//! arguments recorded (`super::call`); [`Host::approve`] runs exactly those
//! arguments once, as the run's caller, through the same call path, and
//! [`Host::deny`] ends it. A decision is taken in one transaction on a run
//! that is still pending, so two deciders never both win.

use serde_json::Value;

use super::{CallRequest, Caller, Host, HostInner, RunReport, lock};
use crate::error::{ApprovalError, RefError, StateError};
use crate::state::refs::{RefBlobs, RefInfo};
use crate::state::runs::{Approval, HostEvent, Outcome, RunFilter, RunRecord, now_ms};

impl HostInner {
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
                let _ = self.decide(&r.run_id, Approval::Expired);
            }
        }
    }

    /// Records a decision on a pending run and its event.
    fn decide(&self, run_id: &str, decision: Approval) -> Result<Option<RunRecord>, StateError> {
        let error = match decision {
            Approval::Denied => Some("denied by the operator"),
            Approval::Expired => Some("the approval expired before anyone approved it"),
            Approval::Pending | Approval::Approved => None,
        };
        let before = lock(&self.store).decide_run(run_id, decision, error)?;
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
                detail: serde_json::json!({ "decision": decision }),
            });
        }
        Ok(before)
    }
}

impl Host {
    /// Approves a run waiting for approval and executes exactly the
    /// approved arguments, once, as its caller (authorization is checked
    /// again). Approving twice, after a denial or after expiry is an
    /// error that says which.
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host) -> Result<(), skillhost::ApprovalError> {
    /// let run = host.approve("run_0123").await?;
    /// # Ok(()) }
    /// ```
    pub async fn approve(&self, run_id: &str) -> Result<RunReport, ApprovalError> {
        self.approve_with(run_id, None, None).await
    }

    /// [`Host::approve`] with the approving request's cancellation and
    /// progress sink (the MCP front's confirmation by elicitation).
    pub(crate) async fn approve_with(
        &self,
        run_id: &str,
        cancel: Option<tokio_util::sync::CancellationToken>,
        progress: Option<tokio::sync::mpsc::UnboundedSender<skillhost_mcp::Progress>>,
    ) -> Result<RunReport, ApprovalError> {
        let run = self.pending(run_id)?;
        let Some(before) = self.inner.decide(run_id, Approval::Approved)? else {
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
        Ok(self
            .inner
            .call(
                &caller,
                &before.tool,
                args,
                &req,
                None,
                Some((before.run_id, before.created_at_ms)),
            )
            .await)
    }

    /// Denies a run waiting for approval.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::ApprovalError> {
    /// host.deny("run_0123")?;
    /// # Ok(()) }
    /// ```
    pub fn deny(&self, run_id: &str) -> Result<RunRecord, ApprovalError> {
        self.pending(run_id)?;
        if self.inner.decide(run_id, Approval::Denied)?.is_none() {
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
            self.inner.decide(run_id, Approval::Expired)?;
            return decided(expired(run_id));
        }
        Ok(run)
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

    /// Recorded events, newest first.
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
        if let Err(e) = lock(&self.inner.store).add_ref_record(&info) {
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
        Ok(self.inner.refs.remove(ref_id)?)
    }
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
