//! One stdio server process: spawned in its own process group, tagged,
//! watched by a lifeline, stopped in order with everything it started,
//! reaped.
//!
//! - **Own process group.** The child is its group's leader (its pid is the
//!   group id), so the stop sequence reaches every process it started that
//!   stayed in the group, including grandchildren that ignore `SIGTERM`.
//! - **Tag.** The child's environment carries [`SERVER_TAG_ENV`] with a
//!   random value of its own, which every process it starts inherits. A
//!   process that leaves the group on purpose (`setsid`, `setpgid`, a
//!   double-forked daemon) still carries it, so the stop sequence finds it
//!   in `/proc` and stops it with the group. Signals to such a process go
//!   through a pidfd after its tag is checked, so a recycled pid is never
//!   signalled.
//! - **Subreaper.** The host makes itself a child subreaper (at the
//!   manager's start), so what a server orphans is re-parented to the host
//!   rather than to init, and the stop sequence reaps it: no zombie is left.
//! - **Lifeline.** Between fork and exec the child forks a tiny watchdog into
//!   the same group. The watchdog closes every descriptor but the read end of
//!   a pipe whose write end only the host holds, and blocks reading it. When
//!   the host exits for any reason — including `SIGKILL` — the pipe reaches
//!   end-of-file and the watchdog leaves the group, sends `SIGKILL` to the
//!   whole group, then to every process carrying the server's tag (a scan
//!   of `/proc` with raw system calls only: it runs in a fork of the host).
//!   (A parent-death signal would not do: it follows the spawning *thread*,
//!   and it reaches only the direct child.)
//! - **Stop** = close stdin, wait, `SIGTERM` to the group and the tagged
//!   strays, wait, `SIGKILL` to them; once the leader has exited, whatever
//!   it left behind gets `SIGTERM` (if it has not had one), the grace, then
//!   `SIGKILL`; then everything is reaped.
//! - **Environment.** Cleared; the child gets only the base below plus the
//!   variables its configuration names: `PATH` (the host's), `HOME` and
//!   `TMPDIR` (the server's own folder), `LANG=C.UTF-8`, and the tag.
//! - **stderr** is drained continuously by a thread into a
//!   [`StderrLog`](crate::StderrLog), so the child never blocks on a full pipe.
//!
//! What remains without cgroups: a process that replaces its environment
//! when it execs (`env -i`, `execve` with a new one) carries no tag, and
//! one that leaves the group that way escapes; a server can kill its own
//! watchdog (same user) before the host dies. A cgroup per server would
//! close both, but needs a writable cgroup v2 hierarchy, which a host
//! running as an ordinary user or in a container does not have.

use std::ffi::c_void;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::proc_table::{self, ProcEntry};
use crate::stderr_log::StderrLog;

/// What to run.
#[derive(Debug, Clone)]
pub(crate) struct SpawnSpec {
    pub command: String,
    pub args: Vec<String>,
    /// Configured variables (exposed values).
    pub env: Vec<(String, String)>,
    /// The server's folder: working directory, HOME and TMPDIR.
    pub cwd: PathBuf,
}

/// The environment variable that tags every process of one server: set by
/// the supervisor (after the configured variables, so an entry cannot
/// choose it) to 32 random hex digits per start. The stop sequence finds
/// the server's processes by it, wherever they moved.
///
/// ```
/// assert_eq!(skillhost_mcp::SERVER_TAG_ENV, "SKILLHOST_MCP_SERVER_TAG");
/// ```
pub const SERVER_TAG_ENV: &str = "SKILLHOST_MCP_SERVER_TAG";

/// How many times the watchdog sweeps `/proc` for tagged processes after
/// the host died: a tagged process may fork while a sweep runs, and a
/// sweep that finds none ends the loop; the bound ends a fork race.
const WATCHDOG_SWEEPS: usize = 16;

/// How long the stop sequence waits for the processes it `SIGKILL`ed to be
/// reaped before it gives up (they are then left to the host's exit).
const REAP_LIMIT: Duration = Duration::from_secs(5);

/// How often the stop sequence looks at the process table while it waits.
const POLL: Duration = Duration::from_millis(20);

/// A running server process.
#[derive(Debug)]
pub(crate) struct ServerProcess {
    child: Child,
    pid: i32,
    /// `SERVER_TAG_ENV=value`: the environment entry of its processes.
    tag: Vec<u8>,
    /// Tagged processes outside the group that the stop sequence signalled,
    /// to reap once they are zombies of the host.
    strays: Vec<i32>,
}

/// How a stop went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopStep {
    /// It exited after stdin closed.
    Stdin,
    /// It needed `SIGTERM`.
    Term,
    /// It needed `SIGKILL`.
    Kill,
    /// It had already exited.
    AlreadyExited,
}

static LIFELINE: OnceLock<Result<(OwnedFd, OwnedFd), String>> = OnceLock::new();

/// The read end of the lifeline pipe; the write end stays open in the host
/// for its whole life (both ends close-on-exec).
fn lifeline_read_fd() -> std::io::Result<RawFd> {
    let pair = LIFELINE.get_or_init(|| {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 writes two descriptors into `fds`.
        let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
        if r != 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
        // SAFETY: both descriptors were just created and are owned here.
        unsafe {
            use std::os::fd::FromRawFd;
            Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])))
        }
    });
    match pair {
        Ok((read, _write)) => Ok(read.as_raw_fd()),
        Err(e) => Err(std::io::Error::other(format!(
            "cannot create the lifeline pipe: {e}"
        ))),
    }
}

/// Makes the host a child subreaper (once), so that processes orphaned by a
/// server come back to the host to be reaped instead of lingering.
pub(crate) fn become_subreaper() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes an integer flag.
        unsafe {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong);
        }
    });
}

impl ServerProcess {
    /// Spawns the server with piped stdin/stdout/stderr; stderr goes to
    /// `log`.
    pub fn spawn(
        spec: &SpawnSpec,
        log: Arc<StderrLog>,
    ) -> std::io::Result<(ServerProcess, ChildStdin, ChildStdout)> {
        become_subreaper();
        let lifeline = lifeline_read_fd()?;
        let tag_value = format!("{:032x}", rand::random::<u128>());
        let tag = format!("{SERVER_TAG_ENV}={tag_value}").into_bytes();
        // What the watchdog looks for in `/proc/PID/environ`: the entry and
        // the NUL that ends it.
        let mut sweep_needle = tag.clone();
        sweep_needle.push(0);
        let mut cmd = tokio::process::Command::new(&spec.command);
        cmd.args(&spec.args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &spec.cwd)
            .env("TMPDIR", &spec.cwd)
            .env("LANG", "C.UTF-8")
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .env(SERVER_TAG_ENV, &tag_value)
            .current_dir(&spec.cwd)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .kill_on_drop(false);
        // SAFETY: the closure runs in the forked child before exec and only
        // makes async-signal-safe calls (fork, dup2, close_range, signal,
        // read, getpgrp, setpgid, kill, open, getdents64, close, _exit);
        // `sweep_needle` was allocated before the fork and is only read.
        unsafe {
            cmd.pre_exec(move || {
                let pid = libc::fork();
                if pid < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if pid == 0 {
                    watchdog(lifeline, &sweep_needle);
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn()?;
        let pid = child.id().map(|p| p as i32).unwrap_or(-1);
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(std::io::Error::other("the child's pipes were not created"));
        };
        let stderr = stderr.into_owned_fd()?;
        log.drain_from(std::fs::File::from(stderr));
        Ok((
            ServerProcess {
                child,
                pid,
                tag,
                strays: Vec::new(),
            },
            stdin,
            stdout,
        ))
    }

    /// The pid, which is also the process group id.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The exit status if it has exited.
    pub fn try_exit(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits for it to exit.
    pub async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.child.wait().await
    }

    /// The stop sequence. `stdin` must already be closed by the caller (the
    /// transport owns it). Always ends with the group and the tagged
    /// processes killed and reaped.
    pub async fn stop(&mut self, grace: Duration) -> StopStep {
        let step = if self.try_exit().is_some() {
            StopStep::AlreadyExited
        } else if tokio::time::timeout(grace, self.child.wait()).await.is_ok() {
            StopStep::Stdin
        } else {
            self.signal_all(libc::SIGTERM);
            if tokio::time::timeout(grace, self.child.wait()).await.is_ok() {
                StopStep::Term
            } else {
                self.signal_all(libc::SIGKILL);
                let _ = tokio::time::timeout(REAP_LIMIT, self.child.wait()).await;
                StopStep::Kill
            }
        };
        // The leader is gone. What it started, in its group or not, gets
        // SIGTERM (unless it had one with the leader), the grace, SIGKILL.
        if step != StopStep::Kill && self.left_behind() {
            if step != StopStep::Term {
                self.signal_all(libc::SIGTERM);
            }
            let deadline = Instant::now() + grace;
            while Instant::now() < deadline && self.left_behind() {
                tokio::time::sleep(POLL).await;
            }
        }
        // The watchdog and anything left.
        self.signal_all(libc::SIGKILL);
        self.reap(REAP_LIMIT).await;
        step
    }

    /// Whether a process the server started still runs: a member of its
    /// group that carries its tag (the watchdog, a fork of the host, does
    /// not), or a stray signalled before.
    fn left_behind(&self) -> bool {
        let alive = |p: &ProcEntry| !matches!(p.state, 'Z' | 'X');
        proc_table::group_members(self.pid)
            .iter()
            .any(|p| alive(p) && proc_table::environ_has(p.pid, &self.tag))
            || self
                .strays
                .iter()
                .any(|&pid| proc_table::stat(pid).is_some_and(|p| alive(&p)))
    }

    /// Sends `sig` to the group and to every tagged process outside it
    /// (recorded, to be reaped).
    fn signal_all(&mut self, sig: libc::c_int) {
        signal_group(self.pid, sig);
        for pid in proc_table::tagged(&self.tag) {
            if signal_tagged(pid, &self.tag, sig) && !self.strays.contains(&pid) {
                self.strays.push(pid);
            }
        }
    }

    /// Reaps the group's members and the strays once they are zombies of
    /// the host (re-parented to it, the host being a subreaper), until none
    /// runs and none is left to reap, or `limit` passes.
    async fn reap(&mut self, limit: Duration) {
        let me = std::process::id() as i32;
        let start = Instant::now();
        loop {
            let mut waiting = false;
            for m in proc_table::group_members(self.pid) {
                waiting |= reap_or_wait(m, me);
            }
            let mut strays = std::mem::take(&mut self.strays);
            strays.retain(|&pid| proc_table::stat(pid).is_some_and(|p| reap_or_wait(p, me)));
            self.strays = strays;
            waiting |= !self.strays.is_empty();
            if !waiting {
                // One last look for a tagged process forked meanwhile.
                let before = self.strays.len();
                self.signal_all(libc::SIGKILL);
                if self.strays.len() == before {
                    return;
                }
            }
            if start.elapsed() > limit {
                tracing::warn!(
                    pgid = self.pid,
                    "processes of the server are still there after the stop sequence"
                );
                return;
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// Reaps `p` if it is a zombie of the host; whether it is still worth
/// waiting for (it runs, or it is a zombie whose parent has yet to die and
/// hand it to the host).
fn reap_or_wait(p: ProcEntry, me: i32) -> bool {
    match p.state {
        'Z' if p.ppid == me => {
            // SAFETY: waitpid on a specific zombie child of ours.
            unsafe {
                libc::waitpid(p.pid, std::ptr::null_mut(), libc::WNOHANG);
            }
            false
        }
        // Another process's zombie: reaped when that one is, or handed to
        // the host when it dies (if it is one of ours, it is being killed).
        'Z' | 'X' => {
            proc_table::stat(p.ppid).is_some_and(|parent| parent.ppid == me || parent.pid == me)
        }
        _ => true,
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // A process dropped without `stop` (a panic, a cancelled task):
        // kill the group and the tagged processes so nothing is left behind.
        signal_group(self.pid, libc::SIGKILL);
        for pid in proc_table::tagged(&self.tag) {
            signal_tagged(pid, &self.tag, libc::SIGKILL);
        }
        let _ = self.child.try_wait();
    }
}

fn signal_group(pgid: i32, sig: libc::c_int) {
    if pgid > 1 {
        // SAFETY: kill with a negative pid signals that process group only.
        unsafe {
            libc::kill(-pgid, sig);
        }
    }
}

/// Sends `sig` to process `pid` if it carries `tag`: through a pidfd opened
/// before the tag is checked, so the signal reaches the process that was
/// checked even if `pid` is reused meanwhile. Whether it was signalled.
fn signal_tagged(pid: i32, tag: &[u8], sig: libc::c_int) -> bool {
    if pid <= 1 || pid == std::process::id() as i32 {
        return false;
    }
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor
    // (or -1), which is owned and closed here.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as libc::c_int;
    if fd < 0 {
        // Gone, or a kernel without pidfds (before 5.3): check, then kill.
        if std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
            || !proc_table::environ_has(pid, tag)
        {
            return false;
        }
        // SAFETY: kill(2) only sends a signal.
        return unsafe { libc::kill(pid, sig) } == 0;
    }
    let ours = proc_table::environ_has(pid, tag);
    // SAFETY: `fd` is the pidfd opened above; pidfd_send_signal with no
    // siginfo and no flags sends `sig` to that process; then it is closed.
    let sent = ours
        && unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                fd,
                sig,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        } == 0;
    // SAFETY: closing the descriptor opened above.
    unsafe {
        libc::close(fd);
    }
    sent
}

/// The watchdog: runs in a forked child of the host (before exec), never
/// returns. Only async-signal-safe calls: the host may have had other
/// threads when it forked, so nothing may allocate or take a lock.
fn watchdog(lifeline: RawFd, needle: &[u8]) -> ! {
    // SAFETY: only async-signal-safe calls; the process ends with _exit.
    unsafe {
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        if libc::dup2(lifeline, 0) < 0 {
            libc::kill(0, libc::SIGKILL);
            libc::_exit(1);
        }
        // Drop every other descriptor: the host's pipes to other servers,
        // this server's stdout/stderr, the lifeline's write end.
        libc::syscall(
            libc::SYS_close_range,
            1 as libc::c_uint,
            !0 as libc::c_uint,
            0,
        );
        let mut byte = 0u8;
        loop {
            let n = libc::read(0, &mut byte as *mut u8 as *mut c_void, 1);
            if n == 0 {
                break;
            }
            if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            if n < 0 {
                break;
            }
        }
        // The host is gone. Leave the group so the group kill spares this
        // process, kill the group, then whatever carries the tag outside it.
        let group = libc::getpgrp();
        libc::setpgid(0, 0);
        if group > 1 {
            libc::kill(-group, libc::SIGKILL);
        }
        for _ in 0..WATCHDOG_SWEEPS {
            if sweep_tagged(needle) == 0 {
                break;
            }
        }
        libc::_exit(0)
    }
}

/// Sends `SIGKILL` to every process whose `/proc/PID/environ` contains
/// `needle`; how many. Raw system calls and stack buffers only (see
/// [`watchdog`]).
///
/// # Safety
///
/// Only calls async-signal-safe functions; safe in a forked child.
unsafe fn sweep_tagged(needle: &[u8]) -> usize {
    // SAFETY: open/getdents64/close on a descriptor owned here.
    unsafe {
        let dir = libc::open(
            c"/proc".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if dir < 0 {
            return 0;
        }
        let me = libc::getpid();
        let mut killed = 0;
        let mut buf = [0u8; DIRENT_BUFFER];
        loop {
            let n = libc::syscall(libc::SYS_getdents64, dir, buf.as_mut_ptr(), buf.len());
            if n <= 0 {
                break;
            }
            let n = n as usize;
            let mut at = 0;
            // struct linux_dirent64: d_ino u64, d_off i64, d_reclen u16,
            // d_type u8, then the NUL-terminated name.
            while let Some(rec) = buf.get(at..n) {
                let Some(&[lo, hi]) = rec.get(16..18) else {
                    break;
                };
                let reclen = u16::from_ne_bytes([lo, hi]) as usize;
                if reclen == 0 {
                    break;
                }
                if let Some(pid) = rec.get(19..reclen.min(rec.len())).and_then(parse_pid)
                    && pid > 1
                    && pid != me
                    && environ_contains(pid, needle)
                    && libc::kill(pid, libc::SIGKILL) == 0
                {
                    killed += 1;
                }
                at += reclen;
            }
        }
        libc::close(dir);
        killed
    }
}

/// The pid a `/proc` entry's NUL-terminated name spells, if it is one.
fn parse_pid(name: &[u8]) -> Option<i32> {
    let mut pid: i32 = 0;
    let mut digits = 0;
    for &b in name {
        if b == 0 {
            break;
        }
        if !b.is_ascii_digit() {
            return None;
        }
        pid = pid.checked_mul(10)?.checked_add(i32::from(b - b'0'))?;
        digits += 1;
    }
    (digits > 0).then_some(pid)
}

/// Whether `/proc/<pid>/environ` contains `needle`, read in chunks into
/// stack buffers (see [`watchdog`]). `needle` is at most
/// [`MAX_NEEDLE`] bytes.
///
/// # Safety
///
/// Only calls async-signal-safe functions; safe in a forked child.
unsafe fn environ_contains(pid: i32, needle: &[u8]) -> bool {
    // One page per read: the watchdog's stack holds it easily.
    const CHUNK: usize = 4096;
    if needle.is_empty() || needle.len() > MAX_NEEDLE {
        return false;
    }
    // "/proc/" + up to 10 digits (an i32) + "/environ" + NUL = 25 bytes.
    let mut path = [0u8; 32];
    let mut len = 0;
    for &b in b"/proc/" {
        path[len] = b;
        len += 1;
    }
    let mut digits = [0u8; 10];
    let mut d = 0;
    let mut v = pid;
    loop {
        digits[d] = b'0' + (v % 10) as u8;
        d += 1;
        v /= 10;
        if v == 0 || d == digits.len() {
            break;
        }
    }
    while d > 0 {
        d -= 1;
        path[len] = digits[d];
        len += 1;
    }
    for &b in b"/environ" {
        path[len] = b;
        len += 1;
    }
    // SAFETY: `path` is NUL-terminated (zero-filled past `len`); the
    // descriptor is owned and closed here; reads stay within `window`.
    unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let mut window = [0u8; CHUNK + MAX_NEEDLE];
        let mut kept = 0;
        let mut found = false;
        loop {
            let n = libc::read(fd, window.as_mut_ptr().add(kept).cast(), CHUNK);
            if n <= 0 {
                break;
            }
            let filled = kept + n as usize;
            let Some(data) = window.get(..filled) else {
                break;
            };
            if data.windows(needle.len()).any(|w| w == needle) {
                found = true;
                break;
            }
            // Keep the tail that could start a match across chunks.
            kept = (needle.len() - 1).min(filled);
            window.copy_within(filled - kept..filled, 0);
        }
        libc::close(fd);
        found
    }
}

/// The directory-entry buffer of the watchdog's `/proc` scan: a stack
/// buffer (it may not allocate) holding a few hundred entries per call.
const DIRENT_BUFFER: usize = 8192;

/// The longest needle the watchdog searches for: the tag entry is
/// `SKILLHOST_MCP_SERVER_TAG=` and 32 hex digits and a NUL (58 bytes).
const MAX_NEEDLE: usize = 128;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_from_proc_names() {
        assert_eq!(parse_pid(b"1234\0"), Some(1234));
        assert_eq!(parse_pid(b"self\0"), None);
        assert_eq!(parse_pid(b"\0"), None);
        assert_eq!(parse_pid(b"99999999999\0"), None);
    }

    #[test]
    fn the_watchdog_finds_a_tagged_process_and_no_other() {
        let value = format!("{:032x}", rand::random::<u128>());
        let needle = format!("{SERVER_TAG_ENV}={value}\0");
        let mut tagged = std::process::Command::new("sleep")
            .arg("30")
            .env(SERVER_TAG_ENV, &value)
            .spawn()
            .unwrap();
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        // Until it has exec'd, /proc shows the parent's environment.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !proc_table::environ_has(tagged.id() as i32, &needle.as_bytes()[..needle.len() - 1]) {
            assert!(Instant::now() < deadline, "never tagged");
            std::thread::sleep(Duration::from_millis(5));
        }
        // SAFETY: the sweep only reads /proc and signals matching processes.
        let killed = unsafe { sweep_tagged(needle.as_bytes()) };
        assert_eq!(killed, 1);
        assert!(
            tagged.wait().unwrap().code().is_none(),
            "killed by a signal"
        );
        assert!(
            other.try_wait().unwrap().is_none(),
            "the untagged one runs on"
        );
        other.kill().unwrap();
        other.wait().unwrap();
    }
}
