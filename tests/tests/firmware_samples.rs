//! The firmware's digit samples file (format 3: arithmetic-coded 4-bit pixels), read
//! by the device's own `firmware/src/assets.rs` (compiled into `torchlet_tests` as
//! `samples_file::assets`) and written by `torchlet_tests::samples_file`.
//!
//! - The committed `firmware/assets/digits_cropped.bin` decodes, pixel for pixel, to
//!   the digits the exporter takes from `tests/data/mnist10k.bin`.
//! - Synthetic digits (noise, flat, one pixel, the widest allowed) round-trip.
//! - Corrupt files are refused with `Error::Corrupt`, never a panic.

use torchlet::io::crc32;
use torchlet::{Error, Q16};
use torchlet_tests::digits::{default_path, Digit, Digits};
use torchlet_tests::samples_file::assets::{Sample, Samples, MAX_W, MODEL_LEN};
use torchlet_tests::samples_file::{device_digits, samples_file, FT_N, TEST_N};

const COMMITTED: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../firmware/assets/digits_cropped.bin"
);
/// Magic, version, counts, model length.
const HEADER: usize = 12;

fn levels(s: &Sample<'_>) -> Vec<u8> {
    let mut v = vec![0xFF; s.h * s.w];
    s.levels(&mut v);
    v
}

fn assert_same(s: &Sample<'_>, d: &Digit) {
    assert_eq!((s.label, s.h, s.w), (d.label, d.h, d.w));
    let want: Vec<u8> = d.pixels.iter().map(|&p| p / 17).collect();
    assert_eq!(levels(s), want);
}

/// Recomputes the CRC-32 at the end, so that only the record checks can refuse.
fn fix_crc(file: &mut [u8]) {
    let n = file.len() - 4;
    let crc = crc32(&file[..n]);
    file[n..].copy_from_slice(&crc.to_le_bytes());
}

fn refused(file: &[u8]) -> bool {
    matches!(Samples::parse(file), Err(Error::Corrupt { .. }))
}

#[test]
fn committed_file_decodes_to_the_exporters_digits() {
    let digits = Digits::parse(&std::fs::read(default_path()).unwrap()).unwrap();
    let (ft, test) = device_digits(&digits);
    let file = std::fs::read(COMMITTED).unwrap();
    let samples = Samples::parse(&file).unwrap();
    assert_eq!((samples.n_finetune, samples.n_heldout), (FT_N, TEST_N));
    assert_eq!(samples.iter().count(), FT_N + TEST_N);
    for (s, d) in samples.finetune().zip(&ft) {
        assert_same(&s, d);
    }
    for (s, d) in samples.heldout().zip(&test) {
        assert_same(&s, d);
    }
    // The writer is deterministic: the committed file is what it writes today.
    assert_eq!(samples_file(&ft, &test).unwrap(), file);
}

#[test]
fn fill_functions_write_level_over_15() {
    let file = std::fs::read(COMMITTED).unwrap();
    let samples = Samples::parse(&file).unwrap();
    let s = samples.heldout().nth(7).unwrap();
    let lv = levels(&s);
    let (mut f, mut q) = (vec![-1.0f32; s.h * s.w], vec![Q16(-1); s.h * s.w]);
    s.fill(&mut f);
    s.fill_q16(&mut q);
    for ((&v, &f), &q) in lv.iter().zip(&f).zip(&q) {
        assert_eq!(f, v as f32 * (1.0 / 15.0));
        assert_eq!(q, Q16((v as i32 * 65536 + 7) / 15));
    }
    // Centred on a canvas 4 rows and 6 columns larger: a frame of zeros around it.
    let (h, w) = (s.h + 4, s.w + 6);
    let mut canvas = vec![-1.0f32; h * w];
    s.fill_padded(&mut canvas, h, w);
    for y in 0..h {
        for x in 0..w {
            let inside = (2..2 + s.h).contains(&y) && (3..3 + s.w).contains(&x);
            let want = if inside { f[(y - 2) * s.w + x - 3] } else { 0.0 };
            assert_eq!(canvas[y * w + x], want, "({y}, {x})");
        }
    }
}

/// A digit of `h x w` levels from `level(y, x)`.
fn synthetic(label: u8, h: usize, w: usize, level: impl Fn(usize, usize) -> u8) -> Digit {
    let pixels = (0..h * w).map(|i| level(i / w, i % w) * 17).collect();
    Digit { label, h, w, pixels }
}

#[test]
fn synthetic_digits_round_trip() {
    let mut seed = 12345u32;
    let mut noise = move || {
        seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        (seed >> 28) as u8
    };
    let noisy: Vec<u8> = (0..28 * MAX_W).map(|_| noise()).collect();
    let ft = vec![
        synthetic(3, 28, MAX_W, |y, x| noisy[y * MAX_W + x]),
        synthetic(0, 1, 1, |_, _| 9),
        synthetic(9, 5, 7, |_, _| 0),
        synthetic(1, 6, 3, |_, _| 15),
    ];
    let test = vec![synthetic(7, 22, 22, |y, x| ((y * 3 + x * 5) % 16) as u8)];
    let file = samples_file(&ft, &test).unwrap();
    let samples = Samples::parse(&file).unwrap();
    assert_eq!((samples.n_finetune, samples.n_heldout), (4, 1));
    // The noise needs more than 127 bytes of code: a two-byte length.
    assert_eq!(file[HEADER + MODEL_LEN + 3] & 0x80, 0x80);
    for (s, d) in samples.iter().zip(ft.iter().chain(&test)) {
        assert_same(&s, d);
    }
    // Empty sets are a valid file too.
    let empty = samples_file(&[], &[]).unwrap();
    assert_eq!(Samples::parse(&empty).unwrap().iter().count(), 0);
}

#[test]
fn writer_refuses_what_the_format_cannot_hold() {
    assert!(samples_file(&[synthetic(1, 4, MAX_W + 1, |_, _| 0)], &[]).is_err());
    assert!(samples_file(&[synthetic(10, 4, 4, |_, _| 0)], &[]).is_err());
    let mut odd = synthetic(1, 2, 2, |_, _| 1);
    odd.pixels[0] = 16; // not a 4-bit level * 17
    assert!(samples_file(&[odd], &[]).is_err());
}

#[test]
fn truncated_or_flipped_files_are_refused() {
    let file = std::fs::read(COMMITTED).unwrap();
    for len in 0..file.len() {
        assert!(refused(&file[..len]), "truncated to {len} bytes");
    }
    for i in 0..file.len() {
        let mut f = file.clone();
        f[i] ^= 0x5A;
        assert!(refused(&f), "byte {i} flipped");
    }
}

/// The offset of the first record's length byte, and of the last record.
fn first_len_and_last_record(file: &[u8]) -> (usize, usize) {
    let records = Samples::parse(file).unwrap().iter().count();
    let mut off = HEADER + MODEL_LEN;
    let mut last = off;
    for _ in 0..records {
        last = off;
        let n = code_len(file, off);
        off += 4 + (n >= 0x80) as usize + n;
    }
    (HEADER + MODEL_LEN + 3, last)
}

fn code_len(file: &[u8], off: usize) -> usize {
    let b = file[off + 3] as usize;
    if b < 0x80 {
        b
    } else {
        (b & 0x7F) | (file[off + 4] as usize) << 7
    }
}

#[test]
fn wrong_counts_and_headers_are_refused_with_a_valid_crc() {
    let file = std::fs::read(COMMITTED).unwrap();
    let (first_len, last) = first_len_and_last_record(&file);
    let edit = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut v = file.clone();
        f(&mut v);
        fix_crc(&mut v);
        refused(&v)
    };
    assert!(edit(&|v| v[4] = 2), "version 2");
    assert!(edit(&|v| v[10] ^= 1), "model length");
    assert!(
        edit(&|v| v[6] += 1),
        "one fine-tuning digit more than the records"
    );
    assert!(edit(&|v| v[8] -= 1), "one held-out digit fewer than the records");
    assert!(edit(&|v| v[HEADER + MODEL_LEN] = 10), "label 10");
    assert!(edit(&|v| v[HEADER + MODEL_LEN + 1] = 0), "height 0");
    assert!(edit(&|v| v[HEADER + MODEL_LEN + 2] = MAX_W as u8 + 1), "too wide");
    // 127 bytes: more than the decoder reads for the first digit.
    assert!(edit(&|v| v[first_len] = 0x7F), "code length past its bytes");
    // Zeros appended to the last record's code: the decoder reads the same zeros
    // past the end, so it consumes fewer bytes than the record claims.
    assert!(edit(&|v| {
        let n = code_len(v, last);
        assert!(n + 5 < 0x80);
        v[last + 3] = (n + 5) as u8;
        let end = v.len() - 4;
        v.splice(end..end, [0u8; 5]);
    }));
}

#[test]
fn bytes_changed_under_a_valid_crc_never_panic() {
    // The header, the model and the first records byte by byte, then every 11th byte
    // (each change re-parses the whole file; all 16 KB x 3 values takes a minute),
    // with the CRC made valid: the parser refuses the file or accepts it, and every
    // digit of an accepted file decodes to h * w levels of 0..=15 without a panic.
    let file = std::fs::read(COMMITTED).unwrap();
    let (mut accepted, mut tried) = (0, 0);
    let positions = (0..file.len() - 4).filter(|&i| i < HEADER + MODEL_LEN + 200 || i % 11 == 0);
    for (k, i) in positions.enumerate() {
        let mut f = file.clone();
        f[i] ^= [0x01, 0x80, 0xFF][k % 3];
        fix_crc(&mut f);
        tried += 1;
        if let Ok(samples) = Samples::parse(&f) {
            accepted += 1;
            for s in samples.iter() {
                assert!(levels(&s).iter().all(|&v| v <= 15));
            }
        }
    }
    // A changed model byte or code byte still decodes (an arithmetic code has no
    // redundancy; the CRC is what catches those): both outcomes are exercised.
    assert!(accepted > 0 && accepted < tried, "{accepted} of {tried} accepted");
}
