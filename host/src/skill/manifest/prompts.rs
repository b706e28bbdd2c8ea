//! `prompts`: prompt templates a skill publishes besides its instructions
//! prompt. Each has named arguments (with optional completion values) and
//! messages: text with `{{argument}}` placeholders, or one of the skill's
//! own files as an image or an embedded resource.

use serde::{Deserialize, Serialize};

/// One prompt template.
///
/// ```
/// let p: skillhost::PromptDecl = serde_yaml::from_str(
///     "name: review\ndescription: Review code\narguments: [{name: lang, required: true}]\n\
///      messages: [{text: 'Review this {{lang}} code.'}]",
/// )
/// .unwrap();
/// assert_eq!(p.arguments[0].name, "lang");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptDecl {
    /// The prompt's name, unique among the prompts a client sees.
    pub name: String,
    /// What the prompt is for.
    pub description: String,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arguments: Vec<PromptArgumentDecl>,
    /// Its messages, in order; at least one.
    pub messages: Vec<PromptMessageDecl>,
}

/// One argument of a prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptArgumentDecl {
    /// `[A-Za-z0-9_]+`, unique within the prompt.
    pub name: String,
    /// What to pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether a `prompts/get` must pass it.
    #[serde(default)]
    pub required: bool,
    /// Values offered by `completion/complete` (those starting with what
    /// the user typed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// Who a prompt message is from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptRole {
    /// The user (the default).
    #[default]
    User,
    /// The assistant.
    Assistant,
}

/// One message of a prompt: exactly one of `text`, `image`, `resource`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptMessageDecl {
    /// Who it is from.
    #[serde(default)]
    pub role: PromptRole,
    /// Text; `{{name}}` is replaced by the argument `name`'s value (empty
    /// when an optional argument is not passed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// A file of the skill (relative path), sent as image content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// A file of the skill (relative path), embedded as a resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
}

/// The names inside `{{…}}` in `text`, in order.
pub(crate) fn placeholders(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        out.push(after[..end].trim());
        rest = &after[end + 2..];
    }
    out
}

/// `text` with each `{{name}}` replaced by `value(name)`.
pub(crate) fn substitute(text: &str, value: impl Fn(&str) -> String) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        out.push_str(&rest[..start]);
        out.push_str(&value(after[..end].trim()));
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

fn valid_argument_name(n: &str) -> bool {
    !n.is_empty() && n.len() <= 64 && n.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// The problems of `prompts`, each naming its field.
pub(crate) fn problems(skill: &str, prompts: &[PromptDecl]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    for (i, p) in prompts.iter().enumerate() {
        let at = format!("`prompts[{i}]`");
        if !super::valid_tool_name(&p.name) {
            problems.push(format!(
                "{at}.name: `{}` is not a valid prompt name",
                p.name.escape_debug()
            ));
        }
        if p.name == skill {
            problems.push(format!(
                "{at}.name: `{}` is the skill's own prompt (its instructions); choose another",
                p.name
            ));
        }
        if !names.insert(p.name.as_str()) {
            problems.push(format!("{at}: prompt `{}` is declared twice", p.name));
        }
        let mut args = std::collections::BTreeSet::new();
        for (j, a) in p.arguments.iter().enumerate() {
            if !valid_argument_name(&a.name) {
                problems.push(format!(
                    "{at}.arguments[{j}].name: `{}` is not `[A-Za-z0-9_]+`",
                    a.name.escape_debug()
                ));
            }
            if !args.insert(a.name.as_str()) {
                problems.push(format!(
                    "{at}.arguments[{j}]: argument `{}` is declared twice",
                    a.name
                ));
            }
        }
        if p.messages.is_empty() {
            problems.push(format!(
                "{at}.messages: a prompt needs at least one message"
            ));
        }
        for (j, m) in p.messages.iter().enumerate() {
            let set = [&m.text, &m.image, &m.resource]
                .iter()
                .filter(|f| f.is_some())
                .count();
            if set != 1 {
                problems.push(format!(
                    "{at}.messages[{j}]: needs exactly one of `text`, `image`, `resource`"
                ));
            }
            if let Some(t) = &m.text {
                for name in placeholders(t) {
                    if !args.contains(name) {
                        problems.push(format!(
                            "{at}.messages[{j}].text: `{{{{{}}}}}` names no argument of the prompt",
                            name.escape_debug()
                        ));
                    }
                }
            }
            for (field, path) in [("image", &m.image), ("resource", &m.resource)] {
                if let Some(path) = path
                    && !super::contained_relative_path(path)
                {
                    problems.push(format!(
                        "{at}.messages[{j}].{field}: `{}` must be a relative path inside the skill folder",
                        path.escape_debug()
                    ));
                }
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(y: &str) -> Vec<PromptDecl> {
        serde_yaml::from_str(y).unwrap()
    }

    #[test]
    fn placeholders_are_substituted_and_unknown_text_kept() {
        assert_eq!(placeholders("a {{x}} b {{ y }} c {{"), vec!["x", "y"]);
        let s = substitute("a {{x}} b {{ y }} {{", |n| n.to_uppercase());
        assert_eq!(s, "a X b Y {{");
        // A value that looks like a placeholder is not expanded again.
        assert_eq!(substitute("{{x}}", |_| "{{x}}".into()), "{{x}}");
    }

    #[test]
    fn problems_name_the_field() {
        let p = parse(
            "- name: s\n  description: d\n  messages: []\n\
             - name: p\n  description: d\n  arguments: [{name: a}, {name: a}, {name: 'b c'}]\n  \
             messages: [{text: '{{zz}}'}, {text: t, image: i.png}, {image: ../x.png}]\n\
             - name: p\n  description: d\n  messages: [{text: t}]\n",
        );
        let all = problems("s", &p).join("\n");
        for needle in [
            "`prompts[0]`.name: `s` is the skill's own prompt",
            "`prompts[0]`.messages: a prompt needs at least one message",
            "`prompts[1]`.arguments[1]: argument `a` is declared twice",
            "`prompts[1]`.arguments[2].name",
            "`{{zz}}` names no argument",
            "`prompts[1]`.messages[1]: needs exactly one of",
            "`prompts[1]`.messages[2].image: `../x.png` must be a relative path",
            "`prompts[2]`: prompt `p` is declared twice",
        ] {
            assert!(all.contains(needle), "missing {needle:?} in\n{all}");
        }
    }
}
