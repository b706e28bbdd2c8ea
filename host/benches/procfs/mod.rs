//! What the benches read of a server process they started, from `/proc`:
//! its resident memory and the CPU time it has used.

#![allow(dead_code)]

use std::time::Duration;

/// The resident set of process `pid`, in KiB.
pub fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no VmRSS for {pid}"))
}

/// The CPU time process `pid` has used so far, all its threads, user and
/// system (`/proc/PID/stat`, in clock ticks).
pub fn cpu_time(pid: u32) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The fields after the command, which is in parentheses and may hold
    // spaces: state is field 3, utime 14, stime 15.
    let (_, rest) = stat
        .rsplit_once(')')
        .ok_or_else(|| anyhow::anyhow!("no command in /proc/{pid}/stat"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| -> anyhow::Result<u64> {
        Ok(fields
            .get(i)
            .ok_or_else(|| anyhow::anyhow!("/proc/{pid}/stat is short"))?
            .parse()?)
    };
    let ticks = field(11)? + field(12)?;
    // SAFETY: sysconf has no preconditions.
    let hz = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) })
        .ok()
        .filter(|&h| h > 0)
        .ok_or_else(|| anyhow::anyhow!("no clock tick rate"))?;
    Ok(Duration::from_nanos(
        ticks.saturating_mul(1_000_000_000) / hz,
    ))
}
