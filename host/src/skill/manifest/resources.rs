//! `resources` and `resource_templates`: what a skill publishes as MCP
//! resources under URIs of its own choosing, besides its files under
//! `skill://NAME/…`. A static resource is one of the skill's files; a
//! template (`scheme://path/{var}/…`) is served by one of the skill's own
//! read-only tools, called with the URI's variables as its arguments.

use serde::{Deserialize, Serialize};

/// A resource served from one of the skill's files.
///
/// ```
/// let r: skillhost::ResourceDecl =
///     serde_yaml::from_str("uri: docs://handbook\nfile: handbook.md").unwrap();
/// assert_eq!(r.file, "handbook.md");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceDecl {
    /// The absolute URI clients read (not `skill:`, which is the host's).
    pub uri: String,
    /// The file of the skill (relative path) it serves.
    pub file: String,
    /// A name for lists (default: the URI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its media type (default: from the file's extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

/// A family of resources served by a tool of the skill.
///
/// ```
/// let t: skillhost::ResourceTemplateDecl = serde_yaml::from_str(
///     "uri_template: 'tickets://{id}'\ntool: tickets.get",
/// )
/// .unwrap();
/// assert_eq!(t.tool, "tickets.get");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceTemplateDecl {
    /// An absolute URI with `{var}` parts; each matches one non-empty
    /// path segment (no `/`, `?` or `#`).
    pub uri_template: String,
    /// A read-only tool this skill implements; a read calls it with
    /// `{"var": "value", …}` as the reader, and serves its result.
    pub tool: String,
    /// A name for lists (default: the template).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The media type of what it serves (default `application/json`, or
    /// `text/plain` for a tool that returns a string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

/// One part of a URI template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part<'a> {
    Literal(&'a str),
    Var(&'a str),
}

fn parts(template: &str) -> Result<Vec<Part<'_>>, String> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        if open > 0 {
            out.push(Part::Literal(&rest[..open]));
        }
        let after = &rest[open + 1..];
        let close = after
            .find('}')
            .ok_or_else(|| "a `{` without its `}`".to_string())?;
        let name = &after[..close];
        if name.is_empty()
            || name.len() > 64
            || !name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
        {
            return Err(format!(
                "`{{{}}}` is not a variable name (`[A-Za-z0-9_]+`)",
                name.escape_debug()
            ));
        }
        if matches!(out.last(), Some(Part::Var(_))) {
            return Err("two variables next to each other cannot be told apart".into());
        }
        out.push(Part::Var(name));
        rest = &after[close + 1..];
    }
    if rest.contains('}') {
        return Err("a `}` without its `{`".into());
    }
    if !rest.is_empty() {
        out.push(Part::Literal(rest));
    }
    Ok(out)
}

/// The variables of `uri` if it matches `template` (each a non-empty run
/// without `/`, `?`, `#`), else `None`.
pub(crate) fn matches(template: &str, uri: &str) -> Option<Vec<(String, String)>> {
    let parts = parts(template).ok()?;
    let mut vars = Vec::new();
    let mut rest = uri;
    for (i, part) in parts.iter().enumerate() {
        match part {
            Part::Literal(l) => rest = rest.strip_prefix(l)?,
            Part::Var(name) => {
                // Up to the next literal (or the end), within one segment.
                let end = match parts.get(i + 1) {
                    Some(Part::Literal(next)) => rest.find(next)?,
                    _ => rest.len(),
                };
                let value = &rest[..end];
                if value.is_empty() || value.contains(['/', '?', '#']) {
                    return None;
                }
                vars.push(((*name).to_string(), value.to_string()));
                rest = &rest[end..];
            }
        }
    }
    rest.is_empty().then_some(vars)
}

/// Whether `uri` is an absolute URI a skill may publish: a scheme other
/// than `skill`, something after it, no whitespace or control character.
fn publishable(uri: &str) -> Result<(), String> {
    let Some((scheme, rest)) = uri.split_once(':') else {
        return Err("has no scheme".into());
    };
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !scheme_ok || rest.is_empty() {
        return Err("is not an absolute URI".into());
    }
    if scheme.eq_ignore_ascii_case("skill") {
        return Err("uses `skill:`, which the host serves the skill's files under".into());
    }
    if uri.chars().any(|c| c.is_whitespace() || c.is_control()) || uri.len() > 1024 {
        return Err("has whitespace or control characters, or is longer than 1024 bytes".into());
    }
    Ok(())
}

/// The problems of `resources` and `resource_templates`, each naming its
/// field. `tools` are the skill's declared tools.
pub(crate) fn problems(
    resources: &[ResourceDecl],
    templates: &[ResourceTemplateDecl],
    tools: &[super::ToolDecl],
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut uris = std::collections::BTreeSet::new();
    for (i, r) in resources.iter().enumerate() {
        if let Err(e) = publishable(&r.uri) {
            problems.push(format!(
                "`resources[{i}].uri`: `{}` {e}",
                r.uri.escape_debug()
            ));
        }
        if !uris.insert(r.uri.as_str()) {
            problems.push(format!("`resources[{i}]`: `{}` is declared twice", r.uri));
        }
        if !super::contained_relative_path(&r.file) {
            problems.push(format!(
                "`resources[{i}].file`: `{}` must be a relative path inside the skill folder",
                r.file.escape_debug()
            ));
        }
    }
    for (i, t) in templates.iter().enumerate() {
        let at = format!("`resource_templates[{i}]`");
        if let Err(e) = publishable(&t.uri_template) {
            problems.push(format!(
                "{at}.uri_template: `{}` {e}",
                t.uri_template.escape_debug()
            ));
        }
        match parts(&t.uri_template) {
            Err(e) => problems.push(format!("{at}.uri_template: {e}")),
            Ok(p) if !p.iter().any(|p| matches!(p, Part::Var(_))) => problems.push(format!(
                "{at}.uri_template: has no `{{variable}}`; declare a fixed URI under `resources`"
            )),
            Ok(_) => {}
        }
        match tools.iter().find(|d| d.name == t.tool) {
            None => problems.push(format!(
                "{at}.tool: `{}` is not one of this skill's `tools`",
                t.tool.escape_debug()
            )),
            Some(d) if !d.read_only || d.requires_confirmation() => problems.push(format!(
                "{at}.tool: `{}` is not read-only; reading a resource must change nothing",
                t.tool
            )),
            Some(_) => {}
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_match_one_segment_per_variable() {
        let t = "test://template/{id}/data";
        assert_eq!(
            matches(t, "test://template/123/data"),
            Some(vec![("id".into(), "123".into())])
        );
        for miss in [
            "test://template//data",
            "test://template/1/2/data",
            "test://template/1/data/x",
            "test://other/1/data",
            "test://template/1?x/data",
        ] {
            assert_eq!(matches(t, miss), None, "{miss}");
        }
        assert_eq!(
            matches("a://{x}/b/{y}", "a://1/b/2"),
            Some(vec![("x".into(), "1".into()), ("y".into(), "2".into())])
        );
        assert_eq!(
            matches("a://{x}", "a://one"),
            Some(vec![("x".into(), "one".into())])
        );
    }

    #[test]
    fn problems_name_the_field() {
        let tools: Vec<super::super::ToolDecl> = serde_yaml::from_str(
            "- {name: r.get, description: d, read_only: true}\n- {name: w.set, description: d}",
        )
        .unwrap();
        let resources: Vec<ResourceDecl> = serde_yaml::from_str(
            "- {uri: 'skill://other/x', file: a}\n- {uri: nope, file: ../a}\n- {uri: 'x://a', file: a}\n- {uri: 'x://a', file: b}",
        )
        .unwrap();
        let templates: Vec<ResourceTemplateDecl> = serde_yaml::from_str(
            "- {uri_template: 'x://{a}{b}', tool: r.get}\n- {uri_template: 'x://fixed', tool: w.set}\n- {uri_template: 'x://{bad name}', tool: missing}",
        )
        .unwrap();
        let all = problems(&resources, &templates, &tools).join("\n");
        for needle in [
            "`resources[0].uri`: `skill://other/x` uses `skill:`",
            "`resources[1].uri`: `nope` has no scheme",
            "`resources[1].file`: `../a` must be a relative path",
            "`resources[3]`: `x://a` is declared twice",
            "`resource_templates[0]`.uri_template: two variables",
            "`resource_templates[1]`.uri_template: has no `{variable}`",
            "`resource_templates[1]`.tool: `w.set` is not read-only",
            "`resource_templates[2]`.uri_template: `{bad name}` is not a variable name",
            "`resource_templates[2]`.tool: `missing` is not one of this skill's `tools`",
        ] {
            assert!(all.contains(needle), "missing {needle:?} in\n{all}");
        }
    }
}
