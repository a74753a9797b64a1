//! Row kernels for three-tap-wide windows (W1's 3x3, column stride and dilation 1), in
//! the two-multiply form with split weights ([`SplitW8`](super::dot::SplitW8)).
//!
//! - One call updates a whole row segment of sums with up to three kernel rows' taps
//!   (nine products per pixel), so the per-call and per-tap bookkeeping of the general
//!   row loop ([`super::input::axpy_w8`], one call per tap) is paid once per nine taps.
//! - Interior pixels (all three columns inside the source row) run without bounds
//!   checks; the few border pixels take a short checked loop in the same call, so no
//!   padding copy is needed and no zero product is computed.
//! - The sums are the same exact integers as the per-tap loop's (only the order of
//!   wrapping `i32` additions changes, and the caller's flush bound rules out overflow).

use crate::fixed::Q16;

/// A weight split for the two-multiply form: `(w >> 8, w & 0xFF)`.
pub(super) type Split = (i32, i32);

/// `w` split as [`SplitW8`](super::dot::SplitW8) does.
#[inline(always)]
pub(super) fn split(w: Q16) -> Split {
    (w.0 >> 8, w.0 & 0xFF)
}

/// `acc[i] += sum over r, k of rows[r][i + k - lead] * w[r][k]` for `i` in
/// `0..acc.len()` and `k` in `0..3`, with the terms whose source index falls outside
/// the row left out (each sum kept as the pair `(sum x * wh, sum x * wl)`).
#[inline(never)]
pub(super) fn corr3_w8<const R: usize>(
    acc: &mut [(i32, i32)],
    rows: [&[Q16]; R],
    lead: usize,
    w: &[[Split; 3]; R],
) {
    let n = acc.len();
    let len = rows.iter().map(|r| r.len()).min().unwrap_or(0);
    // Interior pixels: lead <= i and i + 2 - lead < len.
    let i0 = lead.min(n);
    let i1 = (len + lead).saturating_sub(2).min(n).max(i0);
    for i in (0..i0).chain(i1..n) {
        edge(&mut acc[i], &rows, i, lead, w);
    }
    if i0 == i1 {
        return;
    }
    interior(&mut acc[i0..i1], rows.map(|r| &r[i0 - lead..]), w);
}

/// The interior pixels of [`corr3_w8`]: `acc[i] += sum rows[r][i + k] * w[r][k]`, all
/// in range (`rows[r]` holds at least `acc.len() + 2` values).
#[inline(always)]
fn interior<const R: usize>(acc: &mut [(i32, i32)], rows: [&[Q16]; R], w: &[[Split; 3]; R]) {
    match (&rows[..], &w[..]) {
        ([r0, r1, r2], [w0, w1, w2]) => {
            let wins = r0.windows(3).zip(r1.windows(3)).zip(r2.windows(3));
            for (a, ((x0, x1), x2)) in acc.iter_mut().zip(wins) {
                *a = mac3(mac3(mac3(*a, x0, w0), x1, w1), x2, w2);
            }
        }
        ([r0, r1], [w0, w1]) => {
            let wins = r0.windows(3).zip(r1.windows(3));
            for (a, (x0, x1)) in acc.iter_mut().zip(wins) {
                *a = mac3(mac3(*a, x0, w0), x1, w1);
            }
        }
        ([r0], [w0]) => {
            for (a, x0) in acc.iter_mut().zip(r0.windows(3)) {
                *a = mac3(*a, x0, w0);
            }
        }
        _ => {}
    }
}

/// `(hi, lo) + sum x[k] * w[k]` over three taps.
#[inline(always)]
fn mac3((mut hi, mut lo): (i32, i32), x: &[Q16], w: &[Split; 3]) -> (i32, i32) {
    for (x, &(wh, wl)) in x.iter().zip(w) {
        hi = hi.wrapping_add(x.0.wrapping_mul(wh));
        lo = lo.wrapping_add(x.0.wrapping_mul(wl));
    }
    (hi, lo)
}

/// One border pixel of [`corr3_w8`]: only the taps whose source index is in the row
/// (a contiguous range of `k`).
#[inline(always)]
fn edge<const R: usize>(a: &mut (i32, i32), rows: &[&[Q16]; R], i: usize, lead: usize, w: &[[Split; 3]; R]) {
    let len = rows.iter().map(|r| r.len()).min().unwrap_or(0);
    let ka = lead.saturating_sub(i).min(3);
    let kb = (len + lead).saturating_sub(i).min(3).max(ka);
    let from = (i + ka).saturating_sub(lead);
    for (r, wr) in rows.iter().zip(w) {
        for (x, &(wh, wl)) in r[from..].iter().zip(&wr[ka..kb]) {
            a.0 = a.0.wrapping_add(x.0.wrapping_mul(wh));
            a.1 = a.1.wrapping_add(x.0.wrapping_mul(wl));
        }
    }
}

/// The forward pass's table: 12 kernel rows (288 bytes of stack; 4 channels of a 3x3
/// kernel, re-split per row segment when there are more). Small because the M0
/// fine-tuning program runs the forward pass in 16 KiB of RAM with little stack to spare.
pub(super) type ForwardTable = Table<FORWARD_ROWS>;

/// Kernel rows of [`ForwardTable`] (the smaller table: taller windows take other loops).
pub(super) const FORWARD_ROWS: usize = 12;

/// The input gradient's table: 96 kernel rows (2,304 bytes of stack), all 32 output
/// channels of W1's third convolution.
pub(super) type InputTable = Table<96>;

/// Split weights for [`corr3_planes`], `N` kernel rows of three, cached: a run of
/// channels of one weight set (`key`) is split once and reused by every row segment.
pub(super) struct Table<const N: usize> {
    rows: [[Split; 3]; N],
    key: usize,
    lo: usize,
    hi: usize,
}

impl<const N: usize> Table<N> {
    pub(super) fn new() -> Self {
        Table {
            rows: [[(0, 0); 3]; N],
            key: usize::MAX,
            lo: 0,
            hi: 0,
        }
    }

    /// Channels (of `kh` kernel rows) the table holds.
    pub(super) fn channels(kh: usize) -> usize {
        (N / kh.max(1)).max(1)
    }

    /// The rows of channels `c0..c0 + chans` (at most [`Self::channels`]) of weight set
    /// `key`; when they are not loaded, channels from `c0` on (up to `total`) are split
    /// from `weight(c, ky, k)`, `k` in source order.
    pub(super) fn get(
        &mut self,
        (key, c0, chans, total): (usize, usize, usize, usize),
        kh: usize,
        weight: impl Fn(usize, usize, usize) -> Q16,
    ) -> &[[Split; 3]] {
        if self.key != key || c0 < self.lo || c0 + chans > self.hi {
            // As many channels as fit (counted, not divided: no division on the M0).
            let (mut hi, mut rows) = (c0, self.rows.iter_mut());
            while hi < total && rows.len() >= kh {
                for (ky, t) in (0..kh).zip(&mut rows) {
                    *t = [
                        split(weight(hi, ky, 0)),
                        split(weight(hi, ky, 1)),
                        split(weight(hi, ky, 2)),
                    ];
                }
                hi += 1;
            }
            (self.key, self.lo, self.hi) = (key, c0, hi);
        }
        &self.rows[(c0 - self.lo) * kh..][..chans * kh]
    }
}

/// Where a [`corr3_planes`] call reads: the planes (one per table channel, `plane`
/// values apart, rows `row_len` long), and the source index of sum `i`, tap `k` of
/// kernel row `ky`: `row(ky) + start + i + k - lead` (out-of-row terms left out).
pub(super) struct Planes<'a, F: Fn(usize) -> usize> {
    pub src: &'a [Q16],
    pub plane: usize,
    pub row_len: usize,
    pub start: usize,
    pub lead: usize,
    pub row: F,
}

/// Adds to a row segment of sums the taps of kernel rows `ky0..ky1` of every channel
/// in `table` (`kh` rows of three split weights per channel, in source order): three
/// kernel rows per [`corr3_w8`] pass, then one by one.
#[inline(never)]
pub(super) fn corr3_planes<F: Fn(usize) -> usize>(
    acc: &mut [(i32, i32)],
    p: &Planes<F>,
    (ky0, ky1): (usize, usize),
    kh: usize,
    table: &[[Split; 3]],
) {
    let kh = kh.max(1);
    // Channel by channel (split_at, not `chunks_exact`: no division on the M0).
    let (mut rest, mut at) = (table, 0);
    while rest.len() >= kh {
        let (wt, tail) = rest.split_at(kh);
        rest = tail;
        let plane = &p.src[at..][..p.plane];
        at += p.plane;
        let row = |ky: usize| &plane[(p.row)(ky)..][p.start..p.row_len];
        let mut ky = ky0;
        while ky + 3 <= ky1 {
            if let Ok(w) = <&[[Split; 3]; 3]>::try_from(&wt[ky..ky + 3]) {
                corr3_w8(acc, [row(ky), row(ky + 1), row(ky + 2)], p.lead, w);
            }
            ky += 3;
        }
        if ky + 2 == ky1 {
            corr3_w8(acc, [row(ky), row(ky + 1)], p.lead, &[wt[ky], wt[ky + 1]]);
        } else if ky < ky1 {
            corr3_w8(acc, [row(ky)], p.lead, &[wt[ky]]);
        }
    }
}

/// Sums per call that [`corr3_planes_padded`] takes (its copies: 3 rows of
/// `PADDED + 2` values, 408 bytes of stack).
pub(super) const PADDED: usize = 32;

/// [`corr3_planes`] for short row segments (at most [`PADDED`] sums): each source row
/// is copied once per pass into a zero-padded stack row, so that every sum, border
/// pixels included, runs the interior loop (a zero product adds nothing: the sums are
/// unchanged).
#[inline(never)]
pub(super) fn corr3_planes_padded<F: Fn(usize) -> usize>(
    acc: &mut [(i32, i32)],
    p: &Planes<F>,
    (ky0, ky1): (usize, usize),
    kh: usize,
    table: &[[Split; 3]],
) {
    let n = acc.len();
    if n > PADDED {
        return corr3_planes(acc, p, (ky0, ky1), kh, table);
    }
    let kh = kh.max(1);
    let mut buf = [[Q16(0); PADDED + 2]; 3];
    // Padded index j holds source index j - lead: the copied range is the same for
    // every row, so the zeros around it stay zero.
    let len = p
        .row_len
        .saturating_sub(p.start)
        .min((n + 2).saturating_sub(p.lead));
    let at = p.lead.min(n + 2);
    let (mut rest, mut base) = (table, 0);
    while rest.len() >= kh {
        let (wt, tail) = rest.split_at(kh);
        rest = tail;
        let plane = &p.src[base..][..p.plane];
        base += p.plane;
        let mut ky = ky0;
        while ky < ky1 {
            let r = (ky1 - ky).min(3);
            for (b, k) in buf.iter_mut().zip(ky..ky + r) {
                let src = &plane[(p.row)(k) + p.start..][..len];
                b[at..at + len].copy_from_slice(src);
            }
            let [b0, b1, b2] = &buf;
            let (b0, b1, b2) = (&b0[..n + 2], &b1[..n + 2], &b2[..n + 2]);
            match r {
                3 => {
                    if let Ok(w) = <&[[Split; 3]; 3]>::try_from(&wt[ky..ky + 3]) {
                        interior(acc, [b0, b1, b2], w);
                    }
                }
                2 => interior(acc, [b0, b1], &[wt[ky], wt[ky + 1]]),
                _ => interior(acc, [b0], &[wt[ky]]),
            }
            ky += r;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padded_rows_give_the_checked_loops_sums() {
        // Random planes, weights, segment lengths, leads (0..=3) and row offsets: the
        // padded pass and the checked border loop must give the same i32 pairs.
        let mut s = 0x2545_F491_4F6C_DD1Du64;
        let mut next = |n: u64| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s % n
        };
        for _ in 0..400 {
            let (kh, chans) = (1 + next(4) as usize, 1 + next(3) as usize);
            let (row_len, rows) = (1 + next(20) as usize, kh + next(3) as usize);
            let (start, lead) = (next(row_len as u64 + 1) as usize, next(4) as usize);
            // As the callers have it: no sum's window starts past the row's end.
            let n = 1 + next(PADDED.min(row_len - start + lead + 1) as u64) as usize;
            let plane = rows * row_len;
            let src: Vec<Q16> = (0..chans * plane)
                .map(|_| Q16(next(1 << 20) as i32 - (1 << 19)))
                .collect();
            let table: Vec<[Split; 3]> = (0..chans * kh)
                .map(|_| [0; 3].map(|_: i32| split(Q16(next(1 << 17) as i32 - (1 << 16)))))
                .collect();
            let top = next((rows - kh + 1) as u64) as usize;
            let p = Planes {
                src: &src,
                plane,
                row_len,
                start,
                lead,
                row: |ky: usize| (top + ky) * row_len,
            };
            let ky0 = next(kh as u64) as usize;
            let kys = (ky0, ky0 + next((kh - ky0) as u64 + 1) as usize);
            let (mut want, mut got) = (vec![(0, 0); n], vec![(0, 0); n]);
            corr3_planes(&mut want, &p, kys, kh, &table);
            corr3_planes_padded(&mut got, &p, kys, kh, &table);
            assert_eq!(
                got, want,
                "kh {kh} row_len {row_len} n {n} start {start} lead {lead}"
            );
        }
    }
}
