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

/// Loads lanes `0..cols` of `r` into `a` (the rest zero), or all `bias` when given.
macro_rules! load_lanes {
    ($a:ident, $r:expr, $cols:expr, $bias:expr) => {
        match $bias {
            Some(b) => unroll!([0, 1, 2, 3, 4, 5, 6, 7], L => { $a[L] = b; }),
            None if $cols == 8 => {
                let r = &$r[..8];
                unroll!([0, 1, 2, 3, 4, 5, 6, 7], L => { $a[L] = r[L]; });
            }
            None => {
                let r = &$r[..$cols];
                unroll!([0, 1, 2, 3, 4, 5, 6, 7], L => {
                    $a[L] = if L < $cols { r[L] } else { 0.0 };
                });
            }
        }
    };
}

/// Stores lanes `0..cols` of `a` into `r`.
macro_rules! store_lanes {
    ($a:ident, $r:expr, $cols:expr) => {
        if $cols == 8 {
            let r = &mut $r[..8];
            unroll!([0, 1, 2, 3, 4, 5, 6, 7], L => { r[L] = $a[L]; });
        } else {
            let r = &mut $r[..$cols];
            unroll!([0, 1, 2, 3, 4, 5, 6, 7], L => {
                if L < $cols {
                    r[L] = $a[L];
                }
            });
        }
    };
}

/// `a[l] += w[0] * x[l] + w[1] * x[l + 1] + w[2] * x[l + 2]` (in that order) for the 8 lanes.
macro_rules! row_taps {
    ($a:ident, $w:expr, $x:expr) => {
        unroll!([0, 1, 2], KX => {
            let w = $w[KX];
            unroll!([0, 1, 2, 3, 4, 5, 6, 7], L => { $a[L] += w * $x[L + KX]; });
        });
    };
}

/// The one-channel tile of 8 outputs of two neighbouring rows, for 3-wide kernel rows
/// `kh` high whose rows read neighbouring band rows (row stride and dilation 1, so
/// `src.offs` holds `kh` groups per input channel, `rows.row_step` apart): the window
/// of band row `j` serves kernel row `j` of output row `oy` and kernel row `j - 1` of
/// row `oy + 1`, so each input window is loaded once for both rows (a one-channel
/// correlation has no output channels to share it with). An odd last row goes to
/// [`rows_1x8_k3`]. Same order of additions as [`rows_1x8_k3`] (per row: input
/// channel by channel, kernel row by row, tap by tap).
#[inline(never)]
pub(crate) fn rows2_1x8_k3(src: &Src, rows: &Rows, kh: usize, out: &mut [f32], bias: Option<f32>) {
    let step = rows.row_step;
    let mut oy = rows.oy0;
    while oy + 1 < rows.oy1 {
        let rb = (oy - rows.oy0) * step;
        let mut ox = 0;
        while ox < rows.ow {
            let cols = (rows.ow - ox).min(8);
            let at = oy * rows.ow + ox;
            let (mut a0, mut a1) = ([0.0f32; 8], [0.0f32; 8]);
            load_lanes!(a0, out[at..], cols, bias);
            load_lanes!(a1, out[at + rows.ow..], cols, bias);
            let base = rb + ox;
            for (wc, offs) in src.wpack.chunks_exact(3 * kh).zip(src.offs.chunks_exact(kh)) {
                let first = base + offs[0];
                let win = |j: usize| -> [f32; 10] {
                    let s = &src.buf[first + j * step..][..10];
                    [s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9]]
                };
                let x = win(0);
                row_taps!(a0, wc[..3], x);
                for j in 1..kh {
                    let x = win(j);
                    row_taps!(a1, wc[3 * (j - 1)..][..3], x);
                    row_taps!(a0, wc[3 * j..][..3], x);
                }
                let x = win(kh);
                row_taps!(a1, wc[3 * (kh - 1)..][..3], x);
            }
            store_lanes!(a0, out[at..], cols);
            store_lanes!(a1, out[at + rows.ow..], cols);
            ox += 8;
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
        rows_1x8_k3(&src, &last, out, bias.map(|b| [b]));
    }
}
