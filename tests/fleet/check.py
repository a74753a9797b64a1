"""Checks of one fleet run (tests/fleet/e2e.sh) on the ServerApp's result.json.

    python3 check.py WORK CHECK [ARG...]

WORK holds result.json (rounds' client metrics, final global arrays), initial.safetensors,
shard*.safetensors and, when the nodes evaluated on it, heldout.safetensors; the run's
settings come in the environment (NODES, ROUNDS, STEPS, CLIENT, EVAL_HELDOUT).
Every run is first checked for its rounds: each has a reply from every node with its
num-examples. Then CHECK:
  - example: the final arrays are w0 (1 - lr)^(steps rounds) (the example node's update);
  - trained: every array finite, most changed, num_batches_tracked + steps rounds;
  - equal REF: every array within 1e-4 max|ref| + 1e-5 of REF's (tests/fleet/golden);
  - spread REF SPREAD NAME: prints the distance from REF beside the float32 PyTorch
    replays' (SPREAD's NAME) and fails past 4x their largest;
  - curve CURVES NAME: prints the held-out accuracy per round beside the float32 PyTorch
    replay's (CURVES's NAME) and fails if a round is more than 0.1 away from it.
Distances are in units of the tolerance of `equal` (1 or less passes it).
"""

import json
import os
import sys

import numpy as np
from safetensors.numpy import load_file


def distance(arrays, ref):
    """Worst array's max |a - r| / (1e-4 max|r| + 1e-5), and that array's name."""
    worst, name = 0.0, None
    for k, r in ref.items():
        r = np.asarray(r, np.float64)
        a = np.asarray(arrays[k], np.float64)
        d = float(np.max(np.abs(a - r))) / (1e-4 * float(np.max(np.abs(r))) + 1e-5) if r.size else 0.0
        if d >= worst:
            worst, name = d, k
    return worst, name


def rounds(work, result):
    nodes, n_rounds = int(os.environ["NODES"]), int(os.environ["ROUNDS"])
    if os.environ.get("CLIENT") == "example":
        sizes = [10 * (i + 1) for i in range(nodes)]  # the example node's own claim
    else:
        sizes = [len(load_file(f"{work}/shard{i + 1}.safetensors")["y"]) for i in range(nodes)]
    want = {"train": sorted(float(s) for s in sizes)}
    held = f"{work}/heldout.safetensors"
    if os.environ.get("EVAL_HELDOUT"):
        want["evaluate"] = [float(len(load_file(held)["y"]))] * int(os.environ["EVAL_NODES"])
    else:
        want["evaluate"] = want["train"]
    for kind, rows_by_round in result["rounds"].items():
        if not rows_by_round and kind == "evaluate" and os.environ.get("NO_EVAL"):
            continue
        assert len(rows_by_round) == n_rounds, (kind, len(rows_by_round))
        for r, rows in enumerate(rows_by_round, 1):
            seen = sorted(row["num-examples"] for row in rows)
            assert seen == want[kind], f"{kind} round {r}: num-examples {seen}, want {want[kind]}"
            key = "train-loss" if kind == "train" else "eval-loss"
            losses = [round(row.get(key, float("nan")), 4) for row in rows]
            print(f"{kind} round {r}: num-examples {[int(s) for s in seen]}, {key} {losses}")


def main():
    work, check, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    result = json.load(open(f"{work}/result.json"))
    initial = load_file(f"{work}/initial.safetensors")
    rounds(work, result)
    got = {k: np.asarray(v, np.float64) for k, v in result["arrays"].items()}
    assert set(got) == set(initial), f"the global arrays' names differ: {sorted(set(got) ^ set(initial))}"
    for k, v in got.items():
        assert np.all(np.isfinite(v)), f"{k} is not finite"
    steps, n_rounds = int(os.environ["STEPS"]), int(os.environ["ROUNDS"])
    if check == "example":
        lr = 0.05
        for name, w0 in initial.items():
            want = w0 * (1 - lr) ** (steps * n_rounds) if w0.dtype == np.float32 else w0
            err = float(np.max(np.abs(got[name] - want))) if want.size else 0.0
            assert err <= 1e-5 * max(1.0, float(np.max(np.abs(want)))), (name, err)
            print(f"final {name}: max |global - w0 (1-lr)^{steps * n_rounds}| = {err:.2e}")
    elif check == "trained":
        changed = 0
        for name, w0 in initial.items():
            if name.endswith("num_batches_tracked"):
                counted = float(got[name]) - float(w0)
                assert abs(counted - steps * n_rounds) < 1e-9 * (float(w0) + 1), (name, counted)
            else:
                changed += int(not np.allclose(got[name], w0))
        print(f"final: every array finite, {changed} of {len(initial)} changed, num_batches_tracked + {steps * n_rounds}")
        assert changed > len(initial) // 2
    elif check == "equal":
        ref = load_file(args[0])
        worst, name = distance(got, ref)
        print(f"final arrays vs the float64 PyTorch replay ({os.path.basename(args[0])}): "
              f"worst {name} at {worst:.3f} x the tolerance (1e-4 max|ref| + 1e-5)")
        assert worst <= 1.0, f"{name} is {worst:.3f} x the tolerance away"
    elif check == "spread":
        ref, spread = load_file(args[0]), json.load(open(args[1]))[args[2]]["float32_perturbed_1e-6"]
        worst, name = distance(got, ref)
        print(f"final arrays vs the float64 PyTorch replay: torchlet {worst:.2f} x the tolerance (worst: {name}); "
              f"float32 PyTorch replays perturbed by 1e-6: {', '.join(f'{d:.2f}' for d in spread)}")
        assert worst <= 4 * max(spread), f"{worst:.2f} is past 4 x the replays' largest ({max(spread):.2f})"
    elif check == "curve":
        curves = json.load(open(args[0]))
        ours = [rows[0]["eval-acc"] for rows in result["rounds"]["evaluate"]]
        for rows in result["rounds"]["evaluate"]:  # every node evaluated the same global model
            assert max(r["eval-acc"] for r in rows) - min(r["eval-acc"] for r in rows) < 1e-9, rows
        theirs = [r["all"] for r in curves[args[1]]]
        start = curves["start"]["all"]
        print(f"held-out accuracy (all ten digits), start {start:.3f} (W2 pretrained on 0-4)")
        print("round  torchlet  pytorch-f32  (pytorch 0-4 / 5-9)")
        for r, (a, b, split) in enumerate(zip(ours, theirs, curves[args[1]]), 1):
            print(f"{r:5}  {a:8.3f}  {b:11.3f}  ({split['0-4']:.3f} / {split['5-9']:.3f})")
        print(f"peak {max(ours):.3f} (+{100 * (max(ours) - start):.1f} points) at round {ours.index(max(ours)) + 1}, "
              f"last {ours[-1]:.3f}")
        far = [r + 1 for r, (a, b) in enumerate(zip(ours, theirs)) if abs(a - b) > 0.1]
        assert not far, f"rounds {far} are more than 0.1 from the PyTorch replay"
    else:
        sys.exit(f"unknown check {check}")


if __name__ == "__main__":
    main()
