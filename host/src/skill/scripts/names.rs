//! The names a script call's input files may have, checked by the host
//! before anything reaches the sandbox (which checks them again): a
//! relative, `/`-separated path of at most [`MAX_SCRIPT_INPUT_DEPTH`]
//! names, none empty, `.` or `..`, none with NUL, a control, invisible or
//! bidirectional character, each at most 255 bytes; not under the
//! script's own `out/` and `.tmp/`; no two files of one call the same.

use super::tool::ArgumentError;
use crate::limits::MAX_SCRIPT_INPUT_DEPTH;
use crate::sandbox::vfs::name;

/// The scratch folders a script owns: an input file may not be put there.
const OWN_FOLDERS: [&str; 2] = ["out", ".tmp"];

/// Checks the input file name `path` given in `field` (`files[2].name`):
/// the error names the field and what is wrong, with the name escaped.
///
/// ```ignore
/// assert!(check_input_name("files[0].name", "in/a.pdf").is_ok());
/// ```
pub(crate) fn check_input_name(field: &str, path: &str) -> Result<(), ArgumentError> {
    let shown = crate::escape::escape_control(path, 120, false);
    let refuse = |why: &str| {
        Err(ArgumentError::new(
            field,
            format!("`{field}` `{shown}`: {why}"),
        ))
    };
    if path.is_empty() {
        return refuse("a file name must not be empty");
    }
    if path.starts_with('/') {
        return refuse("a file name is relative to the working folder, not absolute");
    }
    if path.contains('\\') {
        return refuse("folders are separated by `/`, not `\\`");
    }
    let depth = path.split('/').count();
    if depth > MAX_SCRIPT_INPUT_DEPTH {
        return refuse(&format!(
            "{depth} names deep, over the cap of {MAX_SCRIPT_INPUT_DEPTH}"
        ));
    }
    if path.split('/').any(|n| n == "..") {
        return refuse("`..` would leave the working folder");
    }
    if let Err(e) = name::check_path(path) {
        return refuse(&e.to_string());
    }
    let first = path.split('/').next().unwrap_or_default();
    if OWN_FOLDERS.contains(&first) {
        return refuse("`out/` and `.tmp/` are the script's own folders");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_names_pass() {
        for ok in ["form.pdf", "in/a.pdf", "a b/ç.txt", ".hidden", "x..y"] {
            assert!(check_input_name("files[0].name", ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn every_bad_name_is_refused_naming_the_field_and_why() {
        let deep = vec!["d"; MAX_SCRIPT_INPUT_DEPTH + 1].join("/");
        let long = "n".repeat(4000);
        let long_name = "n".repeat(256);
        for (bad, why) in [
            ("", "empty"),
            ("/etc/passwd", "not absolute"),
            ("../x", "`..`"),
            ("a/../../x", "`..`"),
            ("a\\b", "`\\`"),
            ("a\0b", "NUL"),
            ("a\nb", "control"),
            ("report\u{202e}fdp.exe", "invisible"),
            ("a//b", "empty"),
            ("./a", "`.`"),
            (deep.as_str(), "over the cap of 16"),
            (long.as_str(), "at most 1024 bytes"),
            (long_name.as_str(), "at most 255 bytes"),
            ("out/x", "own folders"),
            (".tmp/x", "own folders"),
        ] {
            let err = check_input_name("files[3].name", bad).unwrap_err();
            assert_eq!(err.field, "files[3].name");
            let err = err.message;
            assert!(err.starts_with("`files[3].name` `"), "{err}");
            assert!(err.contains(why), "{bad:?}: {err}");
            assert!(!err.contains('\0') && !err.contains('\n'), "{err:?}");
        }
    }
}
