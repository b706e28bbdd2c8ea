//! `mcp_servers.json`: the MCP servers the host connects to.
//!
//! The file is a JSON object with one field, `servers`, a list of
//! [`ServerConfig`]. It is edited by hand or by the CLI; the CLI writes it
//! atomically (temporary file, fsync, rename). A malformed file is reported
//! with its line and column, or with the server and field at fault, and the
//! caller keeps its last good configuration.
//!
//! ```json
//! {
//!   "servers": [
//!     {
//!       "name": "notes",
//!       "description": "Local notes server",
//!       "transport": "stdio",
//!       "command": "python3",
//!       "args": ["notes_server.py"],
//!       "env": {"NOTES_TOKEN": "…", "PYTHONPATH": "/opt/notes/lib"},
//!       "allow_env": ["PYTHONPATH"],
//!       "enabled": true,
//!       "allowed_persona_ids": ["*"]
//!     },
//!     {
//!       "name": "search",
//!       "transport": "streamable_http",
//!       "url": "https://search.example/mcp",
//!       "headers": {"Authorization": "Bearer …"},
//!       "timeouts": {"read_only_secs": 5},
//!       "tools": {"index_page": {"requires_confirmation": false}}
//!     }
//!   ]
//! }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::time::Duration;

use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};

use crate::oauth::OAuthSettings;

/// File name of the server configuration in the data dir.
pub const CONFIG_FILE: &str = "mcp_servers.json";

/// The lock file that serialises writers of [`CONFIG_FILE`].
pub const LOCK_FILE: &str = ".mcp_servers.lock";

/// The persona id that grants a server to every persona, present and future.
pub const GLOBAL_ALL: &str = "*";

/// Default time allowed to start a server and finish the MCP handshake.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(90);
/// Default time allowed for a call of a read-only tool.
pub const DEFAULT_READ_ONLY_TIMEOUT: Duration = Duration::from_secs(20);
/// Default time allowed for a call of a mutating tool.
pub const DEFAULT_MUTATING_TIMEOUT: Duration = Duration::from_secs(60);

/// A value that must never be shown: an environment value or a header value.
/// `Debug` and `Display` print `***`; [`Secret::expose`] gives the value.
///
/// ```
/// let s = skillhost_mcp::Secret::new("Bearer abc");
/// assert_eq!(format!("{s:?} {s}"), "*** ***");
/// assert_eq!(s.expose(), "Bearer abc");
/// ```
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    ///
    /// ```
    /// let _ = skillhost_mcp::Secret::new("token");
    /// ```
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value itself, to hand to a child process or an HTTP request.
    ///
    /// ```
    /// assert_eq!(skillhost_mcp::Secret::new("v").expose(), "v");
    /// ```
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// How the host talks to a server.
///
/// ```
/// let t: skillhost_mcp::TransportKind = serde_json::from_str("\"streamable_http\"").unwrap();
/// assert_eq!(t.to_string(), "streamable_http");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransportKind {
    /// A child process speaking newline-delimited JSON-RPC on stdin/stdout,
    /// run under the supervisor.
    Stdio,
    /// Streamable HTTP (one endpoint, POST + optional SSE responses).
    StreamableHttp,
    /// Legacy HTTP+SSE (an `endpoint` event, then POSTs).
    Sse,
}

impl fmt::Display for TransportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TransportKind::Stdio => "stdio",
            TransportKind::StreamableHttp => "streamable_http",
            TransportKind::Sse => "sse",
        })
    }
}

/// Per-server timeout overrides, in seconds. A missing field keeps the
/// default ([`DEFAULT_CONNECT_TIMEOUT`], [`DEFAULT_READ_ONLY_TIMEOUT`],
/// [`DEFAULT_MUTATING_TIMEOUT`]).
///
/// ```
/// let t = skillhost_mcp::Timeouts { read_only_secs: Some(5.0), ..Default::default() };
/// assert_eq!(t.read_only().as_secs(), 5);
/// assert_eq!(t.mutating().as_secs(), 60);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timeouts {
    /// Start + handshake.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_secs: Option<f64>,
    /// Calls of read-only tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_secs: Option<f64>,
    /// Calls of mutating tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutating_secs: Option<f64>,
}

impl Timeouts {
    /// The connect timeout.
    ///
    /// ```
    /// assert_eq!(skillhost_mcp::Timeouts::default().connect().as_secs(), 90);
    /// ```
    pub fn connect(&self) -> Duration {
        secs(self.connect_secs, DEFAULT_CONNECT_TIMEOUT)
    }

    /// The timeout for read-only tools.
    ///
    /// ```
    /// assert_eq!(skillhost_mcp::Timeouts::default().read_only().as_secs(), 20);
    /// ```
    pub fn read_only(&self) -> Duration {
        secs(self.read_only_secs, DEFAULT_READ_ONLY_TIMEOUT)
    }

    /// The timeout for mutating tools.
    ///
    /// ```
    /// assert_eq!(skillhost_mcp::Timeouts::default().mutating().as_secs(), 60);
    /// ```
    pub fn mutating(&self) -> Duration {
        secs(self.mutating_secs, DEFAULT_MUTATING_TIMEOUT)
    }

    fn is_empty(&self) -> bool {
        self == &Timeouts::default()
    }
}

fn secs(v: Option<f64>, default: Duration) -> Duration {
    v.map(Duration::from_secs_f64).unwrap_or(default)
}

/// The operator's classification override for one tool of a server.
///
/// ```
/// let o: skillhost_mcp::ToolOverride = serde_json::from_str(r#"{"requires_confirmation": false}"#).unwrap();
/// assert_eq!(o.requires_confirmation, Some(false));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolOverride {
    /// Whether a call needs the operator's confirmation. Default:
    /// whether the tool mutates data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires_confirmation: Option<bool>,
    /// Treat the tool as mutating even if the server says it is read-only
    /// (`true`), or as read-only (`false`). Default: from the annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutates_data: Option<bool>,
}

/// One MCP server.
///
/// ```
/// let s: skillhost_mcp::ServerConfig = serde_json::from_str(
///     r#"{"name": "notes", "transport": "stdio", "command": "python3", "args": ["s.py"]}"#,
/// ).unwrap();
/// assert!(s.enabled);
/// assert!(s.allowed_persona_ids.is_empty());
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Unique name: ASCII letters, digits, `_` and `-`, 1 to 64 characters,
    /// starting with a letter or digit. Registered tool names start with it.
    pub name: String,
    /// What the server is for.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// How the host talks to it.
    pub transport: TransportKind,
    /// stdio: the program (a name looked up on `PATH`, or a path). Never run
    /// through a shell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// stdio: its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// stdio: environment variables given to the child (its environment is
    /// otherwise cleared; the supervisor adds `PATH`, `HOME`, `TMPDIR`,
    /// `LANG` and [`SERVER_TAG_ENV`](crate::SERVER_TAG_ENV), which this may
    /// not set). A variable that makes the
    /// runtime load code it names (`LD_PRELOAD`, `PATH`, `NODE_OPTIONS`,
    /// `PYTHONPATH`, … see [`code_loading_env`](crate::code_loading_env))
    /// is refused unless `allow_env` lists it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, Secret>,
    /// stdio: the code-loading variables of `env` the operator allows for
    /// this server anyway, by exact name, e.g. `["NODE_OPTIONS"]`. Default
    /// empty. Each name must be set in `env` and be one the stdio policy
    /// would refuse.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_env: Vec<String>,
    /// HTTP transports: the endpoint URL (`http` or `https`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// HTTP transports: headers sent with every request.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, Secret>,
    /// HTTP transports: how to sign in when the server asks for OAuth (see
    /// [`OAuthSettings`]). A server without this signs in with the
    /// defaults; one with a static `Authorization` header never does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OAuthSettings>,
    /// Whether the host connects to it. Default `true`.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Personas granted this server; `["*"]` grants every persona.
    #[serde(default)]
    pub allowed_persona_ids: Vec<String>,
    /// Timeout overrides.
    #[serde(default, skip_serializing_if = "Timeouts::is_empty")]
    pub timeouts: Timeouts,
    /// Per-tool classification overrides, by the tool's name on the server.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, ToolOverride>,
    /// The canonical worker the server's tools belong to (the host checks
    /// it against its list; default `general_worker`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub specialist: Option<String>,
    /// Whether this server's `sampling/createMessage` requests (a
    /// completion by a model) go to the calling persona's MCP client, which
    /// must declare sampling; off by default: the host declares no sampling
    /// to the server and refuses such a request.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sampling: bool,
    /// Whether this server's `roots/list` requests go to the calling
    /// persona's MCP client, which must declare roots; off by default: the
    /// host declares no roots and refuses such a request.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub roots: bool,
}

fn yes() -> bool {
    true
}

impl ServerConfig {
    /// A stdio server running `command args…`, enabled, granted to nobody.
    ///
    /// ```
    /// let s = skillhost_mcp::ServerConfig::stdio("notes", "python3", ["s.py"]);
    /// assert_eq!(s.transport, skillhost_mcp::TransportKind::Stdio);
    /// ```
    pub fn stdio<I, S>(name: &str, command: &str, args: I) -> ServerConfig
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ServerConfig {
            command: Some(command.to_string()),
            args: args.into_iter().map(Into::into).collect(),
            ..ServerConfig::blank(name, TransportKind::Stdio)
        }
    }

    /// An HTTP server (`StreamableHttp` or `Sse`) at `url`.
    ///
    /// ```
    /// let s = skillhost_mcp::ServerConfig::http("search", skillhost_mcp::TransportKind::Sse, "http://127.0.0.1:9/sse");
    /// assert_eq!(s.url.as_deref(), Some("http://127.0.0.1:9/sse"));
    /// ```
    pub fn http(name: &str, transport: TransportKind, url: &str) -> ServerConfig {
        ServerConfig {
            url: Some(url.to_string()),
            ..ServerConfig::blank(name, transport)
        }
    }

    fn blank(name: &str, transport: TransportKind) -> ServerConfig {
        ServerConfig {
            name: name.to_string(),
            description: String::new(),
            transport,
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            allow_env: Vec::new(),
            url: None,
            headers: BTreeMap::new(),
            oauth: None,
            enabled: true,
            allowed_persona_ids: Vec::new(),
            timeouts: Timeouts::default(),
            tools: BTreeMap::new(),
            specialist: None,
            sampling: false,
            roots: false,
        }
    }

    /// Whether `headers` sets `Authorization` (static credentials: the
    /// host then never signs in with OAuth).
    ///
    /// ```
    /// let mut s = skillhost_mcp::ServerConfig::http("n",
    ///     skillhost_mcp::TransportKind::StreamableHttp, "https://x/mcp");
    /// assert!(!s.has_static_authorization());
    /// s.headers.insert("authorization".into(), skillhost_mcp::Secret::new("Bearer t"));
    /// assert!(s.has_static_authorization());
    /// ```
    pub fn has_static_authorization(&self) -> bool {
        self.headers
            .keys()
            .any(|k| k.eq_ignore_ascii_case("authorization"))
    }

    /// Whether the host answers this server's OAuth challenges: an HTTP
    /// server (streamable or legacy SSE) without a static `Authorization`
    /// header.
    ///
    /// ```
    /// let s = skillhost_mcp::ServerConfig::http("n",
    ///     skillhost_mcp::TransportKind::StreamableHttp, "https://x/mcp");
    /// assert!(s.uses_oauth());
    /// ```
    pub fn uses_oauth(&self) -> bool {
        self.transport != TransportKind::Stdio && !self.has_static_authorization()
    }

    /// Checks the fields that depend on each other. The error names the
    /// field and says what to do.
    ///
    /// ```
    /// let mut s = skillhost_mcp::ServerConfig::stdio("notes", "python3", ["s.py"]);
    /// s.url = Some("http://x".into());
    /// assert!(s.validate().unwrap_err().contains("`url`"));
    /// ```
    pub fn validate(&self) -> Result<(), String> {
        if !valid_server_name(&self.name) {
            return Err(format!(
                "`name` {:?} is not a valid server name: use 1 to 64 ASCII letters, digits, `_` or `-`, starting with a letter or digit",
                self.name
            ));
        }
        match self.transport {
            TransportKind::Stdio => {
                match self.command.as_deref() {
                    None | Some("") => {
                        return Err("`command` is required for transport `stdio`".into());
                    }
                    Some(c) if c.contains('\0') => {
                        return Err("`command` contains a NUL byte".into());
                    }
                    Some(_) => {}
                }
                if self.url.is_some() || !self.headers.is_empty() {
                    return Err(
                        "`url` and `headers` are for HTTP transports; remove them or set `transport` to `streamable_http` or `sse`"
                            .into(),
                    );
                }
                if self.args.iter().any(|a| a.contains('\0')) {
                    return Err("`args` contains a NUL byte".into());
                }
                for key in self.env.keys() {
                    if key.is_empty() || key.contains('=') || key.contains('\0') {
                        return Err(format!("`env` has an invalid variable name {key:?}"));
                    }
                    if key == crate::SERVER_TAG_ENV {
                        return Err(format!(
                            "`env` sets {key}, which the supervisor sets itself to find the server's processes; remove it"
                        ));
                    }
                }
                for name in &self.allow_env {
                    if !self.env.contains_key(name) {
                        return Err(format!(
                            "`allow_env` lists {name:?}, which `env` does not set; remove it from `allow_env`"
                        ));
                    }
                    if crate::policy::code_loading_env(name).is_none() {
                        return Err(format!(
                            "`allow_env` lists {name:?}, which the stdio policy does not refuse; remove it from `allow_env` (only code-loading variables need allowing)"
                        ));
                    }
                }
                crate::policy::refuse_env(self.env.keys(), &self.allow_env)?;
            }
            TransportKind::StreamableHttp | TransportKind::Sse => {
                let Some(url) = self.url.as_deref() else {
                    return Err(format!(
                        "`url` is required for transport `{}`",
                        self.transport
                    ));
                };
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(format!("`url` {url:?} must start with http:// or https://"));
                }
                if reqwest::Url::parse(url).is_err() {
                    return Err(format!("`url` {url:?} is not a valid URL"));
                }
                if self.command.is_some()
                    || !self.args.is_empty()
                    || !self.env.is_empty()
                    || !self.allow_env.is_empty()
                {
                    return Err(format!(
                        "`command`, `args`, `env` and `allow_env` are for transport `stdio`; remove them for `{}`",
                        self.transport
                    ));
                }
                if let Some(oauth) = &self.oauth {
                    if self.has_static_authorization() {
                        return Err(
                            "`oauth` and an `Authorization` header both say how to authenticate; keep one"
                                .into(),
                        );
                    }
                    oauth.validate()?;
                }
                for (k, v) in &self.headers {
                    if reqwest::header::HeaderName::from_bytes(k.as_bytes()).is_err() {
                        return Err(format!("`headers` has an invalid header name {k:?}"));
                    }
                    if reqwest::header::HeaderValue::from_str(v.expose()).is_err() {
                        return Err(format!("`headers` has an invalid value for {k:?}"));
                    }
                }
            }
        }
        for (field, v) in [
            ("connect_secs", self.timeouts.connect_secs),
            ("read_only_secs", self.timeouts.read_only_secs),
            ("mutating_secs", self.timeouts.mutating_secs),
        ] {
            if let Some(v) = v
                && !(v > 0.0 && v <= 3600.0)
            {
                return Err(format!(
                    "`timeouts.{field}` is {v}: use a number of seconds above 0 and at most 3600"
                ));
            }
        }
        for p in &self.allowed_persona_ids {
            if p.is_empty() {
                return Err("`allowed_persona_ids` has an empty persona id".into());
            }
        }
        if self.allowed_persona_ids.len() > 1
            && self.allowed_persona_ids.iter().any(|p| p == GLOBAL_ALL)
        {
            return Err(
                "`allowed_persona_ids` mixes \"*\" with persona ids: \"*\" already grants every persona, so use [\"*\"] alone"
                    .into(),
            );
        }
        Ok(())
    }

    /// Whether every persona is granted this server.
    ///
    /// ```
    /// let mut s = skillhost_mcp::ServerConfig::stdio("a", "node", ["s.js"]);
    /// s.allowed_persona_ids = vec!["*".into()];
    /// assert!(s.is_global());
    /// ```
    pub fn is_global(&self) -> bool {
        self.allowed_persona_ids.iter().any(|p| p == GLOBAL_ALL)
    }
}

/// Whether `name` is a valid server name.
///
/// ```
/// assert!(skillhost_mcp::valid_server_name("github-2"));
/// assert!(!skillhost_mcp::valid_server_name("a.b"));
/// ```
pub fn valid_server_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"_-".contains(c))
}

/// Why a configuration could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file is not valid JSON or does not have the expected shape.
    #[error("{file}: line {line}, column {column}: {message}")]
    Syntax {
        /// The file name.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What was wrong.
        message: String,
    },
    /// A server's fields are inconsistent.
    #[error("{file}: server {server:?} (entry {index}): {message}")]
    Invalid {
        /// The file name.
        file: String,
        /// The server's name as written.
        server: String,
        /// 1-based position in `servers`.
        index: usize,
        /// What was wrong and what to do.
        message: String,
    },
    /// Two servers have the same name.
    #[error(
        "{file}: two servers are named {name:?} (entries {first} and {second}); names must be unique"
    )]
    Duplicate {
        /// The file name.
        file: String,
        /// The name.
        name: String,
        /// 1-based position of the first.
        first: usize,
        /// 1-based position of the second.
        second: usize,
    },
    /// Reading or writing the file failed.
    #[error("{file}: {message}")]
    Io {
        /// The file name.
        file: String,
        /// What failed.
        message: String,
    },
}

/// The whole configuration file.
///
/// ```
/// let c = skillhost_mcp::McpConfig::parse(r#"{"servers": []}"#).unwrap();
/// assert!(c.servers.is_empty());
/// let e = skillhost_mcp::McpConfig::parse("{\"servers\": [\n  {\"name\": 1}]}").unwrap_err();
/// assert!(e.to_string().contains("line 2"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// The servers, in file order.
    #[serde(default)]
    pub servers: Vec<ServerConfig>,
}

impl McpConfig {
    /// Parses and validates the file's text.
    ///
    /// ```
    /// let e = skillhost_mcp::McpConfig::parse(r#"{"servers": [{"name": "a", "transport": "stdio"}]}"#).unwrap_err();
    /// assert!(e.to_string().contains("`command` is required"));
    /// ```
    pub fn parse(text: &str) -> Result<McpConfig, ConfigError> {
        let config: McpConfig = serde_json::from_str(text).map_err(|e| ConfigError::Syntax {
            file: CONFIG_FILE.into(),
            line: e.line(),
            column: e.column(),
            message: strip_position(&e.to_string()),
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Checks every server and that names are unique.
    ///
    /// ```
    /// let mut c = skillhost_mcp::McpConfig::default();
    /// c.servers.push(skillhost_mcp::ServerConfig::stdio("a", "node", ["x.js"]));
    /// c.servers.push(skillhost_mcp::ServerConfig::stdio("a", "node", ["y.js"]));
    /// assert!(c.validate().unwrap_err().to_string().contains("two servers"));
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, s) in self.servers.iter().enumerate() {
            s.validate().map_err(|message| ConfigError::Invalid {
                file: CONFIG_FILE.into(),
                server: s.name.clone(),
                index: i + 1,
                message,
            })?;
            if let Some(first) = seen.insert(&s.name, i + 1) {
                return Err(ConfigError::Duplicate {
                    file: CONFIG_FILE.into(),
                    name: s.name.clone(),
                    first,
                    second: i + 1,
                });
            }
        }
        Ok(())
    }

    /// Reads the file from the data dir; a missing file is an empty
    /// configuration.
    ///
    /// ```no_run
    /// let dir = cap_std::fs::Dir::open_ambient_dir("data", cap_std::ambient_authority())?;
    /// let config = skillhost_mcp::McpConfig::load(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn load(dir: &Dir) -> Result<McpConfig, ConfigError> {
        match dir.read_to_string(CONFIG_FILE) {
            Ok(text) => McpConfig::parse(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(McpConfig::default()),
            Err(e) => Err(ConfigError::Io {
                file: CONFIG_FILE.into(),
                message: format!("cannot read: {e}"),
            }),
        }
    }

    /// Read-modify-write under an exclusive lock (`.mcp_servers.lock` in
    /// the data dir), so two processes editing the configuration at once
    /// never lose each other's change. `change` sees the current file and
    /// may refuse with an error; nothing is written then.
    ///
    /// ```no_run
    /// let dir = cap_std::fs::Dir::open_ambient_dir("data", cap_std::ambient_authority())?;
    /// skillhost_mcp::McpConfig::update(&dir, |c| {
    ///     c.servers.retain(|s| s.name != "old");
    ///     Ok(())
    /// })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn update<T>(
        dir: &Dir,
        change: impl FnOnce(&mut McpConfig) -> Result<T, String>,
    ) -> Result<T, ConfigError> {
        let io = |what: &str, e: std::io::Error| ConfigError::Io {
            file: CONFIG_FILE.into(),
            message: format!("cannot {what}: {e}"),
        };
        let mut opts = cap_std::fs::OpenOptions::new();
        {
            use cap_std::fs::OpenOptionsExt as _;
            opts.read(true).write(true).create(true).mode(0o600);
        }
        let lock = dir
            .open_with(LOCK_FILE, &opts)
            .map_err(|e| io("open the lock file", e))?
            .into_std();
        lock.lock().map_err(|e| io("lock the configuration", e))?;
        let mut config = McpConfig::load(dir)?;
        let out = change(&mut config).map_err(|message| ConfigError::Io {
            file: CONFIG_FILE.into(),
            message,
        })?;
        config.save(dir)?;
        drop(lock);
        Ok(out)
    }

    /// Reads the file; when it is malformed, returns `last_good` and the
    /// error (to report), so a running host keeps its last good
    /// configuration.
    ///
    /// ```no_run
    /// let dir = cap_std::fs::Dir::open_ambient_dir("data", cap_std::ambient_authority())?;
    /// let good = skillhost_mcp::McpConfig::default();
    /// let (config, problem) = skillhost_mcp::McpConfig::load_or_keep(&dir, &good);
    /// if let Some(e) = problem { eprintln!("kept the last good configuration: {e}"); }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn load_or_keep(dir: &Dir, last_good: &McpConfig) -> (McpConfig, Option<ConfigError>) {
        match McpConfig::load(dir) {
            Ok(c) => (c, None),
            Err(e) => (last_good.clone(), Some(e)),
        }
    }

    /// Validates and writes the file atomically: a temporary file in the
    /// same folder, fsync, rename over the old one, fsync of the folder.
    /// The file is created with mode 0600: it holds secrets.
    ///
    /// ```no_run
    /// let dir = cap_std::fs::Dir::open_ambient_dir("data", cap_std::ambient_authority())?;
    /// skillhost_mcp::McpConfig::default().save(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn save(&self, dir: &Dir) -> Result<(), ConfigError> {
        self.validate()?;
        let io = |what: &str, e: std::io::Error| ConfigError::Io {
            file: CONFIG_FILE.into(),
            message: format!("cannot {what}: {e}"),
        };
        let mut text = serde_json::to_string_pretty(self).map_err(|e| ConfigError::Io {
            file: CONFIG_FILE.into(),
            message: format!("cannot serialise: {e}"),
        })?;
        text.push('\n');
        let tmp = format!(".{CONFIG_FILE}.{}.tmp", std::process::id());
        let mut opts = cap_std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        {
            use cap_std::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let mut f = dir
            .open_with(&tmp, &opts)
            .map_err(|e| io("create a temporary file", e))?;
        let written = f
            .write_all(text.as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(|e| io("write", e));
        drop(f);
        if let Err(e) = written {
            let _ = dir.remove_file(&tmp);
            return Err(e);
        }
        dir.rename(&tmp, dir, CONFIG_FILE).map_err(|e| {
            let _ = dir.remove_file(&tmp);
            io("replace", e)
        })?;
        if let Ok(d) = dir.open(".") {
            let _ = d.sync_all();
        }
        Ok(())
    }

    /// The server named `name`.
    ///
    /// ```
    /// let c = skillhost_mcp::McpConfig::default();
    /// assert!(c.server("x").is_none());
    /// ```
    pub fn server(&self, name: &str) -> Option<&ServerConfig> {
        self.servers.iter().find(|s| s.name == name)
    }

    /// The server named `name`, to change it.
    ///
    /// ```
    /// let mut c = skillhost_mcp::McpConfig::default();
    /// assert!(c.server_mut("x").is_none());
    /// ```
    pub fn server_mut(&mut self, name: &str) -> Option<&mut ServerConfig> {
        self.servers.iter_mut().find(|s| s.name == name)
    }
}

/// serde_json appends " at line L column C" to its messages; the position
/// is reported separately.
fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_errors_carry_line_and_column() {
        let e =
            McpConfig::parse("{\n  \"servers\": [\n    {\"name\": \"a\",, }\n  ]\n}").unwrap_err();
        let ConfigError::Syntax { line, column, .. } = e else {
            panic!("{e}")
        };
        assert_eq!((line, column), (3, 18));
    }

    #[test]
    fn unknown_fields_are_refused() {
        let e = McpConfig::parse(
            r#"{"servers": [{"name": "a", "transport": "stdio", "command": "node", "cmd": "x"}]}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("unknown field `cmd`"), "{e}");
    }

    #[test]
    fn transport_fields_must_match() {
        for (json, want) in [
            (
                r#"{"name": "a", "transport": "sse"}"#,
                "`url` is required for transport `sse`",
            ),
            (
                r#"{"name": "a", "transport": "streamable_http", "url": "ftp://x"}"#,
                "must start with http",
            ),
            (
                r#"{"name": "a", "transport": "streamable_http", "url": "http://x", "command": "node"}"#,
                "are for transport `stdio`",
            ),
            (
                r#"{"name": "a b", "transport": "stdio", "command": "node"}"#,
                "not a valid server name",
            ),
            (
                r#"{"name": "a", "transport": "stdio", "command": "node", "allowed_persona_ids": ["*", "p1"]}"#,
                "mixes \"*\"",
            ),
            (
                r#"{"name": "a", "transport": "stdio", "command": "node", "timeouts": {"read_only_secs": 0}}"#,
                "timeouts.read_only_secs",
            ),
            (
                r#"{"name": "a", "transport": "streamable_http", "url": "http://x", "headers": {"X": "a\nb"}}"#,
                "invalid value for \"X\"",
            ),
            (
                r#"{"name": "a", "transport": "stdio", "command": "node", "env": {"LD_PRELOAD": "/x.so"}}"#,
                "`env` sets LD_PRELOAD, which the dynamic loader reads",
            ),
            (
                r#"{"name": "a", "transport": "stdio", "command": "node", "env": {"PATH": "/tmp"}, "allow_env": ["NODE_OPTIONS"]}"#,
                "`allow_env` lists \"NODE_OPTIONS\", which `env` does not set",
            ),
            (
                r#"{"name": "a", "transport": "stdio", "command": "node", "env": {"TOKEN": "t"}, "allow_env": ["TOKEN"]}"#,
                "`allow_env` lists \"TOKEN\", which the stdio policy does not refuse",
            ),
            (
                r#"{"name": "a", "transport": "streamable_http", "url": "http://x", "allow_env": ["PATH"]}"#,
                "`allow_env` are for transport `stdio`",
            ),
        ] {
            let e = McpConfig::parse(&format!(r#"{{"servers": [{json}]}}"#)).unwrap_err();
            assert!(e.to_string().contains(want), "{json}: {e}");
        }
    }

    #[test]
    fn allow_env_lets_a_code_loading_variable_through() {
        let text = r#"{"servers": [{"name": "a", "transport": "stdio", "command": "node",
            "env": {"NODE_OPTIONS": "--max-old-space-size=512"}, "allow_env": ["NODE_OPTIONS"]}]}"#;
        let c = McpConfig::parse(text).unwrap();
        assert_eq!(c.servers[0].allow_env, ["NODE_OPTIONS"]);
        let e =
            McpConfig::parse(&text.replace(r#", "allow_env": ["NODE_OPTIONS"]"#, "")).unwrap_err();
        assert!(
            e.to_string()
                .contains("list \"NODE_OPTIONS\" in the server's `allow_env`"),
            "{e}"
        );
        // Names are exact: another case is another variable.
        let e = McpConfig::parse(&text.replace(r#"["NODE_OPTIONS"]"#, r#"["node_options"]"#))
            .unwrap_err();
        assert!(
            e.to_string().contains("`allow_env` lists \"node_options\""),
            "{e}"
        );
    }

    #[test]
    fn secrets_never_print() {
        let c = McpConfig::parse(
            r#"{"servers": [{"name": "a", "transport": "streamable_http", "url": "http://x", "headers": {"Authorization": "Bearer s3cret"}}]}"#,
        )
        .unwrap();
        assert!(!format!("{c:?}").contains("s3cret"));
        let e = McpConfig::parse(
            r#"{"servers": [{"name": "a", "transport": "streamable_http", "url": "http://x", "headers": {"Authorization": "Bearer s3cret\n"}}]}"#,
        )
        .unwrap_err();
        assert!(!e.to_string().contains("s3cret"));
    }

    #[test]
    fn save_then_load_round_trips() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).unwrap();
        let mut c = McpConfig::default();
        let mut s = ServerConfig::stdio("a", "node", ["x.js"]);
        s.env.insert("TOKEN".into(), Secret::new("t"));
        s.env.insert("NODE_PATH".into(), Secret::new("/opt/lib"));
        s.allow_env = vec!["NODE_PATH".into()];
        s.timeouts.read_only_secs = Some(2.5);
        c.servers.push(s);
        c.save(&dir).unwrap();
        assert_eq!(McpConfig::load(&dir).unwrap(), c);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(tmp.path().join(CONFIG_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
    }
}
