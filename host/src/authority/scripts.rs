//! A call of a skill's `<skill>.run_script` tool: the arguments read and
//! checked (the script, input file names, contents and sizes) before
//! anything reaches the sandbox; the skill's files (exactly the approved
//! ones) and their byte-code; the run under the script limits; the files
//! the script left under `out/` stored as refs and served as MCP
//! `resource_link`s (small text inline too), beside a text block and
//! `structuredContent` with the exit code, stdout and stderr.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::call::{CallRequest, Executed, Pending, RunOutput};
use super::{HostInner, lock};
use crate::limits::{
    MAX_SCRIPT_INPUT_BYTES, MAX_SCRIPT_INPUT_FILES, SCRIPT_INLINE_TEXT_BYTES,
    SCRIPT_INLINE_TEXT_TOTAL_BYTES,
};
use crate::registry::Registry;
use crate::registry::catalog::SkillSource;
use crate::sandbox::{CallOptions, ScriptRequest, ScriptRun, ScriptRuntime, SkillFiles};
use crate::skill::scripts::names::check_input_name;
use crate::skill::scripts::tool::{ArgumentError, ScriptCall, run_script_tool};
use crate::skill::scripts::{ScriptSet, digest_of, mime};
use crate::state::runs::Outcome;

/// The URI scheme and path under which the front serves a ref.
pub const REF_URI_PREFIX: &str = "skillhost://refs/";

/// Each skill's files as its scripts see them, with their byte-code, by
/// the digest of the scripts: read and compiled once per digest.
#[derive(Default)]
pub(super) struct ScriptFiles {
    by_digest: Mutex<HashMap<String, Arc<SkillFiles>>>,
    /// Serializes the compiles, so two first calls compile once.
    compiling: tokio::sync::Mutex<()>,
}

/// Why a script call stopped before the script ran: the run's error.
fn refused(message: impl Into<String>) -> Executed {
    Executed::failed(Outcome::Error, message)
}

impl HostInner {
    /// Runs one `run_script` call of skill `name` whose scripts are `set`.
    pub(super) async fn execute_script(
        self: &Arc<Self>,
        reg: &Registry,
        set: &Arc<ScriptSet>,
        name: &str,
        run: &Pending,
        args: &Value,
        req: &CallRequest,
    ) -> Executed {
        let tool = run_script_tool(name);
        let call = match ScriptCall::read(args) {
            Ok(c) => c,
            Err(e) => return refused(format!("`{tool}`: {e}")),
        };
        let Some(script) = set.get(&call.script) else {
            return refused(format!(
                "`script`: `{}` is not a script of `{name}` (it has: {})",
                crate::escape::escape_control(&call.script, 120, false),
                set.scripts
                    .iter()
                    .map(|s| s.path.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        };
        if let Some(why) = script.refusal() {
            return refused(why);
        }
        let inputs = match self.script_inputs(&call) {
            Ok(i) => i,
            Err(e) => return refused(e.message),
        };
        let runtime = match self.sandbox.script_runtime() {
            Ok(r) => r,
            Err(e) => return refused(e.to_string()),
        };
        let files = match self.script_files(reg, name, set, &runtime).await {
            Ok(f) => f,
            Err(e) => return e,
        };
        let own = reg
            .skills
            .get(name)
            .and_then(|i| i.manifest.as_ref())
            .and_then(|m| m.scripts.as_ref())
            .and_then(|s| s.limits)
            .map(|l| l.to_request())
            .unwrap_or_default();
        let request = crate::LimitsRequest {
            fuel: req.limits.fuel.or(own.fuel),
            memory_bytes: req.limits.memory_bytes.or(own.memory_bytes),
            timeout_ms: req.limits.timeout_ms.or(own.timeout_ms),
        };
        let limits = match self.sandbox.policy().resolve_script(&request) {
            Ok(l) => l,
            Err(e) => return refused(e.to_string()),
        };
        let opts = CallOptions {
            limits,
            not_after: run.parent.as_ref().map(|p| p.deadline),
            redact: self
                .secrets
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            ..Default::default()
        };
        let request = ScriptRequest {
            skill: files,
            script: call.script.clone(),
            args: call.args,
            stdin: call.stdin.into_bytes(),
            inputs,
        };
        let running = runtime.run(request, opts);
        let result = match &req.cancel {
            Some(cancel) => tokio::select! {
                r = running => r,
                _ = cancel.cancelled() => return refused("cancelled by the caller"),
            },
            None => running.await,
        };
        match result {
            Ok(done) => self.script_result(&call.script, run, done),
            Err(e) => Executed::from_call_error(e),
        }
    }

    /// The call's input files, by name: names checked, contents decoded or
    /// read from their refs, counts and sizes within the caps; an error
    /// names the field.
    fn script_inputs(
        &self,
        call: &ScriptCall,
    ) -> Result<Vec<(String, bytes::Bytes)>, ArgumentError> {
        if call.files.len() > MAX_SCRIPT_INPUT_FILES {
            return Err(ArgumentError::new(
                "files",
                format!(
                    "`files`: {} files, over the cap of {MAX_SCRIPT_INPUT_FILES}",
                    call.files.len()
                ),
            ));
        }
        let mut inputs: Vec<(String, bytes::Bytes)> = Vec::new();
        let mut total: u64 = 0;
        for (i, f) in call.files.iter().enumerate() {
            let field = format!("files[{i}]");
            check_input_name(&format!("{field}.name"), &f.name)?;
            if inputs.iter().any(|(n, _)| *n == f.name) {
                return Err(ArgumentError::new(
                    format!("{field}.name"),
                    format!(
                        "`{field}.name` `{}`: two input files have this name",
                        crate::escape::escape_control(&f.name, 120, false)
                    ),
                ));
            }
            let bytes = match (&f.text, &f.content_base64, &f.r#ref) {
                (Some(t), None, None) => t.clone().into_bytes(),
                (None, Some(b), None) => {
                    // Decoded only within the cap: base64 is 4/3 of it.
                    let left = MAX_SCRIPT_INPUT_BYTES.saturating_sub(total);
                    if (b.len() as u64) / 4 * 3 > left + 3 {
                        return Err(over_input_cap(&field));
                    }
                    base64::engine::general_purpose::STANDARD
                        .decode(b.trim())
                        .map_err(|e| {
                            ArgumentError::new(
                                format!("{field}.content_base64"),
                                format!("`{field}.content_base64`: not base64: {e}"),
                            )
                        })?
                }
                (None, None, Some(r)) => {
                    let record = lock(&self.store)
                        .ref_record(r)
                        .map_err(|e| ref_error(&field, format!("`{field}.ref`: {e}")))?
                        .ok_or_else(|| {
                            ref_error(&field, format!("`{field}.ref`: there is no ref `{r}`"))
                        })?;
                    if record.size > MAX_SCRIPT_INPUT_BYTES.saturating_sub(total) {
                        return Err(over_input_cap(&field));
                    }
                    self.fetch_ref(r)
                        .and_then(|()| self.refs.read_all(r))
                        .map_err(|e| ref_error(&field, format!("`{field}.ref`: {e:#}")))?
                }
                _ => {
                    return Err(ArgumentError::new(
                        field.clone(),
                        format!(
                            "`{field}`: give exactly one of `text`, `content_base64` and `ref`"
                        ),
                    ));
                }
            };
            total += bytes.len() as u64;
            if total > MAX_SCRIPT_INPUT_BYTES {
                return Err(over_input_cap(&field));
            }
            inputs.push((f.name.clone(), bytes.into()));
        }
        Ok(inputs)
    }

    /// The skill's files for its scripts, exactly those approved, with
    /// their byte-code. A local folder is read again at each call: one
    /// edited since its approval is refused (the registry holds it too
    /// once it looks again).
    async fn script_files(
        self: &Arc<Self>,
        reg: &Registry,
        name: &str,
        set: &Arc<ScriptSet>,
        runtime: &ScriptRuntime,
    ) -> Result<Arc<SkillFiles>, Executed> {
        let Some(info) = reg.skills.get(name) else {
            return Err(refused(format!("skill `{name}` is not installed")));
        };
        let label = format!("{}@{}", info.entry.name, info.entry.version);
        let approved = info
            .entry
            .permissions
            .scripts
            .as_ref()
            .map(|s| s.digest.clone())
            .unwrap_or_default();
        let read_again = info.entry.source == SkillSource::Local;
        if !read_again && let Some(f) = lock(&self.script_files.by_digest).get(&approved) {
            return Ok(f.clone());
        }
        let Some(dir) = info.entry.path.clone() else {
            return Err(refused(format!(
                "skill `{name}` has no folder to run scripts from"
            )));
        };
        let files = SkillFiles::from_dir(&dir)
            .map_err(|e| refused(e.to_string()))?
            .labelled(&label);
        let digest = digest_of(&files, &set.folder);
        if digest != approved {
            return Err(Executed::failed(
                Outcome::Denied,
                format!(
                    "the scripts of `{name}` changed since an operator approved them (approved \
                     {}, now {}): they do not run until `skillhost skills approve {name}` \
                     approves them as they are",
                    approved.get(..12).unwrap_or(&approved),
                    digest.get(..12).unwrap_or(&digest)
                ),
            ));
        }
        if let Some(f) = lock(&self.script_files.by_digest).get(&digest) {
            return Ok(f.clone());
        }
        // An install's byte-code, made at install by this runtime.
        let kept = format!(
            "skills/{}/{}/{}",
            info.entry.name,
            info.entry.version,
            crate::skill::scripts::pycache_path(runtime.sha256())
        );
        if info.entry.source == SkillSource::Managed
            && let Ok(bytes) = self.data.dir.read(&kept)
            && let Ok(pyc) = crate::PycTree::from_archive(&bytes)
        {
            let files = files.with_pyc(&pyc);
            lock(&self.script_files.by_digest).insert(digest, files.clone());
            return Ok(files);
        }
        let _one = self.script_files.compiling.lock().await;
        if let Some(f) = lock(&self.script_files.by_digest).get(&digest) {
            return Ok(f.clone());
        }
        let pyc = runtime
            .compile(&files)
            .await
            .map_err(Executed::from_call_error)?;
        let files = files.with_pyc(&pyc);
        lock(&self.script_files.by_digest).insert(digest, files.clone());
        Ok(files)
    }

    /// A finished script as the run's outcome: its `out/` files stored as
    /// refs, the MCP result (text, links, small text inline,
    /// `structuredContent`); a non-zero exit is an error with the same
    /// content.
    fn script_result(self: &Arc<Self>, script: &str, run: &Pending, done: ScriptRun) -> Executed {
        let host = super::Host {
            inner: self.clone(),
        };
        let mut files = Vec::new();
        let mut links = Vec::new();
        let mut inline_left = SCRIPT_INLINE_TEXT_TOTAL_BYTES;
        for (name, bytes) in &done.outputs {
            let stored = match host.add_ref(&mut bytes.as_ref(), name) {
                Ok(r) => r,
                Err(e) => {
                    return refused(format!("cannot keep the output file `out/{name}`: {e}"));
                }
            };
            if let Err(e) = lock(&self.store).set_ref_maker(
                &stored.ref_id,
                run.caller.persona_id(),
                &run.run_id,
            ) {
                return refused(format!("cannot keep the output file `out/{name}`: {e}"));
            }
            let mime_type = mime::mime_type_of(name);
            let uri = format!("{REF_URI_PREFIX}{}", stored.ref_id);
            links.push(json!({
                "type": "resource_link",
                "uri": uri,
                "name": name,
                "mimeType": mime_type,
                "size": bytes.len(),
            }));
            let size = bytes.len() as u64;
            if mime::is_text(mime_type)
                && size <= SCRIPT_INLINE_TEXT_BYTES
                && size <= inline_left
                && let Ok(text) = std::str::from_utf8(bytes)
            {
                inline_left -= size;
                links.push(json!({
                    "type": "resource",
                    "resource": {"uri": uri, "mimeType": mime_type, "text": text},
                }));
            }
            files.push(json!({
                "name": name,
                "ref": stored.ref_id,
                "size": size,
                "sha256": hex::encode(Sha256::digest(bytes)),
                "mime_type": mime_type,
            }));
        }
        let truncated = done.stdout_truncated || done.stderr_truncated;
        let mut text = format!("exit code {}", done.exit_code);
        if !done.stdout.is_empty() {
            text.push_str(&format!("\n--- stdout ---\n{}", done.stdout));
        }
        if !done.stderr.is_empty() {
            text.push_str(&format!("\n--- stderr ---\n{}", done.stderr));
        }
        if truncated {
            text.push_str("\n(output cut: only the first part is kept)");
        }
        let mut content = vec![json!({"type": "text", "text": text})];
        content.extend(links);
        let blocks: Vec<rmcp::model::ContentBlock> =
            match serde_json::from_value(Value::Array(content)) {
                Ok(b) => b,
                Err(e) => return refused(format!("cannot serve the result of {script}: {e}")),
            };
        let structured = json!({
            "exit_code": done.exit_code,
            "stdout": done.stdout,
            "stderr": done.stderr,
            "truncated": truncated,
            "files": files,
        });
        let mut result = skillhost_mcp::CallToolResult::success(blocks);
        result.structured_content = Some(structured);
        if done.exit_code == 0 {
            return Executed {
                outcome: Outcome::Ok,
                output: Some(RunOutput::Mcp(result)),
                error: None,
                trap: None,
                outbound: Vec::new(),
            };
        }
        result.is_error = Some(true);
        let mut error = format!("{script} exited with code {}", done.exit_code);
        if let Some(limit) = &done.scratch_limit {
            error.push_str(&format!(" (its scratch folder reached {limit})"));
        }
        Executed {
            outcome: Outcome::Error,
            output: Some(RunOutput::Mcp(result)),
            error: Some(error),
            trap: None,
            outbound: Vec::new(),
        }
    }
}

fn over_input_cap(field: &str) -> ArgumentError {
    ArgumentError::new(
        field,
        format!(
            "`{field}`: the input files hold more than the cap of {MAX_SCRIPT_INPUT_BYTES} bytes"
        ),
    )
}

/// An input file's `ref` that cannot be read.
fn ref_error(field: &str, message: String) -> ArgumentError {
    ArgumentError::new(format!("{field}.ref"), message)
}

impl super::Host {
    /// A file a skill's script wrote (`skillhost://refs/ID`), for `caller`:
    /// only the persona whose call made it (the operator reads any). Its
    /// record and bytes; a ref the caller may not read is `NotFound`, the
    /// same as one that does not exist.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::RefError> {
    /// let (info, bytes) = host.read_script_ref(&skillhost::Caller::persona("support"), "ref_00000000000000000000000000000000")?;
    /// # Ok(()) }
    /// ```
    pub fn read_script_ref(
        &self,
        caller: &super::Caller,
        ref_id: &str,
    ) -> Result<(crate::RefInfo, Vec<u8>), crate::RefError> {
        use crate::RefError;
        let not_found = || {
            RefError::NotFound(format!(
                "no file `{REF_URI_PREFIX}{}` made by a script of yours",
                crate::escape::escape_control(ref_id, 80, false)
            ))
        };
        if !crate::state::refs::RefBlobs::valid_id(ref_id) {
            return Err(not_found());
        }
        let (record, maker) = {
            let store = lock(&self.inner.store);
            let record = store.ref_record(ref_id).map_err(crate::StateError::from)?;
            let maker = store.ref_maker(ref_id).map_err(crate::StateError::from)?;
            (record, maker)
        };
        let (Some(record), Some(maker)) = (record, maker) else {
            return Err(not_found());
        };
        let allowed = match caller.persona_id() {
            None => true,
            Some(p) => maker.as_deref() == Some(p),
        };
        if !allowed {
            return Err(not_found());
        }
        if record.size > crate::limits::MAX_SERVED_REF_BYTES {
            return Err(RefError::Invalid(format!(
                "`{REF_URI_PREFIX}{ref_id}` is {} bytes, over the {} a resource read serves",
                record.size,
                crate::limits::MAX_SERVED_REF_BYTES
            )));
        }
        let bytes = self
            .inner
            .fetch_ref(ref_id)
            .and_then(|()| self.inner.refs.read_all(ref_id))
            .map_err(crate::StateError::from)?;
        Ok((record, bytes))
    }
}
