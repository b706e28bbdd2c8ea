//! The rules a name must follow to be created in the scratch folder (and
//! for a script call's input files, checked again by the sandbox): each
//! name 1 to [`MAX_SCRATCH_NAME_BYTES`] bytes, no NUL, no control
//! character, no invisible or bidirectional character (a file name comes
//! back to an agent and an operator: `report\u{202e}fdp.exe` must not read
//! as `report.exe`), not `.` or `..`; a path (its names joined by `/`) at
//! most [`MAX_SCRATCH_PATH_BYTES`] bytes and [`MAX_SCRATCH_DEPTH`] names
//! deep.

use crate::limits::{MAX_SCRATCH_DEPTH, MAX_SCRATCH_NAME_BYTES, MAX_SCRATCH_PATH_BYTES};

/// Why a name or a path was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameError {
    /// Empty, `.`, `..`, or holding a `/`.
    NotAName,
    /// A NUL or another control character (C0, DEL, C1), or an invisible
    /// or bidirectional one (`escape.rs`'s `is_invisible`).
    Control,
    /// Longer than [`MAX_SCRATCH_NAME_BYTES`].
    NameTooLong,
    /// A path longer than [`MAX_SCRATCH_PATH_BYTES`].
    PathTooLong,
    /// A path deeper than [`MAX_SCRATCH_DEPTH`].
    TooDeep,
}

impl std::fmt::Display for NameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NameError::NotAName => f.write_str("a name must not be empty, `.`, `..` or hold a `/`"),
            NameError::Control => f.write_str(
                "a name must not hold NUL, a newline, another control character or an \
                 invisible one",
            ),
            NameError::NameTooLong => {
                write!(f, "a name must be at most {MAX_SCRATCH_NAME_BYTES} bytes")
            }
            NameError::PathTooLong => {
                write!(f, "a path must be at most {MAX_SCRATCH_PATH_BYTES} bytes")
            }
            NameError::TooDeep => {
                write!(f, "a path must be at most {MAX_SCRATCH_DEPTH} folders deep")
            }
        }
    }
}

/// Whether `c` may not be in a name: a control character (C0, NUL and
/// newline among them; DEL; C1), or one that renders as nothing or
/// reorders the text around it.
fn is_control(c: char) -> bool {
    c.is_control() || crate::escape::is_invisible(c)
}

/// Checks one name (one component of a path).
pub(crate) fn check_name(name: &str) -> Result<(), NameError> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return Err(NameError::NotAName);
    }
    if name.chars().any(is_control) {
        return Err(NameError::Control);
    }
    if name.len() > MAX_SCRATCH_NAME_BYTES {
        return Err(NameError::NameTooLong);
    }
    Ok(())
}

/// Checks a relative, `/`-separated path: every name by [`check_name`]
/// (so no empty, `.` or `..` component and no leading `/`), its length and
/// its depth. Returns its names.
pub(crate) fn check_path(path: &str) -> Result<Vec<&str>, NameError> {
    if path.len() > MAX_SCRATCH_PATH_BYTES {
        return Err(NameError::PathTooLong);
    }
    let names: Vec<&str> = path.split('/').collect();
    for name in &names {
        check_name(name)?;
    }
    if names.len() > MAX_SCRATCH_DEPTH {
        return Err(NameError::TooDeep);
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_at_their_edges() {
        assert_eq!(check_name("a"), Ok(()));
        assert_eq!(check_name(&"n".repeat(MAX_SCRATCH_NAME_BYTES)), Ok(()));
        assert_eq!(
            check_name(&"n".repeat(MAX_SCRATCH_NAME_BYTES + 1)),
            Err(NameError::NameTooLong)
        );
        // Bytes, not characters: 128 two-byte characters are 256 bytes.
        assert_eq!(check_name(&"é".repeat(128)), Err(NameError::NameTooLong));
        assert_eq!(check_name(&"n".repeat(4000)), Err(NameError::NameTooLong));
        for bad in ["", ".", "..", "a/b", "/"] {
            assert_eq!(check_name(bad), Err(NameError::NotAName), "{bad:?}");
        }
        for bad in [
            "a\0b",
            "a\nb",
            "\r",
            "tab\there",
            "del\u{7f}",
            "c1\u{85}",
            "report\u{202e}fdp.exe",
            "zero\u{200b}width",
        ] {
            assert_eq!(check_name(bad), Err(NameError::Control), "{bad:?}");
        }
        assert_eq!(check_name("..."), Ok(()));
        assert_eq!(check_name(".hidden"), Ok(()));
        assert_eq!(check_name("naïve résumé.pdf"), Ok(()));
    }

    #[test]
    fn paths_at_their_edges() {
        assert_eq!(check_path("in/a.pdf"), Ok(vec!["in", "a.pdf"]));
        for bad in ["/etc/passwd", "a//b", "a/./b", "../x", "a/..", "a/", ""] {
            assert_eq!(check_path(bad), Err(NameError::NotAName), "{bad:?}");
        }
        let deep = vec!["d"; MAX_SCRATCH_DEPTH].join("/");
        assert!(check_path(&deep).is_ok());
        assert_eq!(check_path(&format!("{deep}/d")), Err(NameError::TooDeep));
        // 1024 bytes exactly: four 255-byte names and a 4-byte one, joined.
        let long = format!("{0}/{0}/{0}/{0}/abcd", "n".repeat(254));
        assert_eq!(long.len(), MAX_SCRATCH_PATH_BYTES);
        assert!(check_path(&long).is_ok());
        assert_eq!(check_path(&format!("{long}e")), Err(NameError::PathTooLong));
        assert_eq!(check_path("a\nb/c"), Err(NameError::Control));
    }
}
