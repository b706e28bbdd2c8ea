//! What the run history costs on disk, and what `gc` gives back:
//! `cargo bench -p skillhost --bench retention`.
//!
//! A host in a temp data dir (library, no server) makes [`CALLS`] calls of
//! the built-in `text.word_count` as a granted persona, each recorded as a
//! run (an ok call's whole record: it has no event row). Then:
//!
//! - `db_kib_empty`: the database (file + write-ahead log) before any call,
//!   after `gc` has checkpointed it (the baseline);
//! - `db_kib_after_calls`, `db_bytes_per_call`: the same after the calls
//!   and a `gc` that forgets nothing (so the log is checkpointed and the
//!   file is what the history takes);
//! - `gc_forgot_runs`, `gc_forgot_events`, `gc_ms`, `db_kib_after_gc`:
//!   `gc` of everything older than 0 s (`skillhost gc --older-than 0s`),
//!   the time it took and the size it left, beside the baseline
//!   (`db_after_gc_vs_empty`, 1.0 means every byte given back);
//! - `calls_per_s`: the rate of the calls themselves, for scale.
//!
//! Prints one `name value` per line.

use std::time::{Duration, Instant};

use serde_json::json;
use skillhost::{CallRequest, Caller, HostBuilder};

/// Calls recorded.
const CALLS: usize = 100_000;

/// An age no run reaches, for a `gc` that forgets nothing.
const FOREVER: Duration = Duration::from_secs(100 * 365 * 86_400);

fn main() -> anyhow::Result<()> {
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let data = tmp.path().join("data");
    let host = HostBuilder::new(&data).build().await?;
    host.add_persona("bench", "the retention bench")?;
    host.grant_skill("bench", "text-tools", true)?;
    let empty = host.gc(FOREVER)?.db_bytes_after;
    println!("db_kib_empty {}", empty / 1024);

    let caller = Caller::Persona("bench".into());
    let req = CallRequest::default();
    let start = Instant::now();
    for i in 0..CALLS {
        let r = host
            .call(
                &caller,
                "text.word_count",
                json!({"text": format!("call number {i} of the retention bench")}),
                &req,
            )
            .await;
        anyhow::ensure!(r.error.is_none(), "call {i}: {:?}", r.error);
    }
    host.flush();
    let took = start.elapsed();
    println!("calls {CALLS}");
    println!("calls_per_s {:.0}", CALLS as f64 / took.as_secs_f64());

    let kept = host.gc(FOREVER)?;
    anyhow::ensure!(kept.runs == 0, "a gc of nothing forgot {} runs", kept.runs);
    let full = kept.db_bytes_after;
    println!("db_kib_after_calls {}", full / 1024);
    println!(
        "db_bytes_per_call {:.0}",
        full.saturating_sub(empty) as f64 / CALLS as f64
    );

    let start = Instant::now();
    let gone = host.gc(Duration::ZERO)?;
    let gc_ms = start.elapsed().as_secs_f64() * 1e3;
    println!("gc_forgot_runs {}", gone.runs);
    println!("gc_forgot_events {}", gone.events);
    println!("gc_ms {gc_ms:.0}");
    println!("db_kib_after_gc {}", gone.db_bytes_after / 1024);
    println!(
        "db_after_gc_vs_empty {:.2}",
        gone.db_bytes_after as f64 / empty.max(1) as f64
    );
    host.shutdown().await;
    Ok(())
}
