//! Reading the process table (`/proc`): the members of a process group, and
//! the processes that carry a server's tag in their environment — used by
//! the stop sequence to make sure nothing a server started is left behind,
//! whether it stayed in the server's process group or not.

use std::io::Read;

/// One process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcEntry {
    /// Its pid.
    pub pid: i32,
    /// Its parent's pid.
    pub ppid: i32,
    /// Its state letter (`R`, `S`, `Z`, …).
    pub state: char,
}

/// How much of a process's environment is read to find a tag. The kernel
/// bounds a process's initial arguments and environment together by a
/// quarter of its stack limit (2 MiB with the common 8 MiB); the tag is set
/// by the supervisor, so a process whose environment is larger than this
/// was made so on purpose and is not searched further.
const MAX_ENVIRON_BYTES: u64 = 4 * 1024 * 1024;

/// The pid of every process in `/proc`.
fn pids() -> impl Iterator<Item = i32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
}

/// Process `pid` as `/proc/PID/stat` shows it now, with its group.
fn stat_with_group(pid: i32) -> Option<(ProcEntry, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (state, ppid, pgrp) = parse_stat(&stat)?;
    Some((ProcEntry { pid, ppid, state }, pgrp))
}

/// Process `pid` as `/proc/PID/stat` shows it now; `None` once it is gone
/// (reaped).
pub(crate) fn stat(pid: i32) -> Option<ProcEntry> {
    stat_with_group(pid).map(|(p, _)| p)
}

/// The processes whose process group is `pgid`, zombies included.
///
/// ```
/// // No process group has this id (pids stop far below it).
/// assert!(skillhost_mcp::group_members(i32::MAX).is_empty());
/// ```
pub fn group_members(pgid: i32) -> Vec<ProcEntry> {
    pids()
        .filter_map(stat_with_group)
        .filter(|(_, pgrp)| *pgrp == pgid)
        .map(|(p, _)| p)
        .collect()
}

/// Whether the environment process `pid` was started with (as
/// `/proc/PID/environ` shows it) holds `entry`, a whole `NAME=VALUE`
/// entry. False when it cannot be read: gone, a zombie (whose environment
/// is released), or another user's.
pub(crate) fn environ_has(pid: i32, entry: &[u8]) -> bool {
    let Ok(file) = std::fs::File::open(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let mut environ = Vec::new();
    if file
        .take(MAX_ENVIRON_BYTES)
        .read_to_end(&mut environ)
        .is_err()
    {
        return false;
    }
    environ.split(|b| *b == 0).any(|e| e == entry)
}

/// The live processes (not zombies) whose environment holds `entry`: every
/// process a server started, wherever it moved (another process group, a
/// session of its own, re-parented), unless it replaced its environment.
pub(crate) fn tagged(entry: &[u8]) -> Vec<i32> {
    pids()
        .filter(|&pid| environ_has(pid, entry))
        .filter(|&pid| stat(pid).is_some_and(|p| !matches!(p.state, 'Z' | 'X')))
        .collect()
}

/// Parses state, ppid and pgrp from a `/proc/PID/stat` line. The command
/// name is in parentheses and may itself contain spaces and parentheses, so
/// the fields are read after the last `)`.
fn parse_stat(stat: &str) -> Option<(char, i32, i32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, ppid, pgrp))
}

#[cfg(test)]
mod tests {
    #[test]
    fn stat_with_odd_command_names() {
        assert_eq!(
            super::parse_stat("42 (a) b (c)) S 7 42 42 0 -1"),
            Some(('S', 7, 42))
        );
        assert_eq!(super::parse_stat("garbage"), None);
    }

    #[test]
    fn a_child_is_found_by_its_environment_entry() {
        let entry = format!("SKILLHOST_PROC_TABLE_TEST={:032x}", rand::random::<u128>());
        let (name, value) = entry.split_once('=').unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .env(name, value)
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        // Until it has exec'd, /proc shows the parent's environment.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !super::environ_has(pid, entry.as_bytes()) {
            assert!(std::time::Instant::now() < deadline, "never tagged");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // Only the whole entry matches.
        assert!(!super::environ_has(
            pid,
            &entry.as_bytes()[..entry.len() - 1]
        ));
        assert_eq!(super::tagged(entry.as_bytes()), [pid]);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(super::tagged(entry.as_bytes()).is_empty());
        assert_eq!(super::stat(pid), None);
    }
}
