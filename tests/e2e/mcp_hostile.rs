//! The host's MCP client against servers that misbehave on purpose
//! (`tests/peers/hostile_server.py MODE`), one test per mode, plus restart
//! backoff timing and the stdio command policy.
//!
//! Every test runs a healthy Python SDK server ("good") in the same
//! [`McpManager`] and checks that it still answers after the hostile
//! behaviour, and that no process of the hostile server's process groups is
//! left once the manager has stopped it.
//!
//! The hostile processes are found two ways: the manager's own start
//! markers in the server's stderr log (`--- skillhost: started … (pid N)`),
//! and a [`Spy`] thread that samples `/proc` for children of this test
//! process whose environment carries the test's unique
//! `SKILLHOST_TEST_CASE` value (a server that never gets ready has no pid
//! in its status).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use skillhost_e2e::peers;
use skillhost_mcp::{
    CallErrorKind, LOG_FILE, LOG_FILE_BYTES, ManagerOptions, McpConfig, McpManager, RING_BYTES,
    RestartPolicy, Secret, ServerConfig, ServerState, ServerStatus, Timeouts, server_dir,
};

/// The environment variable that tags a hostile server with its test.
const CASE_ENV: &str = "SKILLHOST_TEST_CASE";

/// The value of [`CASE_ENV`] for `case`. Configured env values count as
/// secrets and are redacted from the stderr log, so the value must not be
/// something the server prints (like its mode). The test process's pid
/// keeps two runs of this suite apart.
fn tag_value(case: &str) -> String {
    format!("skillhost-test/{}/{case}", std::process::id())
}

/// The fast policy most tests use: 3 failures in 30 s mark a server failed.
fn fast_policy() -> RestartPolicy {
    RestartPolicy {
        max_restarts: 2,
        window: Duration::from_secs(30),
        base_delay: Duration::from_millis(50),
        max_delay: Duration::from_secs(1),
    }
}

/// A data dir, a manager, and the healthy server "good", ready.
struct Harness {
    tmp: tempfile::TempDir,
    m: McpManager,
}

impl Harness {
    fn root(&self) -> PathBuf {
        self.tmp.path().join("data")
    }
}

async fn harness_with(restart: RestartPolicy, stop_grace: Option<Duration>) -> Harness {
    let tmp = tempfile::tempdir().unwrap();
    let mut opts = ManagerOptions::new(tmp.path().join("data"));
    opts.restart = restart;
    if let Some(g) = stop_grace {
        opts.stop_grace = g;
    }
    let m = McpManager::new(opts);
    let (prog, args) = peers::py_server_cmd("stdio", None);
    let good = ServerConfig::stdio("good", prog.to_str().unwrap(), args);
    m.connect_all(&McpConfig {
        servers: vec![good],
    })
    .await;
    let st = m.status("good").unwrap();
    assert_eq!(st.state, ServerState::Ready, "the healthy server: {st:?}");
    Harness { tmp, m }
}

async fn harness() -> Harness {
    harness_with(fast_policy(), None).await
}

/// A hostile server named `name` running `mode`, tagged with `case`.
fn hostile(name: &str, mode: &str, case: &str, timeouts: Timeouts) -> ServerConfig {
    let (prog, args) = peers::hostile_cmd(mode);
    let mut s = ServerConfig::stdio(name, prog.to_str().unwrap(), args);
    s.env.insert(CASE_ENV.into(), Secret::new(tag_value(case)));
    s.timeouts = timeouts;
    s
}

fn timeouts(connect: f64, call: f64) -> Timeouts {
    Timeouts {
        connect_secs: Some(connect),
        read_only_secs: Some(call),
        mutating_secs: Some(call),
    }
}

use skillhost_mcp::text_content as text_of;

/// `good.lookup` answers, within 5 s.
async fn assert_good_answers(m: &McpManager) {
    let t = Instant::now();
    let r = tokio::time::timeout(
        Duration::from_secs(5),
        m.call("good.lookup", json!({"key": "k"}), None, None),
    )
    .await
    .expect("good.lookup answers within 5 s")
    .expect("good.lookup succeeds");
    assert_eq!(text_of(&r), "value-of-k");
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(m.status("good").unwrap().state, ServerState::Ready);
}

/// Polls `name`'s status every 5 ms until `pred` holds; panics with the
/// last status after `limit`.
async fn wait_status(
    m: &McpManager,
    name: &str,
    limit: Duration,
    what: &str,
    pred: impl Fn(&ServerStatus) -> bool,
) -> ServerStatus {
    let deadline = Instant::now() + limit;
    loop {
        let st = m.status(name).expect("the server is registered");
        if pred(&st) {
            return st;
        }
        assert!(
            Instant::now() < deadline,
            "{name} not {what} after {limit:?}: {st:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Polls `name`'s stderr log until `pred` holds on it; panics after `limit`.
async fn wait_log(
    m: &McpManager,
    name: &str,
    limit: Duration,
    what: &str,
    pred: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + limit;
    loop {
        let log = m.logs(name, usize::MAX).unwrap_or_default();
        if pred(&log) {
            return log;
        }
        assert!(
            Instant::now() < deadline,
            "{name}'s stderr has no {what} after {limit:?}:\n{}",
            tail_chars(&log, 2000)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn tail_chars(s: &str, n: usize) -> String {
    let skip = s.chars().count().saturating_sub(n);
    s.chars().skip(skip).collect()
}

/// The pids in the manager's start markers (`--- skillhost: started … (pid
/// N) ---`) in `text`.
fn started_pids(text: &str) -> BTreeSet<i32> {
    text.lines()
        .filter(|l| l.starts_with("--- skillhost: started "))
        .filter_map(|l| {
            let rest = &l[l.rfind("(pid ")? + 5..];
            rest[..rest.find(')')?].parse().ok()
        })
        .collect()
}

/// Every process group the manager started for `name`, from the ring
/// buffer and from both log files.
fn started_groups(h: &Harness, name: &str) -> BTreeSet<i32> {
    let mut out = started_pids(&h.m.logs(name, usize::MAX).unwrap_or_default());
    let dir = server_dir(&h.root(), name);
    for f in [LOG_FILE.to_string(), format!("{LOG_FILE}.1")] {
        if let Ok(bytes) = std::fs::read(dir.join(f)) {
            out.extend(started_pids(&String::from_utf8_lossy(&bytes)));
        }
    }
    out
}

/// Samples `/proc` every 5 ms for direct children of this process whose
/// environment has `SKILLHOST_TEST_CASE=<case>`; records their process
/// groups.
struct Spy {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<BTreeSet<i32>>>,
}

impl Spy {
    fn start(case: &str) -> Spy {
        let stop = Arc::new(AtomicBool::new(false));
        let tag = format!("{CASE_ENV}={}", tag_value(case));
        let me = std::process::id() as i32;
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut groups = BTreeSet::new();
            let mut seen = BTreeSet::new();
            // Bounded: a test that forgets to stop the spy ends it after 2 min.
            let deadline = Instant::now() + Duration::from_secs(120);
            while !flag.load(Ordering::Acquire) && Instant::now() < deadline {
                for p in peers::all_processes() {
                    if p.ppid != me || seen.contains(&p.pid) {
                        continue;
                    }
                    let Ok(env) = std::fs::read(format!("/proc/{}/environ", p.pid)) else {
                        continue;
                    };
                    if !env.split(|&b| b == 0).any(|v| v == tag.as_bytes()) {
                        continue;
                    }
                    // The stat above may predate the child's setpgid and
                    // exec; read its group again now that it is the server.
                    let Some(now) = std::fs::read_to_string(format!("/proc/{}/stat", p.pid))
                        .ok()
                        .and_then(|t| peers::parse_proc_stat(&t))
                    else {
                        continue;
                    };
                    seen.insert(p.pid);
                    groups.insert(now.pgrp);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            groups
        });
        Spy {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops sampling; the process groups seen. Each server ran in a group
    /// of its own, never in this test's.
    fn finish(mut self) -> BTreeSet<i32> {
        self.stop.store(true, Ordering::Release);
        let groups = self.thread.take().unwrap().join().unwrap();
        // SAFETY: getpgid(0) only reads this process's group id.
        let mine = unsafe { libc::getpgid(0) };
        assert!(
            !groups.contains(&mine),
            "a server ran in the test's own process group {mine}"
        );
        groups
    }
}

impl Drop for Spy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

/// Each process's stat line and command line, for failure messages.
fn describe(pids: &[i32]) -> String {
    pids.iter()
        .map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                .unwrap_or_default();
            format!("\n  [{}] {}", stat.trim(), cmdline.trim())
        })
        .collect()
}

/// Every group in `groups` has no live member within 5 s, and no process
/// tagged with `case` is alive.
fn assert_groups_gone(groups: &BTreeSet<i32>, case: &str) {
    for &pgid in groups {
        assert!(pgid > 1);
        let left = peers::wait_group_gone(pgid, Duration::from_secs(5));
        assert!(
            left.is_empty(),
            "{case}: group {pgid} still has {}",
            describe(&left)
        );
    }
    let tag = format!("{CASE_ENV}={}", tag_value(case));
    let tagged: Vec<i32> = peers::all_processes()
        .into_iter()
        .filter(|p| p.state != 'Z' && p.state != 'X')
        .filter(|p| {
            std::fs::read(format!("/proc/{}/environ", p.pid))
                .is_ok_and(|e| e.split(|&b| b == 0).any(|v| v == tag.as_bytes()))
        })
        .map(|p| p.pid)
        .collect();
    assert!(
        tagged.is_empty(),
        "{case}: processes left: {}",
        describe(&tagged)
    );
}

/// Stops everything and checks the hostile server's groups are gone.
async fn finish(h: Harness, spy: Spy, name: &str, case: &str, running: Option<i32>) {
    h.m.shutdown().await;
    assert_eq!(h.m.status(name).unwrap().state, ServerState::Disabled);
    let mut groups = spy.finish();
    groups.extend(started_groups(&h, name));
    groups.extend(running);
    assert!(!groups.is_empty(), "{case}: no process group was recorded");
    assert_groups_gone(&groups, case);
}

fn vm_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

// --- one test per hostile mode ---------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_at_start_ends_failed_with_exit_code_and_stderr_line() {
    let case = "exit-at-start-fails";
    let h = harness().await;
    let spy = Spy::start(case);
    h.m.start(hostile(
        "quitter",
        "exit-at-start",
        case,
        timeouts(5.0, 5.0),
    ));
    let st = wait_status(&h.m, "quitter", Duration::from_secs(15), "failed", |s| {
        s.state == ServerState::Failed
    })
    .await;
    let err = st.last_error.clone().unwrap();
    assert!(err.contains("exited with code 3"), "{err}");
    assert!(
        err.contains(
            "; the server's last stderr lines: hostile: exit-at-start: giving up before reading \
             anything"
        ),
        "{err}"
    );
    assert!(err.contains("gave up after 3 failures"), "{err}");
    assert_eq!(st.restarts, 2, "{st:?}");
    assert_eq!(st.pid, None);
    assert!(
        h.m.tools()
            .iter()
            .all(|t| !t.tool.name.starts_with("quitter."))
    );
    // One start per attempt.
    assert_eq!(started_groups(&h, "quitter").len(), 3);
    assert_good_answers(&h.m).await;
    finish(h, spy, "quitter", case, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_mid_call_disconnects_the_call_then_restarts() {
    let case = "crash-mid-call";
    let h = harness().await;
    let spy = Spy::start(case);
    h.m.start(hostile(
        "crashy",
        "crash-mid-call",
        case,
        timeouts(5.0, 5.0),
    ));
    let first = wait_status(&h.m, "crashy", Duration::from_secs(10), "ready", |s| {
        s.state == ServerState::Ready
    })
    .await;
    let first_pid = first.pid.unwrap();
    assert!(h.m.tools().iter().any(|t| t.tool.name == "crashy.boom"));

    let t = Instant::now();
    let e =
        h.m.call("crashy.boom", json!({}), None, None)
            .await
            .unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!((e.server.as_str(), e.tool.as_str()), ("crashy", "boom"));
    match &e.kind {
        CallErrorKind::Disconnected(why) => {
            assert!(why.contains("closed its stdout"), "{why}")
        }
        other => panic!("expected Disconnected, got {other:?}"),
    }

    // The supervisor notices, goes degraded (or straight to starting),
    // then ready again with a new process.
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let st = loop {
        let st = h.m.status("crashy").unwrap();
        if seen.last() != Some(&st.state) {
            seen.push(st.state);
        }
        if st.state == ServerState::Ready && st.restarts >= 1 {
            break st;
        }
        assert!(Instant::now() < deadline, "not ready again: {st:?}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    assert!(
        seen.contains(&ServerState::Degraded) || seen.contains(&ServerState::Starting),
        "{seen:?}"
    );
    assert_eq!(st.restarts, 1, "{st:?}");
    let err = st.last_error.clone().unwrap();
    assert!(err.contains("exited with code 9"), "{err}");
    assert!(err.contains("exiting on tools/call"), "{err}");
    let pid = st.pid.unwrap();
    assert_ne!(pid, first_pid);
    assert!(h.m.tools().iter().any(|t| t.tool.name == "crashy.boom"));
    // The first process group went with the crash.
    let left = peers::wait_group_gone(first_pid, Duration::from_secs(5));
    assert!(left.is_empty(), "{left:?}");
    assert_good_answers(&h.m).await;
    finish(h, spy, "crashy", case, Some(pid)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_init_times_out_the_handshake_and_fails() {
    let case = "never-init";
    let h = harness().await;
    let spy = Spy::start(case);
    h.m.start(hostile("mute", "never-init", case, timeouts(2.0, 2.0)));
    let mut ever_ready = false;
    let deadline = Instant::now() + Duration::from_secs(20);
    let st = loop {
        let st = h.m.status("mute").unwrap();
        ever_ready |= st.state == ServerState::Ready;
        if st.state == ServerState::Failed {
            break st;
        }
        assert!(Instant::now() < deadline, "not failed: {st:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(!ever_ready);
    let err = st.last_error.clone().unwrap();
    assert!(
        err.contains("no answer to the handshake within 2s"),
        "{err}"
    );
    assert!(err.contains("gave up after 3 failures"), "{err}");
    assert_eq!(st.restarts, 2);
    // Each timed-out attempt was stopped at once, not left behind.
    let groups = started_groups(&h, "mute");
    assert_eq!(groups.len(), 3, "{groups:?}");
    assert_groups_gone(&groups, case);
    assert_good_answers(&h.m).await;
    finish(h, spy, "mute", case, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_answer_call_times_out_and_sends_cancelled() {
    let case = "never-answer-call";
    let h = harness().await;
    let spy = Spy::start(case);
    h.m.start(hostile(
        "hangs",
        "never-answer-call",
        case,
        timeouts(5.0, 1.0),
    ));
    let st = wait_status(&h.m, "hangs", Duration::from_secs(10), "ready", |s| {
        s.state == ServerState::Ready
    })
    .await;
    let t = Instant::now();
    let e =
        h.m.call("hangs.hang", json!({}), None, None)
            .await
            .unwrap_err();
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(950) && took < Duration::from_secs(3),
        "{took:?}"
    );
    assert_eq!(e.kind, CallErrorKind::Timeout(Duration::from_secs(1)));
    assert_eq!(
        e.timeout_json().unwrap(),
        json!({"status": "timeout", "error": "MCP tool timed out after 1s"})
    );
    // The server saw notifications/cancelled for the very request it held.
    let log = wait_log(
        &h.m,
        "hangs",
        Duration::from_secs(5),
        "cancelled line",
        |l| l.lines().any(|l| l.starts_with("cancelled ")),
    )
    .await;
    let held = log
        .lines()
        .find_map(|l| l.strip_prefix("hostile: never-answer-call: holding tools/call "))
        .expect("the server logged the call it holds")
        .trim()
        .to_string();
    assert!(
        log.lines().any(|l| l.trim() == format!("cancelled {held}")),
        "no `cancelled {held}` in:\n{log}"
    );
    // The session survived the timeout.
    let now = h.m.status("hangs").unwrap();
    assert_eq!(now.state, ServerState::Ready);
    assert_eq!(now.restarts, 0);
    assert_good_answers(&h.m).await;
    finish(h, spy, "hangs", case, st.pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_is_never_ready_and_harmless() {
    let case = "garbage";
    let h = harness().await;
    let spy = Spy::start(case);
    h.m.start(hostile("junk", "garbage", case, timeouts(2.0, 2.0)));
    let mut ever_ready = false;
    let deadline = Instant::now() + Duration::from_secs(20);
    let st = loop {
        let st = h.m.status("junk").unwrap();
        ever_ready |= st.state == ServerState::Ready;
        if st.state == ServerState::Failed {
            break st;
        }
        assert!(Instant::now() < deadline, "not failed: {st:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(!ever_ready);
    let err = st.last_error.clone().unwrap();
    assert!(
        err.contains("no answer to the handshake within 2s"),
        "{err}"
    );
    assert!(
        h.m.tools()
            .iter()
            .all(|t| !t.tool.name.starts_with("junk."))
    );
    assert_good_answers(&h.m).await;
    finish(h, spy, "junk", case, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_line_fails_the_server_without_growing_memory() {
    let case = "huge-line";
    let h = harness().await;
    let spy = Spy::start(case);
    let before = vm_rss_kib();
    h.m.start(hostile("bloat", "huge-line", case, timeouts(10.0, 5.0)));
    let mut peak = before;
    let deadline = Instant::now() + Duration::from_secs(30);
    let st = loop {
        let st = h.m.status("bloat").unwrap();
        peak = peak.max(vm_rss_kib());
        assert_ne!(st.state, ServerState::Ready, "{st:?}");
        if st.state == ServerState::Failed {
            break st;
        }
        assert!(Instant::now() < deadline, "not failed: {st:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let after = vm_rss_kib();
    let err = st.last_error.clone().unwrap();
    assert!(err.contains("line longer than 16 MiB"), "{err}");
    eprintln!("VmRSS before {before} KiB, peak {peak} KiB, after {after} KiB");
    let slack = 100 * 1024;
    assert!(
        after <= before + slack && peak <= before + slack,
        "VmRSS grew from {before} KiB to {after} KiB (peak {peak} KiB)"
    );
    assert_good_answers(&h.m).await;
    finish(h, spy, "bloat", case, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stderr_flood_keeps_serving_with_bounded_logs() {
    let case = "stderr-flood";
    let h = harness().await;
    let spy = Spy::start(case);
    h.m.start(hostile("noisy", "stderr-flood", case, timeouts(10.0, 5.0)));
    let st = wait_status(&h.m, "noisy", Duration::from_secs(10), "ready", |s| {
        s.state == ServerState::Ready
    })
    .await;
    let pid = st.pid.unwrap();
    for i in 0..20 {
        let t = Instant::now();
        let r = tokio::time::timeout(
            Duration::from_secs(5),
            h.m.call("noisy.ping", json!({}), None, None),
        )
        .await
        .unwrap_or_else(|_| panic!("ping {i} took more than 5 s"))
        .unwrap_or_else(|e| panic!("ping {i}: {e}"));
        assert_eq!(text_of(&r), "pong");
        assert!(t.elapsed() < Duration::from_secs(5));
    }
    assert_good_answers(&h.m).await;
    let dir = server_dir(&h.root(), "noisy");
    let rotated = dir.join(format!("{LOG_FILE}.1"));
    let deadline = Instant::now() + Duration::from_secs(20);
    while !rotated.exists() {
        assert!(Instant::now() < deadline, "stderr.log never rotated");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Sample the bounds a few times while it still floods.
    for _ in 0..5 {
        let logs = h.m.logs("noisy", usize::MAX).unwrap();
        assert!(logs.len() <= RING_BYTES, "{} bytes", logs.len());
        assert!(logs.contains("hostile: stderr flood ####"));
        for f in [dir.join(LOG_FILE), rotated.clone()] {
            let len = std::fs::metadata(&f).map(|m| m.len()).unwrap_or(0);
            assert!(len <= LOG_FILE_BYTES, "{}: {len} bytes", f.display());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let st = h.m.status("noisy").unwrap();
    assert_eq!(
        (st.state, st.restarts, st.pid),
        (ServerState::Ready, 0, Some(pid))
    );
    finish(h, spy, "noisy", case, Some(pid)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grandchild_is_killed_with_the_group() {
    let case = "grandchild";
    let h = harness().await;
    let spy = Spy::start(case);
    h.m.start(hostile("parent", "grandchild", case, timeouts(10.0, 5.0)));
    let st = wait_status(&h.m, "parent", Duration::from_secs(10), "ready", |s| {
        s.state == ServerState::Ready
    })
    .await;
    let pgid = st.pid.unwrap();
    let log = wait_log(
        &h.m,
        "parent",
        Duration::from_secs(5),
        "grandchild line",
        |l| l.lines().any(|l| l.starts_with("grandchild ")),
    )
    .await;
    let grandchild: i32 = log
        .lines()
        .find_map(|l| l.strip_prefix("grandchild "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let stat = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|t| peers::parse_proc_stat(&t))
    };
    let g = stat(grandchild).expect("the grandchild runs");
    assert_eq!(g.pgrp, pgid, "the grandchild is in the server's group");
    assert_eq!(g.ppid, pgid);
    assert_ne!(g.state, 'Z');
    let r =
        h.m.call("parent.ping", json!({}), None, None)
            .await
            .unwrap();
    assert_eq!(text_of(&r), "pong");

    h.m.stop("parent").await;
    assert_eq!(h.m.status("parent").unwrap().state, ServerState::Disabled);
    // Gone, or at most a zombie someone else must reap (never ours).
    let me = std::process::id() as i32;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match stat(grandchild) {
            None => break,
            Some(p) if p.state == 'Z' && p.ppid != me => break,
            Some(p) => assert!(Instant::now() < deadline, "grandchild left: {p:?}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let left = peers::group_members_including_zombies(pgid)
        .into_iter()
        .filter_map(stat)
        .filter(|p| p.state != 'Z' || p.ppid == me)
        .collect::<Vec<_>>();
    assert!(left.is_empty(), "{left:?}");
    assert_good_answers(&h.m).await;
    finish(h, spy, "parent", case, Some(pgid)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignore_sigterm_is_killed_after_the_grace() {
    let case = "ignore-sigterm";
    let grace = Duration::from_millis(300);
    let h = harness_with(fast_policy(), Some(grace)).await;
    let spy = Spy::start(case);
    h.m.start(hostile(
        "stubborn",
        "ignore-sigterm",
        case,
        timeouts(10.0, 5.0),
    ));
    let st = wait_status(&h.m, "stubborn", Duration::from_secs(10), "ready", |s| {
        s.state == ServerState::Ready
    })
    .await;
    let pgid = st.pid.unwrap();
    let r =
        h.m.call("stubborn.ping", json!({}), None, None)
            .await
            .unwrap();
    assert_eq!(text_of(&r), "pong");
    assert_good_answers(&h.m).await;

    let t = Instant::now();
    tokio::time::timeout(Duration::from_secs(10), h.m.shutdown())
        .await
        .expect("shutdown returns");
    let took = t.elapsed();
    // stdin closed → grace → SIGTERM (ignored) → grace → SIGKILL.
    assert!(
        took >= grace * 2 && took < Duration::from_secs(3),
        "shutdown took {took:?}"
    );
    let left = peers::wait_group_gone(pgid, Duration::from_secs(5));
    assert!(left.is_empty(), "{left:?}");
    // It really outlived stdin's end and SIGTERM.
    let log = h.m.logs("stubborn", usize::MAX).unwrap();
    assert!(
        log.contains("hostile: ignore-sigterm: stdin closed, running on"),
        "{log}"
    );
    finish(h, spy, "stubborn", case, Some(pgid)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notification_flood_leaves_the_host_responsive() {
    let case = "notification-flood";
    let h = harness().await;
    let spy = Spy::start(case);
    h.m.start(hostile(
        "chatty",
        "notification-flood",
        case,
        timeouts(10.0, 5.0),
    ));
    let st = wait_status(&h.m, "chatty", Duration::from_secs(10), "ready", |s| {
        s.state == ServerState::Ready
    })
    .await;
    // While the flood runs (it starts after notifications/initialized).
    let flooding =
        !h.m.logs("chatty", usize::MAX)
            .unwrap()
            .contains("notification-flood: sent");
    let t = Instant::now();
    assert_good_answers(&h.m).await;
    let good_took = t.elapsed();
    let t = Instant::now();
    let r = tokio::time::timeout(
        Duration::from_secs(5),
        h.m.call("chatty.ping", json!({}), None, None),
    )
    .await
    .expect("ping answers within 5 s during the flood")
    .unwrap();
    assert_eq!(text_of(&r), "pong");
    let ping_took = t.elapsed();
    eprintln!(
        "during the flood (still flooding: {flooding}): good.lookup {good_took:?}, chatty.ping {ping_took:?}"
    );
    wait_log(
        &h.m,
        "chatty",
        Duration::from_secs(60),
        "end of the flood",
        |l| l.contains("hostile: notification-flood: sent 100000 notifications"),
    )
    .await;
    let r =
        h.m.call("chatty.ping", json!({}), None, None)
            .await
            .unwrap();
    assert_eq!(text_of(&r), "pong");
    let now = h.m.status("chatty").unwrap();
    assert_eq!(
        (now.state, now.restarts, now.pid),
        (ServerState::Ready, 0, st.pid)
    );
    assert_good_answers(&h.m).await;
    finish(h, spy, "chatty", case, st.pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_ids_give_one_result_per_call() {
    let case = "duplicate-ids";
    let h = harness().await;
    let spy = Spy::start(case);
    h.m.start(hostile("twice", "duplicate-ids", case, timeouts(10.0, 5.0)));
    let st = wait_status(&h.m, "twice", Duration::from_secs(10), "ready", |s| {
        s.state == ServerState::Ready
    })
    .await;
    for _ in 0..3 {
        let r = h.m.call("twice.ping", json!({}), None, None).await.unwrap();
        assert_eq!(text_of(&r), "pong");
        assert_eq!(r.content.len(), 1, "{r:?}");
    }
    // Concurrent calls each get their own single answer.
    let calls: Vec<_> = (0..5)
        .map(|_| {
            let m = h.m.clone();
            tokio::spawn(async move { m.call("twice.ping", json!({}), None, None).await })
        })
        .collect();
    for c in calls {
        let r = c.await.expect("no panic").unwrap();
        assert_eq!(text_of(&r), "pong");
    }
    let now = h.m.status("twice").unwrap();
    assert_eq!(
        (now.state, now.restarts, now.pid),
        (ServerState::Ready, 0, st.pid)
    );
    assert_good_answers(&h.m).await;
    finish(h, spy, "twice", case, st.pid).await;
}

/// A server that asks the host for sampling and its roots during a call,
/// which the host never offered: both are refused with a message saying
/// so (not an empty answer the server could act on), and the call and the
/// server go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_the_host_never_offered_are_refused_clearly() {
    let case = "asks-client";
    let h = harness().await;
    let spy = Spy::start(case);
    h.m.start(hostile("asker", "asks-client", case, timeouts(10.0, 15.0)));
    let st = wait_status(&h.m, "asker", Duration::from_secs(10), "ready", |s| {
        s.state == ServerState::Ready
    })
    .await;
    let r = h.m.call("asker.ask", json!({}), None, None).await.unwrap();
    let answers: serde_json::Value =
        serde_json::from_str(&text_of(&r)).unwrap_or_else(|e| panic!("{e}: {r:?}"));
    for (id, says) in [
        (
            "ask-sampling",
            "skillhost offers no sampling to MCP server `asker`",
        ),
        (
            "ask-roots",
            "skillhost shares no roots with MCP server `asker`",
        ),
    ] {
        let error = &answers[id]["error"];
        assert_eq!(error["code"], -32601, "{id}: {answers}");
        assert!(
            error["message"].as_str().is_some_and(|m| m.contains(says)),
            "{id}: {answers}"
        );
        assert!(
            error["message"]
                .as_str()
                .is_some_and(|m| m.contains("skillhost mcp allow asker")),
            "{id}: {answers}"
        );
        assert!(answers[id].get("result").is_none(), "{id}: {answers}");
    }
    assert_eq!(h.m.status("asker").unwrap().state, ServerState::Ready);
    assert_good_answers(&h.m).await;
    finish(h, spy, "asker", case, st.pid).await;
}

// --- restarts and policy ---------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_backoff_grows_exponentially_then_fails_and_enable_resets() {
    let case = "exit-at-start-backoff";
    let policy = RestartPolicy {
        max_restarts: 5,
        window: Duration::from_secs(60),
        base_delay: Duration::from_millis(200),
        max_delay: Duration::from_secs(30),
    };
    let h = harness_with(policy.clone(), None).await;
    let spy = Spy::start(case);
    let config = hostile("flappy", "exit-at-start", case, timeouts(5.0, 5.0));
    h.m.start(config.clone());

    // Record each change to `starting`, polling every 5 ms.
    let mut starts: Vec<Instant> = Vec::new();
    let mut last = ServerState::Disabled;
    let deadline = Instant::now() + Duration::from_secs(30);
    let st = loop {
        let st = h.m.status("flappy").unwrap();
        if st.state != last {
            if st.state == ServerState::Starting {
                starts.push(Instant::now());
            }
            last = st.state;
        }
        if st.state == ServerState::Failed {
            break st;
        }
        assert!(Instant::now() < deadline, "not failed: {st:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert_eq!(starts.len(), 6, "max_restarts + 1 attempts");
    assert_eq!(st.restarts, 5, "{st:?}");
    let err = st.last_error.clone().unwrap();
    assert!(err.contains("gave up after 6 failures in 60 s"), "{err}");
    assert!(err.contains("exited with code 3"), "{err}");
    let gaps: Vec<Duration> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    eprintln!("gaps between starts: {gaps:?}");
    for (i, gap) in gaps.iter().enumerate() {
        let delay = policy.delay(i as u32 + 1);
        // The gap is the failed attempt plus the jittered delay (±25 %);
        // 10 ms for the polling on both ends.
        assert!(
            *gap + Duration::from_millis(10) >= delay.mul_f64(0.75),
            "gap {i} {gap:?} < 0.75 × {delay:?} (all gaps {gaps:?})"
        );
        assert!(
            *gap <= delay.mul_f64(1.25) + Duration::from_secs(2),
            "gap {i} {gap:?} ≫ {delay:?} (all gaps {gaps:?})"
        );
    }
    // Roughly exponential: from the first gap to the last the delay grows
    // by 3 s (0.2 s to 3.2 s, each ±25 %). Each gap also holds the failed
    // attempt's own start, some hundreds of milliseconds on a loaded
    // machine, so growth is compared, not a ratio: a constant delay would
    // grow by nothing, a linear one (0.2 s a step) by 0.8 s.
    let growth = gaps[4].saturating_sub(gaps[0]);
    let least = policy.delay(5).mul_f64(0.75) - policy.delay(1).mul_f64(1.25);
    assert!(
        growth + Duration::from_millis(500) >= least,
        "the gaps grew by {growth:?}, less than {least:?} (all gaps {gaps:?})"
    );

    // Enabling it again starts over.
    h.m.start(config);
    let again = wait_status(
        &h.m,
        "flappy",
        Duration::from_secs(5),
        "starting afresh",
        |s| s.state == ServerState::Starting && s.restarts == 0 && s.last_error.is_none(),
    )
    .await;
    assert_eq!(again.restarts, 0);
    assert_good_answers(&h.m).await;
    finish(h, spy, "flappy", case, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_off_the_allowlist_never_starts() {
    let case = "policy-bash";
    let h = harness().await;
    let spy = Spy::start(case);
    let mut s = ServerConfig::stdio("shell", "bash", ["-c", "echo skillhost-policy-probe"]);
    s.env.insert(CASE_ENV.into(), Secret::new(tag_value(case)));
    s.timeouts = timeouts(2.0, 2.0);
    h.m.start(s);
    let mut ever_ready_or_pid = false;
    let deadline = Instant::now() + Duration::from_secs(10);
    let st = loop {
        let st = h.m.status("shell").unwrap();
        ever_ready_or_pid |= st.state == ServerState::Ready || st.pid.is_some();
        if st.state == ServerState::Failed {
            break st;
        }
        assert!(Instant::now() < deadline, "not failed: {st:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert!(!ever_ready_or_pid);
    let err = st.last_error.clone().unwrap();
    assert!(
        err.contains("stdio command \"bash\" is not on the allowlist"),
        "{err}"
    );
    // No process was started: no start marker, no tagged child.
    assert!(started_groups(&h, "shell").is_empty());
    assert!(
        !h.m.logs("shell", usize::MAX)
            .unwrap()
            .contains("--- skillhost: started")
    );
    assert_good_answers(&h.m).await;
    h.m.shutdown().await;
    let groups = spy.finish();
    assert!(groups.is_empty(), "a process was started: {groups:?}");
    assert_groups_gone(&groups, case);
}
