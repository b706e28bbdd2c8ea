//! A stdio server's stderr: drained continuously, kept in a bounded ring
//! buffer in memory and in a size-capped log file in the server's folder.
//!
//! - Ring buffer: the last [`RING_BYTES`] bytes, for `mcp logs` and for the
//!   "last error" of a failed server.
//! - Log file `stderr.log`: at most [`LOG_FILE_BYTES`]; when full it becomes
//!   `stderr.log.1` (the previous `.1` is dropped) and a new one starts.
//! - Lines longer than [`MAX_LINE_BYTES`] are cut there.
//! - The values of the server's configured secrets (env and header values
//!   of 4 characters or more) are replaced by `***` in every line before it
//!   is kept anywhere.
//!
//! The drain runs on its own thread with blocking reads, so a child that
//! floods stderr is read as fast as it writes and never blocks on a full
//! pipe, and the async runtime is never held up by the log file.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use cap_std::fs::Dir;

/// Bytes kept in memory.
pub const RING_BYTES: usize = 64 * 1024;
/// Size at which `stderr.log` is rotated.
pub const LOG_FILE_BYTES: u64 = 1024 * 1024;
/// Longest line kept.
pub const MAX_LINE_BYTES: usize = 4096;
/// The log file's name in the server's folder.
pub const LOG_FILE: &str = "stderr.log";
/// Stderr lines a failure message quotes as context: enough for a stack
/// trace's head or a package manager's last notices, short enough for one
/// status line.
pub const CONTEXT_LINES: usize = 3;
/// The longest stderr line a failure message quotes, in characters.
const CONTEXT_LINE_CHARS: usize = 300;
/// The end of the ring the quoted lines are looked for in: whole lines only
/// (a line the cut falls in is left out, not quoted from its middle).
const CONTEXT_TAIL_BYTES: usize = 4096;
/// How the host's own lines in the log begin (`--- skillhost: started …`).
const NOTE_PREFIX: &str = "--- skillhost:";

/// One server's stderr.
#[derive(Debug)]
pub struct StderrLog {
    ring: Mutex<VecDeque<u8>>,
    file: Mutex<LogFile>,
    secrets: Vec<String>,
    total: AtomicU64,
    /// Drain threads still reading a pipe.
    draining: AtomicUsize,
}

#[derive(Debug)]
struct LogFile {
    dir: Option<Dir>,
    file: Option<cap_std::fs::File>,
    size: u64,
}

impl StderrLog {
    /// A log writing into `dir` (the server's folder; `None` keeps only the
    /// ring buffer), redacting `secrets`.
    pub fn new(dir: Option<Dir>, secrets: Vec<String>) -> StderrLog {
        StderrLog {
            ring: Mutex::new(VecDeque::with_capacity(RING_BYTES)),
            file: Mutex::new(LogFile {
                dir,
                file: None,
                size: 0,
            }),
            secrets: secrets.into_iter().filter(|s| s.len() >= 4).collect(),
            total: AtomicU64::new(0),
            draining: AtomicUsize::new(0),
        }
    }

    /// Bytes read from the server's stderr so far, over all its runs.
    pub fn total_bytes(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// Adds a line of the host's own (start and exit markers).
    pub fn note(&self, line: &str) {
        self.keep_line(line.as_bytes());
    }

    /// The tail of the ring buffer as text, control characters escaped
    /// (tabs and newlines kept).
    pub fn tail(&self, max_bytes: usize) -> String {
        self.tail_of(max_bytes, false)
    }

    /// [`tail`](Self::tail), without the line the cut falls in when
    /// `whole_lines`: only lines kept whole.
    fn tail_of(&self, max_bytes: usize, whole_lines: bool) -> String {
        let ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        let mut skip = ring.len().saturating_sub(max_bytes);
        if whole_lines && skip > 0 && ring.get(skip - 1) != Some(&b'\n') {
            skip += ring
                .iter()
                .skip(skip)
                .position(|&b| b == b'\n')
                .map_or(ring.len() - skip, |i| i + 1);
        }
        let bytes: Vec<u8> = ring.iter().skip(skip).copied().collect();
        escape(&String::from_utf8_lossy(&bytes))
    }

    /// The last non-empty line, escaped, at most 300 bytes.
    pub fn last_line(&self) -> Option<String> {
        let tail = self.tail(4096);
        tail.lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.chars().take(300).collect())
    }

    /// The last [`CONTEXT_LINES`] non-empty lines the server wrote since
    /// the host's last line (this run's), escaped, each cut at 300
    /// characters, as `the server's last stderr lines: a | b | c`; `None`
    /// when it wrote none. A failure message appends this after saying what
    /// happened: what a server last wrote is context, seldom the cause (npm
    /// writes notices there while the server is fine).
    ///
    /// ```
    /// let log = skillhost_mcp::StderrLog::new(None, vec![]);
    /// log.note("--- skillhost: started npx (pid 7) ---");
    /// assert_eq!(log.context(), None);
    /// for line in ["a", "", "b", "c", "npm notice d"] {
    ///     log.note(line);
    /// }
    /// assert_eq!(
    ///     log.context().unwrap(),
    ///     "the server's last stderr lines: b | c | npm notice d"
    /// );
    /// ```
    pub fn context(&self) -> Option<String> {
        let tail = self.tail_of(CONTEXT_TAIL_BYTES, true);
        let mut lines: Vec<String> = tail
            .lines()
            .rev()
            .take_while(|l| !l.starts_with(NOTE_PREFIX))
            .filter(|l| !l.trim().is_empty())
            .take(CONTEXT_LINES)
            .map(|l| l.chars().take(CONTEXT_LINE_CHARS).collect())
            .collect();
        if lines.is_empty() {
            return None;
        }
        lines.reverse();
        Some(format!(
            "the server's last stderr lines: {}",
            lines.join(" | ")
        ))
    }

    /// Waits, at most `limit`, until every pipe given to
    /// [`drain_from`](Self::drain_from) has been read to its end, so that
    /// the last lines of a server that has exited are in the log before its
    /// failure is described.
    pub(crate) async fn settle(&self, limit: std::time::Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        while self.draining.load(Ordering::Acquire) > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    /// Reads `pipe` to its end on a new thread.
    pub(crate) fn drain_from(self: std::sync::Arc<Self>, mut pipe: std::fs::File) {
        self.draining.fetch_add(1, Ordering::AcqRel);
        let log = self.clone();
        let spawned = std::thread::Builder::new()
            .name("mcp-stderr".into())
            .spawn(move || {
                let mut buf = vec![0u8; 16 * 1024];
                let mut line: Vec<u8> = Vec::with_capacity(256);
                loop {
                    let n = match pipe.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        Err(_) => break,
                    };
                    self.total.fetch_add(n as u64, Ordering::Relaxed);
                    for &b in &buf[..n] {
                        if b == b'\n' {
                            self.keep_line(&line);
                            line.clear();
                        } else if line.len() < MAX_LINE_BYTES {
                            line.push(b);
                        }
                    }
                }
                if !line.is_empty() {
                    self.keep_line(&line);
                }
                self.draining.fetch_sub(1, Ordering::AcqRel);
            });
        if let Err(e) = spawned {
            log.draining.fetch_sub(1, Ordering::AcqRel);
            tracing::error!("cannot start the stderr drain thread: {e}");
        }
    }

    fn keep_line(&self, raw: &[u8]) {
        let mut text = String::from_utf8_lossy(raw).into_owned();
        for s in &self.secrets {
            if text.contains(s.as_str()) {
                text = text.replace(s.as_str(), "***");
            }
        }
        text.push('\n');
        {
            let mut ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
            for &b in text.as_bytes() {
                if ring.len() == RING_BYTES {
                    ring.pop_front();
                }
                ring.push_back(b);
            }
        }
        let mut f = self.file.lock().unwrap_or_else(|e| e.into_inner());
        f.append(text.as_bytes());
    }
}

impl LogFile {
    fn append(&mut self, bytes: &[u8]) {
        let Some(dir) = &self.dir else { return };
        if self.file.is_none() || self.size + bytes.len() as u64 > LOG_FILE_BYTES {
            if self.file.is_some() || self.size > 0 {
                self.file = None;
                let _ = dir.rename(LOG_FILE, dir, format!("{LOG_FILE}.1"));
                self.size = 0;
            }
            let mut opts = cap_std::fs::OpenOptions::new();
            {
                use cap_std::fs::OpenOptionsExt as _;
                // Servers print secrets by mistake: the log is private.
                opts.append(true).create(true).mode(0o600);
            }
            match dir.open_with(LOG_FILE, &opts) {
                Ok(file) => {
                    self.size = file.metadata().map(|m| m.len()).unwrap_or(0);
                    self.file = Some(file);
                }
                Err(e) => {
                    tracing::warn!("cannot open {LOG_FILE}: {e}");
                    self.dir = None;
                    return;
                }
            }
            if self.size + bytes.len() as u64 > LOG_FILE_BYTES {
                self.file = None;
                let _ = dir.rename(LOG_FILE, dir, format!("{LOG_FILE}.1"));
                self.size = 0;
                return self.append(bytes);
            }
        }
        if let Some(file) = &mut self.file
            && file.write_all(bytes).is_ok()
        {
            self.size += bytes.len() as u64;
        }
    }
}

/// Escapes control characters other than tab and newline as `\u{..}`.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_is_bounded_and_secrets_are_redacted() {
        let log = StderrLog::new(None, vec!["hunter22".into(), "ab".into()]);
        log.note("token=hunter22 ab");
        assert_eq!(log.last_line().unwrap(), "token=*** ab");
        for i in 0..10_000 {
            log.note(&format!("line {i} \u{1b}[31m"));
        }
        assert!(log.tail(usize::MAX).len() <= RING_BYTES * 6);
        assert!(log.last_line().unwrap().starts_with("line 9999 \\u{1b}"));
    }

    #[test]
    fn context_quotes_the_last_whole_lines_of_this_run_redacted() {
        let log = StderrLog::new(None, vec!["hunter22".into()]);
        log.note("an earlier run's last words");
        log.note("--- skillhost: started srv (pid 7) ---");
        for line in [
            "npm notice a",
            "npm notice b",
            "npm notice c",
            "",
            "npm notice d",
        ] {
            log.note(line);
        }
        assert_eq!(
            log.context().unwrap(),
            "the server's last stderr lines: npm notice b | npm notice c | npm notice d"
        );
        // A line longer than the tail looked at: the cut falls in it, and
        // its end is not quoted as if it were a line.
        log.note(&format!("npm notice {}", "x".repeat(CONTEXT_TAIL_BYTES)));
        log.note("Error: key hunter22 refused");
        log.note(&format!("at {}", "y".repeat(1000)));
        let context = log.context().unwrap();
        let quoted = context
            .strip_prefix("the server's last stderr lines: ")
            .unwrap();
        let lines: Vec<&str> = quoted.split(" | ").collect();
        assert_eq!(lines.len(), 2, "{context}");
        assert_eq!(lines[0], "Error: key *** refused");
        assert_eq!(lines[1].chars().count(), CONTEXT_LINE_CHARS);
        // Lines from before the host's last note are never quoted.
        log.note("--- skillhost: started srv (pid 8) ---");
        assert_eq!(log.context(), None);
        log.note("only line");
        assert_eq!(
            log.context().unwrap(),
            "the server's last stderr lines: only line"
        );
    }

    #[test]
    fn file_rotates_at_the_cap() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).unwrap();
        let log = StderrLog::new(Some(dir), vec![]);
        let line = "x".repeat(1000);
        for _ in 0..2500 {
            log.note(&line);
        }
        let a = std::fs::metadata(tmp.path().join(LOG_FILE)).unwrap().len();
        let b = std::fs::metadata(tmp.path().join("stderr.log.1"))
            .unwrap()
            .len();
        assert!(a <= LOG_FILE_BYTES && b <= LOG_FILE_BYTES, "{a} {b}");
        assert!(a + b > LOG_FILE_BYTES);
    }
}
