//! The arena's unit tests: two ends, views, external data, meta counting.

use super::*;

#[test]
fn two_ends_meet_with_an_error_that_counts_bytes() {
    let mut buf = [0.0f32; 16];
    let mut a = Arena::new(&mut buf);
    let p = a.alloc_persistent(6).unwrap();
    assert_eq!(p, Span { off: 10, len: 6 });
    let s = a.alloc(8).unwrap();
    assert_eq!(s, Span { off: 0, len: 8 });
    let e = a.alloc(3).unwrap_err();
    assert!(matches!(
        e,
        Error::ArenaExhausted {
            needed: 12,
            available: 8,
            ..
        }
    ));
    // The failed call changed nothing: the last two words are still there.
    assert!(a.alloc(2).is_ok());
    assert_eq!(a.high_water_bytes(), 64);
    a.reset_scratch();
    assert_eq!(a.used_bytes(), 24);
}

#[test]
fn views_split_reads_around_the_write() {
    let mut buf = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let mut a = Arena::new(&mut buf);
    let lo = Span { off: 0, len: 2 };
    let w = Span { off: 2, len: 2 };
    let hi = Span { off: 4, len: 2 };
    let ([x, y], out) = a.views([lo, hi], w).unwrap();
    out[0] = x[0] + y[1];
    assert_eq!(buf[2], 7.0);
}

#[test]
fn external_data_is_mapped_after_the_buffer_read_only_and_free() {
    let flash = [7.0f32, 8.0, 9.0];
    let mut buf = [0.0f32; 4];
    let mut a = Arena::new(&mut buf);
    let e = a.map_external(&flash).unwrap();
    assert_eq!(e, Span { off: 4, len: 3 });
    assert_eq!(a.used_bytes(), 0);
    assert_eq!(a.high_water_bytes(), 0);
    let w = a.alloc(2).unwrap();
    let tail = Span { off: 5, len: 2 };
    let ([x, t], out) = a.views([e, tail], w).unwrap();
    out[0] = x[0] + t[1];
    assert_eq!(a.get(w)[0], 16.0);
    assert_eq!(a.get(e), &flash);
    assert!(a.views([w], e).is_err(), "external data is never written");
    assert!(a.get_mut(e).is_empty());
}

#[test]
fn meta_arena_counts_without_data() {
    let mut a = Arena::<f32>::meta(100);
    a.alloc_persistent(10).unwrap();
    let m = a.mark();
    a.alloc(50).unwrap();
    a.release(m);
    a.alloc(20).unwrap();
    assert_eq!(a.high_water_bytes(), 240);
    assert!(a.alloc(71).is_err());
}
