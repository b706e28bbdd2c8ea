//! The tool a skill with scripts exposes: `<skill>.run_script`, its input
//! schema (the scripts as an enum, `args`, `stdin`, `files`), its
//! description, and its arguments read into [`ScriptCall`].

use serde::Deserialize;
use serde_json::{Value, json};

use super::ScriptSet;
use crate::limits::{
    MAX_SCRATCH_PATH_BYTES, MAX_SCRIPT_ARG_BYTES, MAX_SCRIPT_ARGS, MAX_SCRIPT_INPUT_FILES,
    MAX_SCRIPT_STDIN_BYTES,
};

/// The suffix of the tool's name: `<skill>.run_script`.
pub const RUN_SCRIPT: &str = "run_script";

/// The name of `skill`'s script tool.
///
/// ```
/// assert_eq!(skillhost::run_script_tool("pdf"), "pdf.run_script");
/// ```
pub fn run_script_tool(skill: &str) -> String {
    format!("{skill}.{RUN_SCRIPT}")
}

/// The tool's input schema for `set`.
///
/// ```no_run
/// # fn f(set: skillhost::ScriptSet) {
/// let schema = skillhost::run_script_schema(&set);
/// assert_eq!(schema["required"][0], "script");
/// # }
/// ```
pub fn run_script_schema(set: &ScriptSet) -> Value {
    let scripts: Vec<&str> = set.scripts.iter().map(|s| s.path.as_str()).collect();
    json!({
        "type": "object",
        "properties": {
            "script": {
                "type": "string",
                "enum": scripts,
                "description": "The script to run, by its path in the skill folder.",
            },
            "args": {
                "type": "array",
                "items": {"type": "string", "maxLength": MAX_SCRIPT_ARG_BYTES},
                "maxItems": MAX_SCRIPT_ARGS,
                "description": "Its command-line arguments (sys.argv[1:]).",
            },
            "stdin": {
                "type": "string",
                "maxLength": MAX_SCRIPT_STDIN_BYTES,
                "description": "What it reads on standard input.",
            },
            "files": {
                "type": "array",
                "maxItems": MAX_SCRIPT_INPUT_FILES,
                "description": "Input files, placed in the working folder under `name` before the script runs.",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "minLength": 1, "maxLength": MAX_SCRATCH_PATH_BYTES},
                        "text": {"type": "string"},
                        "content_base64": {"type": "string"},
                        "ref": {"type": "string", "pattern": "^ref_[0-9a-f]{32}$"},
                    },
                    "required": ["name"],
                    "additionalProperties": false,
                    "oneOf": [
                        {"required": ["text"]},
                        {"required": ["content_base64"]},
                        {"required": ["ref"]},
                    ],
                },
            },
        },
        "required": ["script"],
        "additionalProperties": false,
    })
}

/// The tool's description: what it does, then each script with the first
/// line of its docstring (a script that cannot run says why).
pub fn run_script_description(skill: &str, set: &ScriptSet) -> String {
    let mut out = format!(
        "Runs one of the scripts of the skill `{skill}` in the sandbox, as `python3 SCRIPT \
         ARGS...` would, and returns its exit code, stdout and stderr. Input files are placed \
         in the working folder under their `name`; the script writes results under `out/`, \
         which come back as links (refs) a later call can pass as a file's `ref`. Scripts:"
    );
    for s in &set.scripts {
        out.push_str("\n- ");
        out.push_str(&s.path);
        match (s.refusal(), &s.summary) {
            (Some(_), _) => out.push_str(&format!(
                " (cannot run here: {})",
                match s.interpreter {
                    crate::sandbox::Interpreter::Shell(sh) => format!("a shell script, {sh}"),
                    crate::sandbox::Interpreter::JavaScript => "JavaScript".into(),
                    crate::sandbox::Interpreter::Other(name) => name.into(),
                    _ => "not Python".into(),
                }
            )),
            (None, Some(summary)) => {
                out.push_str(": ");
                out.push_str(summary);
            }
            (None, None) => {}
        }
    }
    out
}

/// The note served after a skill's instructions when it has scripts.
pub fn instructions_note(skill: &str) -> String {
    format!(
        "\n\n---\nWhere these instructions say to run a script, call the tool `{}` with \
         `script`, `args` and the files it needs (`files`: each a `name` and its `text`, \
         `content_base64` or `ref`); what it writes under `out/` comes back as links.\n",
        run_script_tool(skill)
    )
}

/// One input file as the call gives it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptFileArg {
    /// Its name in the working folder.
    pub name: String,
    /// Its content as text.
    #[serde(default)]
    pub text: Option<String>,
    /// Its content, base64.
    #[serde(default)]
    pub content_base64: Option<String>,
    /// A ref the host holds.
    #[serde(default)]
    pub r#ref: Option<String>,
}

/// A call's arguments, read (the schema was checked before).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptCall {
    /// The script's path in the skill folder.
    pub script: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Its stdin.
    #[serde(default)]
    pub stdin: String,
    /// Its input files.
    #[serde(default)]
    pub files: Vec<ScriptFileArg>,
}

/// An argument of a `run_script` call that cannot be used: the field it
/// is in, and a message (shown to the agent) naming the field and what is
/// wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ArgumentError {
    /// The argument's path in the call (`files[1].name`), or `arguments`
    /// for the call's arguments as a whole.
    pub field: String,
    /// What is wrong, naming the field.
    pub message: String,
}

impl ArgumentError {
    /// An error in `field` saying `message`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> ArgumentError {
        ArgumentError {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl ScriptCall {
    /// Reads a call's arguments; an error names what is wrong.
    pub fn read(args: &Value) -> Result<ScriptCall, ArgumentError> {
        serde_json::from_value(args.clone())
            .map_err(|e| ArgumentError::new("arguments", format!("the arguments: {e}")))
    }

    /// The refs its files name (the call's input refs).
    pub fn refs(&self) -> Vec<String> {
        self.files.iter().filter_map(|f| f.r#ref.clone()).collect()
    }
}

/// The refs a `run_script` call's `files` name, read without checking the
/// rest (for the call path's ref checks before anything runs).
pub(crate) fn refs_in(args: &Value) -> Vec<String> {
    args.get("files")
        .and_then(Value::as_array)
        .map(|files| {
            files
                .iter()
                .filter_map(|f| f.get("ref").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::Interpreter;
    use crate::skill::scripts::Script;

    fn set() -> ScriptSet {
        ScriptSet {
            folder: "scripts".into(),
            scripts: vec![
                Script {
                    path: "scripts/check.py".into(),
                    interpreter: Interpreter::Python,
                    summary: Some("Checks a form.".into()),
                    read_only: true,
                },
                Script {
                    path: "scripts/init.sh".into(),
                    interpreter: Interpreter::Shell("bash"),
                    summary: None,
                    read_only: false,
                },
            ],
            packages: vec![],
            digest: "0".repeat(64),
        }
    }

    fn check(args: Value) -> Result<(), Vec<String>> {
        crate::skill::schema::Schema::compile(&run_script_schema(&set()))
            .unwrap()
            .check(&args)
    }

    #[test]
    fn the_schema_takes_good_calls_and_refuses_bad_ones() {
        let r = format!("ref_{}", "a".repeat(32));
        assert!(check(json!({"script": "scripts/check.py"})).is_ok());
        assert!(
            check(
                json!({"script": "scripts/check.py", "args": ["a.pdf"], "stdin": "x",
                "files": [{"name": "a.pdf", "content_base64": "AA=="}, {"name": "b", "ref": r}]})
            )
            .is_ok()
        );
        for bad in [
            json!({}),
            json!({"script": "scripts/other.py"}),
            json!({"script": "scripts/check.py", "extra": 1}),
            json!({"script": "scripts/check.py", "files": [{"name": "a"}]}),
            json!({"script": "scripts/check.py", "files": [{"name": "a", "text": "x", "ref": r}]}),
            json!({"script": "scripts/check.py", "files": [{"name": "a", "ref": "ref_x"}]}),
            json!({"script": "scripts/check.py", "files": [{"name": "", "text": "x"}]}),
            json!({"script": "scripts/check.py", "files": [{"name": "a", "text": "x", "mode": 1}]}),
            json!({"script": "scripts/check.py", "args": vec!["a"; 65]}),
            json!({"script": "scripts/check.py", "args": ["a".repeat(4097)]}),
        ] {
            assert!(check(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_description_lists_every_script_and_why_one_cannot_run() {
        let d = run_script_description("pdf", &set());
        assert!(d.contains("\n- scripts/check.py: Checks a form."), "{d}");
        assert!(
            d.contains("\n- scripts/init.sh (cannot run here: a shell script, bash)"),
            "{d}"
        );
        assert!(instructions_note("pdf").contains("`pdf.run_script`"));
    }

    #[test]
    fn arguments_read_and_refs_found() {
        let r = format!("ref_{}", "b".repeat(32));
        let args = json!({"script": "scripts/check.py", "files": [{"name": "a", "ref": r}, {"name": "b", "text": "t"}]});
        let call = ScriptCall::read(&args).unwrap();
        assert_eq!(call.refs(), vec![r.clone()]);
        assert_eq!(refs_in(&args), vec![r]);
        assert!(ScriptCall::read(&json!({"script": 1})).is_err());
    }
}
