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

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use skillhost_mcp::{ServerConfig, TransportKind};

    use super::*;

    const URL: &str = "https://tickets.example/mcp";

    /// A data dir on SQLite (whose store has the same table), and the
    /// vault over it.
    fn setup() -> (tempfile::TempDir, DataDir, Arc<SharedSignIns>) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let data = DataDir::open(&tmp.path().join("data")).expect("data dir");
        let store = Store::open_sqlite(&data.root).expect("store");
        let key = SealingKey::checked(&data.dir, &store).expect("key");
        let vault = Arc::new(SharedSignIns {
            store: Mutex::new(store),
            key,
            url: DatabaseUrl::parse("postgres://db.invalid/skillhost").expect("url"),
        });
        (tmp, data, vault)
    }

    fn sign_in(client: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "version": 1,
            "server_url": URL,
            "client": {"client_id": client, "redirect_uri": "http://127.0.0.1:1/cb"},
        }))
        .expect("JSON")
    }

    #[test]
    fn a_sign_in_is_sealed_written_by_compare_and_set_and_read_back() {
        let (_tmp, _data, vault) = setup();
        assert_eq!(vault.revision("tickets").expect("rev"), None);
        assert_eq!(
            vault.write("tickets", None, &sign_in("c1")).expect("write"),
            Some(1)
        );
        assert_eq!(
            vault.write("tickets", None, &sign_in("c2")).expect("write"),
            None,
            "a second first write loses"
        );
        assert_eq!(
            vault
                .write("tickets", Some(1), &sign_in("c3"))
                .expect("write"),
            Some(2)
        );
        assert_eq!(
            vault
                .write("tickets", Some(1), &sign_in("c4"))
                .expect("write"),
            None,
            "a write over a stale revision loses"
        );
        let (revision, bytes) = vault.read("tickets").expect("read").expect("some");
        assert_eq!((revision, bytes), (2, sign_in("c3")));
        let (_, sealed) = vault
            .store
            .lock()
            .expect("store")
            .sealed_document("oauth:tickets")
            .expect("row")
            .expect("some");
        assert!(
            !sealed.sealed.windows(2).any(|w| w == b"c3"),
            "sealed, not in the clear"
        );
    }

    #[test]
    fn a_sign_in_moved_to_another_server_does_not_open_and_is_not_quoted() {
        let (_tmp, _data, vault) = setup();
        vault
            .write("tickets", None, &sign_in("secret-client"))
            .expect("write")
            .expect("written");
        let store = vault.store.lock().expect("store");
        let (_, sealed) = store
            .sealed_document("oauth:tickets")
            .expect("row")
            .expect("some");
        assert!(
            store
                .put_sealed_document("oauth:wiki", None, &sealed)
                .expect("copy")
        );
        drop(store);
        let e = vault.read("wiki").expect_err("moved bytes");
        assert!(e.contains("does not open"), "{e}");
        assert!(e.contains(SECRETS_KEY_FILE), "{e}");
        assert!(!e.contains("secret-client"), "{e}");
    }

    #[test]
    fn a_data_dirs_sign_in_is_adopted_only_where_the_database_has_none() {
        let (_tmp, data, vault) = setup();
        let home = TokenHome::Shared(vault.clone());
        let tickets = ServerConfig::http("tickets", TransportKind::StreamableHttp, URL);
        let moved = ServerConfig::http(
            "moved",
            TransportKind::StreamableHttp,
            "https://elsewhere.example/mcp",
        );
        let wiki = ServerConfig::http("wiki", TransportKind::StreamableHttp, URL);
        for name in ["tickets", "moved", "wiki"] {
            let dir = data.root.join("mcp").join(name);
            std::fs::create_dir_all(&dir).expect("mkdir");
            let file = dir.join(skillhost_mcp::TOKEN_FILE);
            std::fs::write(&file, sign_in(name)).expect("write");
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        }
        // The database already has wiki's (even signed out: empty).
        vault
            .write("wiki", None, b"{\"version\":1,\"server_url\":\"x\"}")
            .expect("write")
            .expect("written");
        let adopted = adopt(&data, &home, &[tickets.clone(), moved, wiki]);
        assert_eq!(adopted, ["tickets"], "moved's file is for another URL");
        let kept: serde_json::Value = vault
            .read("tickets")
            .expect("read")
            .map(|d| serde_json::from_slice(&d.1).expect("JSON"))
            .expect("adopted");
        assert_eq!(kept["client"]["client_id"], "tickets", "{kept}");
        assert_eq!(kept["server_url"], URL, "{kept}");
        assert_eq!(vault.revision("moved").expect("rev"), None);
        assert_eq!(vault.revision("wiki").expect("rev"), Some(1));
        // Adopting again changes nothing.
        assert!(adopt(&data, &home, &[tickets]).is_empty());
        assert_eq!(vault.revision("tickets").expect("rev"), Some(1));
    }
}
