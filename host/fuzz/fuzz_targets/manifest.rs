//! Arbitrary bytes, decoded lossily, as a `skill.yaml` and as a `SKILL.md`:
//! parsing must return `Ok` or `Err`, never panic, hang or blow up. A
//! `skill.yaml` that parses must also survive a round trip: serialized back
//! to YAML, it parses again to the same manifest.

#![no_main]

use libfuzzer_sys::fuzz_target;
use skillhost::SkillManifest;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(m) = SkillManifest::parse(&text) {
        let yaml = serde_yaml::to_string(&m).expect("a parsed manifest serializes");
        // Far under the size limit, so that escaping cannot push it over.
        if yaml.len() < 256 << 10 {
            assert_eq!(
                SkillManifest::parse(&yaml).as_ref(),
                Ok(&m),
                "round trip through:\n{yaml}"
            );
        }
    }
    let _ = SkillManifest::parse_skill_md(&text);
});
