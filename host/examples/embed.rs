//! Embedding skillhost in an agent platform: `cargo run -p skillhost --example embed`.
//!
//! Builds a host on a fresh data dir (the built-in skills come with it),
//! creates a persona, grants it one skill, lists what it may use, calls a
//! tool, shows a call it may not make, and prints the audit events the host
//! streamed. `cargo test` runs it too (see the test at the bottom).

use serde_json::json;
use skillhost::{CallRequest, Caller, HostBuilder, Outcome};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    run(dir.path()).await
}

async fn run(data_dir: &std::path::Path) -> anyhow::Result<()> {
    let host = HostBuilder::new(data_dir).build().await?;
    let mut events = host.events();

    // The operator's side: a persona and its grants.
    host.add_persona("agent", "the platform's support agent")?;
    host.grant_skill("agent", "text-tools", true)?;

    // The agent's side: its tools, then calls through the one call path.
    let agent = Caller::persona("agent");
    for spec in host.tool_specs(Some("agent"))?.iter() {
        println!(
            "tool {:<20} {:<18} confirm={}",
            spec.name, spec.specialist, spec.requires_confirmation
        );
    }
    let run = host
        .call(
            &agent,
            "text.word_count",
            json!({"text": "embedded and sandboxed"}),
            &CallRequest::default(),
        )
        .await;
    println!(
        "{} → {} {}",
        run.tool,
        run.outcome,
        run.output.as_ref().map(|o| o.data()).unwrap_or_default()
    );
    anyhow::ensure!(
        run.outcome == Outcome::Ok,
        "the granted call failed: {:?}",
        run.error
    );

    let denied = host
        .call(
            &agent,
            "json.query",
            json!({"document": {}, "pointer": ""}),
            &CallRequest::default(),
        )
        .await;
    println!(
        "{} → {}: {}",
        denied.tool,
        denied.outcome,
        denied.error.clone().unwrap_or_default()
    );
    anyhow::ensure!(
        denied.outcome == Outcome::Denied,
        "an ungranted call was not denied"
    );

    // Every call was audited and streamed.
    let mut seen = 0;
    while let Ok(event) = events.try_recv() {
        seen += 1;
        println!(
            "event {} {} {} {}",
            event.kind,
            event.tool.unwrap_or_default(),
            event.outcome.map(|o| o.to_string()).unwrap_or_default(),
            event.run_id.unwrap_or_default()
        );
    }
    anyhow::ensure!(seen >= 2, "expected an event per call, saw {seen}");

    host.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn the_example_runs() {
        let dir = tempfile::tempdir().expect("tempdir");
        super::run(dir.path()).await.expect("the embedding example");
    }
}
