//! Resources a skill publishes under URIs of its own (`resources` and
//! `resource_templates` in `skill.yaml`), besides its files under
//! `skill://NAME/…` (`skills.rs`). A URI or template that two visible
//! skills both publish is served by neither.

use rmcp::model::{Resource, ResourceContents, ResourceTemplate};
use serde_json::Value;

use crate::registry::SkillInfo;
use crate::skill::manifest::resources::matches;
use crate::{ResourceDecl, ResourceTemplateDecl};

/// What a URI names among the visible skills' published resources.
pub(super) enum Target<'a> {
    /// A file of `skill`.
    File(&'a SkillInfo, &'a ResourceDecl),
    /// A read of `skill`'s template tool with these variables.
    Template(
        &'a SkillInfo,
        &'a ResourceTemplateDecl,
        Vec<(String, String)>,
    ),
}

fn declared(all: &[SkillInfo]) -> impl Iterator<Item = (&SkillInfo, &ResourceDecl)> {
    all.iter().flat_map(|s| {
        s.manifest
            .iter()
            .flat_map(move |m| m.resources.iter().map(move |r| (s, r)))
    })
}

fn templates(all: &[SkillInfo]) -> impl Iterator<Item = (&SkillInfo, &ResourceTemplateDecl)> {
    all.iter().flat_map(|s| {
        s.manifest
            .iter()
            .flat_map(move |m| m.resource_templates.iter().map(move |t| (s, t)))
    })
}

/// The resources `skill` publishes, as listed (those no other visible skill
/// also publishes).
pub(super) fn listed(skill: &SkillInfo, all: &[SkillInfo]) -> Vec<Resource> {
    declared(all)
        .filter(|(s, _)| s.entry.name == skill.entry.name)
        .filter(|(_, r)| declared(all).filter(|(_, o)| o.uri == r.uri).count() == 1)
        .map(|(_, r)| {
            let mut res = Resource::new(&r.uri, r.name.as_deref().unwrap_or(&r.uri));
            if let Some(d) = &r.description {
                res = res.with_description(d);
            }
            if let Some(m) = &r.mime_type {
                res = res.with_mime_type(m);
            }
            res
        })
        .collect()
}

/// Every visible skill's resource templates (those no other visible skill
/// also publishes).
pub(super) fn listed_templates(all: &[SkillInfo]) -> Vec<ResourceTemplate> {
    templates(all)
        .filter(|(_, t)| {
            templates(all)
                .filter(|(_, o)| o.uri_template == t.uri_template)
                .count()
                == 1
        })
        .map(|(_, t)| {
            let mut res = ResourceTemplate::new(
                &t.uri_template,
                t.name.as_deref().unwrap_or(&t.uri_template),
            );
            if let Some(d) = &t.description {
                res = res.with_description(d);
            }
            if let Some(m) = &t.mime_type {
                res = res.with_mime_type(m);
            }
            res
        })
        .collect()
}

/// What `uri` names: a published file, else a template it matches; `None`
/// when nothing (or more than one skill) serves it.
pub(super) fn find<'a>(all: &'a [SkillInfo], uri: &str) -> Option<Target<'a>> {
    let files: Vec<_> = declared(all).filter(|(_, r)| r.uri == uri).collect();
    if !files.is_empty() {
        return match files.as_slice() {
            [(s, r)] => Some(Target::File(s, r)),
            _ => None,
        };
    }
    let hits: Vec<_> = templates(all)
        .filter_map(|(s, t)| matches(&t.uri_template, uri).map(|v| (s, t, v)))
        .collect();
    match <[_; 1]>::try_from(hits) {
        Ok([(s, t, v)]) => Some(Target::Template(s, t, v)),
        Err(_) => None,
    }
}

/// A file's contents as read from the skill, under the published URI and
/// media type.
pub(super) fn republished(decl: &ResourceDecl, contents: ResourceContents) -> ResourceContents {
    let (uri, mime) = (decl.uri.clone(), decl.mime_type.clone());
    match contents {
        ResourceContents::TextResourceContents {
            text,
            mime_type,
            meta,
            ..
        } => ResourceContents::TextResourceContents {
            uri,
            mime_type: mime.or(mime_type),
            text,
            meta,
        },
        ResourceContents::BlobResourceContents {
            blob,
            mime_type,
            meta,
            ..
        } => ResourceContents::BlobResourceContents {
            uri,
            mime_type: mime.or(mime_type),
            blob,
            meta,
        },
        other => other,
    }
}

/// The contents a template's tool result serves: a string as text
/// (`text/plain` unless declared), anything else as JSON text
/// (`application/json` unless declared).
pub(super) fn template_contents(
    uri: &str,
    decl: &ResourceTemplateDecl,
    out: Value,
) -> ResourceContents {
    let (text, default) = match out {
        Value::String(s) => (s, "text/plain"),
        v => (v.to_string(), "application/json"),
    };
    ResourceContents::text(text, uri).with_mime_type(decl.mime_type.as_deref().unwrap_or(default))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl() -> ResourceTemplateDecl {
        serde_yaml::from_str("uri_template: 'x://{id}'\ntool: t.get").unwrap()
    }

    #[test]
    fn template_results_are_text_or_json() {
        let c = template_contents("x://1", &decl(), Value::String("hi".into()));
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            serde_json::json!({"uri": "x://1", "mimeType": "text/plain", "text": "hi"})
        );
        let c = template_contents("x://1", &decl(), serde_json::json!({"id": "1"}));
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            serde_json::json!({"uri": "x://1", "mimeType": "application/json", "text": "{\"id\":\"1\"}"})
        );
    }

    #[test]
    fn files_are_republished_under_their_uri() {
        let d: ResourceDecl = serde_yaml::from_str("uri: 'test://t'\nfile: a.txt").unwrap();
        let c = republished(
            &d,
            ResourceContents::text("x", "skill://s/a.txt").with_mime_type("text/plain"),
        );
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            serde_json::json!({"uri": "test://t", "mimeType": "text/plain", "text": "x"})
        );
    }
}
