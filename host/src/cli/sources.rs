//! `skillhost sources …`: the local skill folders (`skill_dirs` in
//! `settings.json`) an author develops in, without editing the file.

use std::path::{Path, PathBuf};

use clap::Subcommand;

use super::open_host;

#[derive(Debug, Subcommand)]
pub(super) enum SourcesCommand {
    /// Add a local skill folder (one holding a skill.yaml or SKILL.md). Its
    /// skill is loaded from there on every start, untrusted until
    /// `skillhost skills trust`.
    Add {
        /// The skill folder.
        dir: PathBuf,
    },
    /// Stop loading a local skill folder (the folder itself is untouched).
    Remove {
        /// The skill folder, as listed or as a path to it.
        dir: PathBuf,
    },
    /// List the local skill folders.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub(super) async fn sources(data_dir: &Path, cmd: SourcesCommand) -> anyhow::Result<()> {
    let host = open_host(data_dir).await?;
    let r = run(&host, cmd);
    host.shutdown().await;
    r
}

fn run(host: &skillhost::Host, cmd: SourcesCommand) -> anyhow::Result<()> {
    match cmd {
        SourcesCommand::Add { dir } => {
            let added = host.add_source(&dir)?;
            println!("added {}", added.display());
        }
        SourcesCommand::Remove { dir } => {
            let removed = host.remove_source(&dir)?;
            println!("removed {}", removed.display());
        }
        SourcesCommand::List { json } => {
            let list = host.sources()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else if list.is_empty() {
                println!("no local skill folders (`skillhost sources add DIR` adds one)");
            } else {
                for d in list {
                    println!("{}", d.display());
                }
            }
        }
    }
    Ok(())
}
