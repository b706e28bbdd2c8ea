//! Where sign-ins are kept: the data dir's token files (one host), or a
//! [`TokenVault`] that replicas share (the host's database), so that a
//! sign-in through one replica, or a refresh by one, is every replica's.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::store::TokenStore;
use crate::config::ServerConfig;

/// A store of sign-ins that processes on several machines share, used
/// instead of the data dir's token files. Each server's sign-in is one
/// document (the token file's JSON, which holds tokens: the vault keeps it
/// sealed) with a revision that grows with every write and never goes
/// back, so a reader knows by the revision alone whether it is current.
pub trait TokenVault: Send + Sync {
    /// The revision of `server`'s document, `None` when none was ever
    /// written. Asked before every use of the tokens: it must be cheap.
    fn revision(&self, server: &str) -> Result<Option<u64>, String>;

    /// `server`'s document and its revision.
    fn read(&self, server: &str) -> Result<Option<(u64, Vec<u8>)>, String>;

    /// Writes `document` as `server`'s next revision if its revision is
    /// still `expected` (`None`: there is no document yet). Returns the
    /// new revision, or `None` when another writer came first (nothing
    /// was written).
    fn write(
        &self,
        server: &str,
        expected: Option<u64>,
        document: &[u8],
    ) -> Result<Option<u64>, String>;

    /// Takes `server`'s refresh lock, waiting at most `wait`: every
    /// process sharing the vault refreshes `server`'s tokens in turn. The
    /// lock is held until the returned guard is dropped (or its holder
    /// dies). Blocks the calling thread.
    fn lock(&self, server: &str, wait: Duration) -> Result<Box<dyn Send>, String>;

    /// Where the documents are, in words (for messages), e.g. "the shared
    /// database".
    fn place(&self) -> String;
}

/// Where the sign-ins of a manager's servers are kept.
#[derive(Clone)]
pub enum TokenHome {
    /// In the data dir at this path, `mcp/<name>/oauth.json` (mode 0600).
    Files(PathBuf),
    /// In a vault processes share.
    Shared(Arc<dyn TokenVault>),
}

impl std::fmt::Debug for TokenHome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenHome::Files(root) => f.debug_tuple("Files").field(root).finish(),
            TokenHome::Shared(vault) => f.debug_tuple("Shared").field(&vault.place()).finish(),
        }
    }
}

impl TokenHome {
    /// The store of `config`'s sign-in.
    pub(crate) fn store(&self, config: &ServerConfig) -> TokenStore {
        let url = config.url.as_deref().unwrap_or_default();
        match self {
            TokenHome::Files(root) => {
                TokenStore::new(&crate::manager::server_dir(root, &config.name), url)
            }
            TokenHome::Shared(vault) => TokenStore::shared(vault.clone(), &config.name, url),
        }
    }
}
