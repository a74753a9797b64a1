//! The innermost loops of the 1x1 and depthwise tiles: one run over the reduction axis
//! with every sum in an FPU register.
//!
//! - On the M4F (`target_arch = "arm"`, hard float) they are inline assembly: LLVM
//!   keeps such tiles in registers but loads every word with its own `VLDR` and walks
//!   pointers with extra adds; here neighbouring words come in one `VLDM` (with
//!   write-back where a pointer walks), so a loop step is its multiply-adds plus a few
//!   instructions. `VMLA.F32` rounds the product and the sum, like `a += w * x` in Rust.
//!   (A `VLDM` of `n` words is one instruction but takes `1 + n` cycles on a real M4.)
//! - Elsewhere (the host tests) the same loops in Rust, the same additions in the same
//!   order, so the host tests check the arithmetic the device runs; the assembly itself
//!   is checked against the generic kernels on the device (`firmware` `kernel_bench`).
//! - The one module of `m_f32` with `unsafe` (the `asm!` blocks): every block reads and
//!   writes only the slices it was given, whose lengths are checked before it runs.
#![allow(unsafe_code)]

/// `out[r][c] = s[r][c] + sum over j < k of a[j * 4 + r] * b[j * stride + c]`, `j` in
/// order, for the 4 x 4 tile whose rows are `out[r * ostride..][..4]`; the start
/// `s` is `start` (`[r][c]`) when given, else the tile itself. A tile of a matrix
/// product whose left factor is packed `[j][r]` and whose right factor's rows are
/// `stride` words apart.
#[inline(never)]
pub(crate) fn gemm4x4(
    out: &mut [f32],
    ostride: usize,
    start: Option<&[f32; 16]>,
    a: &[f32],
    b: &[f32],
    stride: usize,
    k: usize,
) {
    let out = &mut out[..3 * ostride + 4];
    if k == 0 {
        if let Some(s) = start {
            for (r, row) in s.chunks_exact(4).enumerate() {
                out[r * ostride..][..4].copy_from_slice(row);
            }
        }
        return;
    }
    let a = &a[..4 * k];
    let b = &b[..(k - 1) * stride + 4];
    #[cfg(all(target_arch = "arm", target_abi = "eabihf"))]
    // SAFETY: the loop reads `a[..4k]` and, for `j < k`, `b[j * stride..][..4]`, all
    // within the slices checked above (`k >= 1`); it reads (without `start`) and
    // writes `out[r * ostride..][..4]` for `r < 4`, within `out` (checked above), and
    // reads the 16 words of `start`; it changes only the registers declared as outputs
    // and the flags.
    unsafe {
        macro_rules! run {
            ($($init:literal),*) => {
                core::arch::asm!(
                    $($init,)*
                    "2:",
                    "vldmia {a}!, {{s0-s3}}",
                    "vldmia {b}, {{s4-s7}}",
                    "add {b}, {b}, {st}",
                    "vmla.f32 s16, s0, s4",
                    "vmla.f32 s17, s0, s5",
                    "vmla.f32 s18, s0, s6",
                    "vmla.f32 s19, s0, s7",
                    "vmla.f32 s20, s1, s4",
                    "vmla.f32 s21, s1, s5",
                    "vmla.f32 s22, s1, s6",
                    "vmla.f32 s23, s1, s7",
                    "vmla.f32 s24, s2, s4",
                    "vmla.f32 s25, s2, s5",
                    "vmla.f32 s26, s2, s6",
                    "vmla.f32 s27, s2, s7",
                    "vmla.f32 s28, s3, s4",
                    "vmla.f32 s29, s3, s5",
                    "vmla.f32 s30, s3, s6",
                    "vmla.f32 s31, s3, s7",
                    "subs {k}, {k}, #1",
                    "bne 2b",
                    "vstmia {o}, {{s16-s19}}",
                    "add {o}, {o}, {os}",
                    "vstmia {o}, {{s20-s23}}",
                    "add {o}, {o}, {os}",
                    "vstmia {o}, {{s24-s27}}",
                    "add {o}, {o}, {os}",
                    "vstmia {o}, {{s28-s31}}",
                    o = inout(reg) out.as_mut_ptr() => _,
                    t = inout(reg) start.map_or(out.as_ptr(), |s| s.as_ptr()) => _,
                    os = in(reg) ostride * 4,
                    a = inout(reg) a.as_ptr() => _,
                    b = inout(reg) b.as_ptr() => _,
                    st = in(reg) stride * 4,
                    k = inout(reg) k => _,
                    out("s0") _, out("s1") _, out("s2") _, out("s3") _,
                    out("s4") _, out("s5") _, out("s6") _, out("s7") _,
                    out("s16") _, out("s17") _, out("s18") _, out("s19") _,
                    out("s20") _, out("s21") _, out("s22") _, out("s23") _,
                    out("s24") _, out("s25") _, out("s26") _, out("s27") _,
                    out("s28") _, out("s29") _, out("s30") _, out("s31") _,
                    options(nostack),
                )
            };
        }
        if start.is_some() {
            run!("vldmia {t}, {{s16-s31}}");
        } else {
            run!(
                "vldmia {t}, {{s16-s19}}",
                "add {t}, {t}, {os}",
                "vldmia {t}, {{s20-s23}}",
                "add {t}, {t}, {os}",
                "vldmia {t}, {{s24-s27}}",
                "add {t}, {t}, {os}",
                "vldmia {t}, {{s28-s31}}"
            );
        }
    }
    #[cfg(not(all(target_arch = "arm", target_abi = "eabihf")))]
    {
        let mut acc = [0.0f32; 16];
        for (r, cell) in acc.chunks_exact_mut(4).enumerate() {
            cell.copy_from_slice(start.map_or(&out[r * ostride..][..4], |s| &s[4 * r..][..4]));
        }
        for (j, aj) in a.chunks_exact(4).enumerate() {
            let bj = &b[j * stride..][..4];
            for (r, &ar) in aj.iter().enumerate() {
                for (c, &bc) in bj.iter().enumerate() {
                    acc[r * 4 + c] += ar * bc;
                }
            }
        }
        for (r, cell) in acc.chunks_exact(4).enumerate() {
            out[r * ostride..][..4].copy_from_slice(cell);
        }
    }
}

/// `acc[o * 2 + i] += sum over p < 4 * steps of g[o][p] * x[i][p]`, `p` in order: the
/// dot products of 4 rows with 2 rows (a 1x1 convolution's weight gradient: output
/// gradient planes against input planes), 4 positions per step.
#[inline(never)]
pub(crate) fn dots4x2(acc: &mut [f32; 8], g: [&[f32]; 4], x: [&[f32]; 2], steps: usize) {
    if steps == 0 {
        return;
    }
    let n = 4 * steps;
    let g = [&g[0][..n], &g[1][..n], &g[2][..n], &g[3][..n]];
    let x = [&x[0][..n], &x[1][..n]];
    #[cfg(all(target_arch = "arm", target_abi = "eabihf"))]
    // SAFETY: the loop reads `4 * steps` words from each of the six rows (checked
    // above, `steps >= 1`), and reads and writes the 8 words of `acc`; it changes only
    // the registers declared as outputs and the flags.
    unsafe {
        core::arch::asm!(
            "vldmia {acc}, {{s24-s31}}",
            "2:",
            "vldmia {g0}!, {{s0-s3}}",
            "vldmia {g1}!, {{s4-s7}}",
            "vldmia {g2}!, {{s8-s11}}",
            "vldmia {g3}!, {{s12-s15}}",
            "vldmia {x0}!, {{s16-s19}}",
            "vldmia {x1}!, {{s20-s23}}",
            // Position by position, so every sum adds in order of p.
            "vmla.f32 s24, s0, s16",
            "vmla.f32 s25, s0, s20",
            "vmla.f32 s26, s4, s16",
            "vmla.f32 s27, s4, s20",
            "vmla.f32 s28, s8, s16",
            "vmla.f32 s29, s8, s20",
            "vmla.f32 s30, s12, s16",
            "vmla.f32 s31, s12, s20",
            "vmla.f32 s24, s1, s17",
            "vmla.f32 s25, s1, s21",
            "vmla.f32 s26, s5, s17",
            "vmla.f32 s27, s5, s21",
            "vmla.f32 s28, s9, s17",
            "vmla.f32 s29, s9, s21",
            "vmla.f32 s30, s13, s17",
            "vmla.f32 s31, s13, s21",
            "vmla.f32 s24, s2, s18",
            "vmla.f32 s25, s2, s22",
            "vmla.f32 s26, s6, s18",
            "vmla.f32 s27, s6, s22",
            "vmla.f32 s28, s10, s18",
            "vmla.f32 s29, s10, s22",
            "vmla.f32 s30, s14, s18",
            "vmla.f32 s31, s14, s22",
            "vmla.f32 s24, s3, s19",
            "vmla.f32 s25, s3, s23",
            "vmla.f32 s26, s7, s19",
            "vmla.f32 s27, s7, s23",
            "vmla.f32 s28, s11, s19",
            "vmla.f32 s29, s11, s23",
            "vmla.f32 s30, s15, s19",
            "vmla.f32 s31, s15, s23",
            "subs {k}, {k}, #1",
            "bne 2b",
            "vstmia {acc}, {{s24-s31}}",
            acc = in(reg) acc.as_mut_ptr(),
            g0 = inout(reg) g[0].as_ptr() => _,
            g1 = inout(reg) g[1].as_ptr() => _,
            g2 = inout(reg) g[2].as_ptr() => _,
            g3 = inout(reg) g[3].as_ptr() => _,
            x0 = inout(reg) x[0].as_ptr() => _,
            x1 = inout(reg) x[1].as_ptr() => _,
            k = inout(reg) steps => _,
            out("s0") _, out("s1") _, out("s2") _, out("s3") _,
            out("s4") _, out("s5") _, out("s6") _, out("s7") _,
            out("s8") _, out("s9") _, out("s10") _, out("s11") _,
            out("s12") _, out("s13") _, out("s14") _, out("s15") _,
            out("s16") _, out("s17") _, out("s18") _, out("s19") _,
            out("s20") _, out("s21") _, out("s22") _, out("s23") _,
            out("s24") _, out("s25") _, out("s26") _, out("s27") _,
            out("s28") _, out("s29") _, out("s30") _, out("s31") _,
            options(nostack),
        );
    }
    #[cfg(not(all(target_arch = "arm", target_abi = "eabihf")))]
    for p in 0..n {
        for (o, go) in g.iter().enumerate() {
            for (i, xi) in x.iter().enumerate() {
                acc[o * 2 + i] += go[p] * xi[p];
            }
        }
    }
}

/// `acc[ky * 3 + kx] += sum over p < 4 * steps of g[p] * x[ky * pitch + p + kx]`, `p`
/// in order: the 9 weight-gradient sums of a 3x3 kernel with one output channel, over
/// a run of positions of a band whose rows are `pitch` words apart.
#[inline(never)]
pub(crate) fn dots1_k3x3(acc: &mut [f32; 9], g: &[f32], x: &[f32], pitch: usize, steps: usize) {
    if steps == 0 {
        return;
    }
    let n = 4 * steps;
    let g = &g[..n];
    let x = &x[..2 * pitch + n + 2];
    #[cfg(all(target_arch = "arm", target_abi = "eabihf"))]
    // SAFETY: step `s` reads `g[4s..][..4]` and `x[ky * pitch + 4s..][..6]` for
    // `ky < 3`, `s < steps`: the last word read is `x[2 * pitch + 4 * steps + 1]`,
    // within the slices checked above (`steps >= 1`); it reads and writes the 9 words
    // of `acc` and changes only the registers declared as outputs and the flags.
    unsafe {
        core::arch::asm!(
            "vldmia {acc}, {{s0-s8}}",
            "2:",
            "vldmia {g}!, {{s9-s12}}",
            "vldmia {x0}, {{s13-s18}}",
            "add {x0}, {x0}, #16",
            "vmla.f32 s0, s9, s13",
            "vmla.f32 s1, s9, s14",
            "vmla.f32 s2, s9, s15",
            "vmla.f32 s0, s10, s14",
            "vmla.f32 s1, s10, s15",
            "vmla.f32 s2, s10, s16",
            "vmla.f32 s0, s11, s15",
            "vmla.f32 s1, s11, s16",
            "vmla.f32 s2, s11, s17",
            "vmla.f32 s0, s12, s16",
            "vmla.f32 s1, s12, s17",
            "vmla.f32 s2, s12, s18",
            "vldmia {x1}, {{s13-s18}}",
            "add {x1}, {x1}, #16",
            "vmla.f32 s3, s9, s13",
            "vmla.f32 s4, s9, s14",
            "vmla.f32 s5, s9, s15",
            "vmla.f32 s3, s10, s14",
            "vmla.f32 s4, s10, s15",
            "vmla.f32 s5, s10, s16",
            "vmla.f32 s3, s11, s15",
            "vmla.f32 s4, s11, s16",
            "vmla.f32 s5, s11, s17",
            "vmla.f32 s3, s12, s16",
            "vmla.f32 s4, s12, s17",
            "vmla.f32 s5, s12, s18",
            "vldmia {x2}, {{s13-s18}}",
            "add {x2}, {x2}, #16",
            "vmla.f32 s6, s9, s13",
            "vmla.f32 s7, s9, s14",
            "vmla.f32 s8, s9, s15",
            "vmla.f32 s6, s10, s14",
            "vmla.f32 s7, s10, s15",
            "vmla.f32 s8, s10, s16",
            "vmla.f32 s6, s11, s15",
            "vmla.f32 s7, s11, s16",
            "vmla.f32 s8, s11, s17",
            "vmla.f32 s6, s12, s16",
            "vmla.f32 s7, s12, s17",
            "vmla.f32 s8, s12, s18",
            "subs {k}, {k}, #1",
            "bne 2b",
            "vstmia {acc}, {{s0-s8}}",
            acc = in(reg) acc.as_mut_ptr(),
            g = inout(reg) g.as_ptr() => _,
            x0 = inout(reg) x.as_ptr() => _,
            x1 = inout(reg) x[pitch..].as_ptr() => _,
            x2 = inout(reg) x[2 * pitch..].as_ptr() => _,
            k = inout(reg) steps => _,
            out("s0") _, out("s1") _, out("s2") _, out("s3") _,
            out("s4") _, out("s5") _, out("s6") _, out("s7") _,
            out("s8") _, out("s9") _, out("s10") _, out("s11") _,
            out("s12") _, out("s13") _, out("s14") _, out("s15") _,
            out("s16") _, out("s17") _, out("s18") _,
            options(nostack),
        );
    }
    #[cfg(not(all(target_arch = "arm", target_abi = "eabihf")))]
    for (p, &gp) in g.iter().enumerate() {
        for ky in 0..3 {
            for kx in 0..3 {
                acc[ky * 3 + kx] += gp * x[ky * pitch + p + kx];
            }
        }
    }
}

/// `dst.copy_from_slice(src)` for the shorter length: 8 words per `VLDM`/`VSTM` pair,
/// then 4, then one by one (the rows copied into the bands: about half the
/// instructions of word pairs).
#[cfg(all(target_arch = "arm", target_abi = "eabihf"))]
#[inline(never)]
pub(crate) fn copy_words(dst: &mut [f32], src: &[f32]) {
    let n = dst.len().min(src.len());
    // SAFETY: reads `src[..n]` and writes `dst[..n]` (`n` is the shorter length), in
    // blocks of 8, one of 4 and single words that together are exactly `n` words; it
    // changes only the registers declared as outputs and the flags.
    unsafe {
        core::arch::asm!(
            "lsrs {k}, {n}, #3",
            "beq 3f",
            "2:",
            "vldmia {s}!, {{s0-s7}}",
            "vstmia {d}!, {{s0-s7}}",
            "subs {k}, {k}, #1",
            "bne 2b",
            "3:",
            "tst {n}, #4",
            "beq 4f",
            "vldmia {s}!, {{s0-s3}}",
            "vstmia {d}!, {{s0-s3}}",
            "4:",
            "ands {n}, {n}, #3",
            "beq 6f",
            "5:",
            "vldmia {s}!, {{s0}}",
            "vstmia {d}!, {{s0}}",
            "subs {n}, {n}, #1",
            "bne 5b",
            "6:",
            d = inout(reg) dst.as_mut_ptr() => _,
            s = inout(reg) src.as_ptr() => _,
            n = inout(reg) n => _,
            k = out(reg) _,
            out("s0") _, out("s1") _, out("s2") _, out("s3") _,
            out("s4") _, out("s5") _, out("s6") _, out("s7") _,
            options(nostack),
        );
    }
}
