//! Hostile tools used by the host's test suite to prove each limit holds.
//! Never part of a default install.

use std::hint::black_box;
use std::io::{Read, Write};

use serde::{Deserialize, Serialize};
use skillhost_guest::{ToolError, skill};

#[derive(Deserialize)]
struct NoArgs {}

/// Loops forever; the loop carries a value through `black_box` so the
/// optimiser cannot remove it.
fn spin(_: NoArgs) -> Result<u64, ToolError> {
    let mut x: u64 = black_box(1);
    loop {
        x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407));
    }
}

/// Grows memory without end, touching every page.
fn alloc(_: NoArgs) -> Result<u64, ToolError> {
    let mut kept: Vec<Vec<u8>> = Vec::new();
    loop {
        let mut chunk = vec![0u8; 1 << 20];
        chunk[black_box(12345)] = 1;
        kept.push(black_box(chunk));
    }
}

/// Recursion that only a stack limit stops: the result of the deeper call is
/// used after it returns (no tail call), and every value lives in WebAssembly
/// locals, so each frame costs native wasm stack rather than linear memory.
#[inline(never)]
fn recurse_inner(depth: u64, limit: u64) -> u64 {
    if depth == limit {
        return depth;
    }
    let below = recurse_inner(depth + 1, limit);
    below.rotate_left((depth & 31) as u32) ^ depth
}

#[derive(Deserialize)]
struct RecurseArgs {
    /// Depth at which to stop; unbounded when absent.
    #[serde(default)]
    limit: Option<u64>,
}

/// Recurses without end (or to `limit`).
fn recurse(args: RecurseArgs) -> Result<u64, ToolError> {
    Ok(recurse_inner(0, black_box(args.limit.unwrap_or(u64::MAX))))
}

/// Writes to stdout without end.
fn flood_stdout(_: NoArgs) -> Result<u64, ToolError> {
    let line = "flood \x1b[31mred\x1b[0m \x07 ".repeat(64);
    let mut out = std::io::stdout();
    let mut n: u64 = 0;
    loop {
        if writeln!(out, "{n} {line}").is_err() {
            // Keep writing through errors too: only the host can stop this.
            n = black_box(n.wrapping_add(1));
        }
        n += 1;
    }
}

/// Panics.
fn panic(_: NoArgs) -> Result<u64, ToolError> {
    panic!("hostile.panic was asked to panic")
}

/// Blocks for an hour in WASI clocks.
fn sleep(_: NoArgs) -> Result<u64, ToolError> {
    std::thread::sleep(std::time::Duration::from_secs(3600));
    Ok(3600)
}

#[derive(Serialize)]
struct Seen {
    env: Vec<(String, String)>,
    args: Vec<String>,
    stdin: String,
    stdin_error: Option<String>,
    cwd: Option<String>,
}

/// Looks at everything the allowed WASI subset offers and reports it.
fn snoop(_: NoArgs) -> Result<Seen, ToolError> {
    let env = std::env::vars().collect();
    let args = std::env::args().collect();
    let mut stdin = String::new();
    let stdin_error = std::io::stdin().read_to_string(&mut stdin).err().map(|e| e.to_string());
    let cwd = std::env::current_dir().ok().map(|p| p.display().to_string());
    Ok(Seen { env, args, stdin, stdin_error, cwd })
}

#[derive(Deserialize)]
struct HugeArgs {
    #[serde(default)]
    mib: Option<u32>,
}

/// Returns an 8 MiB result by default (`mib` sets the size): larger than the
/// host's 1 MiB output cap.
fn huge_output(args: HugeArgs) -> Result<String, ToolError> {
    let mib = args.mib.unwrap_or(8) as usize;
    Ok("x".repeat(mib << 20))
}

#[derive(Deserialize)]
struct InvokeArgs {
    tool: String,
    #[serde(default)]
    args: serde_json::Value,
}

/// Calls any tool through `host.invoke` and returns its result: the host
/// decides what is reachable.
fn invoke(args: InvokeArgs) -> Result<serde_json::Value, ToolError> {
    let InvokeArgs { tool, args } = args;
    let args = if args.is_null() { serde_json::json!({}) } else { args };
    skillhost_guest::invoke(&tool, &args)
}

#[derive(Deserialize)]
struct ConfigArgs {
    key: String,
}

/// Reads a configuration value through `host.config`.
fn config(args: ConfigArgs) -> Result<Option<String>, ToolError> {
    Ok(skillhost_guest::config(&args.key))
}

#[derive(Deserialize)]
struct FloodArgs {
    count: u32,
}

/// Sends `count` progress reports, going backwards every other time and
/// with a NaN and an infinite total among them, and `count` error log lines
/// carrying control characters: the host must pass on a bounded number,
/// drop the bad reports and escape the lines.
fn notice_flood(args: FloodArgs) -> Result<u32, ToolError> {
    for i in 0..args.count {
        let v = f64::from(i);
        skillhost_guest::progress(v, Some(f64::from(args.count)), Some("step\x1b[31m"));
        skillhost_guest::progress(v - 0.5, None, None);
        skillhost_guest::progress(f64::NAN, None, None);
        skillhost_guest::progress(v, Some(f64::INFINITY), None);
        skillhost_guest::log::error!("line {i}\x1b[2J\r\nforged");
    }
    Ok(args.count)
}

skill! {
    "hostile.spin" => spin,
    "hostile.alloc" => alloc,
    "hostile.recurse" => recurse,
    "hostile.flood_stdout" => flood_stdout,
    "hostile.panic" => panic,
    "hostile.sleep" => sleep,
    "hostile.snoop" => snoop,
    "hostile.huge_output" => huge_output,
    "hostile.invoke" => invoke,
    "hostile.config" => config,
    "hostile.notice_flood" => notice_flood,
}
