//! The data dir: every file the host writes lives under it, and every file
//! operation inside it goes through a `cap_std::fs::Dir`, so no path can
//! escape it by construction.
//!
//! Layout:
//! ```text
//! data/
//!   skillhost.db            state (SQLite, WAL)
//!   settings.json           host settings (hand-editable; see `Settings`)
//!   cache/components/       compiled components
//!   skills/<name>/<version>/  managed installs, each with the signed
//!                           statement (.skillhost/statement.json)
//!   skills/.staging/        installs in progress (cleaned at start)
//!   skills/.lock            serialises installs across processes
//!   mcp_servers.json        MCP servers (see `skillhost_mcp::McpConfig`)
//!   mcp/<server>/work/      a stdio server's working folder (HOME, TMPDIR)
//!   mcp/<server>/stderr.log its stderr, capped at 1 MiB (+ stderr.log.1)
//! ```

use std::path::{Path, PathBuf};

use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};

/// File name of the settings file in the data dir.
pub const SETTINGS_FILE: &str = "settings.json";

/// Host settings, from `settings.json` in the data dir. Unknown fields are
/// an error. `Settings::default()`: no local skill folders.
///
/// ```
/// let s: skillhost::Settings = serde_json::from_str(r#"{"skill_dirs": ["/src/my-skill"]}"#).unwrap();
/// assert_eq!(s.skill_dirs.len(), 1);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Local development skill folders (each holds a skill.yaml or
    /// SKILL.md). Their skills are untrusted unless trusted explicitly.
    #[serde(default)]
    pub skill_dirs: Vec<PathBuf>,
    /// Let stdio MCP servers run any command, not only the launchers on the
    /// allowlist (see `skillhost_mcp::DEFAULT_STDIO_ALLOWLIST`). Default
    /// false; the environment variable
    /// `SKILLHOST_MCP_ALLOW_ARBITRARY_STDIO=1` also turns it on. For
    /// development machines you fully control only.
    #[serde(default)]
    pub mcp_allow_arbitrary_stdio: bool,
    /// Extra stdio commands allowed, exactly as written in a server's
    /// `command`.
    #[serde(default)]
    pub mcp_stdio_allowlist: Vec<String>,
    /// The canonical worker names a tool's `specialist` may be. Empty (the
    /// default) means [`crate::DEFAULT_SPECIALISTS`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub specialists: Vec<String>,
    /// How long a call waiting for approval may be approved, in seconds.
    /// Default ([`None`]): 900 (15 minutes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_ttl_secs: Option<u64>,
    /// Keep every call's arguments with its run (secrets redacted, at most
    /// 64 KiB, `RECORDED_ARGS_MAX_BYTES` in `limits.rs`), for an operator who
    /// audits what agents sent. Default false: a run keeps the arguments
    /// of a call only while it waits for approval, so a call's record
    /// stays small (see `BENCHMARKS.md`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub record_arguments: bool,
    /// OAuth for `serve --http`'s `/mcp`: accept access tokens from this
    /// authorization server (see [`crate::FrontOAuth`]). Default none:
    /// only skillhost tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub front_oauth: Option<crate::FrontOAuth>,
    /// The PostgreSQL database that holds the host's state instead of the
    /// data dir's SQLite file: a `postgres://user:password@host:port/db`
    /// URL, shared by every replica that serves the same agents. The
    /// environment variable `SKILLHOST_DATABASE` takes precedence. Default
    /// none: `skillhost.db` in the data dir.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
}

impl Settings {
    /// Checks what the file's shape cannot: `approval_ttl_secs` within 1 s
    /// and [`crate::limits::MAX_APPROVAL_TTL`], and `front_oauth`'s fields
    /// ([`crate::FrontOAuth::validate`]). The error names the field.
    ///
    /// ```
    /// let s: skillhost::Settings = serde_json::from_str(r#"{"approval_ttl_secs": 0}"#).unwrap();
    /// assert!(s.validate().unwrap_err().contains("approval_ttl_secs"));
    /// ```
    pub fn validate(&self) -> Result<(), String> {
        if let Some(ttl) = self.approval_ttl_secs {
            let most = crate::limits::MAX_APPROVAL_TTL.as_secs();
            if !(1..=most).contains(&ttl) {
                return Err(format!(
                    "approval_ttl_secs must be from 1 to {most}, not {ttl}"
                ));
            }
        }
        self.front_oauth
            .as_ref()
            .map_or(Ok(()), crate::FrontOAuth::validate)
    }
}

/// The environment variable naming the database (a `postgres://` URL),
/// over `database` in `settings.json`.
pub const DATABASE_ENV: &str = "SKILLHOST_DATABASE";

/// The environment variable naming a compiled-code cache folder over the
/// data dir's own (`cache/components`): several data dirs on one machine
/// (replicas, a CI's test runs) then compile each component once.
pub const COMPILE_CACHE_ENV: &str = "SKILLHOST_COMPILE_CACHE";

/// The compiled-code cache of the data dir `root`: the folder
/// `SKILLHOST_COMPILE_CACHE` names, or `root/cache/components`.
///
/// What the cache holds is native code the host runs, so a folder others
/// may write to, or that belongs to another user, is not used (with a
/// warning): the data dir's own cache is, as without the variable.
///
/// ```
/// let dir = skillhost::compile_cache_dir(std::path::Path::new("data"));
/// assert!(
///     dir.ends_with("cache/components")
///         || std::env::var_os(skillhost::COMPILE_CACHE_ENV).is_some()
/// );
/// ```
pub fn compile_cache_dir(root: &Path) -> PathBuf {
    let own = root.join("cache").join("components");
    let Some(shared) = std::env::var_os(COMPILE_CACHE_ENV).map(PathBuf::from) else {
        return own;
    };
    match std::fs::metadata(&shared) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => shared,
        Err(e) => {
            tracing::warn!(
                "{COMPILE_CACHE_ENV}={}: {e}; using the data dir's cache",
                shared.display()
            );
            own
        }
        Ok(meta) => {
            use std::os::unix::fs::MetadataExt as _;
            // SAFETY: geteuid has no preconditions and cannot fail.
            let me = unsafe { libc::geteuid() };
            if !meta.is_dir() || meta.uid() != me || meta.mode() & 0o022 != 0 {
                tracing::warn!(
                    "{COMPILE_CACHE_ENV}={} is not a folder of this user that only it may \
                     write to (compiled code runs as the host); using the data dir's cache",
                    shared.display()
                );
                own
            } else {
                shared
            }
        }
    }
}

/// Where the host's state lives.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Database {
    /// `skillhost.db` in the data dir.
    Sqlite,
    /// A PostgreSQL server.
    Postgres(DatabaseUrl),
}

impl Database {
    /// Whether other replicas may share this database (PostgreSQL): then
    /// what one replica installs or stores reaches the others through it.
    pub fn is_shared(&self) -> bool {
        matches!(self, Database::Postgres(_))
    }
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Database::Sqlite => f.write_str("Sqlite"),
            Database::Postgres(url) => write!(f, "Postgres({url})"),
        }
    }
}

/// A database URL, shown with its password replaced by `***` (the URL
/// itself only reaches the driver).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct DatabaseUrl(String);

impl DatabaseUrl {
    /// Checks that `url` is a PostgreSQL URL.
    pub fn parse(url: &str) -> anyhow::Result<DatabaseUrl> {
        let shown = DatabaseUrl(url.to_string());
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            anyhow::bail!(
                "the database {shown} is not a PostgreSQL URL: expected \
                 postgres://user:password@host:port/database"
            );
        }
        Ok(shown)
    }

    /// The URL with its password, for the driver alone.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for DatabaseUrl {
    /// The URL without its password (nor anything after a `?`, where a
    /// password may also be given).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let url = self.0.split('?').next().unwrap_or_default();
        let Some((scheme, rest)) = url.split_once("://") else {
            return f.write_str("(a database URL)");
        };
        match rest.rsplit_once('@') {
            Some((user, host)) => {
                let user = user.split(':').next().unwrap_or_default();
                write!(f, "{scheme}://{user}:***@{host}")
            }
            None => write!(f, "{scheme}://{rest}"),
        }
    }
}

/// An opened data dir.
#[derive(Debug)]
pub(crate) struct DataDir {
    pub root: PathBuf,
    pub dir: Dir,
    /// Where the state lives: `SKILLHOST_DATABASE`, else `database` in
    /// `settings.json`, else the data dir's SQLite file.
    pub database: Database,
}

/// The mode of every folder the host creates in the data dir.
pub(crate) const PRIVATE_DIR_MODE: u32 = 0o700;
/// The mode of every file the host creates in the data dir.
pub(crate) const PRIVATE_FILE_MODE: u32 = 0o600;

/// A builder of private folders (mode 0700), creating parents too.
pub(crate) fn private_dirs() -> cap_std::fs::DirBuilder {
    use cap_std::fs::DirBuilderExt as _;
    let mut b = cap_std::fs::DirBuilder::new();
    b.recursive(true).mode(PRIVATE_DIR_MODE);
    b
}

/// A builder of one private folder (mode 0700).
pub(crate) fn private_dir() -> cap_std::fs::DirBuilder {
    use cap_std::fs::DirBuilderExt as _;
    let mut b = cap_std::fs::DirBuilder::new();
    b.mode(PRIVATE_DIR_MODE);
    b
}

/// Options creating a private file (mode 0600) for writing, failing if it
/// exists.
pub(crate) fn private_new_file() -> cap_std::fs::OpenOptions {
    use cap_std::fs::OpenOptionsExt as _;
    let mut o = cap_std::fs::OpenOptions::new();
    o.write(true).create_new(true).mode(PRIVATE_FILE_MODE);
    o
}

/// Creates the private file `name` in `dir` holding `contents`, unless it
/// exists: written to a temporary file and linked into place, so a reader
/// never sees half of it and two processes starting at once agree on one.
/// Returns whether this call created it (`false`: it was there, or another
/// process made it first).
pub(crate) fn create_private_once(dir: &Dir, name: &str, contents: &[u8]) -> std::io::Result<bool> {
    use std::io::Write as _;
    let tmp = format!(".{name}.tmp-{}", std::process::id());
    let _ = dir.remove_file(&tmp);
    let written = (|| -> std::io::Result<()> {
        let mut f = dir.open_with(&tmp, &private_new_file())?;
        f.write_all(contents)?;
        f.sync_all()?;
        dir.hard_link(&tmp, dir, name)
    })();
    let _ = dir.remove_file(&tmp);
    match written {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// Reads the private file `name` in `dir`; `None` when it does not exist.
/// Refuses a file other users may read, saying what to do.
pub(crate) fn read_private(dir: &Dir, name: &str) -> anyhow::Result<Option<Vec<u8>>> {
    use cap_std::fs::PermissionsExt as _;
    let bytes = match dir.read(name) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => anyhow::bail!("cannot read `{name}` in the data dir: {e}"),
    };
    let mode = dir
        .metadata(name)
        .map(|m| m.permissions().mode())
        .unwrap_or(0);
    if mode & 0o077 != 0 {
        anyhow::bail!(
            "`{name}` in the data dir is readable by other users (mode {:o}): run `chmod 600` on it",
            mode & 0o777
        );
    }
    Ok(Some(bytes))
}

/// Warns (once per process) when the data dir at `root` can be read or
/// entered by other users.
fn warn_if_shared(root: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    static WARNED: std::sync::Once = std::sync::Once::new();
    let Ok(meta) = std::fs::metadata(root) else {
        return;
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        WARNED.call_once(|| {
            tracing::warn!(
                "the data dir {} can be read by other users (mode {mode:o}): it holds the \
                 host's database, tokens and secrets; run `chmod 700 {}`",
                root.display(),
                root.display()
            );
        });
    }
}

impl DataDir {
    /// Opens `root`, creating it (mode 0700) and its fixed folders when
    /// missing; warns when an existing one is readable by others.
    pub fn open(root: &Path) -> anyhow::Result<DataDir> {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(PRIVATE_DIR_MODE)
            .create(root)
            .map_err(|e| anyhow::anyhow!("cannot create the data dir {}: {e}", root.display()))?;
        warn_if_shared(root);
        let dir = Dir::open_ambient_dir(root, cap_std::ambient_authority())
            .map_err(|e| anyhow::anyhow!("cannot open the data dir {}: {e}", root.display()))?;
        for sub in ["cache/components", "skills/.staging"] {
            dir.create_dir_with(sub, &private_dirs()).map_err(|e| {
                anyhow::anyhow!(
                    "cannot create {} in the data dir {}: {e}",
                    sub,
                    root.display()
                )
            })?;
        }
        let mut data = DataDir {
            root: root.to_path_buf(),
            dir,
            database: Database::Sqlite,
        };
        let named = match std::env::var(DATABASE_ENV) {
            Ok(url) if !url.is_empty() => Some((url, DATABASE_ENV)),
            _ => data
                .settings()?
                .database
                .map(|url| (url, "`database` in settings.json")),
        };
        if let Some((url, named_by)) = named {
            let url = DatabaseUrl::parse(&url)?;
            // Refused here, before anything is opened, naming what to change.
            if cfg!(not(feature = "postgres")) {
                return Err(super::db::DbError::PostgresNotBuilt {
                    named_by: format!("{named_by} ({url})"),
                }
                .into());
            }
            data.database = Database::Postgres(url);
        }
        Ok(data)
    }

    /// Writes `settings.json` (mode 0600) through a temporary file and a
    /// rename: a reader sees the old settings or the new, never half.
    pub fn save_settings(&self, settings: &Settings) -> anyhow::Result<()> {
        use std::io::Write as _;
        let mut text = serde_json::to_string_pretty(settings)?;
        text.push('\n');
        let tmp = format!(".{SETTINGS_FILE}.{}.tmp", std::process::id());
        let _ = self.dir.remove_file(&tmp);
        let written = (|| -> std::io::Result<()> {
            let mut f = self.dir.open_with(&tmp, &private_new_file())?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            self.dir.rename(&tmp, &self.dir, SETTINGS_FILE)
        })();
        if let Err(e) = written {
            let _ = self.dir.remove_file(&tmp);
            anyhow::bail!(
                "cannot write {}: {e}",
                self.root.join(SETTINGS_FILE).display()
            );
        }
        Ok(())
    }

    /// Reads `settings.json`; a missing file means defaults, a malformed one
    /// is an error with line and column.
    pub fn settings(&self) -> anyhow::Result<Settings> {
        match self.dir.read_to_string(SETTINGS_FILE) {
            Ok(text) => {
                let at = |e: &dyn std::fmt::Display| {
                    anyhow::anyhow!("{}: {e}", self.root.join(SETTINGS_FILE).display())
                };
                let settings: Settings = serde_json::from_str(&text).map_err(|e| at(&e))?;
                settings.validate().map_err(|e| at(&e))?;
                Ok(settings)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Settings::default()),
            Err(e) => Err(anyhow::anyhow!(
                "cannot read {}: {e}",
                self.root.join(SETTINGS_FILE).display()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DatabaseUrl;

    #[test]
    fn a_url_is_shown_without_its_password() {
        let url =
            DatabaseUrl::parse("postgres://app:hunter2@db.internal:5432/skills?password=hunter2")
                .expect("a PostgreSQL URL");
        assert_eq!(
            url.to_string(),
            "postgres://app:***@db.internal:5432/skills"
        );
        assert_eq!(
            DatabaseUrl::parse("postgresql://db.internal/skills")
                .expect("a PostgreSQL URL")
                .to_string(),
            "postgresql://db.internal/skills"
        );
    }

    #[test]
    fn a_url_of_another_database_is_refused_in_one_plain_sentence() {
        let e = DatabaseUrl::parse("mysql://app:hunter2@db.internal/skills")
            .err()
            .expect("refused");
        assert_eq!(
            e.to_string(),
            "the database mysql://app:***@db.internal/skills is not a PostgreSQL URL: \
             expected postgres://user:password@host:port/database"
        );
        let e = DatabaseUrl::parse("hunter2").err().expect("refused");
        assert_eq!(
            e.to_string(),
            "the database (a database URL) is not a PostgreSQL URL: \
             expected postgres://user:password@host:port/database"
        );
    }
}
