//! `torchlet plan`, and the planner and graph setup the other commands share.

use crate::limits::Limits;
use crate::{args, files};
use std::path::Path;
use torchlet::model::{Model, ModelFile};
use torchlet::ops::nll::LossParams;
use torchlet::optim::Sgd;
use torchlet::plan::{Plan, Planner, Thousands};
use torchlet::{Error, Graph, Result, Tensor};

/// Tape capacity of the command's graphs (records of one step).
pub const TAPE: usize = 2048;

/// The input dims for a planner size `h x w`: `[n, c, h, w]`, `[n, c, w]` for a
/// sequence input (NCL), whose `h` is ignored, or `[n, features]` as given.
pub fn sized(dims: &[usize], h: usize, w: usize) -> Vec<usize> {
    match dims {
        [_, _] => dims.to_vec(),
        [n, c, _] => vec![*n, *c, w],
        [n, c, ..] => vec![*n, *c, h, w],
        _ => dims.to_vec(),
    }
}

/// Cross-entropy (mean) of `logits` (`[N, C]` or `[N, C, ...]`) against `targets`
/// (one class per sample or per position).
pub fn loss(g: &mut Graph<'_, f32, TAPE>, logits: Tensor, targets: &[i64]) -> Result<Tensor> {
    g.cross_entropy_with(logits, targets, LossParams::default())
}

/// Number of class targets a step's loss takes for `logits`: one per sample and position.
pub fn target_count(g: &Graph<'_, f32, TAPE>, logits: Tensor) -> Result<usize> {
    let s = g.shape(logits)?;
    let c = s.dims().get(1).copied().unwrap_or(1).max(1);
    Ok(s.numel() / c)
}

/// Plans a step of `file` at the sizes of `dims`: a training step (training mode,
/// cross-entropy, backward, SGD state when `momentum` is not 0) and, in its inference
/// pass, a prediction in eval mode.
// The two closures' types are the planner's type parameters; naming them would need
// boxed closures.
#[allow(clippy::type_complexity)]
pub fn planner<'m>(
    file: ModelFile<'m>,
    dims: &[usize],
    momentum: f32,
) -> Planner<
    f32,
    TAPE,
    impl Fn(&mut Graph<'static, f32, TAPE>) -> Result<Model<'m>> + 'm,
    impl Fn(&mut Graph<'static, f32, TAPE>, &Model<'m>, usize, usize) -> Result<Tensor>,
> {
    let dims = dims.to_vec();
    Planner::new(
        move |g: &mut Graph<'static, f32, TAPE>| {
            let m = Model::new(g, file).map_err(Error::from)?;
            if momentum != 0.0 {
                Sgd::new(g, 0.01, momentum, 0.0)?;
            }
            Ok(m)
        },
        move |g: &mut Graph<'static, f32, TAPE>, m: &Model<'m>, h: usize, w: usize| {
            g.set_training(g.grad_enabled());
            let x = g.input(&sized(&dims, h, w), &[])?;
            let y = m.forward(g, &[x]).map_err(Error::from)?;
            // A meta graph's loss takes no targets (their count could be huge).
            loss(g, y, &[])
        },
    )
}

/// The plan at the given dims (the H and W of an NCHW input, the L of an NCL one).
pub fn plan_at(file: ModelFile<'_>, dims: &[usize], momentum: f32) -> std::result::Result<Plan, String> {
    let (h, w) = hw(dims);
    planner(file, dims, momentum)
        .plan(h, w)
        .map_err(|e| format!("plan at {dims:?}: {e}"))
}

/// Refuses the step `plan` (a training step when `train`, else inference) at `dims`
/// when it needs more bytes or multiply-accumulates than `limits` allow.
pub fn within(limits: Limits, plan: &Plan, dims: &[usize], train: bool) -> std::result::Result<(), String> {
    let size: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
    let what = match train {
        true => format!("a training step at {}", size.join("x")),
        false => format!("inference at {}", size.join("x")),
    };
    let (bytes, macs) = match train {
        true => (plan.step_bytes, plan.macs),
        false => (plan.inference_bytes, plan.inference_macs),
    };
    limits.memory(&what, bytes)?;
    limits.work(&what, macs)
}

/// For `plan` and `info`, which allocate nothing for a step (the meta run's sizes are
/// numbers): a line saying that `run` / `train` would refuse the step, if they would.
pub fn note_if_over(limits: Limits, plan: &Plan, dims: &[usize], train: bool) {
    if let Err(e) = within(limits, plan, dims, train) {
        println!("  (over the budget: {e}; `run` and `train` refuse such a step)");
    }
}

/// Whether `file` has no trainable parameter: only its inference can be planned.
pub fn inference_only(file: &ModelFile<'_>) -> bool {
    crate::choices::trained_values(file, torchlet::model::Trained::All) == 0
}

/// The plan of inference (eval mode, no gradients) at `dims`: the full plan as before
/// for a model that trains (its `records` cover the training step too), the inference
/// pass alone for one with no trainable parameter (a lone softmax).
pub fn inference_plan(file: ModelFile<'_>, dims: &[usize]) -> std::result::Result<Plan, String> {
    if !inference_only(&file) {
        return plan_at(file, dims, 0.0);
    }
    let (h, w) = hw(dims);
    planner(file, dims, 0.0)
        .plan_inference(h, w)
        .map_err(|e| format!("plan at {dims:?}: {e}"))
}

/// The planner's `(h, w)` of an input size.
pub fn hw(dims: &[usize]) -> (usize, usize) {
    match dims {
        [_, _, l] => (1, *l),
        [_, _, h, w] => (*h, *w),
        _ => (1, 1),
    }
}

/// `plan --choices`: the file and the patterns live for the program (frozen tensors
/// are read in place from the file's bytes).
pub fn run_choices(
    model: &Path,
    input: &str,
    patterns: Vec<String>,
    momentum: f32,
    limits: Limits,
) -> std::result::Result<(), String> {
    crate::train::check_momentum(momentum)?;
    let bytes: &'static [u8] = files::read(model)?.leak();
    let file = files::model(model, bytes)?;
    let dims = args::dims(input)?;
    let patterns: Vec<&'static str> = patterns.into_iter().map(|p| &*p.leak()).collect();
    let name = model.display().to_string();
    crate::choices::run(&name, file, &dims, patterns.leak(), momentum, limits)
}

pub fn run(
    model: &Path,
    input: &str,
    train: bool,
    budget: Option<&str>,
    limits: Limits,
) -> std::result::Result<(), String> {
    let bytes = files::read(model)?;
    let file = files::model(model, &bytes)?;
    let dims = args::dims(input)?;
    let p = match train {
        true => plan_at(file, &dims, 0.0)?,
        false => inference_plan(file, &dims)?,
    };
    let what = if train { "training step" } else { "inference" };
    let total = if train { p.step_bytes } else { p.inference_bytes };
    println!(
        "{}: {what} at {input}: {} bytes",
        model.display(),
        Thousands(total)
    );
    println!(
        "  parameters and buffers (and gradients): {} bytes",
        Thousands(p.persistent_bytes)
    );
    if train {
        println!("  forward high water: {} bytes", Thousands(p.forward_bytes));
    }
    println!("  tape records: {}", p.records);
    println!(
        "  multiply-accumulates: {}",
        crate::limits::Thousands64(if train { p.macs } else { p.inference_macs })
    );
    note_if_over(limits, &p, &dims, train);
    if let Some(b) = budget {
        let budget = args::bytes(b)?;
        let planner = planner(file, &dims, 0.0);
        let (h, w) = hw(&dims);
        // Inference budgets compare the inference bytes: plan them the same way.
        let only = inference_only(&file);
        let fits = |hh: usize, ww: usize| {
            let p = match only {
                true => planner.plan_inference(hh, ww),
                false => planner.plan(hh, ww),
            };
            let p = p.ok()?;
            Some((if train { p.step_bytes } else { p.inference_bytes }) <= budget)
        };
        // The largest input of the given aspect ratio (for a sequence, the longest).
        let best = largest(&fits, h, w);
        match best {
            Some((bh, bw)) => {
                let size: Vec<String> = sized(&dims, bh, bw).iter().map(|d| d.to_string()).collect();
                println!(
                    "  largest input of this shape within {} bytes: {}",
                    Thousands(budget),
                    size.join("x")
                );
            }
            None => {
                let why = match planner.largest_square(budget) {
                    Err(e) => e.to_string(),
                    Ok(_) => "no input of this aspect ratio fits".to_string(),
                };
                println!("  nothing fits in {} bytes: {why}", Thousands(budget));
            }
        }
    }
    Ok(())
}

/// The largest `k*h/h0 x k*w/w0` scaling of `h x w` (same aspect ratio, by the height)
/// for which `fits` holds, given that `h x w` is a valid size. `fits` is `None` for a
/// size that is no valid input (too small for a kernel, or too large to count) and
/// otherwise whether it fits; valid sizes are taken to form one range and the bytes to
/// grow with the size, so every search is a bisection or a doubling: O(log h) plans,
/// never a walk over the heights (doubling stops past 2^20, as it always did).
fn largest(fits: &dyn Fn(usize, usize) -> Option<bool>, h: usize, w: usize) -> Option<(usize, usize)> {
    let h = h.max(1);
    let at = |th: usize| (th, (w.saturating_mul(th).saturating_add(h / 2) / h).max(1));
    let ok = |th: usize| {
        let (a, b) = at(th);
        fits(a, b)
    };
    // The smallest valid height (bisection over validity in 1..=h; h is valid) must
    // fit, or nothing does.
    let (mut bad, mut lo) = (0, h);
    while lo - bad > 1 {
        let mid = bad + (lo - bad) / 2;
        match ok(mid) {
            Some(_) => lo = mid,
            None => bad = mid,
        }
    }
    if ok(lo) != Some(true) {
        return None;
    }
    // Double until a size no longer fits, then bisect between the two.
    let mut hi = lo.checked_mul(2)?;
    while ok(hi) == Some(true) {
        lo = hi;
        hi = hi.checked_mul(2)?;
        if hi > 1 << 20 {
            return Some(at(lo));
        }
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if ok(mid) == Some(true) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(at(lo))
}

#[cfg(test)]
mod tests {
    use super::largest;
    use std::cell::Cell;

    #[test]
    fn largest_bisects_and_says_when_nothing_fits() {
        // Valid from height 5 up; bytes h * w; aspect 2:1.
        let calls = Cell::new(0);
        let fits = |budget: usize| {
            let calls = &calls;
            move |h: usize, w: usize| {
                calls.set(calls.get() + 1);
                (h >= 5).then_some(h * w <= budget)
            }
        };
        assert_eq!(largest(&fits(200), 28, 14), Some((20, 10)));
        assert_eq!(largest(&fits(20_000), 28, 14), Some((200, 100)));
        calls.set(0);
        assert_eq!(largest(&fits(10), 1_000_000_000, 500_000_000), None);
        assert!(calls.get() < 80, "{} plans", calls.get());
        calls.set(0);
        assert_eq!(largest(&fits(usize::MAX), 28, 14), Some((655_360, 327_680)));
        assert!(calls.get() < 80, "{} plans", calls.get());
    }
}
