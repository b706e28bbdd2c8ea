//! Prompts: each visible skill's instructions (a prompt named for the
//! skill) and the prompt templates it declares in `skill.yaml` `prompts`,
//! with their arguments substituted, its own files as images and embedded
//! resources, and completion of argument values.
//!
//! A declared prompt whose name another visible skill also uses (as a
//! skill name or a declared prompt) is served by neither: a client never
//! gets one skill's prompt under a name it may think is another's.
//!
//! A `prompts/get` without a required argument asks the client's user for
//! the missing ones with a form, where the client declared elicitation: an
//! `elicitation/create` in a legacy session, an `input_required` result
//! (key [`ARGUMENTS_KEY`]) answered by a retry in 2026-07-28. The answer
//! fills in only the prompt's own arguments, as strings.

use rmcp::model::{
    ContentBlock, EmbeddedResource, ErrorData, Prompt, PromptArgument, PromptMessage,
    ResourceContents, Role,
};
use serde_json::Value;

use crate::registry::SkillInfo;
use crate::skill::manifest::prompts::substitute;
use crate::{PromptDecl, PromptRole};

/// The most completion values returned (the MCP limit).
const MAX_COMPLETIONS: usize = 100;

/// The `inputRequests` key of the form asking a prompt's missing
/// arguments.
pub(super) const ARGUMENTS_KEY: &str = "arguments";

/// The required arguments of `decl` that `given` lacks.
pub(super) fn missing<'a>(
    decl: &'a PromptDecl,
    given: Option<&serde_json::Map<String, Value>>,
) -> Vec<&'a crate::skill::manifest::prompts::PromptArgumentDecl> {
    decl.arguments
        .iter()
        .filter(|a| a.required && !given.is_some_and(|g| g.contains_key(&a.name)))
        .collect()
}

/// The form asking for `missing`, each a required string.
pub(super) fn arguments_form(
    decl: &PromptDecl,
    missing: &[&crate::skill::manifest::prompts::PromptArgumentDecl],
) -> rmcp::model::ElicitRequestParams {
    let mut properties = serde_json::Map::new();
    for a in missing {
        let mut p = serde_json::json!({"type": "string", "title": a.name});
        if let Some(d) = &a.description {
            p["description"] = Value::String(d.clone());
        }
        properties.insert(a.name.clone(), p);
    }
    let names: Vec<&str> = missing.iter().map(|a| a.name.as_str()).collect();
    let schema = serde_json::json!({
        "type": "object",
        "properties": properties,
        "required": names,
    });
    let requested_schema = match schema {
        Value::Object(o) => rmcp::model::ElicitationSchema::from_json_schema(o)
            .unwrap_or_else(|_| rmcp::model::ElicitationSchema::new(Default::default())),
        _ => rmcp::model::ElicitationSchema::new(Default::default()),
    };
    rmcp::model::ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!(
            "Prompt `{}` needs: {}",
            decl.name,
            names
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        requested_schema,
    }
}

/// `given` with the user's answer to the arguments form: the accepted
/// content's values for the prompt's own arguments (strings only); a
/// refusal or a malformed answer is `-32602`.
pub(super) fn with_answer(
    decl: &PromptDecl,
    given: Option<serde_json::Map<String, Value>>,
    answer: &Value,
) -> Result<serde_json::Map<String, Value>, ErrorData> {
    let result: rmcp::model::ElicitResult =
        serde_json::from_value(answer.clone()).map_err(|e| {
            ErrorData::invalid_params(
                format!("the `{ARGUMENTS_KEY}` answer is not an elicitation result: {e}"),
                None,
            )
        })?;
    if result.action != rmcp::model::ElicitationAction::Accept {
        return Err(ErrorData::invalid_params(
            format!(
                "the user did not give the arguments prompt `{}` needs ({})",
                decl.name,
                names(decl)
            ),
            None,
        ));
    }
    let mut out = given.unwrap_or_default();
    if let Some(Value::Object(content)) = result.content {
        for a in &decl.arguments {
            match content.get(&a.name) {
                Some(Value::String(v)) => {
                    out.insert(a.name.clone(), Value::String(v.clone()));
                }
                Some(_) => {
                    return Err(ErrorData::invalid_params(
                        format!("the answer's `{}` must be a string", a.name),
                        None,
                    ));
                }
                None => {}
            }
        }
    }
    Ok(out)
}

/// The declared prompts of `skill`, as listed.
pub(super) fn listed(skill: &SkillInfo, all: &[SkillInfo]) -> Vec<Prompt> {
    let Some(m) = &skill.manifest else {
        return Vec::new();
    };
    m.prompts
        .iter()
        .filter(|p| unambiguous(all, &p.name))
        .map(|p| {
            let args = p
                .arguments
                .iter()
                .map(|a| {
                    let mut arg = PromptArgument::new(&a.name).with_required(a.required);
                    if let Some(d) = &a.description {
                        arg = arg.with_description(d);
                    }
                    arg
                })
                .collect::<Vec<_>>();
            Prompt::new(
                &p.name,
                Some(&p.description),
                (!args.is_empty()).then_some(args),
            )
        })
        .collect()
}

/// Whether exactly one visible skill serves a prompt called `name`.
fn unambiguous(all: &[SkillInfo], name: &str) -> bool {
    let uses = all
        .iter()
        .map(|s| {
            usize::from(s.entry.name == name)
                + s.manifest
                    .as_ref()
                    .map_or(0, |m| m.prompts.iter().filter(|p| p.name == name).count())
        })
        .sum::<usize>();
    uses == 1
}

/// The declared prompt `name` and its skill, when exactly one visible
/// skill serves that name.
pub(super) fn find<'a>(
    all: &'a [SkillInfo],
    name: &str,
) -> Option<(&'a SkillInfo, &'a PromptDecl)> {
    if !unambiguous(all, name) {
        return None;
    }
    all.iter().find_map(|s| {
        s.manifest
            .as_ref()?
            .prompts
            .iter()
            .find(|p| p.name == name)
            .map(|p| (s, p))
    })
}

/// The argument values of a `prompts/get`, checked against the prompt:
/// every required one present, no unknown one, every value a string.
pub(super) fn arguments(
    decl: &PromptDecl,
    given: Option<&serde_json::Map<String, Value>>,
) -> Result<std::collections::BTreeMap<String, String>, ErrorData> {
    let mut out = std::collections::BTreeMap::new();
    for (k, v) in given.into_iter().flatten() {
        if !decl.arguments.iter().any(|a| &a.name == k) {
            return Err(ErrorData::invalid_params(
                format!(
                    "prompt `{}` has no argument `{}` (it takes: {})",
                    decl.name,
                    crate::escape::escape_control(k, 64, false),
                    names(decl)
                ),
                None,
            ));
        }
        let Value::String(s) = v else {
            return Err(ErrorData::invalid_params(
                format!("argument `{k}` of prompt `{}` must be a string", decl.name),
                None,
            ));
        };
        out.insert(k.clone(), s.clone());
    }
    if let Some(missing) = decl
        .arguments
        .iter()
        .find(|a| a.required && !out.contains_key(&a.name))
    {
        return Err(ErrorData::invalid_params(
            format!(
                "prompt `{}` needs the argument `{}`",
                decl.name, missing.name
            ),
            None,
        ));
    }
    Ok(out)
}

fn names(decl: &PromptDecl) -> String {
    if decl.arguments.is_empty() {
        return "none".into();
    }
    decl.arguments
        .iter()
        .map(|a| format!("`{}`", a.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What one message of a prompt needs besides its text: a file of the
/// skill, read by the caller.
pub(super) enum Part<'a> {
    /// Text, arguments substituted.
    Text(String),
    /// A skill file sent as image content.
    Image(&'a str),
    /// A skill file embedded as a resource.
    Resource(&'a str),
}

/// The parts of `decl`'s messages with `args` substituted, and their roles.
pub(super) fn parts<'a>(
    decl: &'a PromptDecl,
    args: &std::collections::BTreeMap<String, String>,
) -> Vec<(Role, Part<'a>)> {
    decl.messages
        .iter()
        .filter_map(|m| {
            let role = match m.role {
                PromptRole::User => Role::User,
                PromptRole::Assistant => Role::Assistant,
            };
            let part = if let Some(t) = &m.text {
                Part::Text(substitute(t, |n| args.get(n).cloned().unwrap_or_default()))
            } else if let Some(p) = &m.image {
                Part::Image(p)
            } else {
                Part::Resource(m.resource.as_deref()?)
            };
            Some((role, part))
        })
        .collect()
}

/// A message of a file's contents (as read from the skill).
pub(super) fn file_message(
    role: Role,
    part: &Part<'_>,
    contents: ResourceContents,
) -> Result<PromptMessage, String> {
    match part {
        Part::Image(path) => match contents {
            ResourceContents::BlobResourceContents {
                blob,
                mime_type: Some(mime),
                ..
            } if mime.starts_with("image/") => {
                Ok(PromptMessage::new(role, ContentBlock::image(blob, mime)))
            }
            _ => Err(format!("the prompt's image `{path}` is not an image file")),
        },
        Part::Resource(_) => Ok(PromptMessage::new(
            role,
            ContentBlock::Resource(EmbeddedResource::new(contents)),
        )),
        Part::Text(t) => Ok(PromptMessage::new_text(role, t.clone())),
    }
}

/// The completion values of argument `arg` of `decl` that start with
/// `typed`, at most [`MAX_COMPLETIONS`]; `None` when the prompt has no such
/// argument.
pub(super) fn complete(decl: &PromptDecl, arg: &str, typed: &str) -> Option<(Vec<String>, u32)> {
    let a = decl.arguments.iter().find(|a| a.name == arg)?;
    let matching: Vec<String> = a
        .values
        .iter()
        .filter(|v| v.starts_with(typed))
        .cloned()
        .collect();
    let total = u32::try_from(matching.len()).unwrap_or(u32::MAX);
    Some((matching.into_iter().take(MAX_COMPLETIONS).collect(), total))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl() -> PromptDecl {
        serde_yaml::from_str(
            "name: p\ndescription: d\narguments:\n  - {name: lang, required: true, values: [rust, ruby, python]}\n  - {name: tone}\nmessages:\n  - {text: 'Review {{lang}} code, {{tone}}.'}\n  - {role: assistant, image: a.png}\n",
        )
        .unwrap()
    }

    #[test]
    fn arguments_are_checked_and_substituted() {
        let d = decl();
        let args = |v: Value| arguments(&d, v.as_object());
        assert!(
            args(serde_json::json!({}))
                .unwrap_err()
                .message
                .contains("needs the argument `lang`")
        );
        assert!(
            args(serde_json::json!({"lang": "rust", "x": "1"}))
                .unwrap_err()
                .message
                .contains("has no argument `x`")
        );
        assert!(
            args(serde_json::json!({"lang": 3}))
                .unwrap_err()
                .message
                .contains("must be a string")
        );
        let ok = args(serde_json::json!({"lang": "rust"})).unwrap();
        let parts = parts(&d, &ok);
        match &parts[0].1 {
            Part::Text(t) => assert_eq!(t, "Review rust code, ."),
            _ => panic!("text first"),
        }
        assert!(matches!(parts[1], (Role::Assistant, Part::Image("a.png"))));
    }

    #[test]
    fn completion_offers_the_values_starting_with_what_was_typed() {
        let d = decl();
        assert_eq!(complete(&d, "lang", "r").unwrap().0, vec!["rust", "ruby"]);
        assert_eq!(complete(&d, "lang", "").unwrap().1, 3);
        assert!(complete(&d, "tone", "x").unwrap().0.is_empty());
        assert!(complete(&d, "nope", "").is_none());
    }
}
