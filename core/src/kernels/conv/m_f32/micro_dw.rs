//! The inner loop of the depthwise 3x3 tiles (forward and backward-input of a
//! one-channel-per-group convolution): 2 output rows x 4 outputs, the 9 weights, the
//! 8 sums and a 6-word input window in FPU registers. Inline assembly on the M4F, the
//! same loop in Rust elsewhere (see `micro.rs`, whose notes apply here).
#![allow(unsafe_code)]

/// For `t < tiles`, the 2 x 4 tile whose rows are `out[4t..][..4]` and
/// `out[ostride + 4t..][..4]`: `out[r][c] = s[r][c] + sum over ky, kx (in that order)
/// of w[ky * 3 + kx] * x[(r + ky) * pitch + 4t + c + kx]`, where the start `s` is
/// `start` (`[r][c]`, the same for every tile) when given, else the tile itself.
#[inline(never)]
pub(crate) fn dw3x3_rows2(
    out: &mut [f32],
    ostride: usize,
    start: Option<&[f32; 8]>,
    w: &[f32; 9],
    x: &[f32],
    pitch: usize,
    tiles: usize,
) {
    if tiles == 0 {
        return;
    }
    let out = &mut out[..ostride + 4 * tiles];
    let x = &x[..3 * pitch + 4 * tiles + 2];
    #[cfg(all(target_arch = "arm", target_abi = "eabihf"))]
    // SAFETY: tile `t` reads `x[r * pitch + 4t..][..6]` for `r < 4`, whose last word
    // is `x[3 * pitch + 4 * tiles + 1]`, and reads (without `start`) and writes
    // `out[4t..][..4]` and `out[ostride + 4t..][..4]`, the last word
    // `out[ostride + 4 * tiles - 1]`: all within the slices checked above
    // (`tiles >= 1`); it reads the 9 words of `w` and the 8 of `start`, and changes
    // only the registers declared as outputs and the flags.
    unsafe {
        // One copy of the loop (flash is scarce): a tile starts from `start` when `{s}`
        // is not null, else from its own rows.
        core::arch::asm!(
            "vldmia {w}, {{s0-s8}}",
            "2:",
            "cbz {s}, 3f",
            "vldmia {s}, {{s16-s23}}",
            "b 4f",
            "3:",
            "vldmia {o}, {{s16-s19}}",
            "add {t}, {o}, {os}",
            "vldmia {t}, {{s20-s23}}",
            "4:",
            "vldmia {x}, {{s9-s14}}",
            "vmla.f32 s16, s0, s9",
            "vmla.f32 s17, s0, s10",
            "vmla.f32 s18, s0, s11",
            "vmla.f32 s19, s0, s12",
            "vmla.f32 s16, s1, s10",
            "vmla.f32 s17, s1, s11",
            "vmla.f32 s18, s1, s12",
            "vmla.f32 s19, s1, s13",
            "vmla.f32 s16, s2, s11",
            "vmla.f32 s17, s2, s12",
            "vmla.f32 s18, s2, s13",
            "vmla.f32 s19, s2, s14",
            "add {t}, {x}, {p}",
            "vldmia {t}, {{s9-s14}}",
            "vmla.f32 s16, s3, s9",
            "vmla.f32 s17, s3, s10",
            "vmla.f32 s18, s3, s11",
            "vmla.f32 s19, s3, s12",
            "vmla.f32 s16, s4, s10",
            "vmla.f32 s17, s4, s11",
            "vmla.f32 s18, s4, s12",
            "vmla.f32 s19, s4, s13",
            "vmla.f32 s16, s5, s11",
            "vmla.f32 s17, s5, s12",
            "vmla.f32 s18, s5, s13",
            "vmla.f32 s19, s5, s14",
            "vmla.f32 s20, s0, s9",
            "vmla.f32 s21, s0, s10",
            "vmla.f32 s22, s0, s11",
            "vmla.f32 s23, s0, s12",
            "vmla.f32 s20, s1, s10",
            "vmla.f32 s21, s1, s11",
            "vmla.f32 s22, s1, s12",
            "vmla.f32 s23, s1, s13",
            "vmla.f32 s20, s2, s11",
            "vmla.f32 s21, s2, s12",
            "vmla.f32 s22, s2, s13",
            "vmla.f32 s23, s2, s14",
            "add {t}, {t}, {p}",
            "vldmia {t}, {{s9-s14}}",
            "vmla.f32 s16, s6, s9",
            "vmla.f32 s17, s6, s10",
            "vmla.f32 s18, s6, s11",
            "vmla.f32 s19, s6, s12",
            "vmla.f32 s16, s7, s10",
            "vmla.f32 s17, s7, s11",
            "vmla.f32 s18, s7, s12",
            "vmla.f32 s19, s7, s13",
            "vmla.f32 s16, s8, s11",
            "vmla.f32 s17, s8, s12",
            "vmla.f32 s18, s8, s13",
            "vmla.f32 s19, s8, s14",
            "vmla.f32 s20, s3, s9",
            "vmla.f32 s21, s3, s10",
            "vmla.f32 s22, s3, s11",
            "vmla.f32 s23, s3, s12",
            "vmla.f32 s20, s4, s10",
            "vmla.f32 s21, s4, s11",
            "vmla.f32 s22, s4, s12",
            "vmla.f32 s23, s4, s13",
            "vmla.f32 s20, s5, s11",
            "vmla.f32 s21, s5, s12",
            "vmla.f32 s22, s5, s13",
            "vmla.f32 s23, s5, s14",
            "add {t}, {t}, {p}",
            "vldmia {t}, {{s9-s14}}",
            "vmla.f32 s20, s6, s9",
            "vmla.f32 s21, s6, s10",
            "vmla.f32 s22, s6, s11",
            "vmla.f32 s23, s6, s12",
            "vmla.f32 s20, s7, s10",
            "vmla.f32 s21, s7, s11",
            "vmla.f32 s22, s7, s12",
            "vmla.f32 s23, s7, s13",
            "vmla.f32 s20, s8, s11",
            "vmla.f32 s21, s8, s12",
            "vmla.f32 s22, s8, s13",
            "vmla.f32 s23, s8, s14",
            "vstmia {o}, {{s16-s19}}",
            "add {t}, {o}, {os}",
            "vstmia {t}, {{s20-s23}}",
            "add {o}, {o}, #16",
            "add {x}, {x}, #16",
            "subs {k}, {k}, #1",
            "bne 2b",
            o = inout(reg) out.as_mut_ptr() => _,
            t = out(reg) _,
            s = in(reg) start.map_or(core::ptr::null(), |s| s.as_ptr()),
            os = in(reg) ostride * 4,
            w = in(reg) w.as_ptr(),
            x = inout(reg) x.as_ptr() => _,
            p = in(reg) pitch * 4,
            k = inout(reg) tiles => _,
            out("s0") _, out("s1") _, out("s2") _, out("s3") _,
            out("s4") _, out("s5") _, out("s6") _, out("s7") _,
            out("s8") _, out("s9") _, out("s10") _, out("s11") _,
            out("s12") _, out("s13") _, out("s14") _,
            out("s16") _, out("s17") _, out("s18") _, out("s19") _,
            out("s20") _, out("s21") _, out("s22") _, out("s23") _,
            options(nostack),
        );
    }
    #[cfg(not(all(target_arch = "arm", target_abi = "eabihf")))]
    for t in 0..tiles {
        for r in 0..2 {
            for c in 0..4 {
                let o = &mut out[r * ostride + 4 * t + c];
                let mut s = start.map_or(*o, |s| s[r * 4 + c]);
                for ky in 0..3 {
                    for kx in 0..3 {
                        s += w[ky * 3 + kx] * x[(r + ky) * pitch + 4 * t + c + kx];
                    }
                }
                *o = s;
            }
        }
    }
}
