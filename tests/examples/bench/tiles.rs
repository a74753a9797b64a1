//! What the shape of W1's first-layer forward tile allows on this machine, apart from
//! the kernel's borders, input copies and output traffic: 8 output channels x 3
//! vectors of 16 sums, each sum 9 multiply-adds (one per tap) fed by 3 vector loads
//! and 8 broadcast weights per tap, then 24 stores, everything in L1. The same tile
//! with 72 taps shows what its ends (the stores, and chains that start and finish)
//! cost against its multiply-adds.

#[cfg(target_arch = "x86_64")]
use std::hint::black_box;
#[cfg(target_arch = "x86_64")]
use std::time::Instant;

/// GFLOP/s of the tile with `T` taps, the best of many short blocks; `None` without
/// AVX-512F.
pub fn tile_gflops<const T: usize>() -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    if torchlet::bench::avx512_available() {
        // SAFETY: `avx512_available` checked that the CPU and the OS support AVX-512F.
        return Some(unsafe { tiles::<T>() });
    }
    None
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn tiles<const T: usize>() -> f64 {
    // Input rows: tap `t` reads 48 words from `offs[t]` (64-byte aligned, as the
    // kernel's loads are at best); output: 8 planes of 3 vectors.
    let words = 3 * 1024 + 64;
    let xbuf = vec![black_box(0.25f32); words + 16];
    let x0 = xbuf.as_ptr().align_offset(64);
    let x = &xbuf[x0..][..words];
    let offs: [usize; T] = std::array::from_fn(|t| (t % 3) * 1024 + (t / 3 % 3) * 64 + 16 * (t / 9 % 4));
    let wk: Vec<[f32; 8]> = (0..T)
        .map(|t| std::array::from_fn(|o| black_box(0.01 * (t + o) as f32)))
        .collect();
    let mut ybuf = vec![0.0f32; 8 * 64 + 16];
    let y0 = ybuf.as_ptr().align_offset(64);
    let tiles_per_block = 2000 * 9 / T;
    let mut best = 0.0f64;
    for _ in 0..300 {
        let t0 = Instant::now();
        for i in 0..tiles_per_block {
            let p = 16 * (i % 16);
            tile(&x[p..], &offs, &wk, &mut ybuf[y0..][..8 * 64]);
        }
        black_box(&mut ybuf);
        let flops = (tiles_per_block * T * 24 * 16 * 2) as f64;
        best = best.max(flops / t0.elapsed().as_secs_f64() / 1e9);
    }
    best
}

/// One tile: `y[o][v] = sum over taps t of w[t][o] * x[offs[t] + 16 v ..]`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline(never)]
fn tile<const T: usize>(x: &[f32], offs: &[usize; T], wk: &[[f32; 8]], y: &mut [f32]) {
    use std::arch::x86_64::{__m512, _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_set1_ps, _mm512_storeu_ps};
    let mut acc = [[_mm512_set1_ps(0.0); 3]; 8];
    for (&off, w) in offs.iter().zip(wk) {
        let r = &x[off..][..48];
        // SAFETY: `r` holds 48 words; `loadu` needs no alignment.
        let xv: [__m512; 3] = std::array::from_fn(|v| unsafe { _mm512_loadu_ps(r[16 * v..].as_ptr()) });
        for (a, &wo) in acc.iter_mut().zip(w) {
            let wv = _mm512_set1_ps(wo);
            for (av, &xk) in a.iter_mut().zip(&xv) {
                *av = _mm512_fmadd_ps(wv, xk, *av);
            }
        }
    }
    for (o, a) in acc.iter().enumerate() {
        let d = &mut y[64 * o..][..48];
        for (v, &av) in a.iter().enumerate() {
            // SAFETY: `d` holds 48 writable words; `storeu` needs no alignment.
            unsafe { _mm512_storeu_ps(d[16 * v..].as_mut_ptr(), av) };
        }
    }
}
