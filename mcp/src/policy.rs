//! Which stdio commands the host may start.
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
//! string as written in the server's `command`). Even for allowed
//! interpreters, arguments that evaluate inline code (`python -c`,
//! `node -e`/`--eval`/`-p`/`--print`, `bun -e`, `deno eval`) are refused: a
//! server must be a file or a package.
//!
//! With `mcp_allow_arbitrary_stdio` true (settings file, or the environment
//! variable `SKILLHOST_MCP_ALLOW_ARBITRARY_STDIO=1`), any command may run.
//! Only turn it on in a development environment you fully control.
//! Commands are never run through a shell in either mode.

/// The launchers allowed by default (file names).
pub const DEFAULT_STDIO_ALLOWLIST: &[&str] = &[
    "node", "npx", "python", "python3", "uv", "uvx", "deno", "bun", "bunx",
];

/// Arguments that make an interpreter evaluate inline code.
fn inline_code_flags(file_name: &str) -> &'static [&'static str] {
    match file_name {
        "python" | "python3" => &["-c"],
        "node" | "bun" => &["-e", "--eval", "-p", "--print"],
        "deno" => &["eval"],
        _ => &[],
    }
}

/// The environment variable that turns on `mcp_allow_arbitrary_stdio`.
pub const ALLOW_ARBITRARY_STDIO_ENV: &str = "SKILLHOST_MCP_ALLOW_ARBITRARY_STDIO";

/// The policy for stdio commands.
///
/// ```
/// let p = skillhost_mcp::StdioPolicy::default();
/// assert!(p.check("npx", &["-y".into(), "some-server".into()]).is_ok());
/// assert!(p.check("bash", &["-c".into(), "rm -rf /".into()]).is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StdioPolicy {
    /// Any command may run.
    pub allow_arbitrary: bool,
    /// Extra commands the operator allows, exactly as written in `command`.
    pub extra_allowed: Vec<String>,
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

    /// Whether `command args…` may run; the error says why not and how to
    /// allow it.
    ///
    /// ```
    /// let p = skillhost_mcp::StdioPolicy::default();
    /// let e = p.check("python3", &["-c".into(), "print(1)".into()]).unwrap_err();
    /// assert!(e.contains("inline code"));
    /// ```
    pub fn check(&self, command: &str, args: &[String]) -> Result<(), String> {
        if self.allow_arbitrary || self.extra_allowed.iter().any(|c| c == command) {
            return Ok(());
        }
        let file_name = command.rsplit('/').next().unwrap_or(command);
        if !DEFAULT_STDIO_ALLOWLIST.contains(&file_name) {
            return Err(format!(
                "stdio command {command:?} is not on the allowlist ({}); add it to `mcp_stdio_allowlist` in the settings file, or set `mcp_allow_arbitrary_stdio` (development machines only)",
                DEFAULT_STDIO_ALLOWLIST.join(", ")
            ));
        }
        if let Some(flag) = args.iter().find(|a| {
            inline_code_flags(file_name).contains(&a.as_str()) || a.starts_with("--eval=")
        }) {
            return Err(format!(
                "stdio command {command:?} with {flag:?} would run inline code; run a server file or package instead"
            ));
        }
        Ok(())
    }
}
