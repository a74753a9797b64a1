//! A SuperNode whose model is its arrays and whose loss is ½‖w‖² (gradient w): each train
//! task runs `local-steps` SGD steps w -= lr·w on every float32 array and sends them back.
//! `cargo run -p torchlet-fleet --example node -- http://127.0.0.1:9093 [NUM_EXAMPLES]`
use torchlet_fleet::records::{config_f64, config_u64};
use torchlet_fleet::{sign::Identity, Array, Client, NodeOptions, Reply, Values};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let superlink = args.get(1).map_or("http://127.0.0.1:9093", String::as_str);
    let num_examples = args.get(2).and_then(|n| n.parse().ok()).unwrap_or(10);
    let client = Client::new(superlink, Identity::generate(&mut rand_core::OsRng)?)?;
    let summary = torchlet_fleet::run(&client, &NodeOptions::default(), |task| {
        let lr = config_f64(task.config, "lr").unwrap_or(0.1) as f32;
        let steps = config_u64(task.config, "local-steps").unwrap_or(1).max(1);
        let (mut loss, mut arrays) = (0.0, Vec::new());
        for (name, array) in task.arrays {
            let Values::F32(mut w) = array.values(name).map_err(|e| e.to_string())? else {
                arrays.push((name.clone(), array.clone())); // buffers go back unchanged
                continue;
            };
            for _ in 0..steps {
                loss += w.iter().map(|x| 0.5 * f64::from(x * x)).sum::<f64>() / steps as f64;
                w.iter_mut().for_each(|x| *x -= lr * *x);
            }
            let updated = Array::from_values(name, &array.shape, &Values::F32(w));
            arrays.push((name.clone(), updated.map_err(|e| e.to_string())?));
        }
        Ok(match task.kind {
            "train" => Reply::Train {
                arrays,
                num_examples,
                train_loss: loss,
            },
            _ => Reply::Evaluate {
                num_examples,
                eval_loss: loss,
                eval_acc: 1.0,
            },
        })
    })?;
    eprintln!(
        "node {}: {} replies, run finished",
        summary.node_id, summary.replies
    );
    Ok(())
}
