//! `skillhost personas …` and `skillhost grants …`.

use std::path::Path;

use clap::{Subcommand, ValueEnum};

use super::open_host;

#[derive(Debug, Subcommand)]
pub(super) enum PersonasCommand {
    /// Create a persona. It is granted nothing.
    Add {
        /// The id: 1 to 64 of a-z, 0-9, `_`, `-`.
        id: String,
        /// What the persona is for.
        #[arg(long, default_value = "")]
        description: String,
    },
    /// List personas.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove a persona and every grant it has.
    Remove {
        /// The id.
        id: String,
    },
    /// Change a persona's settings.
    Set {
        /// The id.
        id: String,
        /// Whether the persona's MCP client may answer the confirmation of
        /// its own calls (elicitation). Off by default: an operator then
        /// approves them (`skillhost runs approve RUN`). Turn it on only for
        /// a client application that shows the question to a person.
        #[arg(long, value_name = "on|off")]
        client_approval: Option<Switch>,
    },
}

/// `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum Switch {
    /// On: grant, allow.
    On,
    /// Off: revoke, refuse.
    Off,
}

#[derive(Debug, Subcommand)]
pub(super) enum GrantsCommand {
    /// Grant or revoke an MCP server for a persona, or for every persona
    /// with `*` (present and future; `*` never coexists with persona ids).
    Mcp {
        /// A persona id, or `*`.
        persona: String,
        /// The MCP server.
        server: String,
        /// `on` or `off`.
        switch: Switch,
    },
    /// Grant or revoke a skill (its tools) for a persona.
    Skill {
        /// The persona.
        persona: String,
        /// The skill.
        skill: String,
        /// `on` or `off`.
        switch: Switch,
    },
    /// A persona's grants: every MCP server (`global`, `authorized`) and
    /// every skill (`granted`).
    Show {
        /// The persona.
        persona: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub(super) async fn personas(data_dir: &Path, cmd: PersonasCommand) -> anyhow::Result<()> {
    let host = open_host(data_dir).await?;
    match cmd {
        PersonasCommand::Add { id, description } => {
            if host.add_persona(&id, &description)? {
                println!("added persona {id}");
            } else {
                anyhow::bail!("persona `{id}` already exists");
            }
        }
        PersonasCommand::List { json } => {
            let personas = host.personas()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&personas)?);
            } else if personas.is_empty() {
                println!("no personas (`skillhost personas add ID`)");
            } else {
                for p in personas {
                    let approval = if p.client_approval {
                        "client-approval"
                    } else {
                        "-"
                    };
                    println!("{:<24} {:<16} {}", p.id, approval, p.description);
                }
            }
        }
        PersonasCommand::Remove { id } => {
            host.remove_persona(&id)?;
            println!("removed persona {id}");
        }
        PersonasCommand::Set {
            id,
            client_approval,
        } => {
            let Some(switch) = client_approval else {
                anyhow::bail!("nothing to set: give --client-approval on|off");
            };
            host.set_client_approval(&id, switch == Switch::On)?;
            println!(
                "persona {id}: client-side approval {}",
                if switch == Switch::On { "on" } else { "off" }
            );
        }
    }
    host.shutdown().await;
    Ok(())
}

pub(super) async fn grants(data_dir: &Path, cmd: GrantsCommand) -> anyhow::Result<()> {
    let host = open_host(data_dir).await?;
    match cmd {
        GrantsCommand::Mcp {
            persona,
            server,
            switch,
        } => {
            let list = host.grant_mcp(&persona, &server, switch == Switch::On)?;
            println!(
                "{server}: allowed_persona_ids = {}",
                serde_json::to_string(&list)?
            );
        }
        GrantsCommand::Skill {
            persona,
            skill,
            switch,
        } => {
            let on = switch == Switch::On;
            let changed = host.grant_skill(&persona, &skill, on)?;
            let what = if on { "granted" } else { "revoked" };
            if changed {
                println!("{what} skill {skill} for {persona}");
            } else {
                println!("skill {skill} was already {what} for {persona}");
            }
        }
        GrantsCommand::Show { persona, json } => {
            let g = host.grants(&persona)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&g)?);
            } else {
                println!("MCP servers:");
                if g.mcp.is_empty() {
                    println!("  (none configured)");
                }
                for s in &g.mcp {
                    let how = match (s.global, s.authorized) {
                        (true, _) => "authorized (global: every persona)",
                        (false, true) => "authorized",
                        (false, false) => "-",
                    };
                    println!("  {:<24} {how}", s.name);
                }
                println!("skills:");
                for s in &g.skills {
                    match (&s.suspended, s.granted) {
                        (Some(who), _) => println!(
                            "  {:<24} suspended (given to {who}; `skillhost grants skill {} {} on` grants this one)",
                            s.name, g.persona, s.name
                        ),
                        (None, true) => println!("  {:<24} granted", s.name),
                        (None, false) => println!("  {:<24} -", s.name),
                    }
                }
            }
        }
    }
    host.shutdown().await;
    Ok(())
}
