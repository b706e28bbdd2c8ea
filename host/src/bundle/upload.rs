//! A bundle as it arrives from a client: written a piece at a time to a
//! private file in the data dir's `uploads/` folder instead of memory,
//! refused past [`MAX_ARCHIVE_BYTES`], read back whole only to be opened.
//!
//! The file's name is removed as soon as it is made: the upload is an open
//! file with no name, gone with its last handle whatever ends the process
//! (a dropped connection, a refusal, a `kill -9`). A name left by a
//! process killed between the two steps is removed by the next upload.

use std::io::Write as _;

use crate::bundle::MAX_ARCHIVE_BYTES;
use crate::error::CatalogError;
use crate::state::data_dir::{DataDir, private_dirs, private_new_file};

/// The data dir's folder of uploads.
const UPLOADS: &str = "uploads";

/// A bundle being uploaded, or uploaded: see the module docs.
///
/// ```no_run
/// # fn f(host: skillhost::Host) -> Result<(), skillhost::CatalogError> {
/// let mut upload = host.bundle_upload()?;
/// upload.write(&std::fs::read("greeter.skill").unwrap_or_default())?;
/// let bundle = host.verify_upload(&upload)?;
/// println!("{}@{}", bundle.statement.name, bundle.statement.version);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct BundleUpload {
    file: std::fs::File,
    len: u64,
}

impl BundleUpload {
    /// A new, empty upload in `data`'s `uploads/` folder.
    pub(crate) fn create(data: &DataDir) -> Result<BundleUpload, CatalogError> {
        let failed =
            |e: std::io::Error| CatalogError::Refused(format!("cannot hold the upload: {e}"));
        data.dir
            .create_dir_with(UPLOADS, &private_dirs())
            .map_err(failed)?;
        let dir = data.dir.open_dir(UPLOADS).map_err(failed)?;
        // Every name here is a leftover: an upload's name lives for
        // microseconds.
        if let Ok(entries) = dir.entries() {
            for e in entries.flatten() {
                let _ = dir.remove_file(e.file_name());
            }
        }
        let name = format!(".upload-{}", hex::encode(random_bytes().map_err(failed)?));
        let mut options = private_new_file();
        options.read(true);
        let file = dir.open_with(&name, &options).map_err(failed)?;
        match dir.remove_file(&name) {
            Ok(()) => {}
            // Another upload's sweep took it: the file is ours all the same.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(failed(e)),
        }
        Ok(BundleUpload {
            file: file.into_std(),
            len: 0,
        })
    }

    /// Appends `bytes`; refused past [`MAX_ARCHIVE_BYTES`] in all (what was
    /// written stays, to be dropped).
    ///
    /// ```no_run
    /// # fn f(mut u: skillhost::BundleUpload) -> Result<(), skillhost::CatalogError> {
    /// u.write(b"PK")?;
    /// # Ok(()) }
    /// ```
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), CatalogError> {
        let len = self.len.saturating_add(bytes.len() as u64);
        if len > MAX_ARCHIVE_BYTES {
            return Err(CatalogError::Refused(format!(
                "the bundle is over the {} MiB limit",
                MAX_ARCHIVE_BYTES >> 20
            )));
        }
        self.file
            .write_all(bytes)
            .map_err(|e| CatalogError::Refused(format!("cannot hold the upload: {e}")))?;
        self.len = len;
        Ok(())
    }

    /// The bytes written so far.
    ///
    /// ```no_run
    /// # fn f(u: skillhost::BundleUpload) { println!("{} bytes", u.len()); }
    /// ```
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was written.
    ///
    /// ```no_run
    /// # fn f(u: skillhost::BundleUpload) { assert!(u.is_empty() == (u.len() == 0)); }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The whole upload, read back.
    pub(crate) fn bytes(&self) -> Result<Vec<u8>, CatalogError> {
        use std::os::unix::fs::FileExt as _;
        let mut bytes = vec![0u8; usize::try_from(self.len).unwrap_or(0)];
        self.file
            .read_exact_at(&mut bytes, 0)
            .map_err(|e| CatalogError::Refused(format!("cannot read the upload back: {e}")))?;
        Ok(bytes)
    }
}

fn random_bytes() -> std::io::Result<[u8; 16]> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upload_has_no_name_and_is_capped() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let data = DataDir::open(tmp.path()).expect("data dir");
        std::fs::create_dir_all(tmp.path().join(UPLOADS)).expect("mkdir");
        std::fs::write(tmp.path().join(UPLOADS).join(".upload-left"), b"x").expect("leftover");
        let mut u = BundleUpload::create(&data).expect("upload");
        assert_eq!(
            std::fs::read_dir(tmp.path().join(UPLOADS))
                .expect("uploads")
                .count(),
            0,
            "a name is left in uploads/"
        );
        u.write(b"hello ").expect("write");
        u.write(b"world").expect("write");
        assert_eq!(u.bytes().expect("read back"), b"hello world");
        u.write(b"!").expect("write after reading back");
        assert_eq!(u.bytes().expect("read back"), b"hello world!");
        let big = vec![0u8; 1 << 20];
        let mut refused = None;
        for _ in 0..(MAX_ARCHIVE_BYTES >> 20) + 1 {
            if let Err(e) = u.write(&big) {
                refused = Some(e);
                break;
            }
        }
        let e = refused.expect("refused past the limit");
        assert!(e.to_string().contains("over the 25 MiB limit"), "{e}");
        assert!(u.len() <= MAX_ARCHIVE_BYTES);
    }
}
