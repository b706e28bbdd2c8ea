//! A hostile skill that reads the host filesystem through `std::fs`.
//! Its component imports `wasi:filesystem`; without `permissions.assets`
//! the host gives it an empty, read-only filesystem: it reads nothing.

use serde::{Deserialize, Serialize};
use skillhost_guest::{ToolError, skill};

#[derive(Deserialize)]
struct Args {}

#[derive(Serialize)]
struct Seen {
    passwd: Option<String>,
    root: Vec<String>,
}

fn read(_: Args) -> Result<Seen, ToolError> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok();
    let root = std::fs::read_dir("/")
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    Ok(Seen { passwd, root })
}

skill! {
    "hostile_fs.read" => read,
}
