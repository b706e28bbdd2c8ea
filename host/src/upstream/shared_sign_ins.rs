//! HTTP MCP servers' OAuth sign-ins on a database replicas share: each
//! server's sign-in (what `skillhost mcp login` and every refresh keep:
//! the authorization server's metadata, the client registration, the
//! tokens) is one document in `sealed_documents`, named `oauth:<server>`,
//! sealed under the data dir's key, instead of the data dir's
//! `mcp/<server>/oauth.json`. So a sign-in through any replica (or the CLI
//! on any machine) is every replica's, and a refresh by one is the others'.
//!
//! Refreshes take turns across replicas through an advisory lock named for
//! the document, held on a connection of its own: with rotating refresh
//! tokens, two replicas presenting the same one would make the
//! authorization server revoke the whole grant. Writes are a
//! compare-and-set on the document's revision (the token store applies a
//! change again to a newer document), and a sign-out empties the document
//! rather than deleting it, so its revision only grows and a replica knows
//! by the revision alone whether its copy is current.
//!
//! On SQLite (one host, no replicas) the token files stay where they were.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use skillhost_mcp::{TokenHome, TokenVault};

use crate::state::Store;
use crate::state::data_dir::{DataDir, Database, DatabaseUrl};
use crate::state::sealed_documents::DocumentLock;
use crate::state::sealing::{SECRETS_KEY_FILE, Sealed, SealingKey};

/// The name of `server`'s document.
pub(crate) fn document(server: &str) -> String {
    format!("oauth:{server}")
}

/// What a sealed sign-in is bound to: its bytes moved under another
/// server's name do not open.
fn aad(server: &str) -> Vec<u8> {
    format!("skillhost-document\0{}", document(server)).into_bytes()
}

/// `document` (a token file's JSON) sealed as `server`'s sign-in.
pub(crate) fn seal(key: &SealingKey, server: &str, document: &[u8]) -> anyhow::Result<Sealed> {
    key.seal(&aad(server), document)
}

/// Where the sign-ins of the data dir's servers are kept: its token files,
/// or on a database replicas share, the database (opening a connection of
/// its own and checking the data dir's key against the database's).
pub(crate) fn home(data: &DataDir) -> anyhow::Result<TokenHome> {
    let Database::Postgres(url) = &data.database else {
        return Ok(TokenHome::Files(data.root.clone()));
    };
    let store = Store::open(data)?;
    let key = SealingKey::checked(&data.dir, &store)?;
    Ok(TokenHome::Shared(Arc::new(SharedSignIns {
        store: Mutex::new(store),
        key,
        url: url.clone(),
    })))
}

/// The sign-ins in the shared database.
struct SharedSignIns {
    /// A connection of this vault's own, so that a sign-in read never
    /// waits behind a call's queries.
    store: Mutex<Store>,
    key: SealingKey,
    /// For the refresh locks' own connections.
    url: DatabaseUrl,
}

impl SharedSignIns {
    fn with<T>(&self, f: impl FnOnce(&Store) -> anyhow::Result<T>) -> Result<T, String> {
        let store = self.store.lock().unwrap_or_else(|e| e.into_inner());
        f(&store).map_err(|e| format!("the shared database: {e}"))
    }
}

/// A revision as the token store counts them (they start at 1 and only
/// grow).
fn revision(r: i64) -> u64 {
    u64::try_from(r).unwrap_or(0)
}

impl TokenVault for SharedSignIns {
    fn revision(&self, server: &str) -> Result<Option<u64>, String> {
        self.with(|s| Ok(s.sealed_document_revision(&document(server))?))
            .map(|r| r.map(revision))
    }

    fn read(&self, server: &str) -> Result<Option<(u64, Vec<u8>)>, String> {
        let Some((r, sealed)) = self.with(|s| Ok(s.sealed_document(&document(server))?))? else {
            return Ok(None);
        };
        let plain = self.key.open(&aad(server), &sealed).ok_or_else(|| {
            format!(
                "the sign-in of server {server:?} in the database (revision {r}) does not open \
                 under this data dir's `{SECRETS_KEY_FILE}`: every replica needs the same key"
            )
        })?;
        Ok(Some((revision(r), plain)))
    }

    fn write(
        &self,
        server: &str,
        expected: Option<u64>,
        document_bytes: &[u8],
    ) -> Result<Option<u64>, String> {
        let sealed = seal(&self.key, server, document_bytes)
            .map_err(|e| format!("cannot seal the sign-in of server {server:?}: {e}"))?;
        let expected = expected.map(|r| i64::try_from(r).unwrap_or(i64::MAX));
        let name = document(server);
        self.with(|s| {
            Ok(s.put_sealed_document(&name, expected, &sealed)?
                .then(|| revision(expected.unwrap_or(0) + 1)))
        })
    }

    fn lock(&self, server: &str, wait: Duration) -> Result<Box<dyn Send>, String> {
        let lock = DocumentLock::take(&self.url, &document(server), wait)
            .map_err(|e| format!("cannot take the refresh lock of server {server:?}: {e}"))?;
        Ok(Box::new(lock))
    }

    fn place(&self) -> String {
        "the shared database".into()
    }
}

/// On a database with no sign-in for a server yet, makes the data dir's
/// token file of that server (one written for the server's URL now) the
/// shared sign-in: so an operator who signed in before moving to replicas
/// does not sign in again. Returns the servers adopted. A file that is not
/// used (another user's, readable by others, malformed, for another URL)
/// is reported, never adopted; a sign-in the database has, even an empty
/// one (signed out), is never replaced.
pub(crate) fn adopt(
    data: &DataDir,
    home: &TokenHome,
    servers: &[skillhost_mcp::ServerConfig],
) -> Vec<String> {
    let TokenHome::Shared(vault) = home else {
        return Vec::new();
    };
    let files = TokenHome::Files(data.root.clone());
    let mut adopted = Vec::new();
    for server in servers {
        let outcome = skillhost_mcp::oauth::kept_sign_in(&files, server).and_then(|kept| {
            let Some(bytes) = kept else { return Ok(false) };
            if vault.revision(&server.name)?.is_some() {
                return Ok(false);
            }
            Ok(vault.write(&server.name, None, &bytes)?.is_some())
        });
        match outcome {
            Ok(true) => adopted.push(server.name.clone()),
            Ok(false) => {}
            Err(e) => tracing::warn!(
                server = %server.name,
                "the data dir's sign-in is not used on the shared database: {e}"
            ),
        }
    }
    adopted
}
