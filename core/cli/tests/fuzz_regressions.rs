//! Replays the CLI fuzz targets' inputs with a plain `cargo test`: every crashing input
//! kept (`core/fuzz/regressions/<target>/`) and the seeds (`core/fuzz/seeds/<target>/`)
//! run through the target's body (`torchlet_cli::fuzzing`) without a panic. One test
//! function: the bodies change this process's current directory to their scratch one.

use std::path::{Path, PathBuf};
use torchlet_cli::fuzzing;

fn files(kind: &str, target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz")
        .join(kind)
        .join(target);
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn replay(target: &str, run: fn(&[u8])) -> usize {
    let mut n = 0;
    for kind in ["regressions", "seeds"] {
        for f in files(kind, target) {
            let data = std::fs::read(&f).unwrap();
            let r = std::panic::catch_unwind(|| run(&data));
            assert!(r.is_ok(), "{} panics again", f.display());
            n += 1;
        }
    }
    n
}

#[test]
fn cli_fuzz_inputs_replay_without_panic() {
    assert!(replay("cli_args", fuzzing::cli_args) >= 8);
    assert!(replay("model_file_commands", fuzzing::model_file_commands) >= 3);
}
