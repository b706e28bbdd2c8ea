//! `cargo bench -p skillhost --bench bundle`: verify and install speed of a
//! 20 MB bundle, against `sha256sum` of the same file in the same run.
//! Prints one `name: value` per line.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use skillhost::{
    InstallOptions, PublicKey, SandboxBuilder, SecretKey, install_bundle, open_bundle, pack_dir,
};
use skillhost_test_plugins as art;

const PAD_MB: usize = 20;
const RUNS: usize = 7;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn mb_per_s(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / (1 << 20) as f64 / d.as_secs_f64()
}

fn main() -> anyhow::Result<()> {
    let work = tempfile::tempdir()?;
    let dir = work.path().join("bench-skill");
    std::fs::create_dir_all(&dir)?;
    let manifest = std::fs::read_to_string(Path::new(art::JSON_TOOLS_DIR).join("skill.yaml"))?
        .replace("name: json-tools", "name: bench-skill");
    std::fs::write(dir.join("skill.yaml"), manifest)?;
    std::fs::copy(art::JSON_TOOLS_WASM_PATH, dir.join("json_tools.wasm"))?;
    // Incompressible padding in 8 files, like data a real skill might carry.
    let mut x: u64 = 0x9E3779B97F4A7C15;
    for i in 0..8 {
        let mut pad = Vec::with_capacity((PAD_MB << 20) / 8);
        while pad.len() < (PAD_MB << 20) / 8 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            pad.extend_from_slice(&x.to_le_bytes());
        }
        std::fs::write(dir.join(format!("data{i}.bin")), pad)?;
    }
    let (key, public) = SecretKey::generate()?;
    let t = Instant::now();
    let (bytes, _) = pack_dir(&dir, Some(&key))?;
    let pack_time = t.elapsed();
    let file = work.path().join("bench.skill");
    std::fs::write(&file, &bytes)?;
    let size = bytes.len();

    let lookup = |id: &str| {
        (id == public.key_id())
            .then(|| PublicKey::from_base64(&public.to_base64()).ok())
            .flatten()
    };
    let mut verify = Vec::new();
    let mut sha = Vec::new();
    for _ in 0..RUNS {
        // Alternate the two so machine noise hits both alike.
        let t = Instant::now();
        let read = std::fs::read(&file)?;
        let opened = open_bundle(&read, lookup)?;
        verify.push(t.elapsed());
        assert!(matches!(opened.signer, skillhost::Signer::Trusted { .. }));
        let t = Instant::now();
        let status = Command::new("sha256sum")
            .arg(&file)
            .stdout(std::process::Stdio::null())
            .status()?;
        sha.push(t.elapsed());
        anyhow::ensure!(status.success(), "sha256sum failed");
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let sandbox = SandboxBuilder::new().build()?;
    let mut install = Vec::new();
    for i in 0..3 {
        let data = work.path().join(format!("data{i}"));
        std::fs::create_dir_all(&data)?;
        let t = Instant::now();
        let read = std::fs::read(&file)?;
        runtime.block_on(install_bundle(
            &data,
            &sandbox,
            &read,
            InstallOptions {
                allow_untrusted: true,
                ..Default::default()
            },
        ))?;
        install.push(t.elapsed());
    }

    let (v, s, i) = (median(verify), median(sha), median(install));
    println!("bundle_bytes: {size}");
    println!("pack_mb_per_s: {:.1}", mb_per_s(size, pack_time));
    println!("verify_mb_per_s: {:.1}", mb_per_s(size, v));
    println!("install_mb_per_s: {:.1}", mb_per_s(size, i));
    println!("sha256sum_mb_per_s: {:.1}", mb_per_s(size, s));
    println!(
        "verify_time_vs_sha256sum: {:.2}",
        v.as_secs_f64() / s.as_secs_f64()
    );
    Ok(())
}
