//! How the benches print what they measured: one `name: value` line per
//! figure, percentiles of samples, and ratios against a baseline run in
//! the same process.

#![allow(dead_code)]

use std::time::Duration;

/// The `p` percentile (0 to 1) of `samples`, nearest rank; the default
/// for no samples.
pub fn percentile<T: Copy + Ord + Default>(samples: &[T], p: f64) -> T {
    let mut s = samples.to_vec();
    s.sort_unstable();
    let i = ((s.len() as f64 - 1.0) * p).round() as usize;
    s.get(i).copied().unwrap_or_default()
}

/// Prints one figure as `name: value`.
pub fn line(name: &str, value: impl std::fmt::Display) {
    println!("{name}: {value}");
}

/// `a` over `b` as `1.23x`, or `n/a` when `b` is zero.
pub fn ratio(a: Duration, b: Duration) -> String {
    if b.is_zero() {
        return "n/a".into();
    }
    format!("{:.2}x", a.as_secs_f64() / b.as_secs_f64())
}
