//! The media type of a file a script wrote, by its extension: what an MCP
//! client is told in the file's `resource_link`.

/// The media type of the file named `name`; `application/octet-stream`
/// for an extension not known here.
///
/// ```
/// assert_eq!(skillhost::mime_type_of("out/fields.json"), "application/json");
/// assert_eq!(skillhost::mime_type_of("x"), "application/octet-stream");
/// ```
pub fn mime_type_of(name: &str) -> &'static str {
    let file = name.rsplit('/').next().unwrap_or(name);
    let ext = match file.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => ext.to_ascii_lowercase(),
        _ => return "application/octet-stream",
    };
    match ext.as_str() {
        "json" => "application/json",
        "txt" | "log" => "text/plain",
        "md" => "text/markdown",
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "html" | "htm" => "text/html",
        "xml" => "application/xml",
        "yaml" | "yml" => "application/yaml",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "pptx" => "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "svg" => "image/svg+xml",
        _ => "application/octet-stream",
    }
}

/// Whether a file of this media type is text an agent may be shown inline
/// (when it is also valid UTF-8 and small).
pub(crate) fn is_text(mime: &str) -> bool {
    mime.starts_with("text/")
        || matches!(
            mime,
            "application/json" | "application/xml" | "application/yaml" | "image/svg+xml"
        )
}
