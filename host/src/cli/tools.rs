//! `skillhost tools list` and `skillhost why`.

use std::path::Path;

use clap::Subcommand;

use super::open_host;

#[derive(Debug, Subcommand)]
pub(super) enum ToolsCommand {
    /// The registry: every tool a persona may use (`tool_specs()`), or
    /// without --persona every registered tool. Collisions between sources
    /// are reported on stderr.
    List {
        /// Only this persona's tools.
        #[arg(long)]
        persona: Option<String>,
        /// Print JSON (the ToolSpec objects).
        #[arg(long)]
        json: bool,
    },
}

pub(super) async fn tools(data_dir: &Path, cmd: ToolsCommand) -> anyhow::Result<()> {
    let host = open_host(data_dir).await?;
    let ToolsCommand::List { persona, json } = cmd;
    let specs = host.tool_specs(persona.as_deref())?;
    for c in host.conflicts()? {
        eprintln!("warning: {c}");
    }
    for p in host.registry_problems()? {
        eprintln!("warning: {p}");
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&specs)?);
    } else if specs.is_empty() {
        match &persona {
            Some(p) => println!(
                "persona {p} may use no tool (`skillhost grants show {p}`, `skillhost why --persona {p} TOOL`)"
            ),
            None => println!("no tools are registered"),
        }
    } else {
        println!(
            "{:<32} {:<22} {:<17} {:<8} {:<8}",
            "NAME", "SERVER", "SPECIALIST", "MUTATES", "CONFIRM"
        );
        for s in specs.iter() {
            println!(
                "{:<32} {:<22} {:<17} {:<8} {:<8}",
                s.name,
                s.server,
                s.specialist,
                if s.mutates_data { "yes" } else { "no" },
                if s.requires_confirmation { "yes" } else { "no" }
            );
        }
    }
    host.shutdown().await;
    Ok(())
}

pub(super) async fn why(
    data_dir: &Path,
    persona: &str,
    tool: &str,
    json: bool,
) -> anyhow::Result<()> {
    let host = open_host(data_dir).await?;
    let report = host.why(persona, tool).await;
    host.shutdown().await;
    let report = report?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!("{}", report.verdict);
    println!();
    for s in &report.steps {
        println!(
            "{} {:<10} {}",
            if s.ok { "ok  " } else { "FAIL" },
            s.step,
            s.detail
        );
    }
    if !report.recent_runs.is_empty() {
        println!();
        println!("latest runs:");
        for r in &report.recent_runs {
            println!(
                "  {} {} {} {}",
                r.run_id,
                r.outcome,
                r.duration_ms
                    .map(|d| format!("{d}ms"))
                    .unwrap_or_else(|| "-".into()),
                r.error.as_deref().unwrap_or("")
            );
        }
    }
    if let Some(tail) = &report.log_tail {
        println!();
        println!("server log (tail):");
        for l in tail.lines() {
            println!("  {l}");
        }
    }
    Ok(())
}
