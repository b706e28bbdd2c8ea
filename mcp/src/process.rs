//! One stdio server process: spawned in its own process group, watched by a
//! lifeline, stopped in order, reaped.
//!
//! - **Own process group.** The child is its group's leader (its pid is the
//!   group id), so the stop sequence reaches every process it started that
//!   stayed in the group, including grandchildren that ignore `SIGTERM`.
//! - **Lifeline.** Between fork and exec the child forks a tiny watchdog into
//!   the same group. The watchdog closes every descriptor but the read end of
//!   a pipe whose write end only the host holds, and blocks reading it. When
//!   the host exits for any reason — including `SIGKILL` — the pipe reaches
//!   end-of-file and the watchdog sends `SIGKILL` to the whole group. (A
//!   parent-death signal would not do: it follows the spawning *thread*, and
//!   it reaches only the direct child.) Processes that leave the group on
//!   purpose (`setsid`, `setpgid`) are outside this net; containing those
//!   needs cgroups, which the host does not require.
//! - **Stop** = close stdin, wait, `SIGTERM` to the group, wait, `SIGKILL` to
//!   the group, reap the child, then `SIGKILL` the group again (the watchdog
//!   and any straggler) and reap whatever was re-parented to the host (the
//!   host makes itself a child subreaper so orphans come back to it).
//! - **Environment.** Cleared; the child gets only the base below plus the
//!   variables its configuration names: `PATH` (the host's), `HOME` and
//!   `TMPDIR` (the server's own folder), `LANG=C.UTF-8`.
//! - **stderr** is drained continuously by a thread into a
//!   [`StderrLog`](crate::StderrLog), so the child never blocks on a full pipe.

use std::ffi::c_void;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::process::{Child, ChildStdin, ChildStdout};

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

/// A running server process.
#[derive(Debug)]
pub(crate) struct ServerProcess {
    child: Child,
    pid: i32,
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
fn become_subreaper() {
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
        let mut cmd = tokio::process::Command::new(&spec.command);
        cmd.args(&spec.args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &spec.cwd)
            .env("TMPDIR", &spec.cwd)
            .env("LANG", "C.UTF-8")
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&spec.cwd)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .kill_on_drop(false);
        // SAFETY: the closure runs in the forked child before exec and only
        // makes async-signal-safe calls (fork, dup2, close_range, signal,
        // read, kill, _exit).
        unsafe {
            cmd.pre_exec(move || {
                let pid = libc::fork();
                if pid < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if pid == 0 {
                    watchdog(lifeline);
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
        Ok((ServerProcess { child, pid }, stdin, stdout))
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
    /// transport owns it). Always ends with the group killed and reaped.
    pub async fn stop(&mut self, grace: Duration) -> StopStep {
        let step = if self.try_exit().is_some() {
            StopStep::AlreadyExited
        } else if tokio::time::timeout(grace, self.child.wait()).await.is_ok() {
            StopStep::Stdin
        } else {
            signal_group(self.pid, libc::SIGTERM);
            if tokio::time::timeout(grace, self.child.wait()).await.is_ok() {
                StopStep::Term
            } else {
                signal_group(self.pid, libc::SIGKILL);
                let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
                StopStep::Kill
            }
        };
        // The watchdog and anything else left in the group.
        signal_group(self.pid, libc::SIGKILL);
        reap_group(self.pid, Duration::from_secs(5)).await;
        step
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // A process dropped without `stop` (a panic, a cancelled task):
        // kill the group so nothing is left behind.
        signal_group(self.pid, libc::SIGKILL);
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

/// Reaps group members that were re-parented to the host, until none is
/// left alive (bounded).
async fn reap_group(pgid: i32, limit: Duration) {
    let me = std::process::id() as i32;
    let start = Instant::now();
    loop {
        let members = crate::proc_table::group_members(pgid);
        let mut alive = false;
        let mut reaped = false;
        for m in &members {
            if m.state == 'Z' && m.ppid == me {
                // SAFETY: waitpid on a specific zombie child of ours.
                unsafe {
                    libc::waitpid(m.pid, std::ptr::null_mut(), libc::WNOHANG);
                }
                reaped = true;
            } else if m.state != 'Z' {
                alive = true;
            }
        }
        if !alive && !reaped {
            return;
        }
        if start.elapsed() > limit {
            tracing::warn!(
                pgid,
                "process group still has members after the stop sequence"
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The watchdog: runs in a forked child, never returns.
fn watchdog(lifeline: RawFd) -> ! {
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
        libc::kill(0, libc::SIGKILL);
        libc::_exit(0)
    }
}
