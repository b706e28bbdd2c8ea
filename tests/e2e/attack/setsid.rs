//! Finding C: a server's grandchild that calls `setsid()` escaped the
//! process-group kill and outlived the server and the host.
//!
//! The hostile server (`hostile_server.py setsid-grandchild`) starts a child
//! that calls `setsid()` and a daemon (double fork, `setsid()`, orphaned at
//! once), both ignoring SIGTERM and neither in the server's process group.
//! Both must be gone — not running, and not left as a zombie of this
//! process — after the server is stopped, after the host shuts down, and
//! after the host is killed with SIGKILL.
//!
//! A guard SIGKILLs what the server started if an assertion fails first,
//! so a failing run leaves nothing behind.

use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use skillhost_e2e::peers::{self, GroupGuard};
use skillhost_mcp::{ManagerOptions, McpManager, ServerConfig, ServerState, Timeouts};

/// The server's name; its stderr log is `mcp/<NAME>/stderr.log`.
const NAME: &str = "escaper";

/// How long the stop sequence waits after stdin closes and after SIGTERM.
const GRACE: Duration = Duration::from_millis(300);

/// How long anything in these tests may take to happen.
const LIMIT: Duration = Duration::from_secs(20);

fn hostile() -> ServerConfig {
    let (prog, args) = peers::hostile_cmd("setsid-grandchild");
    let mut s = ServerConfig::stdio(NAME, prog.to_str().expect("UTF-8 path"), args);
    s.timeouts = Timeouts {
        connect_secs: Some(10.0),
        read_only_secs: Some(5.0),
        mutating_secs: Some(5.0),
    };
    s
}

fn stat(pid: i32) -> Option<peers::ProcStat> {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|t| peers::parse_proc_stat(&t))
}

/// The processes the hostile server reported, by their log lines.
#[derive(Debug, Clone, Copy)]
struct Escapees {
    grandchild: i32,
    daemon: i32,
}

impl Escapees {
    /// Parses `grandchild <pid>` and `daemon <pid>` from a stderr log.
    fn parse(log: &str) -> Option<Escapees> {
        let find = |prefix: &str| {
            log.lines()
                .find_map(|l| l.strip_prefix(prefix))
                .and_then(|p| p.trim().parse().ok())
        };
        Some(Escapees {
            grandchild: find("grandchild ")?,
            daemon: find("daemon ")?,
        })
    }

    /// Waits for both lines in the log file of the data dir at `root`.
    fn from_log_file(root: &Path) -> Escapees {
        let path = root.join("mcp").join(NAME).join("stderr.log");
        let deadline = Instant::now() + LIMIT;
        loop {
            if let Some(e) = std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| Escapees::parse(&t))
            {
                return e;
            }
            assert!(Instant::now() < deadline, "no escapee lines in {path:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn both(self) -> [(&'static str, i32); 2] {
        [
            ("the setsid grandchild", self.grandchild),
            ("the daemon", self.daemon),
        ]
    }

    /// The attack is real: both run, outside the server's process group
    /// (each in a session of its own).
    fn assert_escaped(self, server_pgid: i32) {
        for (what, pid) in self.both() {
            let p = stat(pid).unwrap_or_else(|| panic!("{what} ({pid}) runs"));
            assert!(!matches!(p.state, 'Z' | 'X'), "{what}: {p:?}");
            assert_ne!(p.pgrp, server_pgid, "{what} left the server's group");
        }
    }

    /// Both are gone: not running, and not a zombie of this process (a
    /// zombie another process must reap is not ours to judge).
    fn assert_gone(self, when: &str) {
        let me = std::process::id() as i32;
        for (what, pid) in self.both() {
            let deadline = Instant::now() + LIMIT;
            loop {
                match stat(pid) {
                    None => break,
                    Some(p) if p.state == 'Z' && p.ppid != me => break,
                    Some(p) => assert!(
                        Instant::now() < deadline,
                        "{when}: {what} ({pid}) is left: {p:?}"
                    ),
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// SIGKILLs the escapees when dropped, if they still run (a failed
/// assertion), so no test leaves them behind.
struct Cleanup(Option<Escapees>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let Some(e) = self.0 else { return };
        for (_, pid) in e.both() {
            let ours = std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.contains("python"));
            if ours && stat(pid).is_some_and(|p| p.state != 'Z') {
                // SAFETY: kill(2) only sends a signal, to a process this
                // test's server started.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
    }
}

/// Waits until the manager has `NAME` ready; returns its pid (= group).
async fn ready(m: &McpManager) -> i32 {
    let st = m.wait_settled(NAME, LIMIT).await.expect("registered");
    assert_eq!(st.state, ServerState::Ready, "{st:?}");
    st.pid.expect("a stdio server has a pid")
}

/// Stopping the server stops what it started outside its group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setsid_escapees_die_when_the_server_is_stopped() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut opts = ManagerOptions::new(tmp.path().to_path_buf());
    opts.stop_grace = GRACE;
    let m = McpManager::new(opts);
    m.start(hostile());
    let pgid = ready(&m).await;
    let _group = GroupGuard::for_pgid(pgid);
    let e = Escapees::from_log_file(tmp.path());
    let _cleanup = Cleanup(Some(e));
    e.assert_escaped(pgid);
    let r = m
        .call(&format!("{NAME}.ping"), json!({}), None, None)
        .await
        .expect("ping");
    assert_eq!(skillhost_mcp::text_content(&r), "pong");

    m.stop(NAME).await;
    e.assert_gone("after the server was stopped");
    assert!(peers::group_members(pgid).is_empty());
    m.shutdown().await;
}

/// A host shutting down (what `skillhost serve` and every CLI command do
/// at the end) stops what its servers started outside their groups.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setsid_escapees_die_when_the_host_shuts_down() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let data = tmp.path().join("data");
    write_config(&data);
    let host = skillhost::HostBuilder::new(&data)
        .connect_mcp(true)
        .build()
        .await
        .expect("host");
    let pgid = ready(host.mcp()).await;
    let _group = GroupGuard::for_pgid(pgid);
    let e = Escapees::from_log_file(&data);
    let _cleanup = Cleanup(Some(e));
    e.assert_escaped(pgid);

    host.shutdown().await;
    e.assert_gone("after the host shut down");
    assert!(peers::group_members(pgid).is_empty());
}

/// A host killed with SIGKILL cannot stop anything itself: its watchdog
/// in each server's group does.
#[test]
fn setsid_escapees_die_when_the_host_is_killed() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let data = tmp.path().join("data");
    write_config(&data);
    let mut host = Command::new(env!("CARGO_BIN_EXE_attack_host"))
        .arg(&data)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start attack_host");
    let mut stdout = std::io::BufReader::new(host.stdout.take().expect("stdout"));
    let mut line = String::new();
    let read = stdout.read_line(&mut line);
    let e = Escapees::from_log_file(&data);
    let _cleanup = Cleanup(Some(e));
    assert!(
        read.is_ok() && line.trim() == "ready",
        "attack_host did not get ready: {line:?}"
    );
    let pgid = stat(e.grandchild)
        .map(|g| g.ppid)
        .expect("the grandchild's parent is the server");
    let _group = GroupGuard::for_pgid(pgid);
    e.assert_escaped(pgid);

    host.kill().expect("SIGKILL the host");
    host.wait().expect("reap the host");
    // The watchdog kills them: none may run on.
    let deadline = Instant::now() + LIMIT;
    for (what, pid) in e.both() {
        while let Some(p) = stat(pid).filter(|p| !matches!(p.state, 'Z' | 'X')) {
            assert!(
                Instant::now() < deadline,
                "after the host was killed: {what} ({pid}) runs on: {p:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // Orphans of the dead host go to the nearest subreaper: this test
    // process when another test here made it one. Reap what comes to it
    // (the server, then the grandchild the server's zombie held).
    let me = std::process::id() as i32;
    let deadline = Instant::now() + LIMIT;
    loop {
        let left: Vec<peers::ProcStat> = [pgid, e.grandchild, e.daemon]
            .into_iter()
            .filter_map(stat)
            .collect();
        for p in left.iter().filter(|p| p.state == 'Z' && p.ppid == me) {
            // SAFETY: waitpid on a zombie child of this process.
            unsafe {
                libc::waitpid(p.pid, std::ptr::null_mut(), libc::WNOHANG);
            }
        }
        let held = left
            .iter()
            .any(|p| p.ppid == me || [pgid, e.grandchild, e.daemon].contains(&p.ppid));
        if !held || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    e.assert_gone("after the host was killed");
    assert!(peers::wait_group_gone(pgid, LIMIT).is_empty());
}

/// `mcp_servers.json` in `data` with the hostile server enabled.
fn write_config(data: &Path) {
    std::fs::create_dir_all(data).expect("data dir");
    let s = hostile();
    let config = json!({"servers": [{
        "name": s.name,
        "transport": "stdio",
        "command": s.command,
        "args": s.args,
        "timeouts": {"connect_secs": 10.0},
    }]});
    std::fs::write(data.join("mcp_servers.json"), config.to_string()).expect("write config");
}
