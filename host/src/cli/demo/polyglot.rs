//! Demo step 10: skills in Python and JavaScript. The examples of
//! `plugins/` (py-stats, js-slug) built by their own toolchains, checked,
//! signed, installed into a scratch data dir and called.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use skillhost::{Caller, HostBuilder, Outcome, Sandbox};

/// The toolchains `tests/peers/install.sh` installs, where they are, for
/// a checkout whose author did not point `SKILLHOST_COMPONENTIZE_*`
/// anywhere.
fn default_toolchains(root: &Path) -> skillhost::Toolchains {
    let at = |var: &str, path: &str| {
        let p = root.join(path);
        (std::env::var_os(var).is_none() && p.is_file()).then_some(p)
    };
    skillhost::Toolchains {
        componentize_py: at(
            "SKILLHOST_COMPONENTIZE_PY",
            "target/peers/venv/bin/componentize-py",
        ),
        componentize_js: at(
            "SKILLHOST_COMPONENTIZE_JS",
            "target/peers/node/node_modules/.bin/componentize-js",
        ),
    }
}

/// Builds, checks, signs, installs and calls each example; returns one
/// summary line, or why it could not.
pub(super) async fn run(
    sandbox: &Sandbox,
    plugins: &Path,
    scratch: &Path,
) -> anyhow::Result<String> {
    let tools = plugins.parent().map(default_toolchains).unwrap_or_default();
    std::fs::create_dir_all(scratch)?;
    let examples: [(&str, &str, Value); 2] = [
        (
            "py-stats",
            "stats.describe",
            json!({"numbers": [3, 1, 4, 1, 5, 9, 2, 6]}),
        ),
        (
            "js-slug",
            "slug.make",
            json!({"text": "Skills in JavaScript, sandboxed!"}),
        ),
    ];
    let (secret, public) = skillhost::SecretKey::generate()?;
    let host = HostBuilder::new(scratch.join("data"))
        .sandbox(sandbox.clone())
        .build()
        .await?;
    let result = async {
        host.trust_key(&public, "demo-author", &[])?;
        let mut answers = Vec::new();
        for (name, tool, args) in examples {
            let dir: PathBuf = plugins.join(name);
            let (d, t) = (dir.clone(), tools.clone());
            let wasm =
                tokio::task::spawn_blocking(move || skillhost::build_skill_with(&d, &t)).await??;
            println!(
                "  build    plugins/{name} → {} ({} KiB)",
                wasm.file_name().unwrap_or_default().to_string_lossy(),
                std::fs::metadata(&wasm)?.len() >> 10
            );
            let (problems, summary) = crate::cli::author::check(sandbox, &dir).await;
            anyhow::ensure!(problems.is_empty(), "check {name}: {}", problems.join("; "));
            println!("  check    ok: {summary}");
            let (bytes, statement) = skillhost::pack_dir(&dir, Some(&secret))?;
            println!(
                "  pack     {} files, {} bytes, signed by {}",
                statement.files.len(),
                bytes.len(),
                public.key_id()
            );
            let out = host.install_bundle(&bytes, Default::default()).await?;
            println!(
                "  install  {}@{} trusted={}",
                out.name, out.version, out.trusted
            );
            let run = host
                .call(&Caller::Operator, tool, args.clone(), &Default::default())
                .await;
            anyhow::ensure!(
                run.outcome == Outcome::Ok,
                "{tool}: {} {}",
                run.outcome,
                run.error.unwrap_or_default()
            );
            let output = run.output.map(|o| o.data()).unwrap_or_default();
            println!("  call     {tool} {args} → {output}");
            answers.push(format!("{tool} ok"));
        }
        Ok(answers.join(", "))
    }
    .await;
    host.shutdown().await;
    result
}
