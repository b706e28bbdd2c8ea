//! Demo step 11: an Agent Skill's scripts in the sandbox. The word-report
//! fixture (`plugins/script-skills/word-report`: a `SKILL.md` and Python
//! scripts on the standard library, embedded in this binary) is packed,
//! installed and held: its scripts run only once the operator approves
//! them. Approved, an agent's first call counts the words of a file and
//! writes `out/report.json`, kept as a ref; the second call takes that
//! file by its ref and summarizes it. A build without the script runtime
//! leaves the step out, saying what adds it.

use std::path::Path;

use serde_json::{Value, json};

use skillhost::{
    CallRequest, Caller, Decider, Host, HostBuilder, InstallOptions, Outcome, RunReport, Sandbox,
    ScriptRuntimeError,
};

use super::Part;

/// The skill's name, and the tool its scripts become.
const SKILL: &str = "word-report";
const TOOL: &str = "word-report.run_script";

/// The fixture's files: path in the folder, content.
const FILES: [(&str, &str); 6] = [
    (
        "SKILL.md",
        include_str!("../../../../plugins/script-skills/word-report/SKILL.md"),
    ),
    (
        "scripts/count_words.py",
        include_str!("../../../../plugins/script-skills/word-report/scripts/count_words.py"),
    ),
    (
        "scripts/summarize.py",
        include_str!("../../../../plugins/script-skills/word-report/scripts/summarize.py"),
    ),
    (
        "scripts/shout.py",
        include_str!("../../../../plugins/script-skills/word-report/scripts/shout.py"),
    ),
    (
        "scripts/textutil.py",
        include_str!("../../../../plugins/script-skills/word-report/scripts/textutil.py"),
    ),
    (
        "scripts/setup.sh",
        include_str!("../../../../plugins/script-skills/word-report/scripts/setup.sh"),
    ),
];

/// The file the agent hands the first script.
const NOTES: &str = "The sandbox runs the script, not the host.\n\
                     The host keeps the file the script wrote, and the next script reads it.\n";

/// Runs the step in `scratch` with the demo's sandbox.
pub(super) async fn run(sandbox: &Sandbox, scratch: &Path) -> anyhow::Result<Part> {
    match sandbox.script_runtime() {
        Ok(_) => {}
        Err(ScriptRuntimeError::NotBuilt { message }) => return Ok(Part::LeftOut(message)),
        Err(e) => return Err(e.into()),
    }
    let dir = scratch.join(SKILL);
    for (path, text) in FILES {
        let at = dir.join(path);
        if let Some(parent) = at.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(at, text)?;
    }
    let (bundle, _) = skillhost::pack_dir(&dir, None)?;
    let host = HostBuilder::new(scratch.join("data"))
        .sandbox(sandbox.clone())
        .build()
        .await?;
    let result = steps(&host, &bundle).await;
    host.shutdown().await;
    result.map(Part::Ran)
}

async fn steps(host: &Host, bundle: &[u8]) -> anyhow::Result<String> {
    host.install_bundle(
        bundle,
        InstallOptions {
            allow_untrusted: true,
            ..Default::default()
        },
    )
    .await?;
    host.trust_skill(SKILL)?;
    host.add_persona("writer", "writes and reads reports")?;
    host.grant_skill("writer", SKILL, true)?;
    let status = host
        .skills()?
        .into_iter()
        .find(|s| s.name == SKILL)
        .ok_or_else(|| anyhow::anyhow!("{SKILL} is not installed"))?;
    let scripts = status
        .permissions
        .scripts
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("{SKILL} has no scripts to approve"))?;
    println!(
        "  installed {SKILL} (SKILL.md, no component): {} → {}, held until approved: {} \
         (digest {}…)",
        TOOL,
        serde_json::to_value(&status.state)?["state"]
            .as_str()
            .unwrap_or("-"),
        scripts.scripts.join(", "),
        scripts.digest.get(..12).unwrap_or_default()
    );
    let agent = Caller::persona("writer");
    let count = json!({
        "script": "scripts/count_words.py",
        "args": ["notes.txt"],
        "files": [{"name": "notes.txt", "text": NOTES}],
    });
    let held = host
        .call(&agent, TOOL, count.clone(), &CallRequest::default())
        .await;
    println!(
        "  writer calls {TOOL} before the approval → {}: {}",
        held.outcome,
        held.error.clone().unwrap_or_default()
    );
    anyhow::ensure!(
        held.outcome != Outcome::Ok && held.outcome != Outcome::WaitingApproval,
        "a script ran before its approval"
    );
    let why = host.why("writer", TOOL).await?;
    match why.steps.iter().find(|s| !s.ok) {
        Some(step) => println!("  why: first broken link `{}`: {}", step.step, step.detail),
        None => println!("  why: {}", why.verdict),
    }
    host.approve_permissions(
        SKILL,
        Some(&status.permissions_digest),
        &Decider::operator("cli"),
    )?;
    println!("  skills approve {SKILL} → its scripts may run, exactly these files");

    let first = call_confirmed(host, &agent, count).await?;
    let out = first.output.as_ref().map(|o| o.data()).unwrap_or_default();
    println!(
        "  writer calls {TOOL} scripts/count_words.py notes.txt → {} in {} ms: {}",
        first.outcome,
        first.duration_ms,
        out["stdout"].as_str().unwrap_or_default().trim_end()
    );
    let report = out["files"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["name"] == "report.json"))
        .ok_or_else(|| anyhow::anyhow!("count_words.py wrote no out/report.json: {out}"))?;
    let made = report["ref"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("out/report.json has no ref: {report}"))?
        .to_string();
    // What the agent reads at skillhost://refs/ID (resources/read).
    let (_, bytes) = host.read_script_ref(&agent, &made)?;
    let text = String::from_utf8_lossy(&bytes);
    println!(
        "    out/report.json → ref {made} ({} bytes, {}), read back by writer:",
        report["size"],
        report["mime_type"].as_str().unwrap_or("-")
    );
    // Pretty-printed JSON is shown on one line; other text by its first lines.
    match serde_json::from_str::<Value>(&text) {
        Ok(v) => println!("      {v}"),
        Err(_) => text.lines().take(3).for_each(|l| println!("      {l}")),
    }

    let summarize = json!({
        "script": "scripts/summarize.py",
        "args": ["report.json"],
        "files": [{"name": "report.json", "ref": made}],
    });
    let second = call_confirmed(host, &agent, summarize).await?;
    let said = second.output.as_ref().map(|o| o.data()).unwrap_or_default()["stdout"]
        .as_str()
        .unwrap_or_default()
        .trim_end()
        .to_string();
    println!(
        "  writer calls {TOOL} scripts/summarize.py report.json (files: report.json = ref {made}) \
         → {} in {} ms: {said}",
        second.outcome, second.duration_ms
    );
    anyhow::ensure!(
        said == "22 words; most common: the (7), script (3), host (2)",
        "summarize.py said {said:?}"
    );
    Ok(format!(
        "count_words.py wrote out/report.json (ref {made}); summarize.py read it by its ref: {said}"
    ))
}

/// Calls `TOOL` with `args` as `agent`; a call that waits for approval
/// (a script of a skill that does not declare them read-only may write)
/// is approved by the operator, as the console or `runs approve` would.
async fn call_confirmed(host: &Host, agent: &Caller, args: Value) -> anyhow::Result<RunReport> {
    let script = args["script"].as_str().unwrap_or_default().to_string();
    let mut run = host.call(agent, TOOL, args, &CallRequest::default()).await;
    if run.outcome == Outcome::WaitingApproval {
        println!(
            "  writer calls {TOOL} {script} → waiting_approval (run {}): the operator approves it",
            run.run_id
        );
        run = host.approve(&run.run_id).await?;
    }
    anyhow::ensure!(
        run.outcome == Outcome::Ok,
        "{script}: {} {}",
        run.outcome,
        run.error.clone().unwrap_or_default()
    );
    Ok(run)
}
