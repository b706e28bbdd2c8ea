//! `skillhost secrets …`: values a skill's requests carry as headers, kept
//! sealed in the data dir; the component never sees them.

use std::io::Read as _;
use std::path::Path;

use clap::Subcommand;

use super::open_host;

#[derive(Debug, Subcommand)]
pub(super) enum SecretsCommand {
    /// Set a secret the skill declares; the value is read from standard
    /// input (never an argument, which other users may see), a trailing
    /// newline removed.
    Set {
        /// Skill name.
        skill: String,
        /// The secret's name, as the skill's `permissions.secrets` declares it.
        name: String,
    },
    /// List the secrets set: skill, name, when (never a value).
    List {
        /// Only this skill's.
        skill: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove a secret.
    Remove {
        /// Skill name.
        skill: String,
        /// The secret's name.
        name: String,
    },
}

/// Reads a secret value from standard input: at most one byte more than
/// the limit (so an oversized value is refused, not truncated), one
/// trailing newline (`\n` or `\r\n`) removed.
fn read_value() -> anyhow::Result<String> {
    let mut bytes = Vec::new();
    std::io::stdin()
        .take(skillhost::MAX_SECRET_BYTES as u64 + 2)
        .read_to_end(&mut bytes)?;
    if bytes.ends_with(b"\n") {
        bytes.pop();
        if bytes.ends_with(b"\r") {
            bytes.pop();
        }
    }
    String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("the secret value on standard input is not UTF-8 text"))
}

pub(super) async fn secrets(data_dir: &Path, cmd: SecretsCommand) -> anyhow::Result<()> {
    let value = match &cmd {
        SecretsCommand::Set { .. } => Some(read_value()?),
        _ => None,
    };
    let host = open_host(data_dir).await?;
    let r = run(&host, cmd, value);
    host.shutdown().await;
    r
}

fn run(host: &skillhost::Host, cmd: SecretsCommand, value: Option<String>) -> anyhow::Result<()> {
    match cmd {
        SecretsCommand::Set { skill, name } => {
            host.set_secret(&skill, &name, value.as_deref().unwrap_or_default())?;
            println!("set secret {name} of {skill}");
        }
        SecretsCommand::List { skill, json } => {
            let list = host.secrets(skill.as_deref())?;
            if json {
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else if list.is_empty() {
                println!("no secrets set (`skillhost secrets set SKILL NAME` sets one)");
            } else {
                for s in list {
                    println!("{}\t{}\t{}\t{}", s.skill, s.name, s.identity, s.set_at);
                }
            }
        }
        SecretsCommand::Remove { skill, name } => {
            host.remove_secret(&skill, &name)?;
            println!("removed secret {name} of {skill}");
        }
    }
    Ok(())
}
