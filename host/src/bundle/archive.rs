//! Reading a bundle's zip archive defensively: every entry name, type,
//! method and size is checked on the raw archive before anything is used,
//! and the inflated bytes are counted while streaming.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Cursor, Read};

use unicode_normalization::UnicodeNormalization;
use zip::CompressionMethod;
use zip::ZipArchive;

use super::{BundleError, MAX_ARCHIVE_BYTES, MAX_ENTRIES, MAX_EXTRACTED_BYTES};

/// Longest path component accepted, in bytes.
const MAX_COMPONENT_BYTES: usize = 255;
/// Longest entry name accepted, in bytes.
const MAX_NAME_BYTES: usize = 1024;
/// Deepest folder nesting accepted.
const MAX_DEPTH: usize = 16;

/// One file read from a bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ArchiveFile {
    pub path: String,
    pub data: Vec<u8>,
}

/// Checks an entry name; returns it without a trailing `/` and whether it
/// names a directory.
fn check_name(raw: &[u8]) -> Result<(String, bool), BundleError> {
    let shown = String::from_utf8_lossy(raw).escape_debug().to_string();
    let bad = |why: &str| BundleError::entry(&shown, why);
    let name = std::str::from_utf8(raw).map_err(|_| bad("the name is not UTF-8"))?;
    if name.is_empty() {
        return Err(bad("empty name"));
    }
    if name.contains('\0') {
        return Err(bad("NUL in the name"));
    }
    if name.contains('\\') {
        return Err(bad("backslash in the name (only `/` separates folders)"));
    }
    if name.starts_with('/') {
        return Err(bad("absolute path"));
    }
    if name.contains(':') {
        return Err(bad("`:` in the name (drive prefix or stream name)"));
    }
    if name.chars().any(char::is_control) {
        return Err(bad("control character in the name"));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(bad(&format!("name longer than {MAX_NAME_BYTES} bytes")));
    }
    let (body, is_dir) = match name.strip_suffix('/') {
        Some(b) => (b, true),
        None => (name, false),
    };
    let parts: Vec<&str> = body.split('/').collect();
    if parts.len() > MAX_DEPTH {
        return Err(bad(&format!("nested deeper than {MAX_DEPTH} folders")));
    }
    for p in &parts {
        match *p {
            "" => return Err(bad("empty path component")),
            "." | ".." => return Err(bad("`.` or `..` path component")),
            p if p.len() > MAX_COMPONENT_BYTES => {
                return Err(bad(&format!(
                    "path component longer than {MAX_COMPONENT_BYTES} bytes"
                )));
            }
            _ => {}
        }
    }
    Ok((body.to_string(), is_dir))
}

/// File-type bits of a unix mode.
const S_IFMT: u32 = 0o170000;
const S_IFREG: u32 = 0o100000;
const S_IFDIR: u32 = 0o040000;

/// Length of an end-of-central-directory record without its comment.
const EOCD_LEN: usize = 22;
const EOCD_SIG: &[u8; 4] = b"PK\x05\x06";

/// The archive must end with its one end-of-central-directory record (no
/// comment, nothing after it), and no other end record may also reach the
/// end of the file: a fake end record in a comment would make readers
/// disagree on which central directory is the archive's.
fn check_end_record(bytes: &[u8]) -> Result<(), BundleError> {
    let Some(last) = bytes.len().checked_sub(EOCD_LEN) else {
        return Err(BundleError::archive("not a valid zip archive: too short"));
    };
    if &bytes[last..last + 4] != EOCD_SIG || bytes[bytes.len() - 2..] != [0, 0] {
        return Err(BundleError::archive(
            "data after the end of the archive (it must end with its end-of-central-directory record)",
        ));
    }
    let earliest = last.saturating_sub(usize::from(u16::MAX));
    for at in earliest..last {
        if &bytes[at..at + 4] == EOCD_SIG {
            let comment = usize::from(u16::from_le_bytes([bytes[at + 20], bytes[at + 21]]));
            if at + EOCD_LEN + comment == bytes.len() {
                return Err(BundleError::archive(
                    "two end-of-central-directory records end the archive (a fake end record in a comment?)",
                ));
            }
        }
    }
    Ok(())
}

/// Reads and checks every entry; returns the files sorted by path.
pub(crate) fn read_archive(bytes: &[u8]) -> Result<Vec<ArchiveFile>, BundleError> {
    if bytes.len() as u64 > MAX_ARCHIVE_BYTES {
        return Err(BundleError::archive(format!(
            "the archive is {} bytes, over the {MAX_ARCHIVE_BYTES}-byte limit",
            bytes.len()
        )));
    }
    let mut zip = ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| BundleError::archive(format!("not a valid zip archive: {e}")))?;
    if zip.offset() != 0 {
        return Err(BundleError::archive(format!(
            "{} bytes of data before the archive",
            zip.offset()
        )));
    }
    if !zip.comment().is_empty() {
        return Err(BundleError::archive("archive comments are not allowed"));
    }
    check_end_record(bytes)?;
    if zip.len() > MAX_ENTRIES {
        return Err(BundleError::archive(format!(
            "{} entries, over the limit of {MAX_ENTRIES}",
            zip.len()
        )));
    }
    if zip.has_duplicate_names() {
        return Err(BundleError::archive("two entries have the same name"));
    }
    zip.validate_header_consistency()
        .map_err(|e| BundleError::archive(format!("inconsistent archive: {e}")))?;

    // With the offsets rewritten, prepended data leaves `offset()` at 0: the
    // first entry must start the archive.
    let first = (0..zip.len())
        .filter_map(|i| zip.by_index_data(i).ok().map(|e| e.header_start()))
        .min();
    if let Some(first) = first
        && first != 0
    {
        return Err(BundleError::archive(format!(
            "{first} bytes of data before the archive"
        )));
    }

    let mut files = Vec::new();
    let mut dirs = BTreeSet::new();
    let mut folded: BTreeMap<String, String> = BTreeMap::new();
    let mut extracted: u64 = 0;
    for i in 0..zip.len() {
        // Every check on the entry's metadata comes before the zip crate
        // builds a reader, which would refuse encrypted entries without
        // naming them.
        let entry = zip
            .by_index_data(i)
            .map_err(|e| BundleError::archive(format!("entry {i}: {e}")))?;
        let (name, is_dir) = check_name(entry.name_raw())?;
        let bad = |why: String| BundleError::entry(&name, &why);
        if entry.encrypted() {
            return Err(bad("encrypted entries are not allowed".into()));
        }
        if let Some(mode) = entry.unix_mode() {
            let kind = mode & S_IFMT;
            let ok = kind == 0 || (kind == S_IFREG && !is_dir) || (kind == S_IFDIR && is_dir);
            if !ok {
                let what = match kind {
                    0o120000 => "a symlink",
                    0o020000 | 0o060000 => "a device",
                    0o010000 => "a FIFO",
                    0o140000 => "a socket",
                    S_IFDIR => "a directory with a file name",
                    _ => "not a regular file",
                };
                return Err(bad(format!(
                    "{what}; only regular files and folders are allowed"
                )));
            }
        }
        if entry.is_symlink() {
            return Err(bad(
                "a symlink; only regular files and folders are allowed".into()
            ));
        }
        let key: String = name.nfc().collect::<String>().to_lowercase();
        if let Some(other) = folded.insert(key, name.clone()) {
            return Err(bad(format!(
                "same name as `{other}` ignoring case or Unicode normalisation"
            )));
        }
        if is_dir {
            dirs.insert(name);
            continue;
        }
        match entry.compression() {
            CompressionMethod::Stored | CompressionMethod::Deflated => {}
            other => {
                return Err(bad(format!(
                    "compression method {other:?} is not allowed (only stored or deflate)"
                )));
            }
        }
        let mut entry = zip
            .by_index(i)
            .map_err(|e| bad(format!("cannot read: {e}")))?;
        let declared = entry.size();
        let budget = MAX_EXTRACTED_BYTES.saturating_sub(extracted);
        let mut data = Vec::with_capacity(declared.min(budget).min(1 << 20) as usize);
        // Read one byte past both the declared size and the budget so that
        // either lie shows up without inflating without end.
        let limit = declared.min(budget).saturating_add(1);
        (&mut entry)
            .take(limit)
            .read_to_end(&mut data)
            .map_err(|e| bad(format!("cannot inflate: {e}")))?;
        let actual = data.len() as u64;
        extracted = extracted.saturating_add(actual);
        if extracted > MAX_EXTRACTED_BYTES {
            return Err(bad(format!(
                "the extracted content exceeds the {MAX_EXTRACTED_BYTES}-byte limit"
            )));
        }
        if actual != declared {
            return Err(bad(format!(
                "declared size {declared} but the data inflates to {}{actual} bytes",
                if actual > declared { "more than " } else { "" }
            )));
        }
        files.push(ArchiveFile { path: name, data });
    }
    // A file must not also be a folder (`a` and `a/b`).
    let file_names: BTreeSet<&str> = files.iter().map(|f| f.path.as_str()).collect();
    for f in &files {
        let mut prefix = String::new();
        for part in f
            .path
            .split('/')
            .collect::<Vec<_>>()
            .iter()
            .rev()
            .skip(1)
            .rev()
        {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
            if file_names.contains(prefix.as_str()) {
                return Err(BundleError::entry(
                    &f.path,
                    &format!("`{prefix}` is both a file and a folder"),
                ));
            }
        }
        if dirs.contains(&f.path) {
            return Err(BundleError::entry(&f.path, "is both a file and a folder"));
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_names_are_refused() {
        for name in [
            &b"../x"[..],
            b"a/../../x",
            b"..\\x",
            b"/etc/x",
            b"C:\\x",
            b"C:/x",
            b"\\\\srv\\x",
            b"a\0b",
            b"",
            b"a//b",
            b"./a",
            b"\xff\xfe",
            b"a\x1b[31m",
        ] {
            assert!(
                check_name(name).is_err(),
                "{:?} accepted",
                String::from_utf8_lossy(name)
            );
        }
        let deep = "a/".repeat(MAX_DEPTH + 1) + "f";
        assert!(check_name(deep.as_bytes()).is_err());
        assert!(check_name("x".repeat(300).as_bytes()).is_err());
    }

    #[test]
    fn ordinary_names_pass() {
        assert_eq!(
            check_name(b"skill.yaml").unwrap(),
            ("skill.yaml".into(), false)
        );
        assert_eq!(check_name(b"src/").unwrap(), ("src".into(), true));
        assert_eq!(
            check_name("docs/été.md".as_bytes()).unwrap().0,
            "docs/été.md"
        );
    }
}
