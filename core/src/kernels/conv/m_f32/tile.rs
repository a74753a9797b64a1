//! Register tiles of the forward correlation: `OB` output channels x `OX` neighbouring
//! outputs of one row, all in FPU registers.
//!
//! - A tap group is `KW` taps of one kernel row that read neighbouring words (`KW = 3`
//!   for a 3-wide kernel at column stride and dilation 1, else `KW = 1`, one tap). Per
//!   group the tile loads a window of `OX + KW - 1` inputs once and `KW * OB` packed
//!   weights, and does `OB * OX * KW` multiply-adds (`VMLA.F32` on the M4F).
//! - `opt-level = "s"` (the firmware's) never unrolls loops, and a loop over an
//!   accumulator array keeps it in memory; so every loop over tile lanes is unrolled by
//!   the [`unroll`] macro, which leaves only constant indices and lets LLVM keep the
//!   accumulators in registers (16 + a 6-word window + weights of the 32 on the M4F).
//! - The order of the additions is the generic kernel's (bias, then input channel by
//!   input channel, tap by tap), so forward results equal it.

/// Runs `$body` once per listed constant, with `$i` bound to it as a `const`.
macro_rules! unroll {
    ([$($n:literal),*], $i:ident => $body:block) => {
        { $( { #[allow(non_upper_case_globals)] const $i: usize = $n; $body } )* }
    };
}
pub(crate) use unroll;

/// What a tile reads: the band of input planes, the group offsets into it (every
/// input channel of the pass, group after group) and the packed weights (`KW * OB`
/// per group, `[kx][o]`).
pub(crate) struct Src<'a> {
    pub buf: &'a [f32],
    pub offs: &'a [usize],
    pub wpack: &'a [f32],
}

/// Where a block of output rows goes: `OB` planes of `plane` words from `out[0]`,
/// rows `oy0..oy1` of width `ow`, input row `oy` at `(oy - oy0) * row_step` in the band.
pub(crate) struct Rows {
    pub plane: usize,
    pub ow: usize,
    pub oy0: usize,
    pub oy1: usize,
    pub row_step: usize,
}

/// Defines `fn $name(src, rows, out, bias)`: the tiled correlation of one block of
/// `OB` output channels over `rows`. With `bias`, the outputs are overwritten with
/// `bias + correlation`; without, the correlation is added to them.
macro_rules! corr_rows {
    ($name:ident, $ob:literal, $ox:literal, $kw:literal,
     os = [$($o:literal),*], ls = [$($l:literal),*], kxs = [$($kx:literal),*],
     win = [$($x:literal),*]) => {
        #[inline(never)]
        pub(crate) fn $name(src: &Src, rows: &Rows, out: &mut [f32], bias: Option<[f32; $ob]>) {
            const WIN: usize = $ox + $kw - 1;
            for oy in rows.oy0..rows.oy1 {
                let rb = (oy - rows.oy0) * rows.row_step;
                let mut ox = 0;
                while ox < rows.ow {
                    let cols = (rows.ow - ox).min($ox);
                    let at = oy * rows.ow + ox;
                    let mut a = [[0.0f32; $ox]; $ob];
                    match bias {
                        // Lane by lane: an array-repeat expression compiles to a
                        // loop, whose run-time index would keep `a` in memory.
                        Some(b) => unroll!([$($o),*], O => {
                            unroll!([$($l),*], L => { a[O][L] = b[O]; });
                        }),
                        None if cols == $ox => unroll!([$($o),*], O => {
                            let r = &out[O * rows.plane + at..][..$ox];
                            unroll!([$($l),*], L => { a[O][L] = r[L]; });
                        }),
                        // A partial tile: lane by lane with constant indices (a
                        // copy of a run-time length would keep `a` out of registers).
                        None => unroll!([$($o),*], O => {
                            let r = &out[O * rows.plane + at..][..cols];
                            unroll!([$($l),*], L => {
                                a[O][L] = if L < cols { r[L] } else { 0.0 };
                            });
                        }),
                    }
                    let base = rb + ox;
                    for (wg, &off) in src.wpack.chunks_exact($kw * $ob).zip(src.offs) {
                        let s = &src.buf[base + off..][..WIN];
                        let xw: [f32; WIN] = [$(s[$x]),*];
                        unroll!([$($kx),*], KX => {
                            unroll!([$($o),*], O => {
                                let w = wg[KX * $ob + O];
                                unroll!([$($l),*], L => { a[O][L] += w * xw[L + KX]; });
                            });
                        });
                    }
                    if cols == $ox {
                        unroll!([$($o),*], O => {
                            let r = &mut out[O * rows.plane + at..][..$ox];
                            unroll!([$($l),*], L => { r[L] = a[O][L]; });
                        });
                    } else {
                        unroll!([$($o),*], O => {
                            let r = &mut out[O * rows.plane + at..][..cols];
                            unroll!([$($l),*], L => {
                                if L < cols {
                                    r[L] = a[O][L];
                                }
                            });
                        });
                    }
                    ox += $ox;
                }
            }
        }
    };
}

corr_rows!(
    rows_4x4_k3,
    4,
    4,
    3,
    os = [0, 1, 2, 3],
    ls = [0, 1, 2, 3],
    kxs = [0, 1, 2],
    win = [0, 1, 2, 3, 4, 5]
);
corr_rows!(
    rows_4x4_k1,
    4,
    4,
    1,
    os = [0, 1, 2, 3],
    ls = [0, 1, 2, 3],
    kxs = [0],
    win = [0, 1, 2, 3]
);
corr_rows!(
    rows_1x8_k3,
    1,
    8,
    3,
    os = [0],
    ls = [0, 1, 2, 3, 4, 5, 6, 7],
    kxs = [0, 1, 2],
    win = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
);
corr_rows!(
    rows_1x8_k1,
    1,
    8,
    1,
    os = [0],
    ls = [0, 1, 2, 3, 4, 5, 6, 7],
    kxs = [0],
    win = [0, 1, 2, 3, 4, 5, 6, 7]
);

/// `a[l] += w[0] * x[l]`, then `+= w[1] * x[l + 1]`, then `+= w[2] * x[l + 2]`, for
/// the 7 lanes.
macro_rules! row_taps7 {
    ($a:ident, $w:expr, $x:expr) => {
        unroll!([0, 1, 2], KX => {
            let w = $w[KX];
            unroll!([0, 1, 2, 3, 4, 5, 6], L => { $a[L] += w * $x[L + KX]; });
        });
    };
}

/// Lanes of [`rows2_1x7_k3`].
pub(crate) const PAIR_COLS: usize = 7;

/// The one-channel tile of 7 outputs of two neighbouring rows, for 3x3 kernels whose
/// rows read neighbouring band rows (row stride and dilation 1, so `src.offs` holds 3
/// groups per input channel, `rows.row_step` apart): the window of band row `j`
/// serves kernel row `j` of output row `oy` and kernel row `j - 1` of row `oy + 1`,
/// so 4 windows feed 126 multiply-adds per input channel, where one row at a time
/// loads 6 for 63 (a one-channel correlation has no output channels to share a
/// window with). 7 lanes: 14 sums, a 9-word window and a weight fit the 32 registers,
/// and rows of 28, 14 and 7 (W1 at 28x28) are whole tiles; only rows of a multiple
/// of 7 outputs come here (no partial tiles: less code). It adds to `out` (a bias is
/// written first by the caller). An odd last row goes to [`rows_1x8_k3`]. Same order of additions as [`rows_1x8_k3`]
/// (per output: input channel by channel, kernel row by row, tap by tap).
#[inline(never)]
pub(crate) fn rows2_1x7_k3(src: &Src, rows: &Rows, out: &mut [f32]) {
    let step = rows.row_step;
    let mut oy = rows.oy0;
    while oy + 1 < rows.oy1 {
        let rb = (oy - rows.oy0) * step;
        let mut ox = 0;
        while ox < rows.ow {
            let at = oy * rows.ow + ox;
            let (mut a0, mut a1) = ([0.0f32; 7], [0.0f32; 7]);
            let (r0, r1) = (&out[at..][..7], &out[at + rows.ow..][..7]);
            unroll!([0, 1, 2, 3, 4, 5, 6], L => {
                (a0[L], a1[L]) = (r0[L], r1[L]);
            });
            let base = rb + ox;
            for (wc, offs) in src.wpack.chunks_exact(9).zip(src.offs.chunks_exact(3)) {
                let s = &src.buf[base + offs[0]..][..3 * step + 9];
                let win = |j: usize| -> [f32; 9] {
                    let s = &s[j * step..][..9];
                    [s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8]]
                };
                let x = win(0);
                row_taps7!(a0, wc[0..3], x);
                let x = win(1);
                row_taps7!(a1, wc[0..3], x);
                row_taps7!(a0, wc[3..6], x);
                let x = win(2);
                row_taps7!(a1, wc[3..6], x);
                row_taps7!(a0, wc[6..9], x);
                let x = win(3);
                row_taps7!(a1, wc[6..9], x);
            }
            let r0 = &mut out[at..][..7];
            unroll!([0, 1, 2, 3, 4, 5, 6], L => { r0[L] = a0[L]; });
            let r1 = &mut out[at + rows.ow..][..7];
            unroll!([0, 1, 2, 3, 4, 5, 6], L => { r1[L] = a1[L]; });
            ox += 7;
        }
        oy += 2;
    }
    if oy < rows.oy1 {
        let last = Rows { oy0: oy, ..*rows };
        // The last row's band offset: `(oy - oy0) * step` from the band start.
        let src = Src {
            buf: &src.buf[(oy - rows.oy0) * step..],
            ..*src
        };
        rows_1x8_k3(&src, &last, out, None);
    }
}
