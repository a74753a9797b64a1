"""Stock FedAvg over torchlet SuperNodes.

Initial arrays come from a safetensors file (a PyTorch state_dict saved with
safetensors.torch.save_file, or `torchlet export`), in the file's order. Each round's client
metrics (num-examples, train-loss, eval-loss, eval-acc) and the final arrays are written to
the JSON file `out`, which tests/fleet/e2e.sh checks.
"""

import json

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg
from safetensors import safe_open

app = ServerApp()
LOG = {"train": [], "evaluate": []}


def load_arrays(path):
    with safe_open(path, framework="numpy") as f:
        return ArrayRecord({k: Array(np.array(f.get_tensor(k), order="C")) for k in f.keys()})


def logged(kind):
    def aggregate(replies, weighting_key):
        rows = [{k: float(v) for m in r.metric_records.values() for k, v in m.items()} for r in replies]
        LOG[kind].append(rows)
        total = sum(row[weighting_key] for row in rows)
        keys = [k for k in rows[0] if k != weighting_key]
        return MetricRecord({k: sum(r[k] * r[weighting_key] for r in rows) / total for k in keys})

    return aggregate


@app.main()
def main(grid: Grid, context: Context) -> None:
    cfg = context.run_config
    nodes = int(cfg["num-nodes"])
    strategy = FedAvg(
        min_train_nodes=nodes, min_evaluate_nodes=nodes, min_available_nodes=nodes,
        train_metrics_aggr_fn=logged("train"), evaluate_metrics_aggr_fn=logged("evaluate"),
    )
    train_config = ConfigRecord({k: cfg[k] for k in ("lr", "momentum", "local-steps", "batch-size")})
    result = strategy.start(
        grid=grid, initial_arrays=load_arrays(cfg["initial"]),
        num_rounds=int(cfg["num-rounds"]), train_config=train_config,
    )
    final = {k: a.numpy().tolist() for k, a in result.arrays.items()}
    with open(cfg["out"], "w") as f:
        json.dump({"rounds": LOG, "arrays": final}, f)
