//! The cross-target determinism run on the host (x86_64): its arena fits, it does not
//! saturate, and two runs give the same hash. `.ci/stages/40-fixed.sh` compares this
//! hash with the wasm32 and thumbv6m runs (`fixed_determinism -- --nocapture` prints it).

use torchlet::Q16;
use torchlet_determinism::{plan_bytes, run, ARENA_WORDS};

#[test]
fn determinism_run_fits_repeats_and_prints_its_hash() {
    let need = plan_bytes().unwrap();
    assert!(
        need <= ARENA_WORDS * 4,
        "plan {need} bytes > {} words",
        ARENA_WORDS
    );
    let mut arena = vec![Q16(0); ARENA_WORDS];
    let a = run(&mut arena).unwrap();
    let mut arena = vec![Q16(0); ARENA_WORDS];
    let b = run(&mut arena).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.saturated_steps, 0, "{a:?}");
    // The loss is a real cross-entropy of 10 classes (about ln 10 on random data).
    let loss = Q16(a.last_loss).to_f32();
    assert!(loss > 0.5 && loss < 5.0, "{a:?}");
    println!("DETERMINISM_HASH {:016x}", a.hash);
    println!("plan {need} bytes, {a:?}");
}
