//! The planner's searches are logarithmic (issue 38: `plan --budget` with no size that
//! fits walked every height): a model whose smallest valid input is large and a budget
//! no size meets are answered in a few dozen plans, with the true smallest size; and
//! the answers for a model that fits are those of an exhaustive scan.

use std::cell::Cell;
use torchlet::plan::{NoFit, Planner, MAX_SCALE};
use torchlet::{Conv2dParams, Graph, Result, Tensor};

const TAPE: usize = 16;

/// A planner for one conv2d `1 -> 2` with a `k x k` kernel (smallest valid input
/// `k x k`) that counts its plans in `plans`.
#[allow(clippy::type_complexity)]
fn conv_planner(
    k: usize,
    plans: &Cell<usize>,
) -> Planner<
    f32,
    TAPE,
    impl Fn(&mut Graph<'static, f32, TAPE>) -> Result<Tensor> + '_,
    impl Fn(&mut Graph<'static, f32, TAPE>, &Tensor, usize, usize) -> Result<()>,
> {
    Planner::new(
        move |g: &mut Graph<'static, f32, TAPE>| {
            plans.set(plans.get() + 1);
            g.param(&[2, 1, k, k])
        },
        |g, w, h, wd| {
            let x = g.input(&[1, 1, h, wd], &[])?;
            let y = g.conv2d(x, *w, None, Conv2dParams::default())?;
            // A meta graph takes any seed: its values are never read.
            g.backward_with(y, &[])
        },
    )
}

#[test]
fn no_fitting_size_behind_a_large_smallest_size_takes_a_few_dozen_plans() {
    let plans = Cell::new(0);
    let p = conv_planner(300, &plans);
    let smallest = p.plan(300, 300).unwrap();
    assert!(p.plan(299, 300).is_err() && p.plan(300, 299).is_err());
    // More than the parameters, less than the smallest input's step.
    let budget = smallest.persistent_bytes + 1000;
    assert!(smallest.step_bytes > budget);
    plans.set(0);
    let why = p.largest_within(budget, 4096, 4096).unwrap_err();
    assert_eq!(
        why,
        NoFit::SmallestInput {
            size: (300, 300),
            step_bytes: smallest.step_bytes,
            budget
        }
    );
    // The full size, doubling to 512, bisection down to 300: about 2 log2(4096).
    assert!(plans.get() <= 2 * 12 + 2, "{} plans", plans.get());
    plans.set(0);
    let why = p.largest_scaled(budget, [1, 1]).unwrap_err();
    assert!(
        matches!(why, NoFit::SmallestInput { size: (300, 300), .. }),
        "{why}"
    );
    assert!(plans.get() <= 2 * 9 + 2, "{} plans", plans.get());
    // A height of a billion is no slower.
    plans.set(0);
    assert!(p.largest_within(budget, 1 << 30, 1 << 30).is_err());
    assert!(plans.get() <= 2 * 30 + 2, "{} plans", plans.get());
}

#[test]
fn a_model_that_no_size_can_run_is_answered_in_logarithmic_time() {
    // A 2x2 kernel over a width of 1: no height is valid.
    let plans = Cell::new(0);
    let p = conv_planner(2, &plans);
    let why = p.largest_scaled(1 << 30, [1, 0]).unwrap_err();
    assert!(matches!(why, NoFit::Invalid(_)), "{why}");
    assert!(plans.get() <= 26, "{} plans", plans.get());
    plans.set(0);
    assert!(matches!(
        p.largest_within(1 << 30, 1 << 40, 0),
        Err(NoFit::Invalid(_))
    ));
    assert!(plans.get() <= 2 * 40 + 2, "{} plans", plans.get());
}

#[test]
fn the_searches_answer_what_an_exhaustive_scan_answers() {
    let plans = Cell::new(0);
    for k in [1, 3, 7] {
        let p = conv_planner(k, &plans);
        for budget in [600, 2_000, 9_000, 40_000] {
            // largest_within: the largest th < h whose aspect-kept size fits.
            for (h, w) in [(50, 50), (40, 13), (9, 30)] {
                let scan = (1..h)
                    .rev()
                    .map(|th| (th, ((w * th + h / 2) / h).max(1)))
                    .find(|&(a, b)| p.fits(a, b, budget));
                let got = p.largest_within(budget, h, w).ok();
                let want = if p.fits(h, w, budget) { Some((h, w)) } else { scan };
                assert_eq!(got, want, "k {k} budget {budget} {h}x{w}");
            }
            let scan = (1..200).rev().find(|&s| p.fits(s, s, budget));
            assert_eq!(p.largest_square(budget).ok(), scan, "k {k} budget {budget}");
        }
    }
    assert_eq!(MAX_SCALE, 1 << 24);
}
