//! The `skillhost` command line: thin translations of [`skillhost::Host`]
//! calls (the same methods the HTTP API calls for the same operation).
//!
//! Exit codes: 0 done; 1 the request was refused or the call failed (the
//! one line on stderr says why: the host's typed errors carry a message
//! naming what was wrong and what to do); 2 the command line is malformed;
//! 3 the call waits for approval (`skillhost runs approve RUN`).
//!
//! What the CLI prints is often not its own: a run's error echoes a
//! persona's arguments, a guest's or an MCP server's words; a listing
//! shows names and descriptions from files. None of it may drive the
//! operator's terminal (set its title, clear it, write over a line), so
//! every `println!`, `eprintln!`, `print!` and `eprint!` in `cli/` is the
//! one defined below, which passes the whole text through
//! [`skillhost::escape_for_terminal`] (human output and `--json` alike:
//! the escape is JSON's own), and the log's writer escapes what tracing's
//! own sanitizing leaves ([`LogWriter`]).

// The macros every module of `cli/` prints with (declared before them, so
// they shadow std's there): std's, with the text escaped for a terminal.
macro_rules! println {
    () => {
        ::std::println!()
    };
    ($($arg:tt)*) => {
        ::std::println!("{}", ::skillhost::escape_for_terminal(&::std::format!($($arg)*)))
    };
}

macro_rules! eprintln {
    () => {
        ::std::eprintln!()
    };
    ($($arg:tt)*) => {
        ::std::eprintln!("{}", ::skillhost::escape_for_terminal(&::std::format!($($arg)*)))
    };
}

#[allow(unused_macros)] // kept beside println! so no module prints unescaped
macro_rules! print {
    ($($arg:tt)*) => {
        ::std::print!("{}", ::skillhost::escape_for_terminal(&::std::format!($($arg)*)))
    };
}

#[allow(unused_macros)] // kept beside eprintln! so no module prints unescaped
macro_rules! eprint {
    ($($arg:tt)*) => {
        ::std::eprint!("{}", ::skillhost::escape_for_terminal(&::std::format!($($arg)*)))
    };
}

mod author;
mod demo;
mod mcp;
mod personas;
mod runs;
mod secrets;
mod serve;
mod skills;
mod sources;
mod tokens;
mod tools;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use skillhost::LimitsRequest;
use skillhost::Skill;
use skillhost::SkillManifest;
use skillhost::{Sandbox, SandboxBuilder};

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
    /// Build a skill's guest with its language's toolchain (Cargo.toml:
    /// cargo for wasm32-wasip2; app.py: componentize-py; app.js:
    /// componentize-js) and place the component where skill.yaml's
    /// `component` field says. A missing toolchain is named with the
    /// command that installs it.
    ///
    /// A Python or JS component already built from the same sources (by
    /// the same toolchain, with this skillhost's SDK) is left as it is.
    Build {
        /// The skill folder (with skill.yaml, and Cargo.toml, app.py or app.js).
        dir: PathBuf,
        /// Build again even when the component in place was built from
        /// the same sources.
        #[arg(long)]
        force: bool,
    },
    /// Call one tool and print its result JSON on stdout.
    ///
    /// Without --skill, a TOOL named `SERVER.NAME` where SERVER is a
    /// configured MCP server is that server's tool (the server is started
    /// for the call and stopped after); any other TOOL is looked up among
    /// the effective, enabled, trusted skills (built-in, local folders,
    /// installs).
    /// Any failure exits 1 with one line on stderr naming the limit or error.
    Call(CallArgs),
    /// Build the example plugins, call each tool, and show each hostile
    /// plugin stopped by its limit.
    Demo,
    /// Scaffold a new skill folder: skill.yaml with one tool and one
    /// example, and the guest in the chosen language on its SDK (Rust: a
    /// crate with the SDK vendored; Python: app.py and skillhost.py; JS:
    /// app.js, skillhost.js and a package.json pinning componentize-js).
    New {
        /// The skill's name; also the folder's.
        name: String,
        /// Where to create the folder.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
        /// The guest's language.
        #[arg(long, value_enum, default_value = "rust")]
        lang: author::Lang,
    },
    /// Validate a skill folder: manifest, schemas, component imports,
    /// implemented tools, and every example. Prints every problem.
    Check {
        /// The skill folder.
        dir: PathBuf,
        /// A folder of wheels to resolve the scripts' Python requirements
        /// against (writes `.packages/` with the lock and the chosen
        /// wheels, and unpacks them into `.python/`).
        #[arg(long)]
        wheels: Option<PathBuf>,
    },
    /// Generate an ed25519 publisher key pair: NAME.key (secret, mode 0600)
    /// and NAME.pub.
    Keygen {
        /// Base path of the two files.
        #[arg(long)]
        out: PathBuf,
    },
    /// Pack a skill folder into a reproducible, signed .skill bundle.
    Pack {
        /// The skill folder.
        dir: PathBuf,
        /// The publisher's secret key; without it the bundle is unsigned.
        #[arg(long)]
        key: Option<PathBuf>,
        /// The bundle file to write.
        #[arg(long)]
        out: PathBuf,
        /// Pack without running `check` first (manifest, imports,
        /// implemented tools, every example). For the rare skill whose
        /// examples cannot run here.
        #[arg(long)]
        no_check: bool,
        /// A folder of wheels to resolve the scripts' Python requirements
        /// against (as `check --wheels`); without it, the lock in
        /// `.packages/` is checked again.
        #[arg(long)]
        wheels: Option<PathBuf>,
    },
    /// Check a bundle and print its name, version, signer, trust and files.
    Verify {
        /// The bundle.
        file: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Install a bundle into the data dir.
    Install {
        /// The bundle.
        file: PathBuf,
        /// Accept an unsigned or untrusted bundle, recorded as untrusted.
        #[arg(long)]
        allow_untrusted: bool,
        /// Accept a version lower than an installed one.
        #[arg(long)]
        allow_downgrade: bool,
        /// Accept a skill named like a built-in skill, which it then
        /// shadows.
        #[arg(long)]
        replace_builtin: bool,
    },
    /// Uninstall NAME (every version) or NAME@VERSION.
    Uninstall {
        /// NAME or NAME@VERSION.
        spec: String,
    },
    /// Manage trusted publisher keys.
    #[command(subcommand)]
    Trust(skills::TrustCommand),
    /// List and manage skills from every source.
    #[command(subcommand)]
    Skills(skills::SkillsCommand),
    /// Secrets a skill's HTTP requests carry as headers (values from
    /// standard input, kept sealed; the skill's code never sees them).
    #[command(subcommand)]
    Secrets(secrets::SecretsCommand),
    /// Local skill folders loaded on every start (settings.json
    /// `skill_dirs`): add, remove, list.
    #[command(subcommand)]
    Sources(sources::SourcesCommand),
    /// Configure, test and inspect MCP servers (data/mcp_servers.json).
    #[command(subcommand)]
    Mcp(mcp::McpCommand),
    /// Create, list and remove personas.
    #[command(subcommand)]
    Personas(personas::PersonasCommand),
    /// Grant MCP servers and skills to personas, and show a persona's grants.
    #[command(subcommand)]
    Grants(personas::GrantsCommand),
    /// The tool registry.
    #[command(subcommand)]
    Tools(tools::ToolsCommand),
    /// Runs: list, show, approve and deny.
    #[command(subcommand)]
    Runs(runs::RunsCommand),
    /// Blobs passed to calls by reference (input refs).
    #[command(subcommand)]
    Refs(runs::RefsCommand),
    /// Serve a persona's tools to an MCP client over stdio (`--stdio`), or
    /// every persona's over streamable HTTP with bearer tokens (`--http`).
    Serve(serve::ServeArgs),
    /// Bearer tokens for `serve --http`, each acting as one persona.
    #[command(subcommand)]
    Tokens(tokens::TokensCommand),
    /// Copy this data dir's state (its SQLite database, the bundles of its
    /// installs, its ref files) into an empty PostgreSQL database, in one
    /// transaction, then check every table's rows and every blob's sha256.
    /// Point replicas at it afterwards with `"database": URL` in
    /// settings.json (or SKILLHOST_DATABASE).
    Migrate {
        /// The PostgreSQL database: postgres://user:password@host:port/db.
        #[arg(long, value_name = "URL")]
        to: String,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Forget what is older than a given age: decided runs (never one that
    /// waits or runs), events, and ref blobs no remaining run names; then
    /// give the space back to the file system.
    Gc {
        /// The age: a number and a unit, `s`, `m`, `h` or `d` (`30d`).
        #[arg(long, value_name = "AGE", value_parser = parse_age)]
        older_than: std::time::Duration,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Why can't this persona use that tool? Walks server → registry →
    /// grants → runs → approvals → server log and names the first broken
    /// link.
    Why {
        /// The persona.
        #[arg(long)]
        persona: String,
        /// The tool.
        tool: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
struct CallArgs {
    /// The tool to call, e.g. `text.word_count` or `SERVER.TOOL`.
    tool: String,
    /// Call as this persona (only its granted tools). Without it the
    /// operator calls, who may call every registered tool.
    #[arg(long)]
    persona: Option<String>,
    /// Confirm up front: a tool that requires confirmation runs without
    /// stopping in waiting_approval.
    #[arg(long, short = 'y')]
    yes: bool,
    /// An input ref the tool may read (repeatable; `skillhost refs add`).
    #[arg(long = "ref", value_name = "REF")]
    refs: Vec<String>,
    /// A skill folder to load the tool from directly (development: no
    /// registry, no persona, no run recorded).
    #[arg(long, conflicts_with_all = ["persona", "refs"])]
    skill: Option<PathBuf>,
    /// The arguments, a JSON object.
    #[arg(long, default_value = "{}")]
    args: String,
    /// Take the arguments and input refs from a structured handoff file
    /// (`{"args": {...}, "input_refs": [...]}`, `-` for stdin) written by a
    /// previous step; a handoff holding a host path, a shell command or an
    /// interpreter invocation is refused.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["args", "skill"])]
    handoff: Option<PathBuf>,
    /// Print the handoff the result passes to the next step (the result
    /// with every local path removed) instead of the result.
    #[arg(long, conflicts_with_all = ["json", "skill"])]
    emit_handoff: bool,
    /// Fuel budget for this call.
    #[arg(long)]
    fuel: Option<u64>,
    /// Memory cap for this call, in MiB.
    #[arg(long)]
    memory_mb: Option<u64>,
    /// Wall-clock deadline for this call, in milliseconds.
    #[arg(long)]
    timeout_ms: Option<u64>,
    /// Print the whole run report as JSON (run id, outcome, output, error).
    #[arg(long)]
    json: bool,
}

/// Exit code of a refused request or a failed call.
const EXIT_FAILED: u8 = 1;

/// Runs the command line; the binary's `main` is only this.
pub(crate) fn main() -> ExitCode {
    // Everything this process creates is private to its user: the data
    // dir holds the database, tokens and secrets (the library creates its
    // own files so; this covers what SQLite and the toolchains create too).
    // SAFETY: umask only sets this process's file mode creation mask.
    unsafe {
        libc::umask(0o077);
    }
    quiet_on_closed_stdout();
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    let runtime = match runtime_for(&cli.command).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", one_line(&format!("{e:#}")));
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// The async runtime a command runs on. `serve --stdio` has one client
/// whose requests arrive one line at a time on one pipe: a single-threaded
/// runtime serves it with no hand-offs between threads (each hand-off wakes
/// a parked worker, which on a 2-CPU machine cost a third of a call's
/// latency; see `benches/serve.rs`). Guest code yields every epoch tick and
/// the run writer has its own thread, so one call never stalls the session.
/// Every other command (HTTP serving many clients among them) runs on a
/// multi-threaded runtime.
fn runtime_for(command: &Command) -> tokio::runtime::Builder {
    match command {
        Command::Serve(args) if args.is_stdio() => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    }
}

/// Like other Unix tools, end quietly (exit 141, as if by SIGPIPE) when the
/// reader of our output goes away (`skillhost runs list | head`) instead of
/// panicking in `println!`. SIGPIPE itself stays ignored: writing to an MCP
/// child that died must be an error, not the end of the host.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let msg = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info)
    }));
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
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let _ = tracing_subscriber::registry()
        .with(log_layer(filter))
        .try_init();
}

/// The process's log: records `filter` (`RUST_LOG`) passes and
/// [`not_guest_arguments`] keeps, written to stderr.
fn log_layer<S>(filter: tracing_subscriber::EnvFilter) -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    // Colours only for a person at a terminal: a log file, a pipe or an
    // MCP client's stderr capture gets plain text.
    use std::io::IsTerminal as _;
    use tracing_subscriber::Layer as _;
    // The guest-arguments filter says it passes nothing above what
    // RUST_LOG asks for. Without that hint the subscriber's level is
    // unbounded, so the `log` records of every crate (cranelift logs each
    // function it compiles at trace level) were built and filtered one by
    // one: compiling a 19 MB Python guest spent most of its time there.
    let hint = filter
        .max_level_hint()
        .unwrap_or(tracing_subscriber::filter::LevelFilter::TRACE);
    tracing_subscriber::fmt::layer()
        .with_writer(|| LogWriter(std::io::stderr()))
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter(filter)
        .with_filter(
            tracing_subscriber::filter::filter_fn(not_guest_arguments).with_max_level_hint(hint),
        )
}

/// Whether a log record may be written, whatever `RUST_LOG` asks for.
/// The WASI bindings (`wasmtime_wasi`, `wasmtime_wasi_http`) trace every
/// argument a guest passes them, as the guest wrote it and before the host
/// has checked or redacted anything: a request's method, authority, path
/// and headers, a file's path. A secret an API echoed back that the guest
/// put in its next request would be written out. Their trace records are
/// dropped; their warnings and errors (the bindings' words, not the
/// guest's) are kept.
fn not_guest_arguments(meta: &tracing::Metadata<'_>) -> bool {
    !(*meta.level() == tracing::Level::TRACE && meta.target().starts_with("wasmtime_wasi"))
}

/// The log's writer: stderr, with what could drive a terminal escaped.
/// tracing's formatter already writes each ESC, BEL and C1 character of an
/// event's text escaped, so an ESC that reaches this writer is the colour
/// it puts around a level (when stderr is a terminal) and passes; the
/// rest (a carriage return, other C0 characters, the invisible ones) is
/// escaped as [`skillhost::escape_for_terminal`] does. tracing writes each
/// event whole, in one call.
struct LogWriter(std::io::Stderr);

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let shown: Vec<_> = text
            .split('\u{1b}')
            .map(skillhost::escape_for_terminal)
            .collect();
        self.0.write_all(shown.join("\u{1b}").as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// The sandbox for this data dir, with its compiled-code cache.
fn open_sandbox(data_dir: &Path) -> anyhow::Result<Sandbox> {
    SandboxBuilder::new()
        .cache_dir(skillhost::compile_cache_dir(data_dir))
        .build()
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Call(args) => return call(&cli.data_dir, args).await,
        Command::Runs(cmd) => return runs::runs(&cli.data_dir, cmd).await,
        _ => {}
    }
    run_plain(cli).await.map(|()| ExitCode::SUCCESS)
}

async fn run_plain(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Build { dir, force } => {
            let out = tokio::task::spawn_blocking(move || match force {
                true => skillhost::rebuild_skill(&dir, &Default::default()),
                false => skillhost::build_skill(&dir),
            })
            .await??;
            println!("{}", out.display());
            Ok(())
        }
        Command::Call(_) | Command::Runs(_) => Ok(()),
        Command::Demo => demo::run(&cli.data_dir).await,
        Command::New { name, dir, lang } => {
            let made = author::new_skill(&name, &dir, lang)?;
            println!("{}", made.display());
            Ok(())
        }
        Command::Check { dir, wheels } => {
            if let Some(p) = skillhost::prepare_packages(&dir, wheels.as_deref())
                .map_err(|e| anyhow::anyhow!("{}: {}", dir.display(), one_line(&e.to_string())))?
            {
                println!("packages: {}", p.packages.join(", "));
                for d in &p.dropped {
                    println!("dropped native file: {d}");
                }
            }
            let sandbox = open_sandbox(&cli.data_dir)?;
            let (problems, summary) = author::check(&sandbox, &dir).await;
            if let Ok(manifest) = SkillManifest::load_dir(&dir) {
                for w in &manifest.warnings {
                    println!("warning: {}", one_line(&w.to_string()));
                }
            }
            if problems.is_empty() {
                println!("ok: {summary}");
                Ok(())
            } else {
                for p in &problems {
                    println!("problem: {}", one_line(p));
                }
                anyhow::bail!("{} problem(s) in {}", problems.len(), dir.display())
            }
        }
        Command::Keygen { out } => skills::keygen(&out),
        Command::Pack {
            dir,
            key,
            out,
            no_check,
            wheels,
        } => {
            if let Some(p) = skillhost::prepare_packages(&dir, wheels.as_deref())
                .map_err(|e| anyhow::anyhow!("not packed: {}", one_line(&e.to_string())))?
            {
                println!("packages: {}", p.packages.join(", "));
                for d in &p.dropped {
                    println!("dropped native file: {d}");
                }
            }
            // A component older than its sources is never signed, checked
            // or not: the bundle would not run what its sources say.
            if let Ok(manifest) = SkillManifest::load_dir(&dir)
                && let Some(stale) = author::stale_component(&dir, &manifest)
            {
                anyhow::bail!("not packed: {stale}");
            }
            if !no_check {
                // The same checks as `check`: a bundle that would fail them
                // is not signed.
                let sandbox = open_sandbox(&cli.data_dir)?;
                let (problems, _) = author::check(&sandbox, &dir).await;
                if !problems.is_empty() {
                    anyhow::bail!(
                        "not packed: `skillhost check {}` finds {} problem(s): {} (fix them, or \
                         pack with --no-check)",
                        dir.display(),
                        problems.len(),
                        one_line(&problems.join("; "))
                    );
                }
            }
            skills::pack(&dir, key.as_deref(), &out)
        }
        Command::Verify { file, json } => skills::verify(&cli.data_dir, &file, json).await,
        Command::Install {
            file,
            allow_untrusted,
            allow_downgrade,
            replace_builtin,
        } => {
            skills::install(
                &cli.data_dir,
                &file,
                skillhost::InstallOptions {
                    allow_untrusted,
                    allow_downgrade,
                    replace_builtin,
                },
            )
            .await
        }
        Command::Uninstall { spec } => skills::uninstall(&cli.data_dir, &spec).await,
        Command::Trust(cmd) => skills::trust(&cli.data_dir, cmd).await,
        Command::Skills(cmd) => skills::skills(&cli.data_dir, cmd).await,
        Command::Secrets(cmd) => secrets::secrets(&cli.data_dir, cmd).await,
        Command::Sources(cmd) => sources::sources(&cli.data_dir, cmd).await,
        Command::Mcp(cmd) => mcp::run(&cli.data_dir, cmd).await,
        Command::Personas(cmd) => personas::personas(&cli.data_dir, cmd).await,
        Command::Grants(cmd) => personas::grants(&cli.data_dir, cmd).await,
        Command::Tools(cmd) => tools::tools(&cli.data_dir, cmd).await,
        Command::Refs(cmd) => runs::refs(&cli.data_dir, cmd).await,
        Command::Serve(args) => serve::serve(&cli.data_dir, args).await,
        Command::Tokens(cmd) => tokens::tokens(&cli.data_dir, cmd).await,
        Command::Migrate { to, json } => migrate(&cli.data_dir, &to, json),
        Command::Why {
            persona,
            tool,
            json,
        } => tools::why(&cli.data_dir, &persona, &tool, json).await,
        Command::Gc { older_than, json } => {
            let host = open_host(&cli.data_dir).await?;
            let done = host.gc(older_than);
            host.shutdown().await;
            let done = done?;
            if json {
                println!("{}", serde_json::to_string_pretty(&done)?);
            } else {
                println!(
                    "forgot {} runs, {} events, {} refs; database {} → {} bytes",
                    done.runs, done.events, done.refs, done.db_bytes_before, done.db_bytes_after
                );
            }
            Ok(())
        }
    }
}

/// An age like `30d`, `12h`, `90m` or `0s`.
pub(crate) fn parse_age(s: &str) -> Result<std::time::Duration, String> {
    let s = s.trim();
    let unit_at = s
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("`{s}`: give a unit, e.g. `30d` (s, m, h or d)"))?;
    let (n, unit) = s.split_at(unit_at);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("`{s}`: not a number followed by s, m, h or d"))?;
    let secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("`{s}`: the unit is s, m, h or d")),
    };
    n.checked_mul(secs)
        .map(std::time::Duration::from_secs)
        .ok_or_else(|| format!("`{s}` is too long"))
}

/// The host for this data dir (MCP servers on demand).
async fn open_host(data_dir: &Path) -> anyhow::Result<skillhost::Host> {
    let sandbox = open_sandbox(data_dir)?;
    let host = skillhost::HostBuilder::new(data_dir)
        .sandbox(sandbox)
        .build()
        .await?;
    Ok(host)
}

/// Exit code of a call that stopped in `waiting_approval`.
const EXIT_WAITING_APPROVAL: u8 = 3;

/// Prints a run report: the output on stdout for `ok` (exit 0); for
/// `waiting_approval` the run id and how to approve on stderr (exit 3);
/// otherwise the error on stderr (exit 1; an MCP timeout's JSON goes to
/// stdout too). With `json` the whole report goes to stdout.
fn print_report(report: &skillhost::RunReport, json: bool) -> anyhow::Result<ExitCode> {
    use skillhost::Outcome;
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
    }
    match report.outcome {
        Outcome::Ok => {
            if !json {
                let out = report.output.as_ref().map(|o| o.to_value());
                println!(
                    "{}",
                    serde_json::to_string_pretty(&out.unwrap_or_default())?
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Outcome::WaitingApproval => {
            eprintln!(
                "waiting_approval: {}",
                one_line(report.error.as_deref().unwrap_or(""))
            );
            Ok(ExitCode::from(EXIT_WAITING_APPROVAL))
        }
        outcome => {
            let error = report.error.clone().unwrap_or_default();
            // An MCP timeout's answer is the contract's JSON object: it goes
            // to stdout as the result would, and stderr says it once, in words.
            let timeout: Option<serde_json::Value> = (outcome == Outcome::Timeout)
                .then(|| serde_json::from_str(&error).ok())
                .flatten();
            match &timeout {
                Some(answer) => {
                    if !json {
                        println!("{error}");
                    }
                    let words = answer["error"].as_str().unwrap_or("timed out");
                    eprintln!("error: {outcome}: {words}");
                }
                None if outcome == Outcome::Error => eprintln!("error: {}", one_line(&error)),
                None => eprintln!("error: {outcome}: {}", one_line(&error)),
            }
            Ok(ExitCode::from(EXIT_FAILED))
        }
    }
}

async fn call(data_dir: &Path, args: CallArgs) -> anyhow::Result<ExitCode> {
    let arguments: serde_json::Value = serde_json::from_str(&args.args)
        .map_err(|e| anyhow::anyhow!("--args is not valid JSON: {e}"))?;
    let request = LimitsRequest {
        fuel: args.fuel,
        memory_bytes: args.memory_mb.map(|mb| mb.saturating_mul(1 << 20)),
        timeout_ms: args.timeout_ms,
    };
    if let Some(dir) = &args.skill {
        let sandbox = open_sandbox(data_dir)?;
        let skill = Skill::load_dir(&sandbox, dir)?;
        let out = skill.call(&args.tool, &arguments, &request).await?;
        println!("{}", serde_json::to_string_pretty(&out.output)?);
        return Ok(ExitCode::SUCCESS);
    }
    let host = open_host(data_dir).await?;
    let caller = match &args.persona {
        Some(p) => skillhost::Caller::persona(p.clone()),
        None => skillhost::Caller::Operator,
    };
    let req = skillhost::CallRequest {
        input_refs: args.refs.clone(),
        limits: request,
        confirmed: args.yes,
        ..Default::default()
    };
    let report = match &args.handoff {
        Some(file) => {
            let handoff = read_handoff(file)?;
            match host.call_handoff(&caller, &args.tool, &handoff, &req).await {
                Ok(report) => report,
                Err(e) => {
                    host.shutdown().await;
                    anyhow::bail!("handoff {} refused: {e}", file.display());
                }
            }
        }
        None => host.call(&caller, &args.tool, arguments, &req).await,
    };
    host.shutdown().await;
    if args.emit_handoff
        && let Some(next) = report.handoff()
    {
        println!("{}", serde_json::to_string_pretty(&next)?);
        return Ok(ExitCode::SUCCESS);
    }
    print_report(&report, args.json)
}

/// Reads a structured handoff file (`-`: stdin).
fn read_handoff(file: &Path) -> anyhow::Result<skillhost::StructuredHandoff> {
    let text = if file == Path::new("-") {
        std::io::read_to_string(std::io::stdin())
            .map_err(|e| anyhow::anyhow!("cannot read the handoff from stdin: {e}"))?
    } else {
        std::fs::read_to_string(file)
            .map_err(|e| anyhow::anyhow!("cannot read handoff {}: {e}", file.display()))?
    };
    serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "handoff {} is not a structured handoff ({{\"args\": {{...}}, \"input_refs\": [...]}}): {e}",
            file.display()
        )
    })
}

/// `skillhost migrate --to URL`.
fn migrate(data_dir: &Path, url: &str, json: bool) -> anyhow::Result<()> {
    let report = skillhost::migrate_state(data_dir, url)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    for (table, rows) in &report.tables {
        println!("{table:<22} {rows:>9} rows");
    }
    println!(
        "{} blobs copied and checked against their sha256 ({} of them refs)",
        report.blobs, report.refs
    );
    if !report.sign_ins.is_empty() {
        println!(
            "OAuth sign-ins carried (sealed): {}",
            report.sign_ins.join(", ")
        );
    }
    for (server, why) in &report.sign_ins_not_carried {
        println!("warning: the sign-in of {server:?} was not carried ({why}): sign in again");
    }
    for install in &report.installs_without_bundle {
        println!(
            "warning: {install} was installed before installs kept their bundle: other replicas \
             cannot unpack it until it is installed again"
        );
    }
    println!(
        "done: point replicas at it with \"database\" in settings.json (or SKILLHOST_DATABASE)"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::log_layer;
    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::filter::LevelFilter;

    /// The log tells the subscriber the most it will write, so `log`
    /// records below it (cranelift's trace lines while it compiles a
    /// guest) are never built: without the hint a `check` of a 19 MB
    /// Python guest ran minutes instead of seconds.
    #[test]
    fn the_log_passes_nothing_above_what_rust_log_asks_for() {
        for (rust_log, most) in [
            ("warn", LevelFilter::WARN),
            ("info", LevelFilter::INFO),
            ("skillhost=debug,warn", LevelFilter::DEBUG),
            ("trace", LevelFilter::TRACE),
        ] {
            let layer = log_layer::<tracing_subscriber::Registry>(EnvFilter::new(rust_log));
            assert_eq!(layer.max_level_hint(), Some(most), "RUST_LOG={rust_log}");
        }
    }
}
