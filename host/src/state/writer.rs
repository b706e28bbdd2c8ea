//! The writer of runs and events: records them without putting a disk
//! flush on every call's path.
//!
//! A run that stops in `waiting_approval` is written synchronously (another
//! process may approve it); every other run and every event goes through
//! [`EventWriter`]: a thread that writes whatever has queued in one
//! transaction, so a kill -9 loses at most the last batch and never leaves
//! half of one. It commits at most once per [`GROUP_COMMIT`]: a write
//! arriving sooner after the last commit waits for the rest of that
//! interval and is committed with whatever joined it, so a burst of calls
//! pays one disk flush, not one each; a write after a quiet moment is
//! committed at once. [`EventWriter::flush`] waits until everything queued
//! so far is on disk (at most the rest of an interval longer);
//! [`EventWriter::durable`] is the same for async callers (a call that
//! mutates data answers only once its record is on disk).
//!
//! The queue is bounded ([`MAX_QUEUED_WRITES`]): when the disk falls
//! behind, a call waits for room rather than the process growing. The
//! thread runs under `SCHED_BATCH`: its wake-up after a call does not
//! preempt the thread answering that call (on a busy CPU it runs when the
//! answer is out), while its share of the CPU stays that of any thread (a
//! lower priority delayed commits by tens of ms on a loaded machine).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::limits::MAX_QUEUED_WRITES;
use crate::state::Store;
use crate::state::db::Dialect;
use crate::state::runs::{
    HostEvent, PUT_EVENT, PUT_RUN, RunRow, event_values, put_event_on, put_run_on, run_values,
};

/// What the writer thread is asked to do.
enum Write {
    /// A run and the event of its end: one message, so one wake-up of the
    /// writer and one transaction for both.
    Run(Box<RunRow>, Box<HostEvent>),
    Event(Box<HostEvent>),
    /// Answer once everything before is committed.
    Flush(Ack),
    /// Write what came before, then end the thread (closing its
    /// connection).
    Stop,
}

/// Who waits for a flush.
enum Ack {
    /// A thread, blocked on the receiver.
    Thread(mpsc::SyncSender<()>),
    /// A task, awaiting the receiver.
    Task(tokio::sync::oneshot::Sender<()>),
}

impl Ack {
    fn send(self) {
        match self {
            Ack::Thread(tx) => {
                let _ = tx.send(());
            }
            Ack::Task(tx) => {
                let _ = tx.send(());
            }
        }
    }
}

/// The background writer of runs and events (see the module docs).
pub(crate) struct EventWriter {
    tx: mpsc::SyncSender<Write>,
    thread: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// Most writes in one transaction.
const BATCH: usize = 512;

impl EventWriter {
    /// Starts the writer on its own connection to the database.
    pub fn start(store: Store) -> EventWriter {
        let (tx, rx) = mpsc::sync_channel::<Write>(MAX_QUEUED_WRITES);
        let thread = std::thread::Builder::new()
            .name("skillhost-events".into())
            .spawn(move || {
                yield_to_calls();
                writer_loop(store, rx)
            })
            .ok();
        EventWriter {
            tx,
            thread: std::sync::Mutex::new(thread),
        }
    }

    /// Queues a run row and the event of its end.
    pub fn run_with_event(&self, row: RunRow, e: HostEvent) {
        let _ = self.tx.send(Write::Run(Box::new(row), Box::new(e)));
    }

    /// Queues an event.
    pub fn event(&self, e: HostEvent) {
        let _ = self.tx.send(Write::Event(Box::new(e)));
    }

    /// Waits (at most `limit`) until everything queued before is written.
    pub fn flush(&self, limit: Duration) -> bool {
        let (ack, done) = mpsc::sync_channel(1);
        if self.tx.send(Write::Flush(Ack::Thread(ack))).is_err() {
            return false;
        }
        done.recv_timeout(limit).is_ok()
    }

    /// Waits until everything queued before is committed to disk (or the
    /// writer is gone: false). For async callers: the task waits, not the
    /// thread (unless the queue is full, when every caller waits).
    pub async fn durable(&self) -> bool {
        let (ack, done) = tokio::sync::oneshot::channel();
        if self.tx.send(Write::Flush(Ack::Task(ack))).is_err() {
            return false;
        }
        done.await.is_ok()
    }

    /// Writes everything queued so far (a later write still gets written:
    /// the thread runs until the writer is dropped).
    pub fn close(&self) {
        self.flush(Duration::from_secs(10));
    }
}

impl Drop for EventWriter {
    /// Writes everything queued, then waits for the thread to end, so its
    /// connection is closed before the host is gone: the last connection
    /// of a process to close checkpoints the WAL, and a thread still
    /// holding one at exit would leave that to whichever process comes
    /// next.
    fn drop(&mut self) {
        let _ = self.tx.send(Write::Stop);
        let handle = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }
}

/// The shortest time between two commits of the writer (see the module
/// docs): each commit flushes the disk (`synchronous = FULL`), which costs
/// more than the writes of a whole interval's calls.
pub(crate) const GROUP_COMMIT: Duration = Duration::from_millis(2);

/// Puts the calling thread (the writer) under `SCHED_BATCH`:
/// its wake-ups do not preempt the threads answering calls (see the module
/// docs). Best effort: the writer works the same without it.
fn yield_to_calls() {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: a plain system call on the calling thread (0) with a
        // valid parameter; its failure changes nothing.
        unsafe {
            libc::sched_setscheduler(0, libc::SCHED_BATCH, &param);
        }
    }
}

fn writer_loop(store: Store, rx: mpsc::Receiver<Write>) {
    let mut last_commit: Option<Instant> = None;
    while let Ok(first) = rx.recv() {
        // Sleep out the interval rather than wait on the channel: a send to
        // a receiver that is not waiting wakes no thread.
        if let Some(wait) = last_commit
            .map(|t| (t + GROUP_COMMIT).saturating_duration_since(Instant::now()))
            .filter(|w| !w.is_zero() && !matches!(first, Write::Flush(_)))
        {
            std::thread::sleep(wait);
        }
        let mut batch = vec![first];
        while batch.len() < BATCH && !matches!(batch.last(), Some(Write::Stop)) {
            match rx.try_recv() {
                Ok(w) => batch.push(w),
                Err(_) => break,
            }
        }
        let stop = matches!(batch.last(), Some(Write::Stop));
        let mut acks = Vec::new();
        let result = match store.db().dialect() {
            Dialect::Sqlite => store.db().transaction(|tx| {
                for w in &batch {
                    match w {
                        Write::Run(r, e) => {
                            put_run_on(tx, r)?;
                            if !r.says_all_of(e) {
                                put_event_on(tx, e)?;
                            }
                        }
                        Write::Event(e) => put_event_on(tx, e)?,
                        Write::Flush(_) | Write::Stop => {}
                    }
                }
                Ok(())
            }),
            // Over the network: the batch's rows, then one pipelined
            // execution per table (one round trip each, not one per row).
            Dialect::Postgres => {
                let mut runs = Vec::new();
                let mut events = Vec::new();
                for w in &batch {
                    match w {
                        Write::Run(r, e) => {
                            runs.push(run_values(r));
                            if !r.says_all_of(e) {
                                events.push(event_values(e));
                            }
                        }
                        Write::Event(e) => events.push(event_values(e)),
                        Write::Flush(_) | Write::Stop => {}
                    }
                }
                store.db().transaction(|tx| {
                    tx.execute_many(PUT_RUN, &runs)?;
                    tx.execute_many(PUT_EVENT, &events)
                })
            }
        };
        last_commit = Some(Instant::now());
        if let Err(e) = result {
            tracing::error!("cannot record {} run(s)/event(s): {e}", batch.len());
        }
        for w in batch {
            if let Write::Flush(ack) = w {
                acks.push(ack);
            }
        }
        for a in acks {
            a.send();
        }
        if stop {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::db::params;
    use crate::state::runs::{Outcome, now_ms};

    /// Run `i`: an odd one failed (its event says why), an even one
    /// ended ok on its own (its row says it all: no event recorded).
    fn finished(i: usize) -> (RunRow, HostEvent) {
        let run_id = format!("run_{i}");
        let error = (i % 2 == 1).then(|| "it failed".to_string());
        let outcome = if error.is_some() {
            Outcome::Error
        } else {
            Outcome::Ok
        };
        let row = RunRow {
            run_id: run_id.clone(),
            parent_run_id: None,
            persona: Some("p".into()),
            tool: "t.x".into(),
            server: "skill:t".into(),
            outcome,
            approval: None,
            args: None,
            input_refs: Vec::new(),
            error: error.clone(),
            created_at_ms: now_ms(),
            expires_at_ms: None,
            duration_ms: Some(0),
        };
        let event = HostEvent {
            at_ms: now_ms(),
            kind: "call".into(),
            run_id: Some(run_id),
            persona: Some("p".into()),
            tool: Some("t.x".into()),
            server: Some("skill:t".into()),
            outcome: Some(outcome),
            duration_ms: Some(0),
            detail: match error {
                Some(e) => serde_json::json!({ "error": e }),
                None => serde_json::json!({}),
            },
        };
        (row, event)
    }

    /// A fresh SQLite store, and a writer on its own connection to it.
    fn store_and_writer() -> (tempfile::TempDir, Store, EventWriter) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let store = Store::open_sqlite(tmp.path()).expect("open");
        let writer = EventWriter::start(Store::open_sqlite(tmp.path()).expect("open"));
        (tmp, store, writer)
    }

    /// Hands the writer runs `runs` (see [`finished`]).
    fn record(writer: &EventWriter, runs: std::ops::Range<usize>) {
        for i in runs {
            let (row, event) = finished(i);
            writer.run_with_event(row, event);
        }
    }

    fn count(store: &Store, table: &str) -> i64 {
        store
            .db()
            .query_row(&format!("SELECT COUNT(*) FROM {table}"), params![], |r| {
                r.get(0)
            })
            .expect("count")
    }

    #[test]
    fn the_writer_records_bursts_whole_and_quiet_writes_at_once() {
        let (_tmp, store, writer) = store_and_writer();
        // A burst: grouped into few commits, all of it written.
        record(&writer, 0..300);
        let started = Instant::now();
        assert!(writer.flush(Duration::from_secs(10)));
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(count(&store, "runs"), 300);
        assert_eq!(count(&store, "events"), 150, "the failed runs' events");
        // After a quiet moment a write is committed without a flush and
        // without waiting for another write.
        std::thread::sleep(GROUP_COMMIT * 2);
        let (row, event) = finished(300);
        writer.run_with_event(row, event);
        let deadline = Instant::now() + Duration::from_secs(5);
        while count(&store, "runs") < 301 {
            assert!(Instant::now() < deadline, "the write was not committed");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(count(&store, "events"), 150);
        writer.close();
    }

    /// A page limit past what SQL counts (`runs list --limit` with the
    /// largest number) lists everything, once, with no next page.
    #[test]
    fn the_largest_page_limit_lists_everything() {
        let (_tmp, store, writer) = store_and_writer();
        record(&writer, 0..20);
        assert!(writer.flush(Duration::from_secs(10)));
        for limit in [usize::MAX, i64::MAX as usize, i64::MAX as usize - 1] {
            let filter = crate::state::runs::RunFilter {
                limit,
                ..Default::default()
            };
            let page = store.run_page(&filter).expect("a page");
            assert_eq!(page.runs.len(), 20, "limit {limit}");
            assert!(page.next.is_none(), "limit {limit}");
            let events = store.event_page(limit, None).expect("events");
            assert_eq!(events.len(), 10, "limit {limit}");
        }
        writer.close();
    }

    #[tokio::test]
    async fn durable_returns_once_what_came_before_is_committed() {
        let (_tmp, store, writer) = store_and_writer();
        record(&writer, 0..50);
        assert!(writer.durable().await);
        assert_eq!(count(&store, "runs"), 50);
        assert_eq!(count(&store, "events"), 25);
    }

    #[test]
    fn only_an_event_that_says_more_than_its_run_is_recorded() {
        let (plain, event) = finished(0);
        assert!(plain.says_all_of(&event));
        let (failed, its_event) = finished(1);
        assert!(!failed.says_all_of(&its_event));
        let mut approved = plain.clone();
        approved.approval = Some(crate::state::runs::Approval::Approved);
        assert!(!approved.says_all_of(&event));
        let mut invoked = plain.clone();
        invoked.parent_run_id = Some("run_parent".into());
        assert!(!invoked.says_all_of(&event));
        let mut trapped = event.clone();
        trapped.detail = serde_json::json!({ "trap": "fuel" });
        assert!(!plain.says_all_of(&trapped));
        let mut other_run = event.clone();
        other_run.run_id = Some("run_other".into());
        assert!(!plain.says_all_of(&other_run));
        let mut refused = event;
        refused.kind = "refused".into();
        assert!(!plain.says_all_of(&refused));
    }
}
