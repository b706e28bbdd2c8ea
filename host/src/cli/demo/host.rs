//! Demo step 7: the host as one authority over the data dir step 6 left
//! (server-everything configured, enabled and pinned): a persona that sees
//! nothing, `why` naming the missing grant, grants, a call that waits for
//! approval and the approval that runs it, and the audit trail.

use std::path::Path;

use serde_json::json;

use skillhost::{CallRequest, Caller, HostBuilder, Sandbox};
use skillhost::{Outcome, RunFilter};

/// The mutating server-everything tool the demo asks approval for (not
/// annotated read-only, no arguments).
const MUTATING_TOOL: &str = "everything.toggle-simulated-logging";

/// Runs the step on `data` (a data dir with server-everything enabled,
/// when the step before could run it), with the demo's sandbox. Returns a
/// one-line summary.
pub(super) async fn run(sandbox: &Sandbox, data: &Path) -> anyhow::Result<String> {
    let host = HostBuilder::new(data)
        .sandbox(sandbox.clone())
        .build()
        .await?;
    let result = steps(&host).await;
    host.shutdown().await;
    result
}

async fn steps(host: &skillhost::Host) -> anyhow::Result<String> {
    let support = Caller::persona("support");
    host.add_persona("support", "the support desk's agent")?;
    let all = host.tool_specs(None)?.len();
    let seen = host.tool_specs(Some("support"))?.len();
    println!("  persona support added: sees {seen} of {all} registered tools (deny by default)");

    let args = json!({"text": "deny by default"});
    let denied = host
        .call(
            &support,
            "text.word_count",
            args.clone(),
            &CallRequest::default(),
        )
        .await;
    println!("  support calls text.word_count → {}", denied.outcome);
    let why = host.why("support", "text.word_count").await?;
    match why.steps.iter().find(|s| !s.ok) {
        Some(step) => println!("  why: first broken link `{}`: {}", step.step, step.detail),
        None => println!("  why: {}", why.verdict),
    }

    host.grant_skill("support", "text-tools", true)?;
    let granted = if host.mcp_server("everything").is_ok() {
        host.grant_mcp("*", "everything", true)?;
        "skill text-tools and server everything (globally)"
    } else {
        "skill text-tools"
    };
    let seen = host.tool_specs(Some("support"))?.len();
    println!("  granted {granted}: sees {seen} tools");
    let ok = host
        .call(&support, "text.word_count", args, &CallRequest::default())
        .await;
    println!(
        "  support calls text.word_count → {} {}",
        ok.outcome,
        ok.output.as_ref().map(|o| o.data()).unwrap_or_default()
    );

    let mcp = host
        .tool_specs(None)?
        .iter()
        .any(|t| t.name == MUTATING_TOOL);
    if !mcp {
        anyhow::ensure!(
            denied.outcome == Outcome::Denied && ok.outcome == Outcome::Ok,
            "unexpected outcomes: {} before the grant, {} after",
            denied.outcome,
            ok.outcome
        );
        return Ok(
            "denied → granted → ok (a call waiting for approval needs server-everything's \
             mutating tool, left out above)"
                .into(),
        );
    }
    let pending = host
        .call(&support, MUTATING_TOOL, json!({}), &CallRequest::default())
        .await;
    println!(
        "  support calls {MUTATING_TOOL} → {} (run {})",
        pending.outcome, pending.run_id
    );
    if pending.outcome != Outcome::WaitingApproval {
        anyhow::bail!(
            "{MUTATING_TOOL} did not wait for approval: {} {}",
            pending.outcome,
            pending.error.unwrap_or_default()
        );
    }
    let approved = host.approve(&pending.run_id).await?;
    println!(
        "  operator approves {} → {} in {} ms",
        approved.run_id, approved.outcome, approved.duration_ms
    );
    let replay = host.approve(&pending.run_id).await;
    if let Err(e) = &replay {
        println!("  approving it again is refused: {e}");
    }

    host.flush();
    let runs = host.runs(&RunFilter {
        persona: Some("support".into()),
        ..Default::default()
    })?;
    println!("  audit: {} runs of support", runs.len());
    for r in runs.iter().rev() {
        println!(
            "    {} {:<40} {:<18} {:<16} {}",
            r.run_id,
            r.tool,
            r.server,
            r.outcome.to_string(),
            r.duration_ms
                .map(|ms| format!("{ms} ms"))
                .unwrap_or_default()
        );
    }
    if denied.outcome != Outcome::Denied || ok.outcome != Outcome::Ok {
        anyhow::bail!(
            "unexpected outcomes: {} before the grant, {} after",
            denied.outcome,
            ok.outcome
        );
    }
    if approved.outcome != Outcome::Ok || replay.is_ok() {
        anyhow::bail!("the approval did not run exactly once");
    }
    Ok(format!(
        "denied → granted → ok; {MUTATING_TOOL} waited, was approved once; {} runs audited",
        runs.len()
    ))
}
