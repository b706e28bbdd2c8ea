//! `skillhost tokens …`: bearer tokens for `skillhost serve --http`.

use std::path::Path;

use clap::Subcommand;

use super::open_host;

#[derive(Debug, Subcommand)]
pub(super) enum TokensCommand {
    /// Make a bearer token acting as a persona over HTTP. The token is
    /// printed once; only its sha256 is kept.
    Add {
        /// The persona the token acts as.
        #[arg(long)]
        persona: String,
        /// A label to recognise it (e.g. the client's name).
        #[arg(long, default_value = "")]
        label: String,
    },
    /// List tokens: id, first characters, persona, label, creation (never
    /// the token).
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a token by id.
    Remove {
        /// The id (`skillhost tokens list`).
        id: i64,
    },
}

pub(super) async fn tokens(data_dir: &Path, cmd: TokensCommand) -> anyhow::Result<()> {
    let host = open_host(data_dir).await?;
    let r = run(&host, cmd);
    host.shutdown().await;
    r
}

fn run(host: &skillhost::Host, cmd: TokensCommand) -> anyhow::Result<()> {
    match cmd {
        TokensCommand::Add { persona, label } => {
            let (token, info) = host.add_token(&persona, &label)?;
            eprintln!(
                "token {} for persona {persona}: shown once, keep it secret \
                 (`skillhost tokens remove {}` revokes it)",
                info.id, info.id
            );
            println!("{token}");
        }
        TokensCommand::List { json } => {
            let tokens = host.tokens()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&tokens)?);
            } else if tokens.is_empty() {
                println!("no tokens (`skillhost tokens add --persona P` makes one)");
            } else {
                for t in tokens {
                    println!(
                        "{}\t{}…\t{}\t{}\t{}",
                        t.id, t.prefix, t.persona, t.label, t.created_at
                    );
                }
            }
        }
        TokensCommand::Remove { id } => {
            host.remove_token(id)?;
            println!("removed token {id}");
        }
    }
    Ok(())
}
