//! Define-by-run: ordinary `if` and `for` in the forward code change the network from
//! step to step, and the tape is rebuilt each time.

use torchlet::init::Rng;
use torchlet::nn::{Conv2d, Linear};
use torchlet::optim::Sgd;
use torchlet::{Conv2dParams, Graph, Pool2dParams};

#[test]
fn the_network_may_change_between_steps() {
    let mut arena = vec![0.0f32; 256 * 1024];
    let mut g: Graph<f32, 64> = Graph::new(&mut arena);
    let mut rng = Rng::new(5);
    let stem = Conv2d::new(&mut g, 1, 4, 3, Conv2dParams::padded(1), true, &mut rng).unwrap();
    let big_only = Conv2d::new(&mut g, 4, 4, 3, Conv2dParams::padded(1), true, &mut rng).unwrap();
    let head = Linear::new(&mut g, 4, 3, true, &mut rng).unwrap();
    let mut sgd = Sgd::new(&mut g, 0.1, 0.0, 0.0).unwrap();

    let mut tape_lengths = Vec::new();
    for (step, (h, w)) in [(6, 6), (16, 12), (6, 9), (48, 40)].into_iter().enumerate() {
        g.zero_grad();
        let img: Vec<f32> = (0..h * w).map(|i| (i % 7) as f32 / 7.0).collect();
        let x = g.input(&[1, 1, h, w], &img).unwrap();
        let s = stem.forward(&mut g, x).unwrap();
        let mut y = g.relu(s).unwrap();
        // Larger inputs get an extra block, repeated while the map is still large.
        if h >= 12 {
            let mut size = h;
            while size >= 12 {
                let b = big_only.forward(&mut g, y).unwrap();
                y = g.relu(b).unwrap();
                y = g.max_pool2d(y, Pool2dParams::square(2)).unwrap();
                size /= 2;
            }
        }
        let y = g.adaptive_avg_pool2d(y, [1, 1]).unwrap();
        let y = g.flatten(y, 1).unwrap();
        let logits = head.forward(&mut g, y).unwrap();
        let loss = g.cross_entropy(logits, &[step % 3]).unwrap();
        g.backward(loss).unwrap();
        let gw = g.grad(big_only.weight).unwrap().unwrap();
        let used = gw.iter().any(|&v| v != 0.0);
        assert_eq!(
            used,
            h >= 12,
            "the branch-only layer gets a gradient exactly when it ran"
        );
        tape_lengths.push(g.tape_len());
        sgd.step(&mut g).unwrap();
        g.end_step();
    }
    // 6 parameters + input + 6 ops (conv, relu, pool, flatten, linear, loss) = 13;
    // 16 rows: one extra block of 3 records; 48 rows: three blocks (48, 24, 12).
    assert_eq!(tape_lengths, vec![13, 16, 13, 22]);
}

#[test]
fn inference_mode_records_no_gradient_path() {
    let mut arena = vec![0.0f32; 4096];
    let mut g: Graph<f32, 16> = Graph::new(&mut arena);
    let w = g.param(&[2, 2]).unwrap();
    g.set_grad_enabled(false);
    let x = g
        .input(&[1, 2, 2, 2], &[1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 4.0, -4.0])
        .unwrap();
    let p = g.max_pool2d(x, Pool2dParams::square(2)).unwrap();
    let used_after_pool = g.arena().used_bytes();
    let y = g.flatten(p, 1).unwrap();
    let z = g.linear(y, w, None).unwrap();
    assert_eq!(g.op_name(z).unwrap(), "leaf");
    assert!(g.backward_with(z, &[1.0, 1.0]).is_err());
    // max_pool2d kept no indices: only input and output are in use (8 + 2 values,
    // plus 8 words of the parameter and its gradient).
    assert_eq!(used_after_pool, (8 + 2 + 8) * 4);
}
