//! Allocation bombs (issue 38, item 2): a step larger than `--max-memory` (default half
//! of physical memory) is refused from its meta plan, naming the bytes and the budget,
//! before anything is allocated; the process never aborts on a failed allocation.

mod support;
use support::*;

/// A conv with pads 32,767: a 4x8x8 input becomes 4x2x65,540x65,540 (tens of GB).
#[test]
fn a_conv_with_pads_32767_is_refused_by_run_and_train_naming_bytes_and_budget() {
    let m = model_file("pads.tlm", &conv_model(32_767));
    let x = input_file("pads.in.safetensors", &[4, 1, 8, 8]);
    let e = refused(&["run", s(&m), s(&x), s(&scratch("pads.out.safetensors"))]);
    assert!(
        e.contains("inference at 4x1x8x8 needs") && e.contains("memory budget"),
        "{e}"
    );
    let data = data_file("pads.data.safetensors", 4, 8, 8, &[0; 4 * 64]);
    let e = refused(&[
        "train",
        s(&m),
        s(&data),
        "--lr",
        "0.1",
        "-o",
        s(&scratch("pads.trained.tlm")),
    ]);
    assert!(
        e.contains("a training step at 4x1x8x8 needs") && e.contains("bytes"),
        "{e}"
    );
    // plan allocates nothing: it reports the bytes and says run and train refuse them.
    let (out, _) = works(&["plan", s(&m), "--input", "4x1x8x8"]);
    assert!(out.contains("over the budget"), "{out}");
}

/// Resize by 1,000: a 64x64 input becomes 64,000x64,000 (16 GB a channel).
#[test]
fn a_resize_by_1000_is_refused_by_run_and_train() {
    let m = model_file("resize.tlm", &resize_model(1000.0, 3));
    let x = input_file("resize.in.safetensors", &[1, 1, 64, 64]);
    let e = refused(&["run", s(&m), s(&x), s(&scratch("resize.out.safetensors"))]);
    assert!(e.contains("needs") && e.contains("(--max-memory)"), "{e}");
    let data = data_file("resize.data.safetensors", 1, 64, 64, &[0; 64 * 64]);
    let e = refused(&[
        "train",
        s(&m),
        s(&data),
        "--lr",
        "0.1",
        "-o",
        s(&scratch("resize.trained.tlm")),
    ]);
    assert!(e.contains("needs") && e.contains("(--max-memory)"), "{e}");
}

/// A normal model under a small `--max-memory`: refused, with the numbers; with room
/// it runs.
#[test]
fn a_small_max_memory_refuses_a_normal_model_and_a_large_one_runs_it() {
    let m = model_file("normal.tlm", &conv_model(1));
    let x = input_file("normal.in.safetensors", &[2, 1, 16, 16]);
    let out = scratch("normal.out.safetensors");
    let e = refused(&["run", s(&m), s(&x), s(&out), "--max-memory", "1KiB"]);
    assert!(e.contains("1,024 bytes (--max-memory)"), "{e}");
    let (stdout, _) = works(&["--max-memory", "8GiB", "run", s(&m), s(&x), s(&out)]);
    assert!(stdout.contains("[2, 2, 16, 16]"), "{stdout}");
    let data = data_file("normal.data.safetensors", 2, 16, 16, &[1; 2 * 256]);
    let trained = scratch("normal.trained.tlm");
    let e = refused(&[
        "train",
        s(&m),
        s(&data),
        "--lr",
        "0.1",
        "-o",
        s(&trained),
        "--max-memory",
        "2KB",
    ]);
    assert!(
        e.contains("a training step at 2x1x16x16 needs") && e.contains("2,000 bytes"),
        "{e}"
    );
    let e = refused(&["export", s(&m), s(&out), "--max-memory", "10B"]);
    assert!(e.contains("10 bytes"), "{e}");
    let e = refused(&["run", s(&m), s(&x), s(&out), "--max-memory", "12parsecs"]);
    assert!(e.contains("unknown unit"), "{e}");
}

/// x of shape [10^12, 0, 1, 1] is an empty tensor claiming 10^12 samples: refused before
/// the sample order (one entry a sample) is allocated.
#[test]
fn a_data_file_claiming_10_12_empty_samples_is_refused() {
    let m = model_file("empty.tlm", &conv_model(1));
    let d = tensors_file(
        "empty.data.safetensors",
        &[
            (
                "x",
                safetensors::Dtype::F32,
                vec![1_000_000_000_000, 0, 1, 1],
                vec![],
            ),
            ("y", safetensors::Dtype::I64, vec![1_000_000_000_000, 0], vec![]),
        ],
    );
    let e = refused(&[
        "train",
        s(&m),
        s(&d),
        "--lr",
        "0.1",
        "-o",
        s(&scratch("empty.out.tlm")),
    ]);
    assert!(e.contains("no values per sample"), "{e}");
}
