//! PyTorch's default initialisation from a seeded generator: bounds, spread,
//! determinism, and W1's parameter count.

use torchlet::init::Rng;
use torchlet::nn::digits_fcn;
use torchlet::Graph;

fn w1_params(seed: u64) -> Vec<Vec<f32>> {
    let mut arena = vec![0.0f32; 32 * 1024];
    let mut g: Graph<f32, 16> = Graph::new(&mut arena);
    digits_fcn(&mut g, &mut Rng::new(seed)).unwrap();
    (0..g.num_params())
        .map(|i| g.data(g.param_handle(i).unwrap()).unwrap().to_vec())
        .collect()
}

#[test]
fn w1_init_follows_pytorch_bounds_and_is_deterministic() {
    let p = w1_params(42);
    assert_eq!(p.iter().map(Vec::len).sum::<usize>(), 6218);
    // fan_in of conv1, conv2, conv3 (weights and biases) and the linear head.
    let fans = [9, 9, 72, 72, 144, 144, 32, 32];
    for (values, fan) in p.iter().zip(fans) {
        let bound = 1.0 / (fan as f32).sqrt();
        assert!(values.iter().all(|v| v.abs() <= bound), "outside +-1/sqrt({fan})");
        if values.len() >= 100 {
            // U(-b, b) has variance b^2/3.
            let var = values.iter().map(|v| v * v).sum::<f32>() / values.len() as f32;
            let want = bound * bound / 3.0;
            assert!((var - want).abs() < 0.2 * want, "variance {var} vs {want}");
        }
    }
    assert_eq!(w1_params(42), p);
    assert_ne!(w1_params(43), p);
}
