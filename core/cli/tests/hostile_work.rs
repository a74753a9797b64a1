//! Work bombs (issue 38, item 3): `plan --budget` answers in logarithmic time, counts
//! from the command line are range-checked, and a step over `--max-macs` is refused
//! before it starts.

mod support;
use std::time::Duration;
use support::*;

/// No size fits 1 KiB: the old search walked all 20,000 heights.
#[test]
fn plan_budget_with_no_size_that_fits_answers_quickly() {
    let m = model_file("work.tlm", &conv_model(1));
    let r = torchlet(
        &["plan", s(&m), "--input", "1x1x20000x20000", "--budget", "100B"],
        Duration::from_secs(10),
    );
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("nothing fits in 100 bytes"), "{}", r.stdout);
    assert!(r.took < Duration::from_secs(5), "{:?}", r.took);
    // And when sizes fit, the largest one (bytes grow with the size).
    let (out, _) = works(&["plan", s(&m), "--input", "1x1x20000x20000", "--budget", "64KiB"]);
    assert!(
        out.contains("largest input of this shape within 65,536 bytes: 1x1x"),
        "{out}"
    );
}

#[test]
fn steps_and_batch_out_of_range_are_refused_by_the_parser() {
    let m = model_file("counts.tlm", &conv_model(1));
    let data = data_file("counts.data.safetensors", 2, 4, 4, &[0; 32]);
    let o = scratch("counts.out.tlm");
    for (flag, value, why) in [
        ("--steps", "1000000000000", "not in 1..=4294967295"),
        ("--steps", "4611686018427387904", "not in 1..=4294967295"),
        ("--steps", "0", "not in 1..=4294967295"),
        ("--steps", "-3", "unexpected argument"),
        ("--batch", "0", "not in 1..=4294967295"),
        ("--batch", "99999999999", "not in 1..=4294967295"),
    ] {
        let e = refused(&["train", s(&m), s(&data), "--lr", "0.1", "-o", s(&o), flag, value]);
        assert!(
            e.contains(why) || e.contains("invalid value"),
            "{flag} {value}: {e}"
        );
    }
    let e = refused(&["plan", s(&m), "--input", "1x1x4294967296x2"]);
    assert!(e.contains("u32::MAX"), "{e}");
    let e = refused(&["run", s(&m), s(&data), s(&o), "--max-macs", "0"]);
    assert!(e.contains("at least 1"), "{e}");
}

/// Resize by 1,000 then a 31x31 conv: an 8x8 input is 64 M pixels of 961 MACs each, a
/// training step of about 1.8e11 multiply-accumulates (hours); memory would fit.
#[test]
fn a_resize_by_1000_train_is_refused_by_the_mac_limit_before_it_starts() {
    let m = model_file("macs.tlm", &resize_model(1000.0, 31));
    let data = data_file("macs.data.safetensors", 1, 8, 8, &[0; 64]);
    let o = scratch("macs.out.tlm");
    let e = refused(&[
        "train",
        s(&m),
        s(&data),
        "--lr",
        "0.1",
        "-o",
        s(&o),
        "--max-memory",
        "16GiB",
    ]);
    assert!(
        e.contains("a training step at 1x1x8x8 takes")
            && e.contains("multiply-accumulates")
            && e.contains("100,000,000,000 (--max-macs)"),
        "{e}"
    );
    // A lower limit refuses a normal model's step too, naming both numbers.
    let n = model_file("macs.normal.tlm", &conv_model(1));
    let d = data_file("macs.normal.data.safetensors", 2, 4, 4, &[0; 32]);
    let e = refused(&[
        "train",
        s(&n),
        s(&d),
        "--lr",
        "0.1",
        "-o",
        s(&o),
        "--max-macs",
        "10",
    ]);
    assert!(e.contains("more than the budget of 10 (--max-macs)"), "{e}");
    let x = input_file("macs.in.safetensors", &[1, 1, 8, 8]);
    let e = refused(&[
        "run",
        s(&n),
        s(&x),
        s(&scratch("macs.out.st")),
        "--max-macs",
        "10",
    ]);
    assert!(e.contains("inference at 1x1x8x8 takes"), "{e}");
}
