//! The host's side of the MCP client: pinned tool definitions and
//! `tool_changed` events in the database, and the manager's options from the
//! data dir's settings.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use skillhost_mcp::{ManagerOptions, PinStore, StdioPolicy};

use crate::state::Store;
use crate::state::data_dir::DataDir;

/// A [`PinStore`] in the host's database (`mcp_tool_pins`; changes are
/// `tool_changed` events).
///
/// ```no_run
/// let pins = skillhost::StorePins::open("data".as_ref())?;
/// # Ok::<(), anyhow::Error>(())
/// ```
pub struct StorePins {
    store: Mutex<Store>,
}

impl StorePins {
    /// Opens the database of the data dir at `root`.
    ///
    /// ```no_run
    /// let _ = skillhost::StorePins::open("data".as_ref())?;
    /// # Ok::<(), anyhow::Error>(())
    /// ```
    pub fn open(root: &Path) -> anyhow::Result<StorePins> {
        let data = DataDir::open(root)?;
        Ok(StorePins {
            store: Mutex::new(Store::open(&data)?),
        })
    }

    pub(crate) fn from_store(store: Store) -> StorePins {
        StorePins {
            store: Mutex::new(store),
        }
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&mut Store) -> crate::state::db::Result<T>,
    ) -> anyhow::Result<T> {
        let mut store = self.store.lock().unwrap_or_else(|e| e.into_inner());
        Ok(f(&mut store)?)
    }
}

impl PinStore for StorePins {
    fn pins(&self, server: &str) -> anyhow::Result<BTreeMap<String, String>> {
        Ok(self.with(|s| s.mcp_pins(server))?.into_iter().collect())
    }

    fn pin(&self, server: &str, tool: &str, hash: &str) -> anyhow::Result<()> {
        self.with(|s| s.mcp_pin(server, tool, hash))
    }

    fn discovered(
        &self,
        server: &str,
        tools: &[skillhost_mcp::RegisteredTool],
    ) -> anyhow::Result<()> {
        let mut defs = Vec::with_capacity(tools.len());
        for t in tools {
            defs.push((t.tool.name.clone(), serde_json::to_string(t)?));
        }
        self.with(|s| s.replace_mcp_tools(server, &defs))
    }

    fn tool_changed(&self, server: &str, tool: &str, old: &str, new: &str) -> anyhow::Result<()> {
        let detail = serde_json::json!({"pinned": old, "now": new});
        self.with(|s| {
            // One event per new definition, however often it is seen.
            if !s.has_event("tool_changed", Some(server), Some(tool), &detail)? {
                s.record_event("tool_changed", Some(server), Some(tool), &detail)?;
            }
            Ok(())
        })
    }
}

/// The MCP manager's options for the data dir at `root`: the stdio policy
/// from `settings.json` (and `SKILLHOST_MCP_ALLOW_ARBITRARY_STDIO`), pins in
/// the database, and OAuth sign-ins in the data dir's token files or, on a
/// database replicas share, the database (`shared_sign_ins.rs`).
///
/// ```no_run
/// let opts = skillhost::mcp_manager_options("data".as_ref())?;
/// let manager = skillhost_mcp::McpManager::new(opts);
/// # Ok::<(), anyhow::Error>(())
/// ```
pub fn mcp_manager_options(root: &Path) -> anyhow::Result<ManagerOptions> {
    let data = DataDir::open(root)?;
    let settings = data.settings()?;
    let store = Store::open(&data)?;
    let mut opts = ManagerOptions::new(data.root.clone());
    opts.policy = stdio_policy(&settings);
    opts.pins = std::sync::Arc::new(StorePins::from_store(store));
    opts.tokens = super::shared_sign_ins::home(&data)?;
    Ok(opts)
}

pub(crate) fn stdio_policy(settings: &crate::state::data_dir::Settings) -> StdioPolicy {
    StdioPolicy::from_settings(
        settings.mcp_allow_arbitrary_stdio,
        settings.mcp_stdio_allowlist.clone(),
    )
}
