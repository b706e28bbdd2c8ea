//! Arbitrary bytes as a bundle: opening must return `Ok` or `Err`, never
//! panic, and stay within memory (run with `-rss_limit_mb=2048`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = skillhost::open_bundle(data, |_key_id| None);
});
