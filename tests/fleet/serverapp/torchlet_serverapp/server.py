"""Stock FedAvg over torchlet SuperNodes.

Initial arrays come from a safetensors file (a PyTorch state_dict saved with
safetensors.torch.save_file, or `torchlet export`), in the file's order. Each round's client
metrics (num-examples, train-loss, eval-loss, eval-acc), the error replies' reasons, when
each round's replies were in, and the final arrays are written to the JSON file `out`, which tests/fleet/check.py checks. A round
waits `round-timeout` seconds at most for its replies (a node that died does not stall the
run) and proceeds with at least `min-nodes` of them.
"""

import json
import time

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg
from safetensors import safe_open

app = ServerApp()
LOG = {"train": [], "evaluate": []}
ERRORS = {"train": [], "evaluate": []}
TIMES = {"start": 0.0, "train": [], "evaluate": []}  # time.time() as each round's replies are in


class LoggedFedAvg(FedAvg):
    """Stock FedAvg; the reasons of each round's error replies are logged first."""

    def aggregate_train(self, server_round, replies):
        replies = list(replies)
        TIMES["train"].append(time.time())
        ERRORS["train"].append([m.error.reason for m in replies if m.has_error()])
        return super().aggregate_train(server_round, replies)

    def aggregate_evaluate(self, server_round, replies):
        replies = list(replies)
        TIMES["evaluate"].append(time.time())
        ERRORS["evaluate"].append([m.error.reason for m in replies if m.has_error()])
        return super().aggregate_evaluate(server_round, replies)


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
    nodes, least = int(cfg["num-nodes"]), int(cfg["min-nodes"]) or int(cfg["num-nodes"])
    strategy = LoggedFedAvg(
        min_train_nodes=least, min_evaluate_nodes=int(cfg["evaluate-nodes"]) or least, min_available_nodes=least,
        fraction_train=float(cfg["fraction-train"]), fraction_evaluate=float(cfg["fraction-evaluate"]),
        train_metrics_aggr_fn=logged("train"), evaluate_metrics_aggr_fn=logged("evaluate"),
    )
    train_config = ConfigRecord({k: cfg[k] for k in ("lr", "momentum", "local-steps", "batch-size")})
    TIMES["start"] = time.time()
    result = strategy.start(
        grid=grid, initial_arrays=load_arrays(cfg["initial"]),
        num_rounds=int(cfg["num-rounds"]), train_config=train_config,
        timeout=float(cfg["round-timeout"]),
    )
    final = {k: a.numpy().tolist() for k, a in result.arrays.items()}
    with open(cfg["out"], "w") as f:
        json.dump({"rounds": LOG, "errors": ERRORS, "times": TIMES, "arrays": final}, f)
