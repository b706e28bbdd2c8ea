//! The MCP servers' configuration on a database replicas share: one
//! document in the database (`sealed_documents`, named `mcp_servers`),
//! sealed under the data dir's key, instead of each data dir's
//! `mcp_servers.json`. So a server added, replaced or enabled, or an MCP
//! grant changed, through any replica is every replica's at once (the
//! document's trigger notifies the change feeds); each replica still runs
//! its own stdio servers' processes from it.
//!
//! Writers take the documents' lock (an advisory lock on PostgreSQL) for
//! their read-modify-write, as writers of the file take its lock file, and
//! write with a compare-and-set on the document's revision, so no change
//! is lost. The first process on a database with no document yet adopts
//! its data dir's file, if it names servers ([`adopt`]).

use skillhost_mcp::{CONFIG_FILE, McpConfig};

use crate::error::StateError;
use crate::state::Store;
use crate::state::data_dir::DataDir;
use crate::state::sealed_documents::Locked;
use crate::state::sealing::{SECRETS_KEY_FILE, Sealed, SealingKey};

/// The document's name in `sealed_documents`.
pub(crate) const DOCUMENT: &str = "mcp_servers";

/// What the sealed document is bound to: its bytes moved under another
/// name do not open.
const AAD: &[u8] = b"skillhost-document\0mcp_servers";

/// The configuration and the revision it was read at (`None`: never
/// written; an empty configuration).
fn read(store: &Store, key: &SealingKey) -> anyhow::Result<(Option<i64>, McpConfig)> {
    let Some((revision, sealed)) = store.sealed_document(DOCUMENT)? else {
        return Ok((None, McpConfig::default()));
    };
    let plain = key.open(AAD, &sealed).ok_or_else(|| {
        anyhow::anyhow!(
            "the MCP servers' configuration in the database (revision {revision}) does not \
             open under this data dir's `{SECRETS_KEY_FILE}`: every replica needs the same key"
        )
    })?;
    let text = String::from_utf8(plain).map_err(|_| {
        anyhow::anyhow!("the MCP servers' configuration in the database is not UTF-8")
    })?;
    let config = McpConfig::parse(&text).map_err(|e| {
        anyhow::anyhow!("the MCP servers' configuration in the database (revision {revision}): {e}")
    })?;
    Ok((Some(revision), config))
}

/// The shared configuration (empty when none was written).
pub(crate) fn load(store: &Store, key: &SealingKey) -> anyhow::Result<McpConfig> {
    Ok(read(store, key)?.1)
}

/// Changes the shared configuration under the documents' lock; `change`
/// may refuse with a typed error (then nothing is written). The write
/// bumps the state generation and notifies every replica (its trigger).
pub(crate) fn update<T, E>(
    store: &Store,
    key: &SealingKey,
    change: impl FnOnce(&mut McpConfig) -> Result<T, E>,
) -> Result<T, E>
where
    E: From<StateError>,
{
    let state = |e: anyhow::Error| E::from(StateError::from(e));
    let locked = store.with_documents_locked(|| {
        let (revision, mut config) = read(store, key).map_err(state)?;
        let out = change(&mut config)?;
        write(store, key, revision, &config).map_err(state)?;
        Ok(out)
    });
    match locked {
        Ok(out) => Ok(out),
        Err(Locked::Inner(e)) => Err(e),
        Err(Locked::Lock(e)) => Err(state(e)),
    }
}

/// Seals and writes `config` over `revision` (a compare-and-set: with the
/// documents' lock held, losing it means a writer that did not take it).
fn write(
    store: &Store,
    key: &SealingKey,
    revision: Option<i64>,
    config: &McpConfig,
) -> anyhow::Result<()> {
    let sealed = seal(key, config)?;
    anyhow::ensure!(
        store.put_sealed_document(DOCUMENT, revision, &sealed)?,
        "the MCP servers' configuration was changed by another process meanwhile; nothing was \
         written: try again"
    );
    Ok(())
}

/// `config`, validated and sealed as the shared document.
pub(crate) fn seal(key: &SealingKey, config: &McpConfig) -> anyhow::Result<Sealed> {
    config.validate()?;
    let text = serde_json::to_string_pretty(config)?;
    key.seal(AAD, text.as_bytes())
}

/// What [`adopt`] did with the data dir's `mcp_servers.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Adoption {
    /// Nothing to do: the file is missing, names no server, or says what
    /// the database says.
    Nothing,
    /// The database had no configuration: the file's (this many servers)
    /// became the shared one.
    Adopted(usize),
    /// The database has its own configuration, and the file differs: the
    /// file is not used.
    Ignored,
}

/// On a database with no MCP configuration yet, makes the data dir's
/// `mcp_servers.json` (if it names servers) the shared configuration;
/// where the database has one, tells whether the file differs from it
/// (it is then not used). A malformed file is reported, never adopted.
pub(crate) fn adopt(data: &DataDir, store: &Store, key: &SealingKey) -> anyhow::Result<Adoption> {
    let file = match McpConfig::load(&data.dir) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("the data dir's {CONFIG_FILE} is not used: {e}");
            return Ok(Adoption::Nothing);
        }
    };
    if file.servers.is_empty() {
        return Ok(Adoption::Nothing);
    }
    let adopted = store
        .with_documents_locked(|| {
            let (revision, shared) = read(store, key)?;
            if revision.is_some() {
                return Ok(if shared == file {
                    Adoption::Nothing
                } else {
                    Adoption::Ignored
                });
            }
            write(store, key, None, &file)?;
            Ok(Adoption::Adopted(file.servers.len()))
        })
        .map_err(|e| match e {
            Locked::Inner(e) | Locked::Lock(e) => e,
        })?;
    match adopted {
        Adoption::Adopted(n) => tracing::info!(
            "the data dir's {CONFIG_FILE} ({n} servers) is now the MCP servers' configuration \
             every replica on this database shares"
        ),
        Adoption::Ignored => tracing::warn!(
            "the data dir's {CONFIG_FILE} is not used: on a database replicas share, the MCP \
             servers' configuration is the database's (`skillhost mcp list` shows it)"
        ),
        Adoption::Nothing => {}
    }
    Ok(adopted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ServerError;
    use skillhost_mcp::ServerConfig;

    /// A data dir (on SQLite, whose store has the same table) and its key.
    fn setup() -> (tempfile::TempDir, DataDir, Store, SealingKey) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let data = DataDir::open(&tmp.path().join("data")).expect("data dir");
        let store = Store::open_sqlite(&data.root).expect("store");
        let key = SealingKey::checked(&data.dir, &store).expect("key");
        (tmp, data, store, key)
    }

    fn add(store: &Store, key: &SealingKey, name: &str) -> Result<(), ServerError> {
        update(store, key, |c| {
            c.servers
                .push(ServerConfig::stdio(name, "node", ["server.js"]));
            Ok::<_, ServerError>(())
        })
    }

    #[test]
    fn changes_land_sealed_and_a_refused_change_writes_nothing() {
        let (_tmp, _data, store, key) = setup();
        assert!(load(&store, &key).expect("empty").servers.is_empty());
        add(&store, &key, "a").expect("add a");
        add(&store, &key, "b").expect("add b");
        let names: Vec<String> = load(&store, &key)
            .expect("load")
            .servers
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(names, ["a", "b"]);
        let (revision, sealed) = store
            .sealed_document(DOCUMENT)
            .expect("read")
            .expect("written");
        assert_eq!(revision, 2);
        assert!(
            !sealed.sealed.windows(9).any(|w| w == b"server.js"),
            "sealed, not in the clear"
        );
        // A change that refuses, and one the configuration cannot take
        // (a duplicate name): nothing written.
        let refused = update(&store, &key, |_| {
            Err::<(), _>(ServerError::Conflict("no".into()))
        });
        assert!(matches!(refused, Err(ServerError::Conflict(_))));
        let e = add(&store, &key, "a").expect_err("a duplicate");
        assert!(e.to_string().contains("two servers"), "{e}");
        assert_eq!(
            store.sealed_document(DOCUMENT).expect("read").map(|d| d.0),
            Some(2)
        );
    }

    #[test]
    fn altered_bytes_or_another_key_are_an_error_naming_the_key_never_a_config() {
        let (tmp, _data, store, key) = setup();
        add(&store, &key, "a").expect("add");
        let (revision, mut sealed) = store
            .sealed_document(DOCUMENT)
            .expect("read")
            .expect("written");
        sealed.sealed[3] ^= 0x55;
        assert!(
            store
                .put_sealed_document(DOCUMENT, Some(revision), &sealed)
                .expect("tamper")
        );
        let e = load(&store, &key).expect_err("altered");
        assert!(e.to_string().contains("does not open"), "{e}");
        let other_dir = tmp.path().join("other");
        std::fs::create_dir_all(&other_dir).expect("dir");
        let other = cap_std::fs::Dir::open_ambient_dir(&other_dir, cap_std::ambient_authority())
            .expect("dir");
        let other = SealingKey::load(&other, true).expect("other key");
        sealed.sealed[3] ^= 0x55;
        assert!(
            store
                .put_sealed_document(DOCUMENT, Some(revision + 1), &sealed)
                .expect("restore")
        );
        assert_eq!(load(&store, &key).expect("restored").servers.len(), 1);
        let e = load(&store, &other).expect_err("another key");
        assert!(e.to_string().contains("secrets.key"), "{e}");
    }

    #[test]
    fn the_first_data_dir_with_servers_is_adopted_and_a_differing_file_is_ignored() {
        let (_tmp, data, store, key) = setup();
        assert_eq!(
            adopt(&data, &store, &key).expect("no file"),
            Adoption::Nothing
        );
        let mut file = McpConfig::default();
        file.servers
            .push(ServerConfig::stdio("local", "python3", ["s.py"]));
        file.save(&data.dir).expect("save");
        assert_eq!(
            adopt(&data, &store, &key).expect("adopt"),
            Adoption::Adopted(1)
        );
        assert_eq!(load(&store, &key).expect("load"), file);
        assert_eq!(adopt(&data, &store, &key).expect("same"), Adoption::Nothing);
        file.servers
            .push(ServerConfig::stdio("other", "python3", ["t.py"]));
        file.save(&data.dir).expect("save");
        assert_eq!(
            adopt(&data, &store, &key).expect("differs"),
            Adoption::Ignored
        );
        assert_eq!(load(&store, &key).expect("load").servers.len(), 1, "kept");
        // A malformed file is never adopted.
        data.dir.write(CONFIG_FILE, "{not json").expect("write");
        assert_eq!(
            adopt(&data, &store, &key).expect("malformed"),
            Adoption::Nothing
        );
    }
}
