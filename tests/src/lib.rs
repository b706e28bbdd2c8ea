//! Helpers shared by the end-to-end tests: loading the plugins built from
//! `plugins/` by the host's build script, and asserting call outcomes.

pub mod peers;

use std::path::Path;
use std::sync::OnceLock;

use serde_json::{Value, json};
use skillhost::{
    CallError, CallFailure, CallOutput, LoadError, Sandbox, SandboxBuilder, Skill, SkillError,
    SkillManifest, ToolError, TrapReason,
};
use skillhost_test_plugins as art;

/// A sandbox with default settings.
pub fn sandbox() -> Sandbox {
    SandboxBuilder::new().build().expect("sandbox")
}

/// One sandbox for the whole test process, with the hostile, text-tools
/// and json-tools skills loaded into it: each component is compiled once,
/// and hostile calls from every test share one engine, as they would in a
/// host.
pub struct Shared {
    /// The sandbox, with default settings.
    pub sandbox: Sandbox,
    /// The hostile skill.
    pub hostile: Skill,
    /// The text-tools skill.
    pub text_tools: Skill,
    /// The json-tools skill.
    pub json_tools: Skill,
}

/// The process-wide [`Shared`] sandbox, built on first use.
pub fn shared() -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(|| {
        let sandbox = sandbox();
        Shared {
            hostile: hostile(&sandbox),
            text_tools: text_tools(&sandbox),
            json_tools: json_tools(&sandbox),
            sandbox,
        }
    })
}

/// Loads a plugin from its source folder's manifest and the built component.
pub fn load_plugin(
    sandbox: &Sandbox,
    dir: &str,
    wasm_path: &str,
) -> Result<Skill, skillhost::SkillError> {
    let manifest = SkillManifest::load_dir(Path::new(dir))?;
    let wasm = std::fs::read(wasm_path).expect("built plugin");
    Skill::from_parts(sandbox, manifest, Some(&wasm))
}

/// The hostile test skill.
pub fn hostile(sandbox: &Sandbox) -> Skill {
    load_plugin(sandbox, art::HOSTILE_DIR, art::HOSTILE_WASM_PATH).expect("hostile loads")
}

/// The text-tools example skill.
pub fn text_tools(sandbox: &Sandbox) -> Skill {
    load_plugin(sandbox, art::TEXT_TOOLS_DIR, art::TEXT_TOOLS_WASM_PATH).expect("text-tools loads")
}

/// The json-tools example skill.
pub fn json_tools(sandbox: &Sandbox) -> Skill {
    load_plugin(sandbox, art::JSON_TOOLS_DIR, art::JSON_TOOLS_WASM_PATH).expect("json-tools loads")
}

/// Reads a built plugin component.
pub fn read_component(wasm_path: &str) -> Vec<u8> {
    std::fs::read(wasm_path)
        .unwrap_or_else(|e| panic!("cannot read the built plugin {wasm_path}: {e}"))
}

/// The smallest useful valid core WebAssembly module: one function
/// `() -> ()` exported as `f`, whose body is empty.
pub const MINIMAL_CORE_MODULE: &[u8] = &[
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version 1
    0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type section: one type, () -> ()
    0x03, 0x02, 0x01, 0x00, // function section: one function of type 0
    0x07, 0x05, 0x01, 0x01, b'f', 0x00, 0x00, // export section: "f" = func 0
    0x0a, 0x04, 0x01, 0x02, 0x00, 0x0b, // code section: no locals, `end`
];

/// The word count `text.word_count` must return for `text`, computed the
/// way the tool documents it (whitespace-separated words, lines, chars).
pub fn expected_word_count(text: &str) -> Value {
    json!({
        "words": text.split_whitespace().count(),
        "lines": text.lines().count(),
        "chars": text.chars().count(),
    })
}

/// A text for the `i`-th of many concurrent normal calls: every `i` gives
/// different counts.
pub fn sample_text(i: usize) -> String {
    let words = i % 37 + 1;
    let lines = i % 5 + 1;
    let mut text = String::new();
    for l in 0..lines {
        for w in 0..words {
            if w > 0 {
                text.push(' ');
            }
            text.push_str(&format!("w{i}_{l}_{w}"));
        }
        text.push('\n');
    }
    text.push_str("é✓");
    text
}

/// Calls `text.word_count` on a fixed text and checks the exact counts:
/// proves the sandbox still serves normal calls.
pub async fn assert_word_count_works(text_tools: &Skill, after: &str) {
    let out = text_tools
        .call(
            "text.word_count",
            &json!({"text": "one two\nthree"}),
            &Default::default(),
        )
        .await
        .unwrap_or_else(|e| panic!("a normal call after {after} failed: {e}"));
    assert_eq!(
        out.output,
        json!({"words": 3, "lines": 2, "chars": 13}),
        "wrong word count after {after}"
    );
    assert!(
        out.stdout.is_empty() && out.stderr.is_empty(),
        "normal call after {after} wrote stdio: {out:?}"
    );
}

/// Asserts a call was stopped by the sandbox for `reason`; returns the
/// error and its detail.
pub fn expect_trap(
    result: Result<CallOutput, CallError>,
    reason: TrapReason,
) -> (CallError, String) {
    match result {
        Ok(out) => panic!(
            "expected a `{reason}` trap, the call succeeded with {}",
            out.output
        ),
        Err(e) => match &e.failure {
            CallFailure::Trapped {
                reason: got,
                detail,
            } if *got == reason => {
                let detail = detail.clone();
                (e, detail)
            }
            other => panic!("expected a `{reason}` trap, got {other:?} ({e})"),
        },
    }
}

/// Asserts a call failed with `ToolError::InvalidInput`; returns the error
/// and its message.
pub fn expect_invalid_input(result: Result<CallOutput, CallError>) -> (CallError, String) {
    match result {
        Ok(out) => panic!(
            "expected invalid-input, the call succeeded with {}",
            out.output
        ),
        Err(e) => match &e.failure {
            CallFailure::Tool {
                error: ToolError::InvalidInput(m),
            } => {
                let m = m.clone();
                (e, m)
            }
            other => panic!("expected invalid-input, got {other:?} ({e})"),
        },
    }
}

/// Asserts loading failed in the sandbox (not in the manifest or file
/// reading) and returns the load error.
pub fn expect_load_error(result: Result<Skill, SkillError>) -> LoadError {
    match result {
        Ok(skill) => panic!("expected a load error, `{}` loaded", skill.label()),
        Err(SkillError::Load(e)) => e,
        Err(other) => panic!("expected SkillError::Load, got {other:?} ({other})"),
    }
}

/// Resident set size of this process, from `/proc/self/status`.
pub fn vm_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line
        .trim_start_matches("VmRSS:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}
