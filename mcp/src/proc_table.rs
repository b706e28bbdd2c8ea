//! Reading the process table (`/proc`) to find the members of a process
//! group: used by the stop sequence to make sure nothing is left behind.

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

/// The processes whose process group is `pgid`, zombies included.
///
/// ```
/// // No process group has this id (pids stop far below it).
/// assert!(skillhost_mcp::group_members(i32::MAX).is_empty());
/// ```
pub fn group_members(pgid: i32) -> Vec<ProcEntry> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some((state, ppid, pgrp)) = parse_stat(&stat)
            && pgrp == pgid
        {
            out.push(ProcEntry { pid, ppid, state });
        }
    }
    out
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
}
