//! The weights format of `torchlet::io`: round trips, exact sizes, and one test per
//! way bytes can be wrong, each checking that the model's parameters stay untouched.

use torchlet::init::Rng;
use torchlet::io::{self, Weights};
use torchlet::nn::digits_fcn;
use torchlet::{Error, Graph};

const TAPE: usize = 32;

/// A W1 model initialised from `seed`, in the given arena.
fn w1(arena: &mut [f32], seed: u64) -> Graph<'_, f32, TAPE> {
    let mut g = Graph::new(arena);
    digits_fcn(&mut g, &mut Rng::new(seed)).unwrap();
    g
}

fn params(g: &Graph<'_, f32, TAPE>) -> Vec<Vec<f32>> {
    (0..g.num_params())
        .map(|i| g.data(g.param_handle(i).unwrap()).unwrap().to_vec())
        .collect()
}

fn saved(seed: u64) -> Vec<u8> {
    let mut arena = vec![0.0f32; 16 * 1024];
    let g = w1(&mut arena, seed);
    let mut out = vec![0u8; io::saved_len(&g).unwrap()];
    assert_eq!(io::save(&g, &mut out).unwrap(), out.len());
    out
}

/// Loads `bytes` into a fresh W1 and checks that the error is `want` and that no
/// parameter changed.
fn expect_refused(bytes: &[u8], want: impl Fn(&Error) -> bool) -> Error {
    let mut arena = vec![0.0f32; 16 * 1024];
    let mut g = w1(&mut arena, 7);
    let before = params(&g);
    let e = io::load(&mut g, bytes).expect_err("load should fail");
    assert!(want(&e), "unexpected error {e:?}");
    assert_eq!(params(&g), before, "parameters changed after {e}");
    e
}

/// Rewrites the CRC trailer so that a deliberately edited file checks again.
fn fix_crc(bytes: &mut [u8]) {
    let n = bytes.len() - 4;
    let c = io::crc32(&bytes[..n]);
    bytes[n..].copy_from_slice(&c.to_le_bytes());
}

#[test]
fn w1_size_is_exact_and_documented() {
    let mut arena = vec![0.0f32; 16 * 1024];
    let g = w1(&mut arena, 1);
    // 24 header + 4 CRC + 8 records (136 bytes of record heads) + 6,218 values * 4.
    assert_eq!(io::saved_len(&g).unwrap(), 25_036);
    let named = io::saved_len_named(&g, &io::DIGITS_FCN_NAMES).unwrap();
    let name_bytes: usize = io::DIGITS_FCN_NAMES.iter().map(|n| n.len()).sum();
    assert!(named >= 25_036 + name_bytes && named < 25_036 + name_bytes + 8 * 4);
    let mut small = vec![0u8; 25_035];
    assert!(matches!(
        io::save(&g, &mut small),
        Err(Error::ShapeMismatch { expected: 25_036, .. })
    ));
}

#[test]
fn round_trip_is_bit_exact_with_and_without_names() {
    for names in [&[][..], &io::DIGITS_FCN_NAMES[..]] {
        let mut a1 = vec![0.0f32; 16 * 1024];
        let g1 = w1(&mut a1, 1);
        let mut bytes = vec![0u8; io::saved_len_named(&g1, names).unwrap()];
        io::save_named(&g1, names, &mut bytes).unwrap();
        let mut a2 = vec![0.0f32; 16 * 1024];
        let mut g2 = w1(&mut a2, 2);
        assert_ne!(params(&g1), params(&g2));
        io::load(&mut g2, &bytes).unwrap();
        assert_eq!(params(&g1), params(&g2));
        let w = Weights::parse(&bytes).unwrap();
        assert_eq!(w.scalar_name().unwrap(), "f32");
        let got: Vec<&str> = w.records().map(|r| r.name).collect();
        if names.is_empty() {
            assert!(got.iter().all(|n| n.is_empty()));
        } else {
            assert_eq!(got, names);
        }
        // Every record's data starts 4-byte aligned within the file.
        for r in w.records() {
            let off = r.data.as_ptr() as usize - bytes.as_ptr() as usize;
            assert_eq!(off % 4, 0);
        }
    }
}

#[test]
fn header_fields_sit_where_the_docs_say() {
    let b = saved(3);
    assert_eq!(&b[0..4], b"TLWT");
    assert_eq!(u16::from_le_bytes([b[4], b[5]]), 1);
    assert_eq!(&b[8..16], b"f32\0\0\0\0\0");
    assert_eq!(
        u32::from_le_bytes(b[16..20].try_into().unwrap()) as usize,
        b.len()
    );
    assert_eq!(u32::from_le_bytes(b[20..24].try_into().unwrap()), 8);
    // First record: index 0, rank 4, no name, dims [8, 1, 3, 3], then the values.
    assert_eq!(&b[24..32], &[0, 0, 0, 0, 4, 0, 0, 0]);
    let dims: Vec<u32> = b[32..48]
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(dims, [8, 1, 3, 3]);
    let mut arena = vec![0.0f32; 16 * 1024];
    let g = w1(&mut arena, 3);
    let first = g.data(g.param_handle(0).unwrap()).unwrap()[0];
    assert_eq!(&b[48..52], &first.to_le_bytes());
    let n = b.len() - 4;
    assert_eq!(u32::from_le_bytes(b[n..].try_into().unwrap()), io::crc32(&b[..n]));
}

#[test]
fn bad_magic() {
    let mut b = saved(1);
    b[0] = b'X';
    expect_refused(&b, |e| *e == Error::Corrupt { what: io::BAD_MAGIC });
    expect_refused(b"PK\x03\x04 a zip file", |e| {
        *e == Error::Corrupt { what: io::BAD_MAGIC }
    });
}

#[test]
fn unknown_version_and_flags() {
    let mut b = saved(1);
    b[4] = 2;
    fix_crc(&mut b);
    expect_refused(&b, |e| {
        *e == Error::InvalidParam {
            op: "weights",
            what: io::UNKNOWN_VERSION,
            value: 2,
        }
    });
    let mut b = saved(1);
    b[6] = 1;
    fix_crc(&mut b);
    expect_refused(
        &b,
        |e| matches!(e, Error::InvalidParam { what, value: 1, .. } if *what == io::UNKNOWN_FLAGS),
    );
}

#[test]
fn wrong_scalar_type() {
    let mut b = saved(1);
    b[8..16].copy_from_slice(b"q8.8\0\0\0\0");
    fix_crc(&mut b);
    expect_refused(&b, |e| matches!(e, Error::Unsupported { .. }));
    let mut b = saved(1);
    b[8..16].copy_from_slice(b"f32\0\0\0\0x");
    fix_crc(&mut b);
    expect_refused(&b, |e| {
        *e == Error::Corrupt {
            what: io::BAD_SCALAR_FIELD,
        }
    });
}

#[test]
fn every_truncation_is_refused() {
    let b = saved(1);
    for n in 0..b.len() {
        expect_refused(&b[..n], |e| {
            *e == Error::Corrupt { what: io::TRUNCATED }
                || (n < 4 && *e == Error::Corrupt { what: io::BAD_MAGIC })
        });
    }
    let mut longer = b.clone();
    longer.push(0);
    expect_refused(&longer, |e| *e == Error::Corrupt { what: io::TRAILING });
    assert_eq!(Weights::parse_prefix(&longer).unwrap().as_bytes(), &b[..]);
}

#[test]
fn a_bit_flip_in_every_byte_is_refused() {
    let b = saved(1);
    let mut arena = vec![0.0f32; 16 * 1024];
    let mut g = w1(&mut arena, 7);
    let before = params(&g);
    let mut flipped = b.clone();
    // Every bit of the header and the first record, then one bit of every other byte
    // (all 200,288 flips take a minute: CRC-32 catches every single-bit error anyway).
    for i in 0..b.len() {
        let bits = if i < 64 { 0..8 } else { i % 8..i % 8 + 1 };
        for bit in bits {
            flipped[i] ^= 1 << bit;
            assert!(
                io::load(&mut g, &flipped).is_err(),
                "flip of byte {i} bit {bit} accepted"
            );
            flipped[i] ^= 1 << bit;
        }
    }
    assert_eq!(params(&g), before);
}

#[test]
fn checksum_mismatch() {
    let mut b = saved(1);
    let mid = b.len() / 2;
    b[mid] ^= 0x40;
    expect_refused(&b, |e| {
        *e == Error::Corrupt {
            what: io::BAD_CHECKSUM,
        }
    });
}

#[test]
fn shape_mismatch_with_the_model() {
    // A model whose third parameter is [16, 8, 5, 5] instead of [16, 8, 3, 3].
    let mut arena = vec![0.0f32; 32 * 1024];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    for dims in [
        &[8, 1, 3, 3][..],
        &[8],
        &[16, 8, 5, 5],
        &[16],
        &[32, 16, 3, 3],
        &[32],
        &[10, 32],
        &[10],
    ] {
        g.param(dims).unwrap();
    }
    let mut b = vec![0u8; io::saved_len(&g).unwrap()];
    io::save(&g, &mut b).unwrap();
    let e = expect_refused(&b, |e| matches!(e, Error::ShapeMismatch { .. }));
    assert_eq!(
        e,
        Error::ShapeMismatch {
            op: "load weights",
            what: "a parameter dimension is {found} in the file, {expected} in the model",
            expected: 3,
            found: 5
        }
    );
    // Fewer parameters than the model.
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    g.param(&[8, 1, 3, 3]).unwrap();
    let mut b = vec![0u8; io::saved_len(&g).unwrap()];
    io::save(&g, &mut b).unwrap();
    expect_refused(&b, |e| {
        matches!(
            e,
            Error::ShapeMismatch {
                expected: 8,
                found: 1,
                ..
            }
        )
    });
    // A rank that differs.
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    for dims in [
        &[72][..],
        &[8],
        &[16, 8, 3, 3],
        &[16],
        &[32, 16, 3, 3],
        &[32],
        &[10, 32],
        &[10],
    ] {
        g.param(dims).unwrap();
    }
    let mut b = vec![0u8; io::saved_len(&g).unwrap()];
    io::save(&g, &mut b).unwrap();
    expect_refused(&b, |e| {
        matches!(
            e,
            Error::ShapeMismatch {
                expected: 4,
                found: 1,
                ..
            }
        )
    });
}

#[test]
fn records_out_of_order_are_refused() {
    let mut b = saved(1);
    b[24] = 5; // first record claims index 5
    fix_crc(&mut b);
    expect_refused(&b, |e| matches!(e, Error::InvalidParam { value: 5, .. }));
}

#[test]
fn malformed_records_with_a_valid_checksum_are_refused() {
    // rank 5, a dimension that runs past the end, a reserved byte, a huge count.
    for (at, val) in [(28usize, 5u8), (32, 0xFF), (30, 1), (23, 1)] {
        let mut b = saved(1);
        b[at] = val;
        fix_crc(&mut b);
        expect_refused(&b, |e| *e == Error::Corrupt { what: io::BAD_RECORD });
    }
}

#[test]
fn meta_graphs_neither_save_nor_load() {
    let mut g: Graph<f32, TAPE> = Graph::meta(usize::MAX);
    digits_fcn(&mut g, &mut Rng::new(0)).unwrap();
    assert_eq!(io::saved_len(&g).unwrap(), 25_036);
    let mut out = vec![0u8; 25_036];
    assert!(matches!(io::save(&g, &mut out), Err(Error::InvalidState { .. })));
    assert!(matches!(
        io::load(&mut g, &saved(1)),
        Err(Error::InvalidState { .. })
    ));
}
