//! Replays the fuzzers' inputs with a plain `cargo test`: every crashing input ever
//! found (`core/fuzz/regressions/<target>/`, kept after its fix) and the seed corpus
//! (`core/fuzz/seeds/<target>/`) must now run through the target's body without a panic.
//! Run it in the debug profile too (`.ci/stages/40-weights.sh` does) so that integer
//! overflows panic as they did under the fuzzer.

use std::path::{Path, PathBuf};
use torchlet_tests::fuzzing;

fn files(kind: &str, target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../core/fuzz")
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
fn weights_load_inputs_replay_without_panic() {
    assert!(replay("weights_load", fuzzing::weights_load) >= 5);
}

#[test]
fn conformance_case_inputs_replay_without_panic() {
    assert!(replay("conformance_case", fuzzing::conformance_case) >= 5);
}

#[test]
fn model_load_inputs_replay_without_panic() {
    assert!(replay("model_load", fuzzing::model_load) >= 6);
}

#[test]
fn onnx_import_inputs_replay_without_panic() {
    assert!(replay("onnx_import", fuzzing::onnx_import) >= 7);
}

#[test]
fn a_file_written_by_an_independent_python_writer_loads() {
    // seeds/weights_load/tiny: a mode byte, then a file that a 15-line Python writer
    // made from the layout table in core/src/io/mod.rs alone.
    let seed =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/fuzz/seeds/weights_load/tiny"))
            .unwrap();
    let mut arena = vec![0.0f32; 1024];
    let mut g: torchlet::Graph<f32, 8> = torchlet::Graph::new(&mut arena);
    for dims in [&[3, 2, 3, 3][..], &[3], &[4, 3], &[4]] {
        g.param(dims).unwrap();
    }
    torchlet::io::load(&mut g, &seed[1..]).unwrap();
    let w = g.data(g.param_handle(3).unwrap()).unwrap();
    assert!(w.iter().all(|v| v.abs() <= 1.0) && w.iter().any(|&v| v != 0.0));
}
