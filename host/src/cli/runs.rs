//! `skillhost runs …` and `skillhost refs …`.

use std::path::{Path, PathBuf};

use clap::Subcommand;

use super::{open_host, print_report};
use skillhost::{RunFilter, RunRecord, reveal_invisible};

#[derive(Debug, Subcommand)]
pub(super) enum RunsCommand {
    /// Runs, newest first.
    List {
        /// Only this persona's runs (`operator` for the operator's).
        #[arg(long)]
        persona: Option<String>,
        /// Only this tool's runs.
        #[arg(long)]
        tool: Option<String>,
        /// Only runs waiting for approval.
        #[arg(long)]
        pending: bool,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Go on from an earlier page (the cursor it printed on stderr).
        #[arg(long)]
        cursor: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// One run.
    Show {
        /// The run id.
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Approve a run waiting for approval: executes exactly the approved
    /// arguments, once, and prints the result.
    Approve {
        /// The run id.
        id: String,
        /// Print the whole run report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Deny a run waiting for approval.
    Deny {
        /// The run id.
        id: String,
        /// Why: the run's error (what the agent reads) and its `approval`
        /// event carry it (at most 500 characters).
        #[arg(long)]
        reason: Option<String>,
    },
    /// The questions MCP servers asked during calls that no client could
    /// answer, waiting for you (`runs answer` answers one).
    Questions {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Answer a server's question: `--accept '{"field": value}'` (fields
    /// left out take the form's defaults) or `--decline`.
    Answer {
        /// The question id (`q_…`).
        id: String,
        /// The filled-in form, a JSON object.
        #[arg(long, conflicts_with = "decline", required_unless_present = "decline")]
        accept: Option<String>,
        /// Refuse to answer.
        #[arg(long)]
        decline: bool,
    },
    /// The audit events, newest first: calls that waited, failed, trapped
    /// or were invoked by another run (a call that ended ok on its own is
    /// recorded by its run: `runs list`), approvals, refusals, permission
    /// approvals, secrets set and removed, outbound requests.
    Events {
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Go on from an earlier page (the cursor it printed on stderr).
        #[arg(long)]
        cursor: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(super) enum RefsCommand {
    /// Store a file as a blob and print its ref id (pass it to a call with
    /// `--ref`). Only the file's name is kept, never its path.
    Add {
        /// The file.
        file: PathBuf,
    },
    /// List stored refs.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove a ref and its blob.
    Remove {
        /// The ref id.
        id: String,
    },
}

/// A run's line, invisible and bidi characters shown as escapes (a
/// waiting call's persona, tool or error reads as what it is).
fn line(r: &RunRecord) -> String {
    let line = format!(
        "{:<29} {:<18} {:<16} {:<24} {:<22} {:>7}  {}",
        r.run_id,
        r.outcome.as_str(),
        r.persona.as_deref().unwrap_or("(operator)"),
        r.tool,
        r.server,
        r.duration_ms
            .map(|d| format!("{d}ms"))
            .unwrap_or_else(|| "-".into()),
        r.error.as_deref().unwrap_or("")
    );
    reveal_invisible(&line).into_owned()
}

/// `value` as pretty JSON, invisible and bidi characters written as JSON
/// escapes: the same JSON, readable on a terminal.
fn json_text(value: &impl serde::Serialize) -> anyhow::Result<String> {
    Ok(reveal_invisible(&serde_json::to_string_pretty(value)?).into_owned())
}

pub(super) async fn runs(
    data_dir: &Path,
    cmd: RunsCommand,
) -> anyhow::Result<std::process::ExitCode> {
    let host = open_host(data_dir).await?;
    let mut code = std::process::ExitCode::SUCCESS;
    match cmd {
        RunsCommand::List {
            persona,
            tool,
            pending,
            limit,
            cursor,
            json,
        } => {
            let operator_only = persona.as_deref() == Some("operator");
            let page = host.run_page(&RunFilter {
                persona: persona.filter(|p| p != "operator"),
                operator_only,
                tool,
                pending_only: pending,
                outcome: None,
                limit,
                cursor,
            })?;
            let runs = page.runs;
            if let Some(next) = &page.next {
                eprintln!("more runs: `--cursor {next}` lists the next page");
            }
            if json {
                println!("{}", json_text(&runs)?);
            } else if runs.is_empty() {
                println!("no runs");
            } else {
                println!(
                    "{:<29} {:<18} {:<16} {:<24} {:<22} {:>7}  ERROR",
                    "RUN", "OUTCOME", "PERSONA", "TOOL", "SERVER", "TIME"
                );
                for r in &runs {
                    println!("{}", line(r));
                }
            }
        }
        RunsCommand::Events {
            limit,
            cursor,
            json,
        } => {
            let page = host.event_page(limit, cursor.as_deref())?;
            if let Some(next) = &page.next {
                eprintln!("more events: `--cursor {next}` lists the next page");
            }
            if json {
                println!("{}", json_text(&page.events)?);
            } else if page.events.is_empty() {
                println!("no events");
            } else {
                for e in &page.events {
                    let line = format!(
                        "{:<14} {:<22} {:<16} {:<24} {}",
                        e.at_ms,
                        e.kind,
                        e.persona.as_deref().unwrap_or("-"),
                        e.tool.as_deref().or(e.server.as_deref()).unwrap_or("-"),
                        e.detail
                    );
                    println!("{}", reveal_invisible(&line));
                }
            }
        }
        RunsCommand::Show { id, json } => {
            let Some(detail) = host.run_detail(&id)? else {
                anyhow::bail!("there is no run {id:?} (`skillhost runs list` shows runs)");
            };
            if json {
                println!("{}", json_text(&detail)?);
            } else {
                let run = &detail.run;
                println!("run       {}", run.run_id);
                println!("outcome   {}", run.outcome);
                if let Some(a) = &run.approval {
                    println!("approval  {a}");
                }
                println!(
                    "persona   {}",
                    run.persona.as_deref().unwrap_or("(operator)")
                );
                println!("tool      {}", reveal_invisible(&run.tool));
                println!("server    {}", reveal_invisible(&run.server));
                if let Some(d) = run.duration_ms {
                    println!("duration  {d} ms");
                }
                if let Some(p) = &run.parent_run_id {
                    println!("parent    {p}");
                }
                if let Some(a) = &run.args {
                    println!("args      {}", reveal_invisible(&a.to_string()));
                }
                for r in &detail.refs {
                    match &r.stored {
                        Some(info) => println!(
                            "ref       {} {:?} {} bytes sha256 {}",
                            r.ref_id, info.label, info.size, info.sha256
                        ),
                        None => println!("ref       {} (removed since)", r.ref_id),
                    }
                }
                if let Some(e) = &run.error {
                    println!("error     {}", reveal_invisible(e));
                }
                for c in &detail.children {
                    println!("invoked   {} {} {}", c.run_id, c.tool, c.outcome);
                }
                for e in &detail.events {
                    let line = format!("event     {} {} {}", e.at_ms / 1000, e.kind, e.detail);
                    println!("{}", reveal_invisible(&line));
                }
            }
        }
        RunsCommand::Approve { id, json } => {
            let report = host
                .approve_by(&id, &skillhost::Decider::operator("cli"))
                .await?;
            code = print_report(&report, json)?;
        }
        RunsCommand::Questions { json } => {
            let questions = host.questions()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&questions)?);
            } else if questions.is_empty() {
                println!("no questions waiting");
            } else {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis() as i64)
                    .unwrap_or(0);
                for q in &questions {
                    println!(
                        "{}  {} asks, during {} for {} (waits {} s more):",
                        q.id,
                        q.server,
                        q.tool,
                        q.persona.as_deref().unwrap_or("the operator"),
                        (q.expires_at - now).max(0) / 1000
                    );
                    println!("    {}", reveal_invisible(&q.message));
                    println!("    form: {}", q.schema);
                }
                println!("answer with `skillhost runs answer ID --accept '{{…}}'` or `--decline`");
            }
        }
        RunsCommand::Answer {
            id,
            accept,
            decline,
        } => {
            let answer = match (accept, decline) {
                (Some(text), false) => skillhost::QuestionAnswer::Accept(
                    serde_json::from_str(&text)
                        .map_err(|e| anyhow::anyhow!("--accept is not JSON: {e}"))?,
                ),
                _ => skillhost::QuestionAnswer::Decline,
            };
            let state = host.answer_question(&id, answer, &skillhost::Decider::operator("cli"))?;
            println!(
                "{id}: {}",
                serde_json::to_value(state)?.as_str().unwrap_or_default()
            );
        }
        RunsCommand::Deny { id, reason } => {
            let run =
                host.deny_because(&id, &skillhost::Decider::operator("cli"), reason.as_deref())?;
            println!(
                "denied {} ({} for {})",
                run.run_id,
                run.tool,
                run.persona.as_deref().unwrap_or("the operator")
            );
        }
    }
    host.shutdown().await;
    Ok(code)
}

pub(super) async fn refs(data_dir: &Path, cmd: RefsCommand) -> anyhow::Result<()> {
    let host = open_host(data_dir).await?;
    match cmd {
        RefsCommand::Add { file } => {
            let mut f = std::fs::File::open(&file)
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            let label = file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "blob".into());
            let info = host.add_ref(&mut f, &label)?;
            println!("{}", info.ref_id);
        }
        RefsCommand::List { json } => {
            let refs = host.refs()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&refs)?);
            } else if refs.is_empty() {
                println!("no refs (`skillhost refs add FILE`)");
            } else {
                for r in refs {
                    println!(
                        "{}  {:>10}  {}  {}",
                        r.ref_id,
                        r.size,
                        &r.sha256[..12.min(r.sha256.len())],
                        r.label
                    );
                }
            }
        }
        RefsCommand::Remove { id } => {
            host.remove_ref(&id)?;
            println!("removed {id}");
        }
    }
    host.shutdown().await;
    Ok(())
}
