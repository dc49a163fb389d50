//! Replays the cargo-fuzz corpus (`tests/fuzz/corpus/<target>/`) and the
//! minimized crash inputs (`tests/fuzz/crashes/<target>/`) through the same
//! checks as the fuzz targets (`tests/fuzz/src/lib.rs`), on stable, as part
//! of `cargo test`. No libFuzzer needed; see tests/fuzz/README.md for the
//! fuzzing itself.

#[path = "../fuzz/src/lib.rs"]
#[allow(dead_code)]
pub mod checks;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

pub type Target = fn(&[u8]);

pub const TARGETS: [(&str, Target); 3] = [
    ("config", checks::config),
    ("codec", checks::codec),
    ("ops", checks::ops),
];

/// Run every file under `<dir>/<target>/`; the failing ones with their panic.
pub fn replay(dir: &str) -> (usize, Vec<String>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz")
        .join(dir);
    let mut ran = 0;
    let mut failed = Vec::new();
    for (name, f) in TARGETS {
        let Ok(entries) = std::fs::read_dir(root.join(name)) else {
            continue;
        };
        let mut files: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
        files.sort();
        for path in files {
            if !path.is_file() || path.file_name().is_some_and(|n| n == "README.md") {
                continue;
            }
            let data = std::fs::read(&path).expect("read input");
            ran += 1;
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| f(&data))) {
                let msg = crate::support::panic_text(&*p);
                failed.push(format!(
                    "{}: {}",
                    path.display(),
                    msg.lines().next().unwrap_or("")
                ));
            }
        }
    }
    (ran, failed)
}

#[test]
pub fn fuzz_corpus_replays_clean() {
    let (ran, failed) = replay("corpus");
    assert!(ran > 0, "no corpus found under tests/fuzz/corpus");
    assert!(
        failed.is_empty(),
        "{} of {ran} corpus inputs fail:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// Minimized inputs of bugs the fuzzers found (see tests/fuzz/README.md):
/// each fails until its bug is fixed.
#[test]
pub fn fuzz_crash_inputs_are_fixed() {
    let (ran, failed) = replay("crashes");
    assert!(
        failed.is_empty(),
        "{} of {ran} crash inputs still fail:\n{}",
        failed.len(),
        failed.join("\n")
    );
}
