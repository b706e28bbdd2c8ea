//! The `skillhost` command line: thin translations of library calls.

mod demo;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::limits::LimitsRequest;
use crate::sandbox::{Sandbox, SandboxBuilder};
use crate::skill::Skill;

/// skillhost: a WebAssembly-sandboxed plugin host for AI agents.
#[derive(Debug, Parser)]
#[command(name = "skillhost", version, about, long_about = None)]
struct Cli {
    /// The data folder: compiled-code cache and host state.
    #[arg(long, global = true, env = "SKILLHOST_DATA", default_value = "./data")]
    data_dir: PathBuf,

    /// More log output on stderr (-v: info, -vv: debug, including guest
    /// stdout/stderr). `RUST_LOG` overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Build a skill's Rust guest for wasm32-wasip2 and place the component
    /// where skill.yaml's `component` field says.
    Build {
        /// The skill folder (with skill.yaml and Cargo.toml).
        dir: PathBuf,
    },
    /// Call one tool and print its result JSON on stdout.
    ///
    /// Without --skill, TOOL is looked up among the built-in skills.
    /// Any failure exits 1 with one line on stderr naming the limit or error.
    Call(CallArgs),
    /// Build the example plugins, call each tool, and show each hostile
    /// plugin stopped by its limit.
    Demo,
}

#[derive(Debug, Args)]
struct CallArgs {
    /// The tool to call, e.g. `text.word_count`.
    tool: String,
    /// A skill folder to load the tool from (skill.yaml + built component).
    #[arg(long)]
    skill: Option<PathBuf>,
    /// The arguments, a JSON object.
    #[arg(long, default_value = "{}")]
    args: String,
    /// Fuel budget for this call.
    #[arg(long)]
    fuel: Option<u64>,
    /// Memory cap for this call, in MiB.
    #[arg(long)]
    memory_mb: Option<u64>,
    /// Wall-clock deadline for this call, in milliseconds.
    #[arg(long)]
    timeout_ms: Option<u64>,
}

/// Runs the command line; the binary's `main` is only this.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", one_line(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}

fn one_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// The sandbox for this data dir, with its compiled-code cache.
fn open_sandbox(data_dir: &Path) -> anyhow::Result<Sandbox> {
    SandboxBuilder::new()
        .cache_dir(data_dir.join("cache").join("components"))
        .build()
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Build { dir } => {
            let out = tokio::task::spawn_blocking(move || crate::guest_build::build_skill(&dir))
                .await??;
            println!("{}", out.display());
            Ok(())
        }
        Command::Call(args) => call(&cli.data_dir, args).await,
        Command::Demo => demo::run(&cli.data_dir).await,
    }
}

async fn call(data_dir: &Path, args: CallArgs) -> anyhow::Result<()> {
    let arguments: serde_json::Value = serde_json::from_str(&args.args)
        .map_err(|e| anyhow::anyhow!("--args is not valid JSON: {e}"))?;
    let request = LimitsRequest {
        fuel: args.fuel,
        memory_bytes: args.memory_mb.map(|mb| mb.saturating_mul(1 << 20)),
        timeout_ms: args.timeout_ms,
    };
    let sandbox = open_sandbox(data_dir)?;
    let skill = match &args.skill {
        Some(dir) => Skill::load_dir(&sandbox, dir)?,
        None => find_builtin(&sandbox, &args.tool)?,
    };
    let out = skill.call(&args.tool, &arguments, &request).await?;
    println!("{}", serde_json::to_string_pretty(&out.output)?);
    Ok(())
}

fn find_builtin(sandbox: &Sandbox, tool: &str) -> anyhow::Result<Skill> {
    let mut known = Vec::new();
    for b in crate::builtin::builtin_skills() {
        let skill = b.load(sandbox)?;
        if skill.manifest().tool(tool).is_some() {
            return Ok(skill);
        }
        known.extend(skill.manifest().tools.iter().map(|t| t.name.clone()));
    }
    anyhow::bail!(
        "no built-in skill has a tool `{tool}` (built-in tools: {}); use --skill DIR for a skill folder",
        known.join(", ")
    )
}
