//! The token store: one file per server, `mcp/<name>/oauth.json` in the
//! data dir, mode 0600, holding everything a sign-in produced (the
//! authorization server's metadata, the client registration, the tokens).
//!
//! It is the only place a token or client secret is written. The file is
//! bound to the server URL it was issued for: a store whose URL differs from
//! the configured one is treated as empty, so a token never reaches another
//! resource. A file that others can read, that is a symlink, that is too big
//! or that is not JSON is refused with a message naming it (and treated as
//! no sign-in), never followed or half-read.
//!
//! The file is cached in memory and read again only when its size or
//! modification time changed, so that a request does not pay a file read
//! and a sign-in by another process (`skillhost mcp login` while `serve`
//! runs) is seen at the next request.

use std::fs::OpenOptions;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use rmcp::transport::auth::{
    AuthError, AuthorizationMetadata, CredentialRefreshGuard, CredentialStore, StoredCredentials,
};
use serde::{Deserialize, Serialize};

use super::MAX_TOKEN_FILE_BYTES;

/// The file's name in the server's folder.
pub const TOKEN_FILE: &str = "oauth.json";

/// The layout version this binary writes and reads.
const VERSION: u32 = 1;

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

/// The file's content.
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
}

/// What the cache last saw on disk: (modified, size, inode).
pub(crate) type Stamp = (SystemTime, u64, u64);

struct Cached {
    stamp: Option<Stamp>,
    /// The stamp of this store's own last write.
    written: Option<Stamp>,
    file: TokenFile,
    /// Why the file on disk was not used, if it was not.
    refused: Option<String>,
}

/// One server's token file. Cloning shares the cache.
#[derive(Clone)]
pub(crate) struct TokenStore {
    path: PathBuf,
    server_url: String,
    cache: Arc<Mutex<Cached>>,
}

impl std::fmt::Debug for TokenStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl TokenStore {
    /// The store of `config`'s server in the data dir at `data_root`.
    pub fn of(data_root: &Path, config: &crate::config::ServerConfig) -> TokenStore {
        TokenStore::new(
            &crate::manager::server_dir(data_root, &config.name),
            config.url.as_deref().unwrap_or_default(),
        )
    }

    /// The store of the server whose folder is `dir`, for `server_url`.
    pub fn new(dir: &Path, server_url: &str) -> TokenStore {
        TokenStore {
            path: dir.join(TOKEN_FILE),
            server_url: server_url.to_string(),
            cache: Arc::new(Mutex::new(Cached {
                stamp: None,
                written: None,
                file: TokenFile::empty(server_url),
                refused: None,
            })),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the file holds now (empty when it is missing or refused).
    pub fn read(&self) -> TokenFile {
        self.refresh();
        self.lock().file.clone()
    }

    /// Why the file on disk is not used, if it is not.
    pub fn refused(&self) -> Option<String> {
        self.refresh();
        self.lock().refused.clone()
    }

    /// The credentials the file holds (without cloning the rest of it:
    /// this is read for every request).
    pub fn credentials(&self) -> Option<StoredCredentials> {
        self.refresh();
        self.lock().file.credentials.clone()
    }

    /// Whether the file changed since `seen` by another writer than this
    /// store (another process's sign-in), returning its stamp now.
    pub fn changed_elsewhere(&self, seen: Option<Stamp>) -> (bool, Option<Stamp>) {
        let now = stamp_of(&self.path);
        let written = self.lock().written;
        (now != seen && now != written, now)
    }

    /// Whether the file holds tokens for this server.
    pub fn has_tokens(&self) -> bool {
        self.credentials()
            .is_some_and(|c| c.token_response.is_some())
    }

    /// The file's stamp, to notice a sign-in by another process.
    pub fn stamp(&self) -> Option<Stamp> {
        stamp_of(&self.path)
    }

    /// Changes the file with `f` and writes it (atomically, 0600).
    pub fn update(&self, f: impl FnOnce(&mut TokenFile)) -> Result<(), String> {
        self.refresh();
        let mut cached = self.lock();
        let mut file = cached.file.clone();
        f(&mut file);
        file.version = VERSION;
        file.server_url = self.server_url.clone();
        write_private(&self.path, &file)?;
        cached.file = file;
        cached.stamp = stamp_of(&self.path);
        cached.written = cached.stamp;
        cached.refused = None;
        Ok(())
    }

    /// Removes the file (sign-out).
    pub fn remove(&self) -> Result<bool, String> {
        let mut cached = self.lock();
        cached.file = TokenFile::empty(&self.server_url);
        cached.stamp = None;
        cached.refused = None;
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(format!("cannot remove {}: {e}", self.path.display())),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cached> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads the file again if it changed on disk.
    fn refresh(&self) {
        let stamp = stamp_of(&self.path);
        let mut cached = self.lock();
        if stamp == cached.stamp {
            return;
        }
        cached.stamp = stamp;
        if stamp.is_none() {
            cached.file = TokenFile::empty(&self.server_url);
            cached.refused = None;
            return;
        }
        match read_private(&self.path) {
            Ok(file) if file.server_url != self.server_url => {
                cached.file = TokenFile::empty(&self.server_url);
                cached.refused = Some(format!(
                    "{} was written for {}, not {}; sign in again",
                    self.path.display(),
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
    Some((m.modified().ok()?, m.len(), m.ino()))
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
    if meta.len() > MAX_TOKEN_FILE_BYTES {
        return Err(format!(
            "the token file {shown} is {} bytes, more than the {MAX_TOKEN_FILE_BYTES} a token \
             file may hold; it is not used",
            meta.len()
        ));
    }
    let mut text = Vec::new();
    std::io::Read::by_ref(&mut f)
        .take(MAX_TOKEN_FILE_BYTES + 1)
        .read_to_end(&mut text)
        .map_err(|e| format!("cannot read the token file {shown}: {e}"))?;
    let file: TokenFile = serde_json::from_slice(&text).map_err(|e| {
        // The serde message can quote the file; it holds secrets.
        format!(
            "the token file {shown} is not a token file (line {}, column {}); it is not used",
            e.line(),
            e.column()
        )
    })?;
    if file.version > VERSION {
        return Err(format!(
            "the token file {shown} was written by a newer skillhost (layout {}); it is not used",
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
        self.update(|f| f.credentials = Some(credentials))
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

    /// Refreshes by every process sharing the file take turns: with
    /// rotating refresh tokens, two processes presenting the same one make
    /// the authorization server revoke the whole grant.
    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        let path = self.path.with_file_name(format!(".{TOKEN_FILE}.lock"));
        let file = tokio::task::spawn_blocking(move || lock_exclusive(&path))
            .await
            .map_err(|e| AuthError::CredentialStoreError(e.to_string()))?
            .map_err(AuthError::CredentialStoreError)?;
        Ok(Some(CredentialRefreshGuard::new(file)))
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
/// it, waiting at most 30 s; the lock goes with the file.
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
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(file);
        }
        if std::time::Instant::now() >= deadline {
            return Err(format!(
                "another process has held {} for 30 s",
                path.display()
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
        let mode = std::fs::metadata(store.path())
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
        let path = store.path().to_path_buf();

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
        assert!(why.contains("not a token file"), "{why}");
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
}
