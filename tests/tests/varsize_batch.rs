//! A batch tensor of one shape computes what its samples compute one at a time: the
//! same logits, and a batch-mean loss whose parameter gradients are the mean of the
//! per-sample gradients. Checked at the odd sizes of the cropped digits (bucketed
//! training feeds such batches), where pooling drops rows and columns.

use torchlet::init::Rng;
use torchlet::nn::digits_fcn;
use torchlet::Graph;

const TAPE: usize = 32;

fn image(h: usize, w: usize, seed: usize) -> Vec<f32> {
    (0..h * w)
        .map(|i| ((i * 7 + seed * 13) % 17) as f32 / 17.0)
        .collect()
}

fn grads<const N: usize>(g: &Graph<'_, f32, N>) -> Vec<f32> {
    (0..g.num_params())
        .flat_map(|i| g.grad(g.param_handle(i).unwrap()).unwrap().unwrap().to_vec())
        .collect()
}

#[test]
fn a_batch_equals_its_samples_one_at_a_time() {
    let mut arena = vec![0.0f32; 1 << 20];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    let model = digits_fcn(&mut g, &mut Rng::new(5)).unwrap();
    for (b, h, w) in [(3, 22, 13), (4, 22, 5), (2, 12, 22), (5, 22, 22), (32, 22, 17)] {
        let samples: Vec<Vec<f32>> = (0..b).map(|i| image(h, w, i * 3 + h + w)).collect();
        let labels: Vec<usize> = (0..b).map(|i| (i * 7 + w) % 10).collect();
        // One sample at a time: logits and summed gradients.
        let mut logits_one = Vec::new();
        let mut grad_sum = vec![0.0f32; 6218];
        for (x, &y) in samples.iter().zip(&labels) {
            g.zero_grad();
            let t = g.input(&[1, 1, h, w], x).unwrap();
            let logits = model.forward(&mut g, t).unwrap();
            logits_one.extend_from_slice(g.data(logits).unwrap());
            let loss = g.cross_entropy(logits, &[y]).unwrap();
            g.backward(loss).unwrap();
            for (s, v) in grad_sum.iter_mut().zip(grads(&g)) {
                *s += v / b as f32;
            }
            g.end_step();
        }
        // The whole batch as one tensor.
        g.zero_grad();
        let all: Vec<f32> = samples.concat();
        let t = g.input(&[b, 1, h, w], &all).unwrap();
        let logits = model.forward(&mut g, t).unwrap();
        let logits_batch = g.data(logits).unwrap().to_vec();
        let loss = g.cross_entropy(logits, &labels).unwrap();
        g.backward(loss).unwrap();
        let grad_batch = grads(&g);
        g.end_step();
        let diff = |a: &[f32], c: &[f32]| a.iter().zip(c).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
        assert_eq!(logits_batch.len(), logits_one.len());
        let dl = diff(&logits_batch, &logits_one);
        assert!(dl < 1e-4, "{b}x{h}x{w}: logits differ by {dl}");
        let dg = diff(&grad_batch, &grad_sum);
        assert!(dg < 1e-4, "{b}x{h}x{w}: gradients differ by {dg}");
        assert!(grad_sum.iter().any(|&v| v != 0.0));
    }
}
