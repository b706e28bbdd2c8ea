//! The real MCP peers the end-to-end tests run against, and the process
//! plumbing around them.
//!
//! The peers live in `tests/peers/` and are installed into `target/peers/`
//! by `tests/peers/install.sh` (which `.ci/run` calls before the tests):
//!
//! - `py_server.py`: a server built with the official Python MCP SDK
//!   ([`py_server_cmd`]);
//! - `hostile_server.py MODE`: a raw JSON-RPC server that misbehaves in one
//!   way per mode ([`hostile_cmd`]);
//! - `slow_server.py`: a Python SDK server slow to start, as `npx -y` is on
//!   a cold cache ([`slow_server_cmd`]);
//! - `@modelcontextprotocol/server-everything` ([`server_everything_cmd`]);
//! - the `@modelcontextprotocol/conformance` CLI ([`conformance_cmd`]).
//!
//! Each `*_cmd` helper returns the program and its arguments, ready for
//! `std::process::Command` or `tokio::process::Command`. Paths are
//! absolute, so the child's working directory does not matter.
//!
//! Children are meant to be spawned in their own process group
//! ([`spawn_in_own_group`] or `CommandExt::process_group(0)`), killed as a
//! group ([`kill_group`], [`GroupGuard`]), and checked with
//! [`group_members`] to have left nothing behind.

use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The message every helper panics with when a peer is not installed.
const INSTALL_HINT: &str = "run `tests/peers/install.sh` (from the repository root) to install \
     the MCP test peers into target/peers/";

/// The repository root (the workspace directory holding `tests/`).
pub fn repo_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = manifest_dir
        .parent()
        .expect("the tests crate lives one level below the repository root");
    root.canonicalize().unwrap_or_else(|_| root.to_path_buf())
}

/// `target/peers/` under the repository root, where `install.sh` puts the
/// peers.
pub fn peers_dir() -> PathBuf {
    repo_root().join("target").join("peers")
}

/// `tests/peers/` under the repository root: the peers' sources.
pub fn peers_src_dir() -> PathBuf {
    repo_root().join("tests").join("peers")
}

/// Whether `python` runs and can import the MCP SDK's high-level server.
fn python_has_sdk(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "import mcp.server.mcpserver"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The Python interpreter that has the official MCP SDK: the one named by
/// the environment variable `SKILLHOST_TEST_PYTHON` if it can import the
/// SDK, else `target/peers/venv/bin/python`.
///
/// # Panics
///
/// When neither can import the SDK, with a message saying to run
/// `tests/peers/install.sh`.
pub fn peers_python() -> PathBuf {
    match find_peers_python() {
        Ok(p) => p.clone(),
        Err(msg) => panic!("{msg}"),
    }
}

/// [`peers_python`]'s search, done once per test process.
fn find_peers_python() -> &'static Result<PathBuf, String> {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let mut tried = Vec::new();
        if let Some(p) = std::env::var_os("SKILLHOST_TEST_PYTHON") {
            let p = PathBuf::from(p);
            if python_has_sdk(&p) {
                return Ok(p);
            }
            tried.push(format!("SKILLHOST_TEST_PYTHON={}", p.display()));
        }
        let venv = peers_dir().join("venv").join("bin").join("python");
        if python_has_sdk(&venv) {
            return Ok(venv);
        }
        tried.push(venv.display().to_string());
        Err(format!(
            "no Python with the MCP SDK (tried {}): {INSTALL_HINT}",
            tried.join(", ")
        ))
    })
}

/// A Python interpreter for peers that need no SDK (`hostile_server.py`):
/// [`peers_python`] when it is available, else `python3` from `PATH`.
pub fn plain_python() -> PathBuf {
    match find_peers_python() {
        Ok(p) => p.clone(),
        Err(_) => PathBuf::from("python3"),
    }
}

/// Where `install.sh` puts node 22 (whether or not it is there).
fn node22_path() -> PathBuf {
    peers_dir()
        .join("node")
        .join("node_modules")
        .join("node")
        .join("bin")
        .join("node")
}

/// The node 22 binary installed from the npm package `node@22`:
/// `target/peers/node/node_modules/node/bin/node`.
///
/// # Panics
///
/// When it is not installed, with a message saying to run
/// `tests/peers/install.sh`.
pub fn node22() -> PathBuf {
    let node = node22_path();
    assert!(
        node.is_file(),
        "node 22 is not installed at {}: {INSTALL_HINT}",
        node.display()
    );
    node
}

/// The installed npm package `name` (under `target/peers/node/node_modules`),
/// or a panic saying to run `install.sh`.
fn npm_package_file(name: &str, file: &str) -> PathBuf {
    let path = peers_dir()
        .join("node")
        .join("node_modules")
        .join(name)
        .join(file);
    assert!(
        path.is_file(),
        "{name} is not installed ({} is missing): {INSTALL_HINT}",
        path.display()
    );
    path
}

/// The program and arguments that run `@modelcontextprotocol/server-everything`
/// over stdio: node 22 when installed, else `node` from `PATH`, on the
/// package's `dist/index.js` with the argument `stdio`.
///
/// For streamable HTTP, replace the last argument with `streamableHttp`
/// and set the environment variable `PORT` (default 3001; it listens on
/// all interfaces and serves `/mcp`); `sse` serves `GET /sse` and
/// `POST /message` the same way.
///
/// # Panics
///
/// When the package is not installed.
pub fn server_everything_cmd() -> (PathBuf, Vec<String>) {
    let script = npm_package_file("@modelcontextprotocol/server-everything", "dist/index.js");
    let node = node22_path();
    let node = if node.is_file() {
        node
    } else {
        PathBuf::from("node")
    };
    (node, vec![path_arg(&script), "stdio".to_owned()])
}

/// The program and arguments that run the `@modelcontextprotocol/conformance`
/// CLI with node 22; append the subcommand, e.g.
/// `client --command "<client command>" --scenario initialize`.
///
/// The CLI appends the mock server's URL as the client command's last
/// argument and passes the scenario in `MCP_CONFORMANCE_SCENARIO` and the
/// protocol version in `MCP_CONFORMANCE_PROTOCOL_VERSION` (see
/// `tests/peers/README.md`).
///
/// # Panics
///
/// When node 22 or the package is not installed.
pub fn conformance_cmd() -> (PathBuf, Vec<String>) {
    let script = npm_package_file("@modelcontextprotocol/conformance", "dist/index.js");
    (node22(), vec![path_arg(&script)])
}

/// The program and arguments that run `tests/peers/py_server.py` over
/// `transport` (`stdio`, `streamable-http` or `sse`); the HTTP transports
/// listen on `127.0.0.1:port` (the server's default port is 8000). Add
/// `--many-tools N` to the arguments for N extra tools.
///
/// # Panics
///
/// When no Python with the MCP SDK is found (see [`peers_python`]).
pub fn py_server_cmd(transport: &str, port: Option<u16>) -> (PathBuf, Vec<String>) {
    let script = peers_src_dir().join("py_server.py");
    let mut args = vec![
        path_arg(&script),
        "--transport".to_owned(),
        transport.to_owned(),
    ];
    if let Some(port) = port {
        args.push("--port".to_owned());
        args.push(port.to_string());
    }
    (peers_python(), args)
}

/// Which handshake `slow_server.py` speaks (its `--era`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlowEra {
    /// The SDK as it is: `server/discover` opens the 2026-07-28 era.
    Modern,
    /// A server from before 2026-07-28: over stdio `server/discover` gets
    /// -32601; over streamable HTTP, HTTP 400 with -32000 (no session).
    Legacy,
    /// A legacy server that never answers `server/discover` (stdio only).
    LegacySilent,
}

impl SlowEra {
    fn arg(self) -> &'static str {
        match self {
            SlowEra::Modern => "modern",
            SlowEra::Legacy => "legacy",
            SlowEra::LegacySilent => "legacy-silent",
        }
    }
}

/// The program and arguments that run `tests/peers/slow_server.py`, a
/// Python SDK server that answers nothing for `delay_secs` after it starts
/// (as `npx -y` does while it fetches a package) and then speaks the
/// handshake of `era`; over stdio, or over streamable HTTP on
/// `127.0.0.1:port` when `port` is given (not `SlowEra::LegacySilent`).
///
/// # Panics
///
/// When no Python with the MCP SDK is found (see [`peers_python`]).
pub fn slow_server_cmd(delay_secs: f64, era: SlowEra, port: Option<u16>) -> (PathBuf, Vec<String>) {
    let script = peers_src_dir().join("slow_server.py");
    let mut args = vec![
        path_arg(&script),
        "--delay".to_owned(),
        delay_secs.to_string(),
        "--era".to_owned(),
        era.arg().to_owned(),
    ];
    if let Some(port) = port {
        args.extend([
            "--transport".to_owned(),
            "streamable-http".to_owned(),
            "--port".to_owned(),
            port.to_string(),
        ]);
    }
    (peers_python(), args)
}

/// The program and arguments that run `tests/peers/hostile_server.py MODE`
/// (modes in `tests/peers/README.md`), with [`plain_python`].
pub fn hostile_cmd(mode: &str) -> (PathBuf, Vec<String>) {
    let script = peers_src_dir().join("hostile_server.py");
    (plain_python(), vec![path_arg(&script), mode.to_owned()])
}

fn path_arg(path: &Path) -> String {
    path.to_str()
        .unwrap_or_else(|| panic!("non-UTF-8 path {}", path.display()))
        .to_owned()
}

/// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0,
/// then released). Another process may take it before the caller does;
/// tests that lose that race fail loudly in [`wait_for_port`].
pub fn free_loopback_port() -> u16 {
    let listener =
        TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local address").port()
}

/// Waits until something accepts TCP connections on `127.0.0.1:port`,
/// trying every 50 ms.
///
/// # Panics
///
/// When nothing does within `timeout`.
pub fn wait_for_port(port: u16, timeout: Duration) {
    let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port).into();
    let deadline = Instant::now() + timeout;
    loop {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "nothing listens on 127.0.0.1:{port} after {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One process as read from `/proc/PID/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// Process id.
    pub pid: i32,
    /// State letter (`R`, `S`, `D`, `Z` for a zombie, `X` dead, ...).
    pub state: char,
    /// Parent process id.
    pub ppid: i32,
    /// Process group id.
    pub pgrp: i32,
}

/// Parses the text of `/proc/PID/stat`. The second field, the command
/// name, is in parentheses and may itself contain spaces and parentheses,
/// so the fields after it are read from the text after the *last* `)`.
pub fn parse_proc_stat(text: &str) -> Option<ProcStat> {
    let (head, tail) = text.rsplit_once(')')?;
    let (pid, _comm) = head.split_once(" (")?;
    let mut fields = tail.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some(ProcStat {
        pid: pid.trim().parse().ok()?,
        state,
        ppid,
        pgrp,
    })
}

/// Every process whose stat is readable now, from `/proc/*/stat`
/// (processes that exit during the scan are skipped).
pub fn all_processes() -> Vec<ProcStat> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|entry| {
        let entry = entry.ok()?;
        let name = entry.file_name();
        let name = name.to_str()?;
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let text = std::fs::read_to_string(entry.path().join("stat")).ok()?;
        parse_proc_stat(&text)
    })
    .collect()
}

/// The pids of the live processes in process group `pgid`: zombies (state
/// `Z`) and dead entries (`X`) are left out, since a zombie whose parent
/// does not reap it (an orphan under a PID 1 that never waits) runs
/// nothing. See [`group_members_including_zombies`].
///
/// A multi-threaded process whose main thread has exited shows state `Z`
/// while its other threads still run and still hold its descriptors (a
/// pipe written to it then takes the bytes): it counts as live until its
/// last thread is gone.
pub fn group_members(pgid: i32) -> Vec<i32> {
    all_processes()
        .into_iter()
        .filter(|p| p.pgrp == pgid && (!is_dead(p.state) || has_live_threads(p.pid)))
        .map(|p| p.pid)
        .collect()
}

fn is_dead(state: char) -> bool {
    state == 'Z' || state == 'X'
}

/// Whether some thread of process `pid` other than a dead main thread is
/// still running (from `/proc/PID/task/*/stat`).
fn has_live_threads(pid: i32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|task| {
        std::fs::read_to_string(task.path().join("stat"))
            .ok()
            .and_then(|text| parse_proc_stat(&text))
            .is_some_and(|t| !is_dead(t.state))
    })
}

/// The pids of every process in process group `pgid`, zombies included.
pub fn group_members_including_zombies(pgid: i32) -> Vec<i32> {
    all_processes()
        .into_iter()
        .filter(|p| p.pgrp == pgid)
        .map(|p| p.pid)
        .collect()
}

/// Sends SIGKILL to every process in process group `pgid` (`kill(-pgid)`).
/// A group that is already gone is not an error.
///
/// # Panics
///
/// When `pgid` is not positive (which would signal this process's own
/// group, or every process).
pub fn kill_group(pgid: i32) {
    assert!(pgid > 1, "refusing to signal process group {pgid}");
    // SAFETY: kill(2) with a negative pid only sends a signal.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

/// Waits, at most `timeout`, until process group `pgid` has no live member
/// ([`group_members`]); returns the members left at the end (empty when
/// the group is gone).
pub fn wait_group_gone(pgid: i32, timeout: Duration) -> Vec<i32> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = group_members(pgid);
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Spawns `cmd` as the leader of a new process group, so the child's pid is
/// its process group id and [`kill_group`] reaches it and everything it
/// starts (unless they move to another group).
pub fn spawn_in_own_group(cmd: &mut Command) -> std::io::Result<Child> {
    cmd.process_group(0).spawn()
}

/// Kills a process group when dropped: SIGKILL to the whole group, then
/// reaps the leader if it is held here. Keep one beside every child a test
/// starts, so a failing assertion leaves no process behind.
#[derive(Debug)]
pub struct GroupGuard {
    pgid: i32,
    child: Option<Child>,
    killed: bool,
}

impl GroupGuard {
    /// Guards the group led by `child` (spawned with `process_group(0)`),
    /// taking ownership of it so it is reaped on drop.
    pub fn new(child: Child) -> Self {
        let pgid = i32::try_from(child.id()).expect("pid fits in i32");
        Self {
            pgid,
            child: Some(child),
            killed: false,
        }
    }

    /// Guards process group `pgid` whose leader is reaped elsewhere (e.g. a
    /// `tokio::process::Child`).
    pub fn for_pgid(pgid: i32) -> Self {
        Self {
            pgid,
            child: None,
            killed: false,
        }
    }

    /// The guarded process group id (the leader's pid).
    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    /// The guarded leader, when it is held here.
    pub fn child(&mut self) -> Option<&mut Child> {
        self.child.as_mut()
    }

    /// Kills the group now and reaps the leader; returns the live members
    /// still there after waiting up to 5 s for them to go (empty when all
    /// are gone).
    pub fn kill(&mut self) -> Vec<i32> {
        kill_group(self.pgid);
        self.killed = true;
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
        wait_group_gone(self.pgid, Duration::from_secs(5))
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if !self.killed {
            kill_group(self.pgid);
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_parens_and_spaces_in_comm() {
        let text = "4242 (a (weird) ) name) S 1 4200 4200 0 -1 4194560 0 0";
        assert_eq!(
            parse_proc_stat(text),
            Some(ProcStat {
                pid: 4242,
                state: 'S',
                ppid: 1,
                pgrp: 4200
            })
        );
        assert_eq!(
            parse_proc_stat("17 (x) Z 3 17 17 0").map(|p| p.state),
            Some('Z')
        );
        assert_eq!(parse_proc_stat("garbage"), None);
    }

    #[test]
    fn finds_this_process_in_its_group() {
        let me = std::process::id() as i32;
        let pgid = unsafe { libc::getpgid(0) };
        assert!(group_members(pgid).contains(&me));
        assert!(group_members_including_zombies(pgid).contains(&me));
    }
}
