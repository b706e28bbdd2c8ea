//! Which imports a skill component may have. Checked before anything is
//! instantiated: a component asking for more than this is refused at load,
//! never at call time.

use wasmtime::Engine;
use wasmtime::component::Component;

/// Interfaces a component may import, without version. Everything else,
/// `wasi:filesystem`, `wasi:sockets` and `wasi:http` included, is refused;
/// those are not even linked.
const ALLOWED_IMPORTS: &[&str] = &[
    "skillhost:plugin/types",
    "skillhost:plugin/host",
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:clocks/wall-clock",
    "wasi:clocks/monotonic-clock",
    "wasi:random/random",
    "wasi:random/insecure",
    "wasi:random/insecure-seed",
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
];

/// The export every skill component must have, without version.
pub(crate) const TOOLS_EXPORT: &str = "skillhost:plugin/tools";

/// Splits `ns:pkg/iface@1.2.3` into `ns:pkg/iface` and `1.2.3`.
fn split_version(name: &str) -> (&str, Option<&str>) {
    match name.split_once('@') {
        Some((n, v)) => (n, Some(v)),
        None => (name, None),
    }
}

/// Whether `version` is in the line this host implements for the package:
/// WASI 0.2.x and skillhost:plugin 0.1.x.
fn supported_version(interface: &str, version: Option<&str>) -> bool {
    let Some(v) = version.and_then(|v| semver::Version::parse(v).ok()) else {
        return false;
    };
    if interface.starts_with("wasi:") {
        v.major == 0 && v.minor == 2
    } else {
        v.major == 0 && v.minor == 1
    }
}

/// Returns every import of `component` the sandbox does not provide, or
/// the missing `tools` export.
pub(crate) fn check(engine: &Engine, component: &Component) -> Result<(), String> {
    let ty = component.component_type();
    let mut refused: Vec<String> = ty
        .imports(engine)
        .map(|(name, _)| name)
        .filter(|name| {
            let (iface, version) = split_version(name);
            !(ALLOWED_IMPORTS.contains(&iface) && supported_version(iface, version))
        })
        .map(str::to_string)
        .collect();
    refused.sort();
    refused.dedup();
    if !refused.is_empty() {
        return Err(format!(
            "refused before running: the component imports {} which the sandbox does not provide \
             (allowed: the skillhost:plugin host interface, and WASI 0.2 clocks, random, io and \
             cli environment/exit/stdio/terminal)",
            refused
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let exports_tools = ty.exports(engine).any(|(name, _)| {
        let (iface, version) = split_version(name);
        iface == TOOLS_EXPORT && supported_version(iface, version)
    });
    if !exports_tools {
        return Err(format!(
            "the component does not export `{TOOLS_EXPORT}@0.1.x`; build it against the \
             skillhost:plugin WIT world `skill` (the skillhost-guest SDK does this)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_must_be_in_the_supported_line() {
        assert!(supported_version("wasi:io/streams", Some("0.2.6")));
        assert!(!supported_version("wasi:io/streams", Some("0.3.0")));
        assert!(!supported_version("wasi:io/streams", None));
        assert!(supported_version("skillhost:plugin/host", Some("0.1.0")));
        assert!(!supported_version("skillhost:plugin/host", Some("1.0.0")));
    }
}
