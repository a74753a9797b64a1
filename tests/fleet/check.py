"""Checks of one fleet run (tests/fleet/e2e.sh) on the ServerApp's result.json.

    python3 check.py WORK CHECK [ARG...]
    python3 check.py WORK fault-nan|fault-extra|fault-shape   # spoils WORK's files first

WORK holds result.json (rounds' client metrics, final global arrays), initial.safetensors,
shard*.safetensors and, when the nodes evaluated on it, heldout.safetensors; the run's
settings come in the environment (NODES, ROUNDS, STEPS, CLIENT, EVAL_HELDOUT).
Every run is first checked for its rounds: each has a reply from every node with its
num-examples (but the node a FAULT takes out: see e2e.sh; with FAULT extra or shape, that
every node refused every message by name). Then CHECK:
  - example: the final arrays are w0 (1 - lr)^(steps rounds) (the example node's update);
  - trained: every array finite, most changed, num_batches_tracked + steps rounds;
  - equal REF: every array within 1e-4 max|ref| + 1e-5 of REF's (tests/fleet/golden);
  - spread REF SPREAD NAME: prints the distance from REF beside the float32 PyTorch
    replays' (SPREAD's NAME) and fails past 4x their largest;
  - curve CURVES NAME: prints the held-out accuracy per round beside the float32 PyTorch
    replay's (CURVES's NAME) and fails if a round is more than 0.1 away from it;
  - scale: prints wall time per round, CPU time and peak memory per node and bytes on the
    wire per node-round (WIRE=1 SAMPLE=1 runs; tests/fleet/scale.sh).
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


def rounds(work, result, missing=(), maybe_missing=()):
    """Every round has a reply from every node but those `missing` (0-based) and perhaps
    those `maybe_missing`, each with its num-examples; prints the rounds."""
    nodes, n_rounds = int(os.environ["NODES"]), int(os.environ["ROUNDS"])
    if os.environ.get("CLIENT") == "example":
        sizes = [10 * (i + 1) for i in range(nodes)]  # the example node's own claim
    else:
        sizes = [len(load_file(f"{work}/shard{i + 1}.safetensors")["y"]) for i in range(nodes)]
    held = f"{work}/heldout.safetensors"
    if os.environ.get("EVAL_HELDOUT"):
        eval_sizes = [len(load_file(held)["y"])] * (int(os.environ["EVAL_NODES"]) or nodes)
    else:
        eval_sizes = sizes
    for kind, all_sizes in (("train", sizes), ("evaluate", eval_sizes)):
        rows_by_round = result["rounds"][kind]
        if not rows_by_round and kind == "evaluate" and os.environ.get("NO_EVAL"):
            continue
        assert len(rows_by_round) == n_rounds, (kind, len(rows_by_round))
        want = sorted(float(n) for i, n in enumerate(all_sizes) if i not in missing and i not in maybe_missing)
        maybe = sorted(float(all_sizes[i]) for i in maybe_missing if i < len(all_sizes))
        for r, rows in enumerate(rows_by_round, 1):
            seen = sorted(row["num-examples"] for row in rows)
            if maybe_missing:  # FedAvg samples; a sampled dead node leaves its round short
                assert len(seen) >= len(want) - 1 and set(seen) <= set(want + maybe), (kind, r, seen)
            else:
                assert seen == want, f"{kind} round {r}: num-examples {seen}, want {want}"
            key = "train-loss" if kind == "train" else "eval-loss"
            losses = [round(row.get(key, float("nan")), 4) for row in rows]
            times = result.get("times", {})
            took = ""
            if len(times.get(kind, [])) >= r:
                took = f" (in at {times[kind][r - 1] - times['start']:.1f} s)"
            print(f"{kind} round {r}: num-examples {[int(s) for s in seen]}, {key} {losses}{took}")


def prepare_fault(work, fault):
    """Spoils node 1's samples (nan) or the initial arrays (extra, shape) in place."""
    from safetensors.numpy import save_file

    if fault == "nan":
        shard = load_file(f"{work}/shard1.safetensors")
        shard["x"][0, 0, 0, 0] = np.nan
        save_file(shard, f"{work}/shard1.safetensors")
        print("node 1's first sample holds a NaN")
        return
    initial = load_file(f"{work}/initial.safetensors")
    if fault == "extra":
        initial["extra.weight"] = np.zeros(3, np.float32)
        print("the initial arrays hold extra.weight, which the model has not")
    else:
        name = reshaped(initial)
        initial[name] = np.zeros(initial[name].shape[0] + 1, np.float32)
        print(f"the initial {name} has shape {list(initial[name].shape)}")
    save_file(initial, f"{work}/initial.safetensors")


def reshaped(initial):
    """The array FAULT=shape spoils: the first 1-D float32 one."""
    return next(k for k, v in sorted(initial.items()) if v.dtype == np.float32 and v.ndim == 1)


def refused(result, name):
    """Every node refused every message, naming `name`; nothing was averaged."""
    nodes, n_rounds = int(os.environ["NODES"]), int(os.environ["ROUNDS"])
    assert not result["rounds"]["train"], "a train reply was taken"
    for kind in ("train", "evaluate"):
        errors = result["errors"][kind]
        assert len(errors) == n_rounds, (kind, errors)
        for r, reasons in enumerate(errors, 1):
            assert len(reasons) == nodes and all(name in e for e in reasons), (kind, r, reasons)
    assert not result["arrays"], "no array should have been averaged"
    print(f"every node refused every message ({n_rounds} rounds), e.g.: {result['errors']['train'][0][0]}")
    print("no train reply was averaged; the ServerApp has no new arrays")


def scale(work, result, initial):
    """Prints the scale figures: wall time per round, CPU and peak memory per node, bytes."""
    nodes, n_rounds = int(os.environ["NODES"]), int(os.environ["ROUNDS"])
    times = [result["times"]["start"]] + result["times"]["train"]
    walls = [b - a for a, b in zip(times, times[1:])]
    samples = json.load(open(f"{work}/nodes.json")).values()
    cpu = sorted(v["cpu_s"] for v in samples)
    rss = sorted(v["peak_rss_kib"] for v in samples)
    wire = json.load(open(f"{work}/wire.json"))
    arrays = sum(v.nbytes for v in initial.values())
    requests = []
    for i in range(nodes):
        for line in open(f"{work}/node{i + 1}.log"):
            if "HTTP requests" in line:
                requests.append(int(line.rsplit(",", 1)[1].split()[0]))
    per_request = (wire["to_superlink"] + wire["from_superlink"] - 2 * arrays * nodes * n_rounds) / max(1, sum(requests))
    per = (wire["to_superlink"] + wire["from_superlink"]) / (nodes * n_rounds)
    print(f"{nodes} nodes, {n_rounds} rounds, {len(initial)} arrays of {arrays:,} bytes")
    print(f"wall time per round: {', '.join(f'{w:.1f}' for w in walls)} s")
    print(f"CPU per node-round: median {cpu[len(cpu) // 2] / n_rounds * 1e3:.0f} ms, "
          f"max {cpu[-1] / n_rounds * 1e3:.0f} ms (the whole run, joining and leaving included, / rounds)")
    print(f"peak resident memory per node: median {rss[len(rss) // 2] / 1024:.1f} MiB, max {rss[-1] / 1024:.1f} MiB")
    print(f"bytes on the wire per node-round: {per:,.0f} (to the SuperLink {wire['to_superlink'] / (nodes * n_rounds):,.0f}, "
          f"from it {wire['from_superlink'] / (nodes * n_rounds):,.0f}; {wire['connections']} connections), "
          f"beside the arrays' own {2 * arrays:,} (down and up): overhead {per - 2 * arrays:+,.0f}")
    print(f"HTTP requests per node-round: {sum(requests) / (nodes * n_rounds):.0f} "
          f"(one per object each way, besides heartbeats and polls); {per_request:,.0f} bytes each beyond the arrays")


def main():
    work, check, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    if check.startswith("fault-"):
        prepare_fault(work, check[len("fault-"):])
        return
    result = json.load(open(f"{work}/result.json"))
    initial = load_file(f"{work}/initial.safetensors")
    fault, nodes = os.environ.get("FAULT", ""), int(os.environ["NODES"])
    if fault in ("extra", "shape"):
        refused(result, "extra.weight" if fault == "extra" else reshaped(initial))
        return
    rounds(work, result, missing={0} if fault == "nan" else (), maybe_missing={nodes - 1} if fault in ("kill", "interrupt") else ())
    if fault == "nan":
        for kind in ("train", "evaluate"):
            for r, reasons in enumerate(result["errors"][kind], 1):
                assert len(reasons) == 1 and "finite" in reasons[0], (kind, r, reasons)
        print(f"node 1 sent an error reply in every round, e.g.: {result['errors']['train'][0][0]}")
    if fault in ("kill", "interrupt"):
        dead = float(len(load_file(f"{work}/shard{nodes}.safetensors")["y"]))
        without = [r for r, rows in enumerate(result["rounds"]["train"], 1) if dead not in [x["num-examples"] for x in rows]]
        assert without, "the stopped node replied in every round"
        print(f"the run finished without the stopped node in train rounds {without}")
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
    elif check == "scale":
        scale(work, result, initial)
    else:
        sys.exit(f"unknown check {check}")


if __name__ == "__main__":
    main()
