//! The benchmark's machine figures: the measured multiply-add peak of the widest
//! instructions the conv kernels use, the nominal peak from /proc/cpuinfo, and the
//! CPU's model name and flags.

use std::hint::black_box;
use std::time::Instant;

/// The clock from /proc/cpuinfo times the FLOP per cycle of two FMA pipes of the
/// widest vectors the kernels use (on AMD Zen 4 a 512-bit FMA takes both 256-bit
/// pipes, so AVX-512F gives what AVX2 does); under a hypervisor that clock is often
/// the base clock, so when the measured peak is higher the clock it implies is
/// printed too.
pub fn nominal_peak(ghz: f64, measured: f64, avx512: bool) -> String {
    let (per_cycle, isa) = if avx512 && zen4() {
        (32.0, "AVX-512F on AMD Zen 4: two 256-bit FMA pipes")
    } else if avx512 {
        (64.0, "AVX-512F FMA x2")
    } else {
        (32.0, "AVX2 FMA x2")
    };
    let nominal = ghz * per_cycle;
    let implied = if measured > nominal {
        format!(
            "; the measured peak implies {:.2} GHz, above the reported clock",
            measured / per_cycle
        )
    } else {
        String::new()
    };
    format!("; nominal {nominal:.1} GFLOP/s ({ghz:.2} GHz x {per_cycle} FLOP/cycle, {isa}){implied}")
}

/// The attainable peak of the widest instructions the kernels use in this run, and
/// their name: the 16-lane FMA loop when some dispatch to AVX-512F at run time, the
/// 8-lane one for AVX2 + FMA, else this build's multiply-add loop.
pub fn measured_peak_gflops() -> (f64, &'static str) {
    #[cfg(target_arch = "x86_64")]
    if torchlet::bench::avx512_available() {
        // SAFETY: `avx512_available` checked that the CPU and the OS support AVX-512F.
        return (unsafe { fma16_peak_gflops() }, "AVX-512F");
    }
    #[cfg(target_arch = "x86_64")]
    if torchlet::bench::avx2_available() {
        // SAFETY: `available` checked that the CPU and the OS support AVX2 and FMA.
        return (unsafe { fma_peak_gflops() }, "AVX2 + FMA");
    }
    (mul_add_peak_gflops(), "this build's SIMD")
}

/// GFLOP/s of 16 independent 16-lane FMA chains; the best of many short blocks.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn fma16_peak_gflops() -> f64 {
    use std::arch::x86_64::{_mm512_fmadd_ps, _mm512_set1_ps};
    let (m, c) = (_mm512_set1_ps(black_box(0.999)), _mm512_set1_ps(black_box(1e-3)));
    let iters = 20_000usize;
    let mut best = 0.0f64;
    for _ in 0..300 {
        let mut acc = [_mm512_set1_ps(black_box(0.5)); 16];
        let t = Instant::now();
        for _ in 0..iters {
            for a in acc.iter_mut() {
                *a = _mm512_fmadd_ps(*a, m, c);
            }
        }
        black_box(&acc);
        best = best.max((iters * 16 * 16 * 2) as f64 / t.elapsed().as_secs_f64() / 1e9);
    }
    best
}

/// GFLOP/s of 24 independent 16-lane FMA chains fed per 24 multiply-adds by `L`
/// 16-word loads and `B` one-word broadcasts (`B` dividing 24) out of an L1-resident
/// buffer (`B` at most `16 L`), the best of many short blocks; `None` without
/// AVX-512F. The loads start on 64-byte boundaries, or 4 words past them (`split`:
/// each then reads two cache lines). What a kernel with that mix of loads can reach,
/// beside the peak of multiply-adds alone: W1's one-channel tiles load 3 input
/// vectors and broadcast 8 weights (forward), or load 3 input and 8 output-gradient
/// vectors (backward-weight).
pub fn fma16_with_loads_gflops<const L: usize, const B: usize>(split: bool) -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    if torchlet::bench::avx512_available() {
        // SAFETY: `avx512_available` checked that the CPU and the OS support AVX-512F.
        return Some(unsafe { fma16_loads::<L, B>(split) });
    }
    let _ = split;
    None
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn fma16_loads<const L: usize, const B: usize>(split: bool) -> f64 {
    use std::arch::x86_64::{__m512, _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_set1_ps};
    let words = vec![black_box(0.5f32); 16 * 258];
    let start = words.as_ptr().align_offset(64) + if split { 4 } else { 0 };
    let buf = &words[start..][..16 * 256];
    let m = _mm512_set1_ps(black_box(0.999));
    let (iters, rows) = (5_000usize, buf.len() / 16 - L);
    let mut best = 0.0f64;
    for _ in 0..300 {
        let mut acc = [_mm512_set1_ps(black_box(0.5)); 24];
        let t = Instant::now();
        for i in 0..iters {
            let row = &buf[(i % rows) * 16..][..16 * L];
            let mut v: [__m512; L] = [m; L];
            for (k, vk) in v.iter_mut().enumerate() {
                // SAFETY: `row` holds `L` vectors of 16 words; `loadu` needs no alignment.
                *vk = unsafe { _mm512_loadu_ps(row[16 * k..].as_ptr()) };
            }
            match 24usize.checked_div(B) {
                None => {
                    for (j, a) in acc.iter_mut().enumerate() {
                        *a = _mm512_fmadd_ps(m, v[j % L], *a);
                    }
                }
                // Broadcast `k` feeds `per` chains in turn, one vector each.
                Some(per) => {
                    for (k, chains) in acc.chunks_exact_mut(per).enumerate() {
                        let w = _mm512_set1_ps(row[k]);
                        for (j, a) in chains.iter_mut().enumerate() {
                            *a = _mm512_fmadd_ps(w, v[j % L], *a);
                        }
                    }
                }
            }
        }
        black_box(&acc);
        best = best.max((iters * 24 * 16 * 2) as f64 / t.elapsed().as_secs_f64() / 1e9);
    }
    best
}

/// Microseconds to write `words` words with 16-lane stores, the buffer staying in
/// the caches from one pass to the next (the best of 300 passes); `None` without
/// AVX-512F. What storing a kernel's output costs alone: the one-channel forward
/// writes 9 multiply-adds' worth of output per word, so its stores run beside its
/// multiply-adds at a rate close to theirs.
pub fn store16_us(words: usize) -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    if torchlet::bench::avx512_available() {
        // SAFETY: `avx512_available` checked that the CPU and the OS support AVX-512F.
        return Some(unsafe { store16_pass_us(words) });
    }
    let _ = words;
    None
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn store16_pass_us(words: usize) -> f64 {
    use std::arch::x86_64::{_mm512_set1_ps, _mm512_storeu_ps};
    let mut buf = vec![0.0f32; words.div_ceil(16) * 16];
    let mut best = f64::MAX;
    for i in 0..300 {
        let v = _mm512_set1_ps(black_box(i as f32));
        let t = Instant::now();
        for chunk in buf.chunks_exact_mut(16) {
            // SAFETY: `chunk` is 16 writable words; `storeu` needs no alignment.
            unsafe { _mm512_storeu_ps(chunk.as_mut_ptr(), v) };
        }
        black_box(&mut buf);
        best = best.min(t.elapsed().as_secs_f64() * 1e6);
    }
    best
}

/// GFLOP/s of 12 independent 8-lane FMA chains (two FMA pipes x a latency of 4-5
/// cycles need at least 10 in flight); the best of many short blocks.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn fma_peak_gflops() -> f64 {
    use std::arch::x86_64::{_mm256_fmadd_ps, _mm256_set1_ps};
    let (m, c) = (_mm256_set1_ps(black_box(0.999)), _mm256_set1_ps(black_box(1e-3)));
    let iters = 20_000usize;
    let mut best = 0.0f64;
    for _ in 0..300 {
        let mut acc = [_mm256_set1_ps(black_box(0.5)); 12];
        let t = Instant::now();
        for _ in 0..iters {
            for a in acc.iter_mut() {
                *a = _mm256_fmadd_ps(*a, m, c);
            }
        }
        black_box(&acc);
        best = best.max((iters * 12 * 8 * 2) as f64 / t.elapsed().as_secs_f64() / 1e9);
    }
    best
}

/// GFLOP/s of a loop of independent multiply-adds: this build's attainable peak. The
/// best of many short blocks, so that time slices lost to other processes do not count.
fn mul_add_peak_gflops() -> f64 {
    let (m, c) = (black_box(0.999_f32), black_box(1e-3_f32));
    let iters = 20_000usize;
    let mut best = 0.0f64;
    for _ in 0..300 {
        let mut acc = black_box([[0.5f32; 8]; 6]);
        let t = Instant::now();
        for _ in 0..iters {
            for a in acc.iter_mut() {
                for v in a.iter_mut() {
                    *v = *v * m + c;
                }
            }
        }
        black_box(&acc);
        best = best.max((iters * 6 * 8 * 2) as f64 / t.elapsed().as_secs_f64() / 1e9);
    }
    best
}

/// Whether /proc/cpuinfo names an AMD CPU of family 25 (Zen 3 and Zen 4; of them only
/// Zen 4 has AVX-512F).
fn zen4() -> bool {
    let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |k: &str| {
        text.lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split(':').nth(1))
            .map(str::trim)
    };
    field("vendor_id") == Some("AuthenticAMD") && field("cpu family") == Some("25")
}

/// Clock (GHz) and model name from /proc/cpuinfo, and whether it has AVX2 and FMA.
pub fn cpu_info() -> (String, f64, bool) {
    let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |k: &str| {
        text.lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split(':').nth(1))
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let ghz = field("cpu MHz").parse::<f64>().unwrap_or(0.0) / 1000.0;
    let flags = field("flags");
    let wide = flags.split(' ').any(|f| f == "avx2") && flags.split(' ').any(|f| f == "fma");
    (field("model name"), ghz, wide)
}
