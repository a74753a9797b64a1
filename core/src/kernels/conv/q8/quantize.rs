//! The host-side quantizer of frozen convolution weights (used by exporters; the device
//! never calls it, so its `f64` math costs the device nothing).
//!
//! - Symmetric, per output channel: `s = max|w_c| / 127`, `q = round(w / s)` in
//!   `-127..=127` (ties away from zero), as TFLite's per-channel int8 weights.
//! - The scale is stored as `mult / 2^shift` ([`QScale`]) with `mult` normalised to
//!   `[2^15, 2^16)` (the largest shift in `16..=62` that keeps it below `2^16`), and `q`
//!   is computed against that stored scale, so the dequantized weight `q * mult / 2^shift`
//!   is as close to `w` as the grid allows.
//! - An all-zero channel gets `mult = 0` (every `q` 0); a channel whose scale is too
//!   small for the grid (`max|w| < 127 * 2^-63`) rounds to the same.

use super::{QScale, MAX_SHIFT, MIN_SHIFT};
use crate::error::{Error, Result};

const OP: &str = "quantize_per_channel";

/// Quantizes `w` (`[cout, ...]` row-major, `f32`) into `q_out` (same length) and one
/// scale per output channel into `scale_out` (length `cout`). Errors:
/// [`Error::ShapeMismatch`] when `cout` is 0, does not divide `w.len()` (or `w` is
/// empty), or an output slice has the wrong length; [`Error::InvalidParam`] for a
/// non-finite weight (its index as the value) or a channel with `max|w| >= ~127`,
/// beyond the largest scale ([`QScale`] below 1; the channel index as the value).
/// On error the outputs may be partly written.
pub fn quantize_per_channel(
    w: &[f32],
    cout: usize,
    q_out: &mut [i8],
    scale_out: &mut [QScale],
) -> Result<()> {
    let shape_err = |what, expected, found| Error::ShapeMismatch {
        op: OP,
        what,
        expected,
        found,
    };
    if cout == 0 || w.is_empty() || !w.len().is_multiple_of(cout) {
        return Err(shape_err(
            "weights length, a positive multiple of cout",
            cout,
            w.len(),
        ));
    }
    if q_out.len() != w.len() {
        return Err(shape_err("q_out length vs weights length", w.len(), q_out.len()));
    }
    if scale_out.len() != cout {
        return Err(shape_err("scale_out length vs cout", cout, scale_out.len()));
    }
    if let Some(i) = w.iter().position(|v| !v.is_finite()) {
        return Err(Error::InvalidParam {
            op: OP,
            what: "weight is not finite; index",
            value: i as i64,
        });
    }
    let k = w.len() / cout;
    let channels = w.chunks_exact(k).zip(q_out.chunks_exact_mut(k));
    for (c, ((wc, qc), sc)) in channels.zip(scale_out.iter_mut()).enumerate() {
        let amax = wc.iter().fold(0.0f64, |m, &v| m.max(abs(v as f64)));
        *sc = channel_scale(amax / 127.0).ok_or(Error::InvalidParam {
            op: OP,
            what: "max |weight| of 127 or more (scale would reach 1); channel",
            value: c as i64,
        })?;
        let s = sc.to_f64();
        for (q, &v) in qc.iter_mut().zip(wc) {
            *q = if s == 0.0 {
                0
            } else {
                round_away(v as f64 / s).clamp(-127, 127) as i8
            };
        }
    }
    Ok(())
}

/// `s` as `mult / 2^shift` with `mult` in `[2^15, 2^16)` when the range allows;
/// `None` when `s` needs a shift below 16 (`s >= 1 - 2^-17`).
fn channel_scale(s: f64) -> Option<QScale> {
    let mut shift = MAX_SHIFT;
    while shift > MIN_SHIFT && s * pow2(shift) >= 65535.5 {
        shift -= 1;
    }
    let m = round_away(s * pow2(shift));
    (m <= u16::MAX as i64).then_some(QScale {
        mult: m as u16,
        shift,
    })
}

fn pow2(e: u8) -> f64 {
    (1u64 << e) as f64
}

fn abs(v: f64) -> f64 {
    if v < 0.0 {
        -v
    } else {
        v
    }
}

/// Nearest integer, ties away from zero (saturating cast for huge values). The
/// fraction `v - trunc(v)` is exact, so values just below a half do not round up.
fn round_away(v: f64) -> i64 {
    let t = v as i64;
    let f = v - t as f64;
    t.saturating_add((f >= 0.5) as i64 - (f <= -0.5) as i64)
}
