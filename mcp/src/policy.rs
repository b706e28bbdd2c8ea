//! Which stdio commands the host may start, with which arguments and which
//! environment.
//!
//! A stdio server is code running on this machine with the host's rights,
//! so by default (`mcp_allow_arbitrary_stdio` false) only a documented set
//! of launchers may be started:
//!
//! | command (file name) | what it runs |
//! |---|---|
//! | `node`, `npx` | a JavaScript server from a package or a file |
//! | `python`, `python3` | a Python server from a file or `-m module` |
//! | `uv`, `uvx` | a Python server from a package |
//! | `deno`, `bun`, `bunx` | a JavaScript/TypeScript server |
//!
//! plus any command the operator lists in `mcp_stdio_allowlist` (exact
//! string as written in the server's `command`). A launcher may be given
//! by name (looked up on `PATH`) or by absolute path; a relative path is
//! refused, since it would be looked up in the server's own folder.
//!
//! # A server must be a file or a package
//!
//! Even for allowed commands, the policy reads the arguments the way each
//! interpreter or launcher reads them ([`argv`]) and refuses every form of
//! code written in the server entry itself or read from stdin (which the
//! host writes, with the agent's tool arguments in it):
//!
//! - **python** (`python`, `python3`, `python3.12`, `pypy3`, …): `-c`
//!   anywhere in a cluster of single-letter options (`-Ic`, `-Bc`,
//!   `-cCODE`), `-` or no script (program from stdin), `-i`, a script that
//!   is stdin (`/dev/stdin`, `/proc/self/fd/0`), and `-m` of a module that
//!   runs code from its arguments or stdin (`timeit`, `code`, `pdb`,
//!   `asyncio`, `idlelib`, `IPython`) or another program around the check
//!   (`runpy`, `cProfile`, `profile`, `trace`). `-W`/`-X` take the next
//!   argument as their value, as python does (`-W -c` is not `-c`).
//!   Options end at the script, or after `-m MODULE`: the rest belongs to
//!   it.
//! - **node**, **bun**, **deno**: `-e`, `-p`, `--eval`, `--print`
//!   (`=`-joined or not) and short clusters with `e` or `p` (`-pe`, `-ep`);
//!   `-`, no script, `-i`; `deno eval`, `deno repl`, `deno task --eval`,
//!   `bun exec`, `bun repl`; a script or option value that is a `data:` or
//!   `blob:` URL (`deno run data:…`, `node --import=data:…`). Preloading
//!   (`-r`/`--require`/`--import`/`--loader`/`--experimental-loader`/
//!   `--preload`) a file or a package is allowed — it is no more than
//!   running that file as the script — but not a URL other than `file:`
//!   and `node:` (inline or remote code). Refused too: the debugger options
//!   (`--inspect*`, `--debug*`: anyone reaching the port runs code) and
//!   `--env-file` (environment from a file, around the `env` rules below).
//! - **npx** (and `npm exec`): `-c`/`--call` in every form npm reads
//!   (`--call=…`, `-call`, clusters such as `-yc`), and the npm settings
//!   that run code (`--node-options`, `--script-shell`, `--shell`,
//!   `--userconfig`, `--globalconfig`, `--git`, `--node-gyp`, also
//!   abbreviated as npm accepts them); no command (npm would open a shell
//!   on stdin).
//! - **the command a launcher starts** (`npx CMD`, `bunx CMD`, `bun run
//!   CMD`, `deno x CMD`, `uv run CMD`, `uvx CMD`, everything after `--`): an
//!   interpreter the policy knows is read with its own grammar, however it
//!   is named (`npx node@20 -e …`, `uvx python -c …`, `uv run python -c
//!   …`, `uvx --from pkg python -c …`); a path, or — for the launchers
//!   that also run programs from `PATH` (all but `uvx`) — a name found on
//!   the host's `PATH`, must itself pass this policy, so `npx bash -c …`
//!   or `uv run curl …` is refused unless the operator allowlists that
//!   program. Any other name is a package, which launchers are for.
//! - **shells**, when the operator allowlists one (`sh`, `bash`, `dash`,
//!   `zsh`, `ksh`, `fish`, …): `-c` (also in clusters such as `-ec`), `-s`,
//!   `-i`, and no script.
//!
//! Each reader stops where its program stops reading options (the first
//! argument that is not an option, `--`, or an option's end such as `-m
//! MODULE`); what follows belongs to the server. An option a reader does
//! not know may take the next argument as its value or not: both readings
//! are checked (at most [`argv::MAX_UNKNOWN_OPTIONS`] such options), so an
//! option added in a later release cannot hide an inline-code flag.
//! Launchers are followed at most [`argv::MAX_LAUNCH_DEPTH`] deep.
//!
//! **The allowlist names a binary the operator trusts, not its
//! arguments.** A command in `mcp_stdio_allowlist` may run, but if its
//! file name is an interpreter the policy knows (`/opt/py/bin/python3.12`,
//! `bash`), the inline-code forms above stay refused: allowlisting
//! `python3` means "run Python servers", not "run any Python text a
//! configuration contains". Interpreters the policy does not know
//! (`perl`, `ruby`, `php`, …) are not read: allowlisting one trusts its
//! whole command line.
//!
//! # Environment
//!
//! A server entry's `env` may not set a variable that makes the runtime
//! load code it names ([`code_loading_env`]): the dynamic loader's
//! (`LD_*`, `DYLD_*`, `GCONV_PATH`), `PATH`, node's and npm's
//! (`NODE_OPTIONS`, `NODE_PATH`, `npm_config_node_options`, …), Python's
//! (`PYTHONPATH`, `PYTHONSTARTUP`, `PYTHONHOME`, `PYTHONINSPECT`,
//! `PYTHONUSERBASE`, …), Ruby's, Perl's, the JVM's, the shells'
//! (`BASH_ENV`, `ENV`, `BASH_FUNC_*`) and git's (`GIT_SSH_COMMAND`, …) —
//! unless the operator lists the name in the server's `allow_env`. Names
//! are compared exactly, as Linux does. The check runs here (start and
//! `test`) and in [`ServerConfig::validate`](crate::ServerConfig::validate),
//! so the host refuses such an entry when it is added, imported or
//! replaced; `allow_env` is needed in every mode, since the entry itself
//! records the operator's decision.
//!
//! # Arbitrary commands
//!
//! With `mcp_allow_arbitrary_stdio` true (settings file, or the
//! environment variable `SKILLHOST_MCP_ALLOW_ARBITRARY_STDIO=1`), this
//! check lets every command, argument and variable through. Only turn it
//! on in a development environment you fully control. Commands are never
//! run through a shell in either mode.
//!
//! # What remains
//!
//! The policy decides what the host starts, not what a started program
//! does: a package run by `npx`/`uvx` is arbitrary code by design, a
//! script file runs whatever it contains, and an interpreter reads
//! configuration files of its own (`.npmrc`, `pyvenv.cfg`, a project's
//! `package.json` scripts) from the server's folder or `HOME`, which the
//! entry may set. `uv run CMD` and `npx CMD` run a command the project or
//! package provides; one not found on the host's `PATH` is taken for a
//! package's.

use std::ffi::OsString;

pub(crate) mod argv;
mod env;

pub use env::code_loading_env;
pub(crate) use env::refuse_env;

use crate::config::ServerConfig;

/// The launchers allowed by default (file names).
pub const DEFAULT_STDIO_ALLOWLIST: &[&str] = &[
    "node", "npx", "python", "python3", "uv", "uvx", "deno", "bun", "bunx",
];

/// The environment variable that turns on `mcp_allow_arbitrary_stdio`.
pub const ALLOW_ARBITRARY_STDIO_ENV: &str = "SKILLHOST_MCP_ALLOW_ARBITRARY_STDIO";

/// The policy for stdio commands.
///
/// ```
/// let p = skillhost_mcp::StdioPolicy::default();
/// assert!(p.check("npx", &["-y".into(), "some-server".into()]).is_ok());
/// assert!(p.check("bash", &["-c".into(), "rm -rf /".into()]).is_err());
/// assert!(p.check("python3", &["-Ic".into(), "print(1)".into()]).is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StdioPolicy {
    /// Any command may run, with any arguments and environment.
    pub allow_arbitrary: bool,
    /// Extra commands the operator allows, exactly as written in `command`.
    /// Their arguments are still read if they are an interpreter the
    /// policy knows (see the module documentation).
    pub extra_allowed: Vec<String>,
}

/// Why a command line is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Problem {
    /// The command is not on the allowlist.
    NotAllowed { command: String },
    /// The command is a relative path.
    Relative { command: String },
    /// An argument (or the lack of one) runs code from the entry or stdin.
    Arg {
        /// The offending argument (`None`: a missing script).
        arg: Option<String>,
        /// What it does.
        why: String,
        /// What to do instead.
        fix: &'static str,
        /// The program a launcher would run with it (`npx node -e …`).
        via: Option<String>,
    },
}

/// The advice of most refusals.
pub(crate) const RUN_A_FILE: &str = "run a server file or package instead";

impl Problem {
    /// The message for the server whose `command` is `top`.
    fn message(&self, top: &str) -> String {
        let allowlist = DEFAULT_STDIO_ALLOWLIST.join(", ");
        match self {
            Problem::NotAllowed { command } if command == top => format!(
                "stdio command {command:?} is not on the allowlist ({allowlist}); add it to `mcp_stdio_allowlist` in the settings file, or set `mcp_allow_arbitrary_stdio` (development machines only)"
            ),
            Problem::NotAllowed { command } => format!(
                "stdio command {top:?} would run {command:?}, which is not on the allowlist ({allowlist}); run a server file or package instead, or add {command:?} to `mcp_stdio_allowlist` in the settings file"
            ),
            Problem::Relative { command } => format!(
                "stdio command {command:?} is a relative path, which would be looked up in the server's own folder; use a command name found on PATH or an absolute path instead"
            ),
            Problem::Arg { arg, why, fix, via } => {
                let subject = match (via, arg) {
                    (Some(via), Some(arg)) => format!("would run {via:?}, whose {arg:?}"),
                    (Some(via), None) => format!("would run {via:?}, which"),
                    (None, Some(arg)) => format!("{arg:?}"),
                    (None, None) => String::new(),
                };
                let sep = if via.is_none() && arg.is_some() {
                    ": "
                } else {
                    " "
                };
                let subject = if subject.is_empty() {
                    String::new()
                } else {
                    format!("{sep}{subject}")
                };
                format!("stdio command {top:?}{subject} {why}; {fix}")
            }
        }
    }
}

/// One check of a command line: the policy, and the `PATH` launched names
/// are looked up on (the host's, which the server gets).
pub(crate) struct Checker<'a> {
    policy: &'a StdioPolicy,
    path: Option<OsString>,
}

impl Checker<'_> {
    /// Checks `command args…` as a command the host (or a launcher, at
    /// `depth`) starts.
    pub(crate) fn launch(&self, command: &str, args: &[String], depth: usize) -> argv::Verdict {
        if depth > argv::MAX_LAUNCH_DEPTH {
            return Err(Problem::Arg {
                arg: None,
                why: format!(
                    "is nested more than {} launchers deep",
                    argv::MAX_LAUNCH_DEPTH
                ),
                fix: RUN_A_FILE,
                via: Some(command.to_owned()),
            });
        }
        if command.contains('/') && !command.starts_with('/') {
            return Err(Problem::Relative {
                command: command.to_owned(),
            });
        }
        let file_name = command.rsplit('/').next().unwrap_or(command);
        let allowed = self.policy.extra_allowed.iter().any(|c| c == command)
            || DEFAULT_STDIO_ALLOWLIST.contains(&file_name);
        if !allowed {
            return Err(Problem::NotAllowed {
                command: command.to_owned(),
            });
        }
        match argv::kind(file_name) {
            Some(kind) if depth > 0 => argv::via(command, argv::check(self, kind, args, depth)),
            Some(kind) => argv::check(self, kind, args, depth),
            None => Ok(()),
        }
    }

    /// Whether `name` (no `/`) is an executable file in a folder of `PATH`.
    pub(crate) fn on_path(&self, name: &str) -> bool {
        use std::os::unix::fs::PermissionsExt;
        if name.is_empty() || name.contains('/') {
            return false;
        }
        let Some(path) = &self.path else { return false };
        std::env::split_paths(path)
            .filter(|dir| !dir.as_os_str().is_empty())
            .any(|dir| {
                std::fs::metadata(dir.join(name))
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    }
}

impl StdioPolicy {
    /// The policy from the settings, with the environment variable
    /// [`ALLOW_ARBITRARY_STDIO_ENV`] set to `1` or `true` turning on
    /// `allow_arbitrary`.
    ///
    /// ```
    /// let p = skillhost_mcp::StdioPolicy::from_settings(false, vec!["/opt/srv/bin/server".into()]);
    /// assert!(p.check("/opt/srv/bin/server", &[]).is_ok());
    /// ```
    pub fn from_settings(allow_arbitrary: bool, extra_allowed: Vec<String>) -> StdioPolicy {
        let env_on = std::env::var(ALLOW_ARBITRARY_STDIO_ENV)
            .map(|v| v == "1" || v.eq_ignore_ascii_case("true"))
            .unwrap_or(false);
        StdioPolicy {
            allow_arbitrary: allow_arbitrary || env_on,
            extra_allowed,
        }
    }

    /// Whether `command args…` may run; the error names the command and
    /// the offending argument, and says what to do instead. Launched names
    /// are looked up on this process's `PATH`, which the server gets.
    ///
    /// ```
    /// let p = skillhost_mcp::StdioPolicy::default();
    /// let e = p.check("python3", &["-c".into(), "print(1)".into()]).unwrap_err();
    /// assert!(e.contains("inline code"));
    /// assert!(p.check("python3", &["-m".into(), "notes_server".into(), "-c".into()]).is_ok());
    /// ```
    pub fn check(&self, command: &str, args: &[String]) -> Result<(), String> {
        self.check_with_path(command, args, std::env::var_os("PATH"))
    }

    /// [`check`](Self::check) with `path` as the `PATH` to look launched
    /// names up on.
    fn check_with_path(
        &self,
        command: &str,
        args: &[String],
        path: Option<OsString>,
    ) -> Result<(), String> {
        if self.allow_arbitrary {
            return Ok(());
        }
        Checker { policy: self, path }
            .launch(command, args, 0)
            .map_err(|p| p.message(command))
    }

    /// Whether a server entry may set the environment variables `names`,
    /// given the names its `allow_env` lists; the error names the first
    /// refused variable, what it does, and how to allow it.
    ///
    /// ```
    /// let p = skillhost_mcp::StdioPolicy::default();
    /// let names = ["TOKEN".to_string(), "NODE_OPTIONS".to_string()];
    /// assert!(p.check_env(&names, &[]).unwrap_err().contains("NODE_OPTIONS"));
    /// assert!(p.check_env(&names, &["NODE_OPTIONS".into()]).is_ok());
    /// ```
    pub fn check_env<'a>(
        &self,
        names: impl IntoIterator<Item = &'a String>,
        allow_env: &[String],
    ) -> Result<(), String> {
        if self.allow_arbitrary {
            return Ok(());
        }
        refuse_env(names, allow_env)
    }

    /// Whether the stdio server `config` may start: its command and
    /// arguments ([`check`](Self::check)) and its environment
    /// ([`check_env`](Self::check_env)).
    ///
    /// ```
    /// let p = skillhost_mcp::StdioPolicy::default();
    /// let mut s = skillhost_mcp::ServerConfig::stdio("notes", "python3", ["notes.py"]);
    /// assert!(p.check_server(&s).is_ok());
    /// s.env.insert("PYTHONPATH".into(), skillhost_mcp::Secret::new("/tmp/x"));
    /// assert!(p.check_server(&s).unwrap_err().contains("PYTHONPATH"));
    /// ```
    pub fn check_server(&self, config: &ServerConfig) -> Result<(), String> {
        let command = config.command.as_deref().unwrap_or_default();
        self.check(command, &config.args)?;
        self.check_env(config.env.keys(), &config.allow_env)
    }
}

#[cfg(test)]
mod golden;
