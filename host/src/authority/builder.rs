//! [`HostBuilder`]: opens the data dir and builds a [`Host`].

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use skillhost_mcp::McpManager;

use super::{Host, HostInner, Seen, lock};
use crate::error::StateError;
use crate::limits::LimitsPolicy;
use crate::limits::{DEFAULT_APPROVAL_TTL, MAX_APPROVAL_TTL};
use crate::sandbox::{Sandbox, SandboxBuilder};
use crate::state::Store;
use crate::state::data_dir::DataDir;
use crate::state::refs::RefBlobs;
use crate::state::writer::EventWriter;

/// Builds a [`Host`].
///
/// Defaults: the data dir `./data`; the sandbox's default limits policy
/// ([`LimitsPolicy::default`]) and its compiled-code cache in
/// `data/cache/components`; MCP servers started on demand, for the call
/// that needs them, and stopped at [`Host::shutdown`]
/// (`connect_mcp(true)` starts every enabled server at build instead);
/// approvals valid for `approval_ttl_secs` from `settings.json`, else
/// [`DEFAULT_APPROVAL_TTL`].
///
/// ```no_run
/// # async fn f() -> anyhow::Result<()> {
/// let host = skillhost::HostBuilder::new("data").build().await?;
/// host.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct HostBuilder {
    data_dir: PathBuf,
    policy: Option<LimitsPolicy>,
    sandbox: Option<Sandbox>,
    connect_mcp: bool,
    approval_ttl: Option<Duration>,
}

impl HostBuilder {
    /// A builder for the data dir at `data_dir` (created if missing).
    ///
    /// ```
    /// let b = skillhost::HostBuilder::new("data");
    /// ```
    pub fn new(data_dir: impl Into<PathBuf>) -> HostBuilder {
        HostBuilder {
            data_dir: data_dir.into(),
            policy: None,
            sandbox: None,
            connect_mcp: false,
            approval_ttl: None,
        }
    }

    /// The limits policy for skill calls (ignored if [`HostBuilder::sandbox`]
    /// is given).
    ///
    /// ```
    /// let b = skillhost::HostBuilder::new("data").limits(skillhost::LimitsPolicy::default());
    /// ```
    pub fn limits(mut self, policy: LimitsPolicy) -> HostBuilder {
        self.policy = Some(policy);
        self
    }

    /// Use this sandbox instead of building one.
    ///
    /// ```no_run
    /// let sandbox = skillhost::SandboxBuilder::new().build().unwrap();
    /// let b = skillhost::HostBuilder::new("data").sandbox(sandbox);
    /// ```
    pub fn sandbox(mut self, sandbox: Sandbox) -> HostBuilder {
        self.sandbox = Some(sandbox);
        self
    }

    /// Start every enabled MCP server at build and keep it supervised
    /// (for a long-running host); default false (start on demand).
    ///
    /// ```
    /// let b = skillhost::HostBuilder::new("data").connect_mcp(true);
    /// ```
    pub fn connect_mcp(mut self, yes: bool) -> HostBuilder {
        self.connect_mcp = yes;
        self
    }

    /// How long a call waiting for approval may be approved (at most
    /// [`MAX_APPROVAL_TTL`]; longer is taken as that).
    ///
    /// ```
    /// let b = skillhost::HostBuilder::new("data").approval_ttl(std::time::Duration::from_secs(60));
    /// ```
    pub fn approval_ttl(mut self, ttl: Duration) -> HostBuilder {
        self.approval_ttl = Some(ttl);
        self
    }

    /// Opens the data dir and its database (recovering from an interrupted
    /// install, marking runs a dead process left running), and builds the
    /// host. A data dir, database or `settings.json` that cannot be read
    /// is a [`StateError`] naming it.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), skillhost::StateError> {
    /// let host = skillhost::HostBuilder::new("data").build().await?;
    /// # Ok(()) }
    /// ```
    pub async fn build(self) -> Result<Host, StateError> {
        Ok(self.open().await?)
    }

    async fn open(self) -> anyhow::Result<Host> {
        let data = DataDir::open(&self.data_dir)?;
        let settings = data.settings()?;
        let sandbox = match self.sandbox {
            Some(s) => s,
            None => {
                let mut b = SandboxBuilder::new();
                b.cache_dir(crate::state::data_dir::compile_cache_dir(&data.root));
                if let Some(p) = self.policy {
                    b.policy(p);
                }
                b.build()?
            }
        };
        let mut store = Store::open(&data)?;
        crate::bundle::install::recover(&data, &mut store)?;
        match store.interrupt_orphaned_runs() {
            Ok(ids) if !ids.is_empty() => {
                tracing::warn!(runs = ?ids, "approved runs interrupted by a process that died")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("cannot check for interrupted runs: {e}"),
        }
        let writer = EventWriter::start(Store::open(&data)?);
        let refs = RefBlobs::open(&data.dir)?;
        // Clean up after a crash mid-add, unless another process is adding a
        // ref right now (then its blob may be unrecorded for a moment; the
        // next start cleans up).
        match refs.try_lock_exclusive() {
            Ok(Some(_cleanup)) => {
                if let Err(e) = refs.sweep_temp() {
                    tracing::warn!("cannot clean unfinished refs: {e}");
                }
                // A blob whose record was never written (a crash between
                // the two) is unreachable: remove it.
                if let (Ok(ids), Ok(records)) = (refs.ids(), store.ref_records()) {
                    for id in ids {
                        if !records.iter().any(|r| r.ref_id == id) {
                            let _ = refs.remove(&id);
                        }
                    }
                }
            }
            Ok(None) => {}
            Err(e) => tracing::warn!("{e}"),
        }
        let mcp = McpManager::new(crate::upstream::pins::mcp_manager_options(&data.root)?);
        let approval_ttl = self
            .approval_ttl
            .or(settings.approval_ttl_secs.map(Duration::from_secs))
            .unwrap_or(DEFAULT_APPROVAL_TTL)
            .min(MAX_APPROVAL_TTL);
        let (events, _) = tokio::sync::broadcast::channel(1024);
        let feed = match &data.database {
            crate::state::data_dir::Database::Postgres(url) => Some(
                crate::state::db::ChangeFeed::start(url.expose())
                    .map_err(|e| anyhow::anyhow!("{url}: {e}"))?,
            ),
            crate::state::data_dir::Database::Sqlite => None,
        };
        let inner = Arc::new(HostInner {
            root: data.root.clone(),
            data,
            store: Mutex::new(store),
            writer,
            sandbox,
            mcp,
            snapshot: RwLock::new(None),
            seen: Mutex::new(Seen {
                data_version: -1,
                generation: -1,
                checked_at: None,
                feed_epoch: None,
            }),
            tokens: Mutex::new(super::tokens::TokenSnapshot::default()),
            sealing: std::sync::OnceLock::new(),
            loaded: Mutex::new(HashMap::new()),
            script_files: Default::default(),
            events,
            approval_ttl,
            record_arguments: settings.record_arguments,
            refs,
            secrets: RwLock::new(Arc::default()),
            reach: RwLock::new(std::collections::HashMap::new()),
            access: std::sync::OnceLock::new(),
            request_states: std::sync::OnceLock::new(),
            metrics: crate::authority::metrics::Metrics::new(),
            changes: tokio::sync::watch::Sender::new(0),
            watching: Mutex::new(false),
            feed,
        });
        let host = Host { inner };
        host.inner.expire_pending();
        if host.inner.data.database.is_shared() {
            // Every replica seals under the same key: checked now, so a
            // replica without it says so at once rather than at its first
            // secret; and the data dir's MCP servers become the shared
            // ones if the database has none yet.
            let key = host.inner.sealing_key()?;
            let servers = {
                let store = lock(&host.inner.store);
                crate::upstream::shared_config::adopt(&host.inner.data, &store, &key)?;
                crate::upstream::shared_config::load(&store, &key)?.servers
            };
            // And its HTTP servers' sign-ins, where the database has none.
            let adopted = crate::upstream::shared_sign_ins::adopt(
                &host.inner.data,
                host.inner.mcp.token_home(),
                &servers,
            );
            if !adopted.is_empty() {
                tracing::info!(
                    "the data dir's OAuth sign-ins of {} are now the shared database's",
                    adopted.join(", ")
                );
            }
            // Every replica looks for runs whose runner died (an expired
            // lease) twice per lease.
            let weak = Arc::downgrade(&host.inner);
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(crate::limits::RUN_LEASE / 2).await;
                    let Some(inner) = weak.upgrade() else { return };
                    let swept = lock(&inner.store).interrupt_orphaned_runs();
                    match swept {
                        Ok(ids) if !ids.is_empty() => {
                            tracing::warn!(runs = ?ids, "approved runs interrupted: their replica stopped")
                        }
                        Ok(_) => {}
                        Err(e) => tracing::debug!("cannot look for interrupted runs: {e}"),
                    }
                }
            });
        }
        if self.connect_mcp {
            let config = host.inner.mcp_config()?;
            host.inner.mcp.connect_all(&config).await;
        }
        Ok(host)
    }
}

// What a build without the `postgres` feature does with a data dir that
// names PostgreSQL (a full build connects: tests/e2e and the binary's
// replicas tests).
#[cfg(all(test, not(feature = "postgres")))]
mod tests {
    use super::HostBuilder;
    use crate::{ErrorKind, HostError as _};

    /// A data dir whose settings name PostgreSQL, on a build without the
    /// `postgres` feature: refused with a typed error naming the feature
    /// and the setting, never a panic, and nothing opened.
    #[tokio::test]
    async fn postgres_settings_without_the_feature_are_refused_naming_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(
            dir.path().join(crate::SETTINGS_FILE),
            r#"{"database": "postgres://app:hunter2@db.internal:5432/skills"}"#,
        )
        .expect("settings");
        let Err(e) = HostBuilder::new(dir.path()).build().await else {
            panic!("a host was built on a PostgreSQL database without the feature");
        };
        assert_eq!(e.kind(), ErrorKind::Internal);
        let shown = e.to_string();
        // The environment variable, when set, names the database instead.
        let named_by = match std::env::var(crate::state::data_dir::DATABASE_ENV) {
            Ok(v) if !v.is_empty() => crate::state::data_dir::DATABASE_ENV,
            _ => "`database` in settings.json",
        };
        assert!(shown.contains(named_by), "{shown}");
        assert!(shown.contains("`postgres` feature"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(
            !dir.path().join(crate::DB_FILE).exists(),
            "no SQLite file made"
        );
    }
}
