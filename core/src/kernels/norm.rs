//! Batch and group normalisation on a row-major tensor seen as `[n, c, inner]`
//! (channels at dim 1, everything after it flattened), and dropout's regenerable mask.
//!
//! - A *set* is the values one mean and variance are taken over: a channel across the
//!   batch (batch norm: `n` runs of `inner` values) or a group of channels of one
//!   sample (group norm: one run of `c / groups * inner` values).
//! - Statistics are two passes (mean, then squared deviations), each sum divided in
//!   the accumulator ([`Scalar::acc_mean`]), so fixed point does not saturate on a
//!   large set. `saved` holds `[mean; sets]` then `[inverse std; sets]`.
//! - Optional affine parameters come as empty slices when absent (weight 1, bias 0).

use crate::scalar::Scalar;

/// `[n, c, inner]`: batch, channels, values per channel and sample.
#[derive(Clone, Copy, Debug)]
pub struct NormGeom {
    /// Batch.
    pub n: usize,
    /// Channels.
    pub c: usize,
    /// Values per channel and sample (the product of the dims after dim 1).
    pub inner: usize,
}

impl NormGeom {
    /// Values in one channel across the batch (batch norm's set).
    pub fn per_channel(&self) -> usize {
        self.n * self.inner
    }
}

/// The runs of batch-norm channel `ch`: one slice of `inner` values per sample.
fn channel_runs<S: Scalar>(g: NormGeom, x: &[S], ch: usize) -> impl Iterator<Item = &[S]> + Clone {
    (0..g.n).map(move |b| &x[(b * g.c + ch) * g.inner..][..g.inner])
}

/// Mean of the values of `runs` (`count` in all) and the sum of their squared
/// deviations from it.
fn mean_dev<'a, S: Scalar>(runs: impl Iterator<Item = &'a [S]> + Clone, count: usize) -> (S, S::Acc) {
    let mean = S::acc_mean(S::fold_runs(runs.clone(), S::acc_add), count);
    let dev = S::fold_runs(runs, |acc, v| {
        let d = v - mean;
        S::mac(acc, d, d)
    });
    (mean, dev)
}

/// `1 / sqrt(var + eps)`.
pub fn inv_std<S: Scalar>(var: S, eps: S) -> S {
    S::ONE.div((var + eps).sqrt())
}

/// Batch norm's batch statistics: `stats[ch]` = mean, `stats[c + ch]` = biased
/// variance; when `running_var` is not empty (and the channel holds at least two
/// values), `running_var = (1 - m) * running_var + m * unbiased variance`.
pub fn channel_stats<S: Scalar>(g: NormGeom, x: &[S], stats: &mut [S], running_var: &mut [S], momentum: S) {
    let count = g.per_channel();
    for ch in 0..g.c {
        let (m, dev) = mean_dev(channel_runs(g, x, ch), count);
        stats[ch] = m;
        stats[g.c + ch] = S::acc_mean(dev, count);
        if let (Some(r), true) = (running_var.get_mut(ch), count > 1) {
            *r = (S::ONE - momentum) * *r + momentum * S::acc_mean(dev, count - 1);
        }
    }
}

/// Group norm's statistics, one set per sample and group: `saved[s]` = mean,
/// `saved[sets + s]` = inverse std.
pub fn group_stats<S: Scalar>(g: NormGeom, groups: usize, x: &[S], eps: S, saved: &mut [S]) {
    let len = g.c / groups * g.inner;
    let sets = g.n * groups;
    for s in 0..sets {
        let (m, dev) = mean_dev(core::iter::once(&x[s * len..][..len]), len);
        saved[s] = m;
        saved[sets + s] = inv_std(S::acc_mean(dev, len), eps);
    }
}

/// `running = (1 - m) * running + m * value` per channel (PyTorch's momentum update).
pub fn momentum_update<S: Scalar>(running: &mut [S], value: &[S], momentum: S) {
    for (r, &v) in running.iter_mut().zip(value) {
        *r = (S::ONE - momentum) * *r + momentum * v;
    }
}

/// Affine parameter `k` (1 or 0 when absent).
#[inline(always)]
fn param<S: Scalar>(p: &[S], k: usize, absent: S) -> S {
    p.get(k).copied().unwrap_or(absent)
}

/// `y = (x - mean) * inv_std * w + b`, where the statistics of element
/// `(b, ch, i)` are set `set(b, ch)` of `saved`.
#[allow(clippy::too_many_arguments)]
pub fn normalize<S: Scalar>(
    g: NormGeom,
    x: &[S],
    saved: &[S],
    sets: usize,
    set: impl Fn(usize, usize) -> usize,
    w: &[S],
    bias: &[S],
    y: &mut [S],
) {
    for b in 0..g.n {
        for ch in 0..g.c {
            let s = set(b, ch);
            let (m, a) = (saved[s], saved[sets + s] * param(w, ch, S::ONE));
            let sh = param(bias, ch, S::ZERO);
            let at = (b * g.c + ch) * g.inner;
            for (yv, &xv) in y[at..at + g.inner].iter_mut().zip(&x[at..at + g.inner]) {
                *yv = (xv - m) * a + sh;
            }
        }
    }
}

/// [`normalize`] with one set of statistics per channel, over `y` in place (the
/// input's values on entry).
pub fn normalize_in_place<S: Scalar>(
    g: NormGeom,
    saved: &[S],
    sets: usize,
    w: &[S],
    bias: &[S],
    y: &mut [S],
) {
    for b in 0..g.n {
        for ch in 0..g.c {
            let (m, a) = (saved[ch], saved[sets + ch] * param(w, ch, S::ONE));
            let sh = param(bias, ch, S::ZERO);
            let at = (b * g.c + ch) * g.inner;
            y[at..at + g.inner]
                .iter_mut()
                .for_each(|v| *v = (*v - m) * a + sh);
        }
    }
}

/// The scale of channel `ch` of batch norm with fixed statistics,
/// `w / sqrt(var + eps)` (`w` 1 when absent).
#[inline]
fn fixed_scale<S: Scalar>(var: &[S], w: &[S], eps: S, ch: usize) -> S {
    inv_std(var[ch], eps) * param(w, ch, S::ONE)
}

/// [`fixed_scale`] of every channel, into `scale`: what a record with a frozen scale
/// keeps for backward.
pub fn fixed_scales<S: Scalar>(var: &[S], w: &[S], eps: S, scale: &mut [S]) {
    for (ch, a) in scale.iter_mut().enumerate() {
        *a = fixed_scale(var, w, eps, ch);
    }
}

/// Batch norm with fixed statistics: `y = (x - mean) * w / sqrt(var + eps) + bias`
/// per channel, over `y` in place when `x` is `None`.
#[allow(clippy::too_many_arguments)]
pub fn normalize_fixed<S: Scalar>(
    g: NormGeom,
    x: Option<&[S]>,
    mean: &[S],
    var: &[S],
    eps: S,
    w: &[S],
    bias: &[S],
    y: &mut [S],
) {
    for (ch, &m) in mean.iter().enumerate().take(g.c) {
        let a = fixed_scale(var, w, eps, ch);
        let sh = param(bias, ch, S::ZERO);
        for b in 0..g.n {
            let at = (b * g.c + ch) * g.inner;
            let yr = &mut y[at..at + g.inner];
            match x {
                Some(x) => yr
                    .iter_mut()
                    .zip(&x[at..at + g.inner])
                    .for_each(|(yv, &xv)| *yv = (xv - m) * a + sh),
                None => yr.iter_mut().for_each(|v| *v = (*v - m) * a + sh),
            }
        }
    }
}

/// `gy *= scale[ch]`: batch norm's input gradient with fixed statistics and a frozen
/// scale ([`fixed_scales`]), written over the output's.
pub fn scale_grad_in_place<S: Scalar>(g: NormGeom, scale: &[S], gy: &mut [S]) {
    if g.inner == 0 {
        return;
    }
    for (k, run) in gy.chunks_exact_mut(g.inner).enumerate() {
        let a = scale[k % g.c];
        run.iter_mut().for_each(|v| *v = a * *v);
    }
}

/// `gx += gy * scale[ch]`, as [`scale_grad_in_place`] into a separate gradient.
pub fn add_scaled_grad<S: Scalar>(g: NormGeom, scale: &[S], gy: &[S], gx: &mut [S]) {
    if g.inner == 0 {
        return;
    }
    for (k, (gxr, gyr)) in gx
        .chunks_exact_mut(g.inner)
        .zip(gy.chunks_exact(g.inner))
        .enumerate()
    {
        let a = scale[k % g.c];
        gxr.iter_mut().zip(gyr).for_each(|(gxv, &gv)| *gxv += a * gv);
    }
}

/// `gw[ch] += sum gy * xhat` and `gb[ch] += sum gy` (either may be empty), with the
/// statistics of `set(b, ch)`.
#[allow(clippy::too_many_arguments)]
pub fn affine_grads<S: Scalar>(
    g: NormGeom,
    x: &[S],
    gy: &[S],
    saved: &[S],
    sets: usize,
    set: impl Fn(usize, usize) -> usize,
    gw: &mut [S],
    gb: &mut [S],
) {
    for ch in 0..g.c {
        let s0 = set(0, ch);
        if (1..g.n).all(|b| set(b, ch) == s0) {
            // One set for the whole channel (batch norm): one long sum over its runs.
            let (m, r) = (saved[s0], saved[sets + s0]);
            let runs = channel_runs(g, x, ch).zip(channel_runs(g, gy, ch));
            let [sw, sb] = S::fold_run_pairs(runs, |[w, b], xv, gv| {
                [S::mac(w, gv, (xv - m) * r), S::acc_add(b, gv)]
            });
            add_sums(gw, gb, ch, sw, sb);
            continue;
        }
        let (mut sw, mut sb) = (S::acc_zero(), S::acc_zero());
        for b in 0..g.n {
            let s = set(b, ch);
            let (m, r) = (saved[s], saved[sets + s]);
            let at = (b * g.c + ch) * g.inner;
            for (&xv, &gv) in x[at..at + g.inner].iter().zip(&gy[at..at + g.inner]) {
                sw = S::mac(sw, gv, (xv - m) * r);
                sb = S::acc_add(sb, gv);
            }
        }
        add_sums(gw, gb, ch, sw, sb);
    }
}

/// `gw[ch] += sw` and `gb[ch] += sb` where those parameters exist.
fn add_sums<S: Scalar>(gw: &mut [S], gb: &mut [S], ch: usize, sw: S::Acc, sb: S::Acc) {
    if let Some(v) = gw.get_mut(ch) {
        *v += S::from_acc(sw);
    }
    if let Some(v) = gb.get_mut(ch) {
        *v += S::from_acc(sb);
    }
}

/// Batch norm's input gradient with fixed (running) statistics: `gx += gy * w * r`
/// (`r` the saved inverse standard deviations); the input's values do not enter.
pub fn fixed_backward_input<S: Scalar>(g: NormGeom, gy: &[S], saved: &[S], w: &[S], gx: &mut [S]) {
    for ch in 0..g.c {
        let a = saved[g.c + ch] * param(w, ch, S::ONE);
        for b in 0..g.n {
            let at = (b * g.c + ch) * g.inner;
            let (gxr, gyr) = (&mut gx[at..at + g.inner], &gy[at..at + g.inner]);
            gxr.iter_mut().zip(gyr).for_each(|(gxv, &gv)| *gxv += a * gv);
        }
    }
}

/// Channel `ch`'s sums of `gy` and `gy * (x - m) * r` over the batch (the bias's and
/// the weight's gradients, and the input gradient's two means).
fn backward_sums<S: Scalar>(g: NormGeom, x: &[S], gy: &[S], ch: usize, m: S, r: S) -> [S::Acc; 2] {
    let runs = channel_runs(g, x, ch).zip(channel_runs(g, gy, ch));
    S::fold_run_pairs(runs, |[s1, s2], xv, gv| {
        [S::acc_add(s1, gv), S::mac(s2, gv, (xv - m) * r)]
    })
}

/// Batch norm's backward with batch statistics in one read of `x` and `gy` per
/// channel: `gw[ch] += sum gy * xhat` (skipped when `gw` is empty) and the input
/// gradient `gx += w * r * (gy - mean(gy) - xhat * mean(gy * xhat))`, whose sums are
/// the same ones.
pub fn batch_norm_backward_batch<S: Scalar>(
    g: NormGeom,
    x: &[S],
    gy: &[S],
    saved: &[S],
    w: &[S],
    gw: &mut [S],
    gx: &mut [S],
) {
    for ch in 0..g.c {
        let (m, r) = (saved[ch], saved[g.c + ch]);
        let a = r * param(w, ch, S::ONE);
        let [s1, s2] = backward_sums(g, x, gy, ch, m, r);
        if let Some(v) = gw.get_mut(ch) {
            *v += S::from_acc(s2);
        }
        let (m1, m2) = (S::acc_mean(s1, g.per_channel()), S::acc_mean(s2, g.per_channel()));
        for b in 0..g.n {
            let at = (b * g.c + ch) * g.inner;
            let (gxr, gyr) = (&mut gx[at..at + g.inner], &gy[at..at + g.inner]);
            for (gxv, (&xv, &gv)) in gxr.iter_mut().zip(x[at..at + g.inner].iter().zip(gyr)) {
                *gxv += a * (gv - m1 - (xv - m) * r * m2);
            }
        }
    }
}

/// [`batch_norm_backward_batch`] for a fresh input gradient, written over the output's:
/// `gy` becomes `0 + w * r * (gy - mean(gy) - xhat * mean(gy * xhat))` (the bits of
/// adding to a zeroed buffer), and `saved` (`[mean; c]`, `[inv std; c]`, read first)
/// becomes each channel's bias and weight gradient terms `[sum gy; c]`,
/// `[sum gy * xhat; c]`: the same sums, so no buffer is cleared and `gy` is read once
/// less.
pub fn batch_norm_backward_batch_in_place<S: Scalar>(
    g: NormGeom,
    x: &[S],
    w: &[S],
    saved: &mut [S],
    gy: &mut [S],
) {
    for ch in 0..g.c {
        let (m, r) = (saved[ch], saved[g.c + ch]);
        let a = r * param(w, ch, S::ONE);
        let [s1, s2] = backward_sums(g, x, gy, ch, m, r);
        (saved[ch], saved[g.c + ch]) = (S::from_acc(s1), S::from_acc(s2));
        let (m1, m2) = (S::acc_mean(s1, g.per_channel()), S::acc_mean(s2, g.per_channel()));
        for b in 0..g.n {
            let at = (b * g.c + ch) * g.inner;
            for (gv, &xv) in gy[at..at + g.inner].iter_mut().zip(&x[at..at + g.inner]) {
                *gv = S::ZERO + a * (*gv - m1 - (xv - m) * r * m2);
            }
        }
    }
}

/// `gy *= w * r` per channel (`r` the saved inverse standard deviations): batch
/// norm's input gradient with fixed statistics, written over the output's.
pub fn scale_channels_in_place<S: Scalar>(g: NormGeom, saved: &[S], w: &[S], gy: &mut [S]) {
    for ch in 0..g.c {
        let a = saved[g.c + ch] * param(w, ch, S::ONE);
        for b in 0..g.n {
            let at = (b * g.c + ch) * g.inner;
            gy[at..at + g.inner].iter_mut().for_each(|v| *v = a * *v);
        }
    }
}

/// `gb[ch] += sum gy` over each channel: the bias gradient of a normalisation, which
/// needs nothing of the input (a frozen-weight layer keeps nothing for it).
pub fn bias_grads<S: Scalar>(g: NormGeom, gy: &[S], gb: &mut [S]) {
    for (ch, v) in gb.iter_mut().enumerate().take(g.c) {
        *v += S::from_acc(S::fold_runs(channel_runs(g, gy, ch), S::acc_add));
    }
}

/// Group norm's input gradient, per sample and group, with `gyw = gy * w`:
/// `gx += r * (gyw - mean(gyw) - xhat * mean(gyw * xhat))`.
pub fn group_norm_backward_input<S: Scalar>(
    g: NormGeom,
    groups: usize,
    x: &[S],
    gy: &[S],
    saved: &[S],
    w: &[S],
    gx: &mut [S],
) {
    let cpg = g.c / groups;
    let len = cpg * g.inner;
    let sets = g.n * groups;
    for s in 0..sets {
        let (m, r) = (saved[s], saved[sets + s]);
        let ch0 = s % groups * cpg;
        let at = s * len;
        let (mut s1, mut s2) = (S::acc_zero(), S::acc_zero());
        for k in 0..len {
            let gw = gy[at + k] * param(w, ch0 + k / g.inner, S::ONE);
            s1 = S::acc_add(s1, gw);
            s2 = S::mac(s2, gw, (x[at + k] - m) * r);
        }
        let (m1, m2) = (S::acc_mean(s1, len), S::acc_mean(s2, len));
        for k in 0..len {
            let gw = gy[at + k] * param(w, ch0 + k / g.inner, S::ONE);
            gx[at + k] += r * (gw - m1 - (x[at + k] - m) * r * m2);
        }
    }
}

/// A 32-bit mixing function (the finaliser of MurmurHash3): dropout's mask bit of
/// element `j` under a call's `seed` is a pure function of both, so backward
/// regenerates the mask instead of keeping it.
#[inline(always)]
fn mix(seed: u32, j: u32) -> u32 {
    let mut h = seed ^ j.wrapping_mul(0x9e37_79b9);
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// Whether dropout keeps element `j`: drawn with probability `1 - p`, where `drop_below`
/// is `p * 2^32` (elements whose hash is below it are zeroed).
#[inline(always)]
pub fn kept(seed: u32, j: usize, drop_below: u64) -> bool {
    u64::from(mix(seed, j as u32)) >= drop_below
}

/// The seed of the next dropout call after one seeded `state` (a Weyl step, mixed).
pub fn next_seed(state: u32) -> u32 {
    mix(state.wrapping_add(0x6d2b_79f5), 0x1234_5678)
}

/// `y = x * scale` where kept, 0 elsewhere (`acc`: `y +=` instead, for backward).
pub fn dropout<S: Scalar>(seed: u32, drop_below: u64, scale: S, x: &[S], y: &mut [S], acc: bool) {
    for (j, (yv, &xv)) in y.iter_mut().zip(x).enumerate() {
        // x * 0, not 0, at a dropped element: a NaN stays NaN, as in PyTorch.
        let v = xv * if kept(seed, j, drop_below) { scale } else { S::ZERO };
        *yv = if acc { *yv + v } else { v };
    }
}

/// `g = g * scale` where kept, 0 elsewhere, in place.
pub fn dropout_in_place<S: Scalar>(seed: u32, drop_below: u64, scale: S, g: &mut [S]) {
    for (j, v) in g.iter_mut().enumerate() {
        *v = *v * if kept(seed, j, drop_below) { scale } else { S::ZERO };
    }
}
