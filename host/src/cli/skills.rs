//! Operator commands for bundles, keys and skills.

use std::path::{Path, PathBuf};

use clap::Subcommand;

use crate::bundle::install::{self, InstallOptions};
use crate::bundle::trust::{PublicKey, SecretKey};
use crate::bundle::{MAX_ARCHIVE_BYTES, Signer, pack_dir};
use crate::registry::catalog;
use crate::sandbox::Sandbox;
use crate::skill::Skill;
use crate::state::Store;
use crate::state::data_dir::DataDir;

#[derive(Debug, Subcommand)]
pub(super) enum TrustCommand {
    /// Trust a publisher key.
    Add {
        /// The `.pub` file.
        file: PathBuf,
        /// A label for the key.
        #[arg(long)]
        name: String,
        /// Also trust this key to publish SKILL even though another key
        /// signed earlier versions (repeatable).
        #[arg(long = "for", value_name = "SKILL")]
        for_skills: Vec<String>,
    },
    /// List trusted keys.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stop trusting a key, by key id or label.
    Remove {
        /// Key id or label.
        key: String,
    },
}

#[derive(Debug, Subcommand)]
pub(super) enum SkillsCommand {
    /// The effective skill of every name: source, version, digest, signer,
    /// trust, enabled, and what it shadows.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Enable a skill.
    Enable {
        /// Skill name.
        name: String,
    },
    /// Disable a skill.
    Disable {
        /// Skill name.
        name: String,
    },
    /// Trust an untrusted install or local folder of this name.
    Trust {
        /// Skill name.
        name: String,
    },
}

/// Opens the data dir and database, cleaning up any interrupted install.
fn open_state(data_dir: &Path) -> anyhow::Result<(DataDir, Store)> {
    let data = DataDir::open(data_dir)?;
    let mut store = Store::open(&data.root)?;
    install::recover(&data, &mut store)?;
    Ok((data, store))
}

pub(super) fn keygen(out: &Path) -> anyhow::Result<()> {
    let (secret, public) = SecretKey::generate()?;
    let (key, pubf) = secret.write_pair(out)?;
    println!("key id {}", public.key_id());
    println!("secret key: {} (mode 0600; keep it private)", key.display());
    println!("public key: {}", pubf.display());
    Ok(())
}

pub(super) fn pack(dir: &Path, key: Option<&Path>, out: &Path) -> anyhow::Result<()> {
    let key = key.map(SecretKey::read).transpose()?;
    let (bytes, statement) = pack_dir(dir, key.as_ref())?;
    let tmp = out.with_extension("skill.tmp");
    std::fs::write(&tmp, &bytes).and_then(|()| std::fs::rename(&tmp, out))?;
    println!(
        "{}@{}: {} files, {} bytes, {}",
        statement.name,
        statement.version,
        statement.files.len(),
        bytes.len(),
        statement
            .signer
            .map(|k| format!("signed by {k}"))
            .unwrap_or_else(|| "unsigned".into())
    );
    Ok(())
}

fn read_bundle(file: &Path) -> anyhow::Result<Vec<u8>> {
    let len = std::fs::metadata(file)
        .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?
        .len();
    if len > MAX_ARCHIVE_BYTES {
        anyhow::bail!(
            "{}: {len} bytes, over the bundle limit of {MAX_ARCHIVE_BYTES}",
            file.display()
        );
    }
    Ok(std::fs::read(file)?)
}

pub(super) fn verify(data_dir: &Path, file: &Path, json: bool) -> anyhow::Result<()> {
    let bytes = read_bundle(file)?;
    let data = DataDir::open(data_dir)?;
    let b = install::verify(&data, &bytes)?;
    let trusted = matches!(b.signer, Signer::Trusted { .. });
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "name": b.statement.name,
                "version": b.statement.version.to_string(),
                "digest": b.digest,
                "signer": b.signer.key_id(),
                "trusted": trusted,
                "files": b.statement.files,
            }))?
        );
    } else {
        println!("name:    {}", b.statement.name);
        println!("version: {}", b.statement.version);
        println!("digest:  sha256:{}", b.digest);
        println!(
            "signer:  {}",
            match &b.signer {
                Signer::Unsigned => "none (unsigned)".to_string(),
                Signer::Unknown { key_id } => format!("{key_id} (not trusted: unknown key)"),
                Signer::Trusted { key_id } => format!("{key_id} (trusted, signature verified)"),
            }
        );
        println!("files:");
        for f in &b.statement.files {
            println!("  {:>9}  {}  {}", f.size, &f.sha256[..16], f.path);
        }
    }
    Ok(())
}

pub(super) async fn install(
    data_dir: &Path,
    file: &Path,
    options: InstallOptions,
) -> anyhow::Result<()> {
    let bytes = read_bundle(file)?;
    let (data, _store) = open_state(data_dir)?;
    let sandbox = super::open_sandbox(data_dir)?;
    let out = install::install(&data, &sandbox, &bytes, options).await?;
    println!(
        "installed {}@{} ({}, {})",
        out.name,
        out.version,
        out.signer
            .key_id()
            .map(|k| format!("signed by {k}"))
            .unwrap_or_else(|| "unsigned".into()),
        if out.trusted {
            "trusted"
        } else {
            "UNTRUSTED: visible to no persona until `skillhost skills trust`"
        }
    );
    Ok(())
}

pub(super) fn uninstall(data_dir: &Path, spec: &str) -> anyhow::Result<()> {
    let (data, _store) = open_state(data_dir)?;
    let removed = install::uninstall(&data, spec)?;
    let name = spec.split('@').next().unwrap_or(spec);
    for v in removed {
        println!("uninstalled {name}@{v}");
    }
    Ok(())
}

pub(super) fn trust(data_dir: &Path, cmd: TrustCommand) -> anyhow::Result<()> {
    let data = DataDir::open(data_dir)?;
    let mut store = Store::open(&data.root)?;
    match cmd {
        TrustCommand::Add {
            file,
            name,
            for_skills,
        } => {
            let key = PublicKey::read(&file)?;
            store.add_trusted_key(&key.key_id(), &name, &key.to_base64(), &for_skills)?;
            println!("trusted key {} as `{name}`", key.key_id());
        }
        TrustCommand::List { json } => {
            let keys = store.trusted_keys()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&keys)?);
            } else if keys.is_empty() {
                println!("no trusted keys");
            } else {
                for k in keys {
                    let extra = if k.skills.is_empty() {
                        String::new()
                    } else {
                        format!("  (also for: {})", k.skills.join(", "))
                    };
                    println!("{}  {}{extra}", k.key_id, k.label);
                }
            }
        }
        TrustCommand::Remove { key } => {
            if store.remove_trusted_key(&key)? == 0 {
                anyhow::bail!("no trusted key has the id or label `{key}`");
            }
            println!("removed {key}");
        }
    }
    Ok(())
}

pub(super) async fn skills(data_dir: &Path, cmd: SkillsCommand) -> anyhow::Result<()> {
    let states = match &cmd {
        SkillsCommand::List { .. } => {
            let host = super::open_host(data_dir).await?;
            let states = host.skills();
            host.shutdown().await;
            states?
        }
        _ => Vec::new(),
    };
    let (data, mut store) = open_state(data_dir)?;
    let (entries, problems) = catalog::effective(&data, &store)?;
    let known = |name: &str| -> anyhow::Result<()> {
        if entries.iter().any(|e| e.name == name) {
            Ok(())
        } else {
            anyhow::bail!("no skill named `{name}` (see `skillhost skills list`)")
        }
    };
    match cmd {
        SkillsCommand::List { json } => {
            for p in &problems {
                eprintln!("warning: {p}");
            }
            // The registry's view: ready, unresolved (with the names that
            // match no tool), untrusted, disabled or invalid.
            let states: Vec<(String, serde_json::Value)> = states
                .iter()
                .map(|s| {
                    let v = serde_json::to_value(&s.state).unwrap_or_default();
                    (s.name.clone(), v)
                })
                .collect();
            let state_of = |name: &str| {
                states
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default()
            };
            if json {
                let mut out = Vec::new();
                for e in &entries {
                    let mut v = serde_json::to_value(e)?;
                    if let (Some(obj), serde_json::Value::Object(state)) =
                        (v.as_object_mut(), state_of(&e.name))
                    {
                        obj.extend(state);
                    }
                    out.push(v);
                }
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                println!(
                    "{:<20} {:<9} {:<9} {:<14} {:<17} {:<9} {:<8} {:<11} shadows",
                    "NAME", "VERSION", "SOURCE", "DIGEST", "SIGNER", "TRUSTED", "ENABLED", "STATE"
                );
                for e in &entries {
                    let state = state_of(&e.name);
                    let state_name = state["state"].as_str().unwrap_or("-").to_string();
                    let source = serde_json::to_value(&e.source)?
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    println!(
                        "{:<20} {:<9} {:<9} {:<14} {:<17} {:<9} {:<8} {:<11} {}",
                        e.name,
                        e.version.to_string(),
                        source,
                        &e.digest[..e.digest.len().min(12)],
                        e.signer.as_deref().unwrap_or("-"),
                        if e.trusted { "yes" } else { "NO" },
                        if e.enabled { "yes" } else { "no" },
                        state_name,
                        if e.shadows.is_empty() {
                            "-".to_string()
                        } else {
                            e.shadows.join(", ")
                        }
                    );
                    if let Some(missing) = state["missing"].as_array() {
                        let names: Vec<&str> = missing.iter().filter_map(|m| m.as_str()).collect();
                        println!("    unresolved tool_names: {}", names.join(", "));
                    }
                    if let Some(error) = state["error"].as_str() {
                        println!("    invalid: {error}");
                    }
                }
            }
        }
        SkillsCommand::Enable { name } => {
            known(&name)?;
            store.set_enabled(&name, true)?;
            println!("enabled {name}");
        }
        SkillsCommand::Disable { name } => {
            known(&name)?;
            store.set_enabled(&name, false)?;
            println!("disabled {name}");
        }
        SkillsCommand::Trust { name } => {
            known(&name)?;
            store.set_trusted(&name)?;
            println!("trusted {name}");
        }
    }
    Ok(())
}

/// The effective, enabled, trusted skill that has `tool`.
pub(super) fn find_tool(data_dir: &Path, sandbox: &Sandbox, tool: &str) -> anyhow::Result<Skill> {
    let (data, store) = open_state(data_dir)?;
    let (entries, _) = catalog::effective(&data, &store)?;
    let mut known = Vec::new();
    for e in &entries {
        // Only the manifest is read to find the tool; only the skill that
        // has it is loaded (compiled or taken from the cache).
        let manifest = match e.manifest() {
            Ok(m) => m,
            Err(err) => {
                tracing::warn!("skipping {}@{}: {err}", e.name, e.version);
                continue;
            }
        };
        if manifest.tool(tool).is_some() {
            if !e.enabled {
                anyhow::bail!(
                    "`{tool}` belongs to skill `{}`, which is disabled (`skillhost skills enable {}`)",
                    e.name,
                    e.name
                );
            }
            if !e.trusted {
                anyhow::bail!(
                    "`{tool}` belongs to skill `{}`, which is untrusted (`skillhost skills trust {}`)",
                    e.name,
                    e.name
                );
            }
            return Ok(e.load(sandbox)?);
        }
        known.extend(manifest.tools.iter().map(|t| t.name.clone()));
    }
    anyhow::bail!(
        "no skill has a tool `{tool}` (available: {}); use --skill DIR for a skill folder",
        known.join(", ")
    )
}
