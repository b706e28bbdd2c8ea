//! Demo step 10: skills in Python and JavaScript. The examples of
//! `plugins/` (py-stats, js-slug), whose sources are compiled into this
//! binary, built in the demo's scratch folder by their own toolchains,
//! checked, signed, installed into a scratch data dir and called. A
//! language whose toolchain is not installed here is left out, saying what
//! installs it.

use std::path::Path;

use serde_json::{Value, json};
use skillhost::{BuildError, Caller, HostBuilder, Outcome, Sandbox};

use super::Part;
use super::checkout::Checkout;

/// One example: its folder's files, the tool the demo calls, and how the
/// summary names it.
pub(super) struct Example {
    /// The part of the demo it is (`the Python skill`).
    pub part: &'static str,
    /// The example's folder in `plugins/`.
    name: &'static str,
    /// Its files: path in the folder, content.
    files: &'static [(&'static str, &'static str)],
    /// The tool called, and its arguments (JSON).
    tool: &'static str,
    args: &'static str,
}

/// The Python and the JavaScript example.
pub(super) const EXAMPLES: [Example; 2] = [
    Example {
        part: "the Python skill",
        name: "py-stats",
        files: &[
            (
                "skill.yaml",
                include_str!("../../../../plugins/py-stats/skill.yaml"),
            ),
            (
                "app.py",
                include_str!("../../../../plugins/py-stats/app.py"),
            ),
        ],
        tool: "stats.describe",
        args: r#"{"numbers": [3, 1, 4, 1, 5, 9, 2, 6]}"#,
    },
    Example {
        part: "the JavaScript skill",
        name: "js-slug",
        files: &[
            (
                "skill.yaml",
                include_str!("../../../../plugins/js-slug/skill.yaml"),
            ),
            ("app.js", include_str!("../../../../plugins/js-slug/app.js")),
        ],
        tool: "slug.make",
        args: r#"{"text": "Skills in JavaScript, sandboxed!"}"#,
    },
];

/// The toolchains `tests/peers/install.sh` installs into the checkout,
/// for an author who did not point `SKILLHOST_COMPONENTIZE_*` anywhere
/// (else `skillhost build` looks where it always does).
fn peers_toolchains(checkout: Option<&Checkout>) -> skillhost::Toolchains {
    let Some(c) = checkout else {
        return Default::default();
    };
    let unset = |var: &str| std::env::var_os(var).is_none();
    let componentize_js = c
        .peer("node/node_modules/.bin/componentize-js")
        .filter(|_| unset("SKILLHOST_COMPONENTIZE_JS"));
    skillhost::Toolchains {
        componentize_py: c
            .peer("venv/bin/componentize-py")
            .filter(|_| unset("SKILLHOST_COMPONENTIZE_PY")),
        // The peers' componentize-js runs on the peers' Node.js 22.
        node: componentize_js
            .as_ref()
            .and_then(|_| c.peer("node/node_modules/node/bin/node")),
        componentize_js,
    }
}

/// What installs a missing toolchain, for someone running the demo.
fn install_hint(toolchain: &str, checkout: Option<&Checkout>) -> String {
    let own = match toolchain {
        "componentize-py" => format!(
            "`python3 -m pip install componentize-py=={}` puts it on PATH (or \
             SKILLHOST_COMPONENTIZE_PY names it)",
            skillhost::COMPONENTIZE_PY_VERSION
        ),
        "componentize-js" => format!(
            "`npm install --global @bytecodealliance/componentize-js@{}` puts it on PATH (or \
             SKILLHOST_COMPONENTIZE_JS names it; Node.js 20 or later)",
            skillhost::COMPONENTIZE_JS_VERSION
        ),
        _ => "install Node.js 20 or later, so that `node` is on PATH".into(),
    };
    match checkout {
        Some(_) => format!("{own}; or `tests/peers/install.sh` installs it where the demo looks"),
        None => own,
    }
}

/// Builds, checks, signs, installs and calls `example` in `scratch`; or
/// leaves it out when its toolchain is not installed here.
pub(super) async fn run(
    sandbox: &Sandbox,
    example: &Example,
    checkout: Option<&Checkout>,
    scratch: &Path,
) -> anyhow::Result<Part> {
    let dir = scratch.join(example.name);
    std::fs::create_dir_all(&dir)?;
    for (path, text) in example.files {
        std::fs::write(dir.join(path), text)?;
    }
    let (d, tools) = (dir.clone(), peers_toolchains(checkout));
    let wasm =
        match tokio::task::spawn_blocking(move || skillhost::build_skill_with(&d, &tools)).await? {
            Ok(wasm) => wasm,
            Err(BuildError::MissingToolchain { toolchain, .. }) => {
                return Ok(Part::LeftOut(format!(
                    "{toolchain} is not installed: {}",
                    install_hint(toolchain, checkout)
                )));
            }
            Err(e) => return Err(e.into()),
        };
    println!(
        "  build    plugins/{} → {} ({} KiB)",
        example.name,
        wasm.file_name().unwrap_or_default().to_string_lossy(),
        std::fs::metadata(&wasm)?.len() >> 10
    );
    let (problems, summary) = crate::cli::author::check(sandbox, &dir).await;
    anyhow::ensure!(problems.is_empty(), "check: {}", problems.join("; "));
    println!("  check    ok: {summary}");
    let (secret, public) = skillhost::SecretKey::generate()?;
    let (bytes, statement) = skillhost::pack_dir(&dir, Some(&secret))?;
    println!(
        "  pack     {} files, {} bytes, signed by {}",
        statement.files.len(),
        bytes.len(),
        public.key_id()
    );
    let host = HostBuilder::new(scratch.join(format!("data-{}", example.name)))
        .sandbox(sandbox.clone())
        .build()
        .await?;
    let result = async {
        host.trust_key(&public, "demo-author", &[])?;
        let out = host.install_bundle(&bytes, Default::default()).await?;
        println!(
            "  install  {}@{} trusted={}",
            out.name, out.version, out.trusted
        );
        let args: Value = serde_json::from_str(example.args)?;
        let run = host
            .call(
                &Caller::Operator,
                example.tool,
                args.clone(),
                &Default::default(),
            )
            .await;
        anyhow::ensure!(
            run.outcome == Outcome::Ok,
            "{}: {} {}",
            example.tool,
            run.outcome,
            run.error.unwrap_or_default()
        );
        let output = run.output.map(|o| o.data()).unwrap_or_else(|| json!(null));
        println!("  call     {} {args} → {output}", example.tool);
        Ok(Part::Ran(format!("{} ok", example.tool)))
    }
    .await;
    host.shutdown().await;
    result
}
