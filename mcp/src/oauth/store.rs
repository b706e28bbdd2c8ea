//! The token store: everything a sign-in produced for one server (the
//! authorization server's metadata, the client registration, the tokens),
//! kept in one of two places ([`super::TokenHome`]):
//!
//! - a file, `mcp/<name>/oauth.json` in the data dir, mode 0600: a file
//!   that others can read, that is a symlink, that is too big or that is
//!   not JSON is refused with a message naming it (and treated as no
//!   sign-in), never followed or half-read;
//! - a document in a [`TokenVault`] that replicas share, written with a
//!   compare-and-set on its revision so that two replicas' writes never
//!   lose each other.
//!
//! It is the only place a token or client secret is written. What it
//! holds is bound to the server URL it was issued for: a store whose URL
//! differs from the configured one is treated as empty, so a token never
//! reaches another resource.
//!
//! What it holds is cached in memory and read again only when the file's
//! size or modification time (or the document's revision) changed, so
//! that a request does not pay a read, and a sign-in by another process
//! (`skillhost mcp login` while `serve` runs, another replica's refresh)
//! is seen at the next request.

use std::fs::OpenOptions;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use rmcp::transport::auth::{
    AuthError, AuthorizationMetadata, CredentialRefreshGuard, CredentialStore, StoredCredentials,
};
use serde::{Deserialize, Serialize};

use super::MAX_TOKEN_FILE_BYTES;
use super::vault::TokenVault;

/// The file's name in the server's folder.
pub const TOKEN_FILE: &str = "oauth.json";

/// The layout version this binary writes and reads.
const VERSION: u32 = 1;

/// How long a refresh waits for another process's refresh of the same
/// server to finish.
const REFRESH_LOCK_WAIT: Duration = Duration::from_secs(30);

/// Writes to a shared document that lose the compare-and-set to another
/// writer before one gives up (each loser reads the new revision and
/// applies its change again).
const MAX_WRITE_ATTEMPTS: u32 = 8;

/// The client identity a sign-in used, kept so that a refresh after a
/// restart authenticates the same way.
#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct ClientRegistration {
    pub client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    pub redirect_uri: String,
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The resource (RFC 8707) the tokens were issued for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
}

/// What the store holds.
#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct TokenFile {
    pub version: u32,
    /// The MCP endpoint the tokens were issued for.
    pub server_url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<AuthorizationMetadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientRegistration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<StoredCredentials>,
}

impl TokenFile {
    fn empty(server_url: &str) -> TokenFile {
        TokenFile {
            version: VERSION,
            server_url: server_url.to_string(),
            metadata: None,
            client: None,
            credentials: None,
        }
    }

    /// Whether it holds anything a sign-in wrote.
    fn is_empty(&self) -> bool {
        self.metadata.is_none() && self.client.is_none() && self.credentials.is_none()
    }
}

/// What the cache last saw: a file's (modified, size, inode), or a shared
/// document's revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stamp {
    /// A file's modification time, size and inode.
    File(SystemTime, u64, u64),
    /// A shared document's revision.
    Revision(u64),
}

struct Cached {
    stamp: Option<Stamp>,
    /// The stamp of this store's own last write.
    written: Option<Stamp>,
    file: TokenFile,
    /// Why what is kept was not used, if it was not.
    refused: Option<String>,
}

/// Where one store keeps its server's sign-in.
#[derive(Clone)]
enum Backing {
    /// The token file at this path.
    File(PathBuf),
    /// The server's document in a shared vault.
    Shared {
        vault: Arc<dyn TokenVault>,
        server: String,
    },
}

/// One server's sign-in. Cloning shares the cache.
#[derive(Clone)]
pub(crate) struct TokenStore {
    backing: Backing,
    server_url: String,
    cache: Arc<Mutex<Cached>>,
}

impl std::fmt::Debug for TokenStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenStore")
            .field("place", &self.place())
            .finish_non_exhaustive()
    }
}

impl TokenStore {
    /// The store of the server whose folder is `dir`, for `server_url`.
    pub fn new(dir: &Path, server_url: &str) -> TokenStore {
        TokenStore::with(Backing::File(dir.join(TOKEN_FILE)), server_url)
    }

    /// The store of `server`'s document in `vault`, for `server_url`.
    pub fn shared(vault: Arc<dyn TokenVault>, server: &str, server_url: &str) -> TokenStore {
        TokenStore::with(
            Backing::Shared {
                vault,
                server: server.to_string(),
            },
            server_url,
        )
    }

    fn with(backing: Backing, server_url: &str) -> TokenStore {
        TokenStore {
            backing,
            server_url: server_url.to_string(),
            cache: Arc::new(Mutex::new(Cached {
                stamp: None,
                written: None,
                file: TokenFile::empty(server_url),
                refused: None,
            })),
        }
    }

    /// Where the sign-in is kept, in words: the file's path, or the vault
    /// and the server.
    pub fn place(&self) -> String {
        match &self.backing {
            Backing::File(path) => path.display().to_string(),
            Backing::Shared { vault, server } => {
                format!("{} (server {server:?})", vault.place())
            }
        }
    }

    /// What is kept now (empty when nothing is, or it is refused).
    pub fn read(&self) -> TokenFile {
        self.refresh();
        self.lock().file.clone()
    }

    /// Why what is kept is not used, if it is not.
    pub fn refused(&self) -> Option<String> {
        self.refresh();
        self.lock().refused.clone()
    }

    /// The credentials kept (without cloning the rest: this is read for
    /// every request).
    pub fn credentials(&self) -> Option<StoredCredentials> {
        self.refresh();
        self.lock().file.credentials.clone()
    }

    /// Whether what is kept changed since `seen` by another writer than
    /// this store (another process's sign-in or refresh), returning its
    /// stamp now. A stamp that cannot be read counts as no change.
    pub fn changed_elsewhere(&self, seen: Option<Stamp>) -> (bool, Option<Stamp>) {
        let Ok(now) = self.current() else {
            return (false, seen);
        };
        let written = self.lock().written;
        (now != seen && now != written, now)
    }

    /// Whether tokens are kept for this server.
    pub fn has_tokens(&self) -> bool {
        self.credentials()
            .is_some_and(|c| c.token_response.is_some())
    }

    /// The stamp of what is kept, to notice a sign-in by another process
    /// (`None` also when it cannot be read).
    pub fn stamp(&self) -> Option<Stamp> {
        self.current().ok().flatten()
    }

    /// The stamp of what is kept now.
    fn current(&self) -> Result<Option<Stamp>, String> {
        match &self.backing {
            Backing::File(path) => Ok(stamp_of(path)),
            Backing::Shared { vault, server } => Ok(vault.revision(server)?.map(Stamp::Revision)),
        }
    }

    /// Changes what is kept with `f` and writes it (a file atomically and
    /// 0600; a shared document by compare-and-set, `f` applied again to
    /// the newer document when another writer came first).
    pub fn update(&self, f: impl Fn(&mut TokenFile)) -> Result<(), String> {
        for _ in 0..MAX_WRITE_ATTEMPTS {
            self.refresh();
            let mut cached = self.lock();
            let mut file = cached.file.clone();
            f(&mut file);
            file.version = VERSION;
            file.server_url = self.server_url.clone();
            let stamp = match &self.backing {
                Backing::File(path) => {
                    write_private(path, &file)?;
                    stamp_of(path)
                }
                Backing::Shared { vault, server } => {
                    let expected = match cached.stamp {
                        Some(Stamp::Revision(r)) => Some(r),
                        _ => None,
                    };
                    let text = serde_json::to_vec(&file)
                        .map_err(|e| format!("cannot encode the sign-in: {e}"))?;
                    match vault.write(server, expected, &text)? {
                        Some(revision) => Some(Stamp::Revision(revision)),
                        None => {
                            // Another writer came first: read theirs, and
                            // apply the change to it.
                            cached.stamp = None;
                            cached.written = None;
                            continue;
                        }
                    }
                }
            };
            cached.file = file;
            cached.stamp = stamp;
            cached.written = stamp;
            cached.refused = None;
            return Ok(());
        }
        Err(format!(
            "the sign-in in {} kept changing under {MAX_WRITE_ATTEMPTS} attempts to write it; \
             nothing was written",
            self.place()
        ))
    }

    /// Removes the sign-in (sign-out): `true` when there was one. A file is
    /// deleted; a shared document is emptied (its revision keeps growing).
    pub fn remove(&self) -> Result<bool, String> {
        match &self.backing {
            Backing::File(path) => {
                let mut cached = self.lock();
                cached.file = TokenFile::empty(&self.server_url);
                cached.stamp = None;
                cached.refused = None;
                match std::fs::remove_file(path) {
                    Ok(()) => Ok(true),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                    Err(e) => Err(format!("cannot remove {}: {e}", path.display())),
                }
            }
            Backing::Shared { vault, server } => {
                // What the document holds, whatever URL it was written for.
                let held = match vault.read(server)? {
                    Some((_, bytes)) => parse(&bytes, &self.place())
                        .map(|f| !f.is_empty())
                        .unwrap_or(true),
                    None => false,
                };
                if held {
                    self.update(|f| {
                        f.metadata = None;
                        f.client = None;
                        f.credentials = None;
                    })?;
                }
                Ok(held)
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cached> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads what is kept again if it changed. A shared document that
    /// cannot be read now (the database is away) leaves the cache as it
    /// was.
    fn refresh(&self) {
        let stamp = match self.current() {
            Ok(s) => s,
            Err(why) => {
                tracing::warn!("cannot check the sign-in in {}: {why}", self.place());
                return;
            }
        };
        let mut cached = self.lock();
        if stamp == cached.stamp {
            return;
        }
        if stamp.is_none() {
            cached.stamp = None;
            cached.file = TokenFile::empty(&self.server_url);
            cached.refused = None;
            return;
        }
        let (stamp, read) = match &self.backing {
            Backing::File(path) => (stamp, read_private(path)),
            Backing::Shared { vault, server } => match vault.read(server) {
                Ok(Some((revision, bytes))) => (
                    Some(Stamp::Revision(revision)),
                    parse(&bytes, &self.place()),
                ),
                Ok(None) => (None, Ok(TokenFile::empty(&self.server_url))),
                Err(why) => {
                    tracing::warn!("cannot read the sign-in in {}: {why}", self.place());
                    return;
                }
            },
        };
        cached.stamp = stamp;
        match read {
            Ok(file) if file.is_empty() => {
                cached.file = TokenFile::empty(&self.server_url);
                cached.refused = None;
            }
            Ok(file) if file.server_url != self.server_url => {
                cached.file = TokenFile::empty(&self.server_url);
                cached.refused = Some(format!(
                    "the sign-in in {} was made for {}, not {}; sign in again",
                    self.place(),
                    file.server_url,
                    self.server_url
                ));
            }
            Ok(file) => {
                cached.file = file;
                cached.refused = None;
            }
            Err(why) => {
                tracing::warn!("{why}");
                cached.file = TokenFile::empty(&self.server_url);
                cached.refused = Some(why);
            }
        }
    }
}

fn stamp_of(path: &Path) -> Option<Stamp> {
    let m = std::fs::symlink_metadata(path).ok()?;
    Some(Stamp::File(m.modified().ok()?, m.len(), m.ino()))
}

/// Reads the token file, refusing what would leak or mislead.
fn read_private(path: &Path) -> Result<TokenFile, String> {
    let shown = path.display();
    let mut f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| format!("cannot open the token file {shown}: {e} (is it a symlink?)"))?;
    let meta = f
        .metadata()
        .map_err(|e| format!("cannot read the token file {shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("the token file {shown} is not a regular file"));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "the token file {shown} can be read by other users (mode {:o}); it is not used: \
             remove it and sign in again",
            meta.mode() & 0o777
        ));
    }
    if meta.uid() != current_uid() {
        return Err(format!(
            "the token file {shown} belongs to another user; it is not used"
        ));
    }
    let mut text = Vec::new();
    std::io::Read::by_ref(&mut f)
        .take(MAX_TOKEN_FILE_BYTES + 1)
        .read_to_end(&mut text)
        .map_err(|e| format!("cannot read the token file {shown}: {e}"))?;
    parse(&text, &format!("the token file {shown}"))
}

/// Parses a sign-in read from `shown` (a file or a shared document),
/// refusing one too big, malformed, or from a newer binary.
fn parse(bytes: &[u8], shown: &str) -> Result<TokenFile, String> {
    if bytes.len() as u64 > MAX_TOKEN_FILE_BYTES {
        return Err(format!(
            "{shown} holds {} bytes or more, more than the {MAX_TOKEN_FILE_BYTES} a sign-in \
             may hold; it is not used",
            bytes.len()
        ));
    }
    let file: TokenFile = serde_json::from_slice(bytes).map_err(|e| {
        // The serde message can quote the content; it holds secrets.
        format!(
            "{shown} does not hold a sign-in (line {}, column {}); it is not used",
            e.line(),
            e.column()
        )
    })?;
    if file.version > VERSION {
        return Err(format!(
            "{shown} was written by a newer skillhost (layout {}); it is not used",
            file.version
        ));
    }
    Ok(file)
}

/// This process's user id.
fn current_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// Writes `file` to `path` through a private temporary file and a rename,
/// so that a reader sees the old or the new file, never half of one.
fn write_private(path: &Path, file: &TokenFile) -> Result<(), String> {
    let dir = path
        .parent()
        .ok_or_else(|| format!("{} has no folder", path.display()))?;
    crate::private_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let text = serde_json::to_vec_pretty(file)
        .map_err(|e| format!("cannot encode the token file: {e}"))?;
    let tmp = dir.join(format!(
        ".{TOKEN_FILE}.{}.{:016x}.tmp",
        std::process::id(),
        rand::random::<u64>()
    ));
    let _ = std::fs::remove_file(&tmp);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    let written = f.write_all(&text).and_then(|()| f.sync_all());
    drop(f);
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("cannot write {}: {e}", path.display()));
    }
    Ok(())
}

#[async_trait::async_trait]
impl CredentialStore for TokenStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        Ok(self.credentials())
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.update(|f| f.credentials = Some(credentials.clone()))
            .map_err(AuthError::CredentialStoreError)
    }

    /// A refresh token the authorization server refused is dropped (the
    /// issuer and granted scopes stay for the next sign-in), unless the
    /// file holds another one by now.
    async fn on_refresh_token_rejected(
        &self,
        rejected: &StoredCredentials,
    ) -> Result<(), AuthError> {
        let refused = refresh_token_of(rejected);
        self.update(|f| {
            if let Some(c) = f.credentials.as_mut()
                && refused.is_some()
                && refresh_token_of(c) == refused
            {
                c.token_response = None;
            }
        })
        .map_err(AuthError::CredentialStoreError)
    }

    /// Refreshes by every process sharing the file (or, through the
    /// vault's lock, every replica) take turns: with
    /// rotating refresh tokens, two processes presenting the same one make
    /// the authorization server revoke the whole grant.
    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        let backing = self.backing.clone();
        let guard = tokio::task::spawn_blocking(move || match backing {
            Backing::File(path) => {
                let lock = path.with_file_name(format!(".{TOKEN_FILE}.lock"));
                lock_exclusive(&lock).map(CredentialRefreshGuard::new)
            }
            Backing::Shared { vault, server } => vault
                .lock(&server, REFRESH_LOCK_WAIT)
                .map(CredentialRefreshGuard::new),
        })
        .await
        .map_err(|e| AuthError::CredentialStoreError(e.to_string()))?
        .map_err(AuthError::CredentialStoreError)?;
        Ok(Some(guard))
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.update(|f| {
            f.credentials = None;
            f.client = None;
        })
        .map_err(AuthError::CredentialStoreError)
    }
}

/// The refresh token of `c`, if any.
fn refresh_token_of(c: &StoredCredentials) -> Option<String> {
    let fields = serde_json::to_value(c.token_response.as_ref()?).ok()?;
    fields
        .get("refresh_token")
        .and_then(serde_json::Value::as_str)
        .map(str::to_string)
}

/// Opens `path` (0600, created if missing) and takes an exclusive lock on
/// it, waiting at most [`REFRESH_LOCK_WAIT`]; the lock goes with the file.
fn lock_exclusive(path: &Path) -> Result<std::fs::File, String> {
    use std::os::fd::AsRawFd as _;
    if let Some(dir) = path.parent() {
        crate::private_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let deadline = std::time::Instant::now() + REFRESH_LOCK_WAIT;
    loop {
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(file);
        }
        if std::time::Instant::now() >= deadline {
            return Err(format!(
                "another process has held {} for {} s",
                path.display(),
                REFRESH_LOCK_WAIT.as_secs()
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn creds(client: &str) -> StoredCredentials {
        StoredCredentials::new(client.into(), None, vec!["a".into()], Some(1))
    }

    #[test]
    fn a_saved_file_is_private_and_read_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = TokenStore::new(dir.path(), "https://mcp.example/mcp");
        assert!(store.read().credentials.is_none());
        store
            .update(|f| f.credentials = Some(creds("c1")))
            .expect("write");
        let mode = std::fs::metadata(dir.path().join(TOKEN_FILE))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = TokenStore::new(dir.path(), "https://mcp.example/mcp");
        assert_eq!(
            again.read().credentials.map(|c| c.client_id).as_deref(),
            Some("c1")
        );
        assert!(again.refused().is_none());
    }

    #[test]
    fn a_file_for_another_url_is_not_used() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = TokenStore::new(dir.path(), "https://a.example/mcp");
        store
            .update(|f| f.credentials = Some(creds("c1")))
            .expect("write");
        let other = TokenStore::new(dir.path(), "https://b.example/mcp");
        assert!(other.read().credentials.is_none());
        let why = other.refused().expect("refused");
        assert!(why.contains("https://a.example/mcp"), "{why}");
    }

    #[test]
    fn hostile_files_are_refused_with_a_message() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = TokenStore::new(dir.path(), "https://a.example/mcp");
        let path = dir.path().join(TOKEN_FILE);

        // Readable by others.
        std::fs::write(
            &path,
            r#"{"version":1,"server_url":"https://a.example/mcp"}"#,
        )
        .expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let why = store.refused().expect("refused");
        assert!(why.contains("other users"), "{why}");

        // Not JSON; the message does not quote the content.
        std::fs::remove_file(&path).expect("rm");
        std::fs::write(&path, "secret-token-value garbage").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let why = store.refused().expect("refused");
        assert!(why.contains("does not hold a sign-in"), "{why}");
        assert!(!why.contains("secret-token-value"), "{why}");

        // Too big.
        std::fs::remove_file(&path).expect("rm");
        std::fs::write(&path, vec![b' '; MAX_TOKEN_FILE_BYTES as usize + 1]).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let why = store.refused().expect("refused");
        assert!(why.contains("more than"), "{why}");

        // A symlink to a file that would otherwise be fine.
        std::fs::remove_file(&path).expect("rm");
        let real = dir.path().join("real.json");
        std::fs::write(
            &real,
            r#"{"version":1,"server_url":"https://a.example/mcp"}"#,
        )
        .expect("write");
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        std::os::unix::fs::symlink(&real, &path).expect("symlink");
        let why = store.refused().expect("refused");
        assert!(why.contains("symlink"), "{why}");

        // From a newer binary.
        std::fs::remove_file(&path).expect("rm");
        std::fs::write(
            &path,
            r#"{"version":99,"server_url":"https://a.example/mcp"}"#,
        )
        .expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let why = store.refused().expect("refused");
        assert!(why.contains("newer"), "{why}");
        assert!(store.read().credentials.is_none());

        // Writing replaces the refused file with a private one.
        store
            .update(|f| f.credentials = Some(creds("c2")))
            .expect("write");
        assert!(store.refused().is_none());
        assert!(store.read().credentials.is_some());
    }

    #[test]
    fn a_change_by_another_process_is_seen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = TokenStore::new(dir.path(), "https://a.example/mcp");
        let b = TokenStore::new(dir.path(), "https://a.example/mcp");
        assert!(b.read().credentials.is_none());
        a.update(|f| f.credentials = Some(creds("fresh")))
            .expect("write");
        assert_eq!(
            b.read().credentials.map(|c| c.client_id).as_deref(),
            Some("fresh")
        );
        assert!(a.remove().expect("remove"));
        assert!(b.read().credentials.is_none());
    }

    /// A vault in memory: what the host's database does, without the
    /// sealing (tested with the database in the host's tests).
    #[derive(Default)]
    struct MemoryVault {
        docs: Mutex<std::collections::HashMap<String, (u64, Vec<u8>)>>,
        /// Writes that lost their compare-and-set.
        lost: std::sync::atomic::AtomicU32,
        /// A document another writer writes just before the next write.
        sneak: Mutex<Option<Vec<u8>>>,
    }

    impl TokenVault for MemoryVault {
        fn revision(&self, server: &str) -> Result<Option<u64>, String> {
            Ok(self.docs.lock().expect("docs").get(server).map(|d| d.0))
        }
        fn read(&self, server: &str) -> Result<Option<(u64, Vec<u8>)>, String> {
            Ok(self.docs.lock().expect("docs").get(server).cloned())
        }
        fn write(
            &self,
            server: &str,
            expected: Option<u64>,
            document: &[u8],
        ) -> Result<Option<u64>, String> {
            let mut docs = self.docs.lock().expect("docs");
            if let Some(theirs) = self.sneak.lock().expect("sneak").take() {
                let next = docs.get(server).map_or(1, |d| d.0 + 1);
                docs.insert(server.to_string(), (next, theirs));
            }
            let now = docs.get(server).map(|d| d.0);
            if now != expected {
                self.lost.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                return Ok(None);
            }
            let next = now.unwrap_or(0) + 1;
            docs.insert(server.to_string(), (next, document.to_vec()));
            Ok(Some(next))
        }
        fn lock(&self, _server: &str, _wait: Duration) -> Result<Box<dyn Send>, String> {
            Ok(Box::new(()))
        }
        fn place(&self) -> String {
            "the test vault".into()
        }
    }

    #[test]
    fn two_replicas_writing_one_shared_sign_in_lose_neither_change() {
        let vault = Arc::new(MemoryVault::default());
        let a = TokenStore::shared(vault.clone(), "tickets", "https://a.example/mcp");
        let b = TokenStore::shared(vault.clone(), "tickets", "https://a.example/mcp");
        assert!(b.read().credentials.is_none());
        // A writes between B's read and B's write: B's compare-and-set
        // loses, and B applies its change to A's document.
        let mut theirs = TokenFile::empty("https://a.example/mcp");
        theirs.credentials = Some(creds("from-a"));
        *vault.sneak.lock().expect("sneak") = Some(serde_json::to_vec(&theirs).expect("json"));
        b.update(|f| {
            f.client = Some(ClientRegistration {
                client_id: "cid".into(),
                client_secret: None,
                redirect_uri: "http://127.0.0.1:1/cb".into(),
                scopes: vec![],
                resource: None,
            })
        })
        .expect("b writes");
        assert_eq!(
            vault.lost.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "B's first write lost the compare-and-set"
        );
        let seen = a.read();
        assert_eq!(
            seen.credentials.map(|c| c.client_id).as_deref(),
            Some("from-a"),
            "A's change survived B's"
        );
        assert_eq!(seen.client.map(|c| c.client_id).as_deref(), Some("cid"));
        // A sees B's write as another writer's; B does not see its own.
        assert!(!b.changed_elsewhere(Some(Stamp::Revision(1))).0);
        assert!(a.changed_elsewhere(Some(Stamp::Revision(1))).0);
    }

    #[test]
    fn a_shared_sign_in_for_another_url_or_malformed_is_refused_without_quoting_it() {
        let vault = Arc::new(MemoryVault::default());
        let old = TokenStore::shared(vault.clone(), "tickets", "https://old.example/mcp");
        old.update(|f| f.credentials = Some(creds("c1")))
            .expect("write");
        let now = TokenStore::shared(vault.clone(), "tickets", "https://new.example/mcp");
        assert!(now.credentials().is_none());
        let why = now.refused().expect("refused");
        assert!(why.contains("https://old.example/mcp"), "{why}");
        assert!(why.contains("test vault"), "{why}");

        let revision = vault.revision("tickets").expect("rev");
        vault
            .write("tickets", revision, b"{\"secret-token-value\": ")
            .expect("write")
            .expect("written");
        let why = now.refused().expect("refused");
        assert!(why.contains("does not hold a sign-in"), "{why}");
        assert!(!why.contains("secret-token-value"), "{why}");
        let revision = vault.revision("tickets").expect("rev");
        let big = vec![b' '; MAX_TOKEN_FILE_BYTES as usize + 1];
        vault.write("tickets", revision, &big).expect("write");
        assert!(now.refused().expect("refused").contains("more than"));
        // Signing in again replaces it.
        now.update(|f| f.credentials = Some(creds("c2")))
            .expect("write");
        assert!(now.refused().is_none());
        assert!(now.credentials().is_some());
    }

    #[test]
    fn signing_out_of_a_shared_sign_in_empties_it_and_its_revision_still_grows() {
        let vault = Arc::new(MemoryVault::default());
        let a = TokenStore::shared(vault.clone(), "tickets", "https://a.example/mcp");
        let b = TokenStore::shared(vault.clone(), "tickets", "https://a.example/mcp");
        assert!(!a.remove().expect("nothing to remove"));
        a.update(|f| f.credentials = Some(creds("c1")))
            .expect("write");
        assert!(b.credentials().is_some());
        let before = vault.revision("tickets").expect("rev").expect("some");
        assert!(a.remove().expect("remove"));
        let after = vault.revision("tickets").expect("rev").expect("some");
        assert!(after > before, "{after} > {before}");
        assert!(
            b.credentials().is_none(),
            "the other replica sees the sign-out"
        );
        assert!(b.refused().is_none());
        assert!(!b.remove().expect("already out"));
    }
}
