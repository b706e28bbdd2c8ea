//! Operator commands for bundles, keys and skills.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use skillhost::{InstallOptions, MAX_ARCHIVE_BYTES, PublicKey, SecretKey, Signer, pack_dir};

use super::open_host;

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
    /// One skill in full: state, tools, and the permissions it asks for
    /// (network origins, secrets, assets), approved or waiting.
    Show {
        /// Skill name.
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Approve exactly the permissions the skill waits for (shown by
    /// `skills show`): a new skill's, or those a newer installed version
    /// adds (it becomes the one that runs).
    Approve {
        /// Skill name.
        name: String,
        /// Approve only if the set's digest is this one (as `skills show`
        /// printed it), so a set that changed since is not approved.
        #[arg(long)]
        digest: Option<String>,
    },
}

/// Prints a permission set, one line per item, indented.
fn print_permissions(p: &skillhost::Permissions) {
    if p.is_empty() {
        println!("    nothing beyond computing");
        return;
    }
    for o in &p.network {
        println!("    network  {o}");
    }
    for s in &p.secrets {
        println!(
            "    secret   {} as `{}: {}` to {}",
            s.name,
            s.header,
            s.format,
            s.origins.join(", ")
        );
    }
    if p.assets {
        println!("    assets   read its own assets/ folder");
    }
    if p.sampling {
        println!("    sampling ask the caller's model for completions");
    }
    if p.roots {
        println!("    roots    ask the caller's client for its roots");
    }
    if let Some(s) = &p.scripts {
        println!(
            "    scripts  run in the sandbox (digest {}): {}",
            s.digest.get(..12).unwrap_or(&s.digest),
            s.scripts.join(", ")
        );
        if !s.packages.is_empty() {
            println!("    packages {}", s.packages.join(", "));
        }
    }
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

pub(super) async fn verify(data_dir: &Path, file: &Path, json: bool) -> anyhow::Result<()> {
    let bytes = read_bundle(file)?;
    let host = open_host(data_dir).await?;
    let verified = host.verify_bundle(&bytes);
    host.shutdown().await;
    let b = verified?;
    let trusted = matches!(b.signer, Signer::Trusted { .. });
    // The manifest is one of the signed files; verify checked it parses.
    let permissions = b
        .files
        .get(skillhost::MANIFEST_FILE)
        .and_then(|y| skillhost::SkillManifest::parse(&String::from_utf8_lossy(y)).ok())
        .map(|m| m.permissions)
        .unwrap_or_default();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "name": b.statement.name,
                "version": b.statement.version.to_string(),
                "digest": b.digest,
                "signer": b.signer.key_id(),
                "trusted": trusted,
                "permissions": permissions,
                "permissions_digest": permissions.digest(),
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
        println!("permissions (digest {}):", permissions.digest());
        print_permissions(&permissions);
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
    let host = open_host(data_dir).await?;
    let installed = host.install_bundle(&bytes, options).await;
    let now = match &installed {
        Ok(out) => host
            .skills()
            .ok()
            .and_then(|all| all.into_iter().find(|s| s.name == out.name)),
        Err(_) => None,
    };
    host.shutdown().await;
    let out = installed?;
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
    if let Some(s) = now {
        let held = s.held.as_ref().filter(|h| h.version == out.version);
        match held {
            Some(h) => {
                println!(
                    "it asks for more than {} {} was approved for, so {} keeps running until \
                     `skillhost skills approve {}`:",
                    s.name, s.version, s.version, s.name
                );
                print_permissions(&h.permissions);
                println!("  beyond what is approved: {}", h.unapproved.join("; "));
            }
            None if s.version == out.version.to_string() => {
                let state = serde_json::to_value(&s.state)?;
                if !s.permissions.is_empty() {
                    println!("it asks for:");
                    print_permissions(&s.permissions);
                }
                if state["state"] == "unapproved" {
                    println!(
                        "  not approved: it is off until `skillhost skills approve {}` (digest {})",
                        s.name, s.permissions_digest
                    );
                }
            }
            None => {}
        }
    }
    Ok(())
}

pub(super) async fn uninstall(data_dir: &Path, spec: &str) -> anyhow::Result<()> {
    let host = open_host(data_dir).await?;
    let removed = host.uninstall_skill(spec);
    host.shutdown().await;
    let removed = removed?;
    let name = spec.split('@').next().unwrap_or(spec);
    for v in removed {
        println!("uninstalled {name}@{v}");
    }
    Ok(())
}

pub(super) async fn trust(data_dir: &Path, cmd: TrustCommand) -> anyhow::Result<()> {
    let host = open_host(data_dir).await?;
    let done = trust_with(&host, cmd);
    host.shutdown().await;
    done
}

fn trust_with(host: &skillhost::Host, cmd: TrustCommand) -> anyhow::Result<()> {
    match cmd {
        TrustCommand::Add {
            file,
            name,
            for_skills,
        } => {
            let key = PublicKey::read(&file)?;
            host.trust_key(&key, &name, &for_skills)?;
            println!("trusted key {} as `{name}`", key.key_id());
        }
        TrustCommand::List { json } => {
            let keys = host.trusted_keys()?;
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
            host.untrust_key(&key)?;
            println!("removed {key}");
        }
    }
    Ok(())
}

pub(super) async fn skills(data_dir: &Path, cmd: SkillsCommand) -> anyhow::Result<()> {
    let host = open_host(data_dir).await?;
    let done = skills_with(&host, cmd);
    host.shutdown().await;
    done
}

fn skills_with(host: &skillhost::Host, cmd: SkillsCommand) -> anyhow::Result<()> {
    match cmd {
        SkillsCommand::List { json } => {
            let skills = host.skills()?;
            for p in host.skill_source_problems()? {
                eprintln!("warning: {p}");
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&skills)?);
                return Ok(());
            }
            println!(
                "{:<20} {:<9} {:<9} {:<14} {:<17} {:<9} {:<8} {:<11} shadows",
                "NAME", "VERSION", "SOURCE", "DIGEST", "SIGNER", "TRUSTED", "ENABLED", "STATE"
            );
            for s in &skills {
                let state = serde_json::to_value(&s.state)?;
                let source = serde_json::to_value(&s.source)?
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                println!(
                    "{:<20} {:<9} {:<9} {:<14} {:<17} {:<9} {:<8} {:<11} {}",
                    s.name,
                    s.version,
                    source,
                    &s.digest[..s.digest.len().min(12)],
                    s.signer.as_deref().unwrap_or("-"),
                    if s.trusted { "yes" } else { "NO" },
                    if s.enabled { "yes" } else { "no" },
                    state["state"].as_str().unwrap_or("-"),
                    if s.shadows.is_empty() {
                        "-".to_string()
                    } else {
                        s.shadows.join(", ")
                    }
                );
                if let Some(missing) = state["missing"].as_array() {
                    let names: Vec<&str> = missing.iter().filter_map(|m| m.as_str()).collect();
                    println!("    unresolved tool_names: {}", names.join(", "));
                }
                if let Some(error) = state["error"].as_str() {
                    println!("    invalid: {error}");
                }
                if let Some(unapproved) = state["unapproved"].as_array() {
                    let items: Vec<&str> = unapproved.iter().filter_map(|m| m.as_str()).collect();
                    println!(
                        "    waits for approval of: {} (`skillhost skills approve {}`)",
                        items.join("; "),
                        s.name
                    );
                }
                if let Some(h) = &s.held {
                    println!(
                        "    version {} installed, waits for approval of: {} (`skillhost skills approve {}`)",
                        h.version,
                        h.unapproved.join("; "),
                        s.name
                    );
                }
            }
        }
        SkillsCommand::Show { name, json } => {
            let Some(s) = host.skills()?.into_iter().find(|s| s.name == name) else {
                anyhow::bail!("no skill named `{name}` (see `skillhost skills list`)");
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&s)?);
                return Ok(());
            }
            let state = serde_json::to_value(&s.state)?;
            println!("name:     {}", s.name);
            println!("version:  {}", s.version);
            println!("source:   {}", s.source.as_str());
            println!("signer:   {}", s.signer.as_deref().unwrap_or("-"));
            println!("trusted:  {}", if s.trusted { "yes" } else { "NO" });
            println!("enabled:  {}", if s.enabled { "yes" } else { "no" });
            println!("state:    {}", state["state"].as_str().unwrap_or("-"));
            println!("tools:    {}", s.tools.join(", "));
            if let Some(set) = &s.scripts {
                println!(
                    "scripts:  {} ({} script{})",
                    skillhost::run_script_tool(&s.name),
                    set.scripts.len(),
                    if set.scripts.len() == 1 { "" } else { "s" }
                );
                for script in &set.scripts {
                    let note = match script.refusal() {
                        Some(_) => " (cannot run in the sandbox)".to_string(),
                        None if script.read_only => " (read-only)".to_string(),
                        None => String::new(),
                    };
                    println!("    {}{note}", script.path);
                }
            }
            for w in &s.warnings {
                println!("warning:  {w}");
            }
            println!("permissions (digest {}):", s.permissions_digest);
            print_permissions(&s.permissions);
            if let Some(u) = state["unapproved"].as_array() {
                let items: Vec<&str> = u.iter().filter_map(|m| m.as_str()).collect();
                println!("  not approved: {}", items.join("; "));
                println!("  `skillhost skills approve {name}` approves the set above");
            }
            if let Some(m) = state["missing"]
                .as_array()
                .filter(|_| state["state"] == "secrets_missing")
            {
                let items: Vec<&str> = m.iter().filter_map(|m| m.as_str()).collect();
                println!(
                    "  secrets not set: {} (`skillhost secrets set {name} NAME` reads one from standard input)",
                    items.join(", ")
                );
            }
            if let Some(h) = &s.held {
                println!(
                    "held:     version {} ({}) is installed and waits for approval (digest {}):",
                    h.version,
                    h.source.as_str(),
                    h.permissions.digest()
                );
                print_permissions(&h.permissions);
                println!("  beyond what is approved: {}", h.unapproved.join("; "));
                println!(
                    "  `skillhost skills approve {name}` approves it and makes it the one that runs"
                );
            }
        }
        SkillsCommand::Approve { name, digest } => {
            let s = host.approve_permissions(
                &name,
                digest.as_deref(),
                &skillhost::Decider::operator("cli"),
            )?;
            let state = serde_json::to_value(&s.state)?;
            println!(
                "approved the permissions of {name}; {} {} is {}",
                s.name,
                s.version,
                state["state"].as_str().unwrap_or("-")
            );
            print_permissions(&s.permissions);
        }
        SkillsCommand::Enable { name } => {
            host.set_skill_enabled(&name, true)?;
            println!("enabled {name}");
        }
        SkillsCommand::Disable { name } => {
            host.set_skill_enabled(&name, false)?;
            println!("disabled {name}");
        }
        SkillsCommand::Trust { name } => {
            host.trust_skill(&name)?;
            println!("trusted {name}");
        }
    }
    Ok(())
}
