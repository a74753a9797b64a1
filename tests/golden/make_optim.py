"""Golden values for torchlet's optimizers from torch.optim (SGD with momentum and
weight decay, Adam with and without weight decay).

For each recipe: one parameter vector p0 and a fixed sequence of 5 gradients; PyTorch's
parameter after every step is recorded (float32, as torch computes it).
Run: python3 tests/golden/make_optim.py   (writes tests/golden/optim.json)
"""
import json
import os

import torch

torch.manual_seed(0)
p0 = [0.5, -1.25, 2.0, 0.0, -0.1, 3.5]
grads = [[((i * 7 + j * 3) % 11 - 5) / 4.0 for j in range(len(p0))] for i in range(5)]

recipes = [
    {"name": "sgd", "opt": "sgd", "lr": 0.1, "momentum": 0.0, "weight_decay": 0.0},
    {"name": "sgd-momentum", "opt": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 0.0},
    {"name": "sgd-momentum-wd", "opt": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 0.01},
    {"name": "adam", "opt": "adam", "lr": 0.01, "weight_decay": 0.0},
    {"name": "adam-wd", "opt": "adam", "lr": 0.02, "weight_decay": 0.1},
]
out = {"torch": torch.__version__, "p0": p0, "grads": grads, "recipes": []}
for r in recipes:
    p = torch.nn.Parameter(torch.tensor(p0, dtype=torch.float32))
    if r["opt"] == "sgd":
        opt = torch.optim.SGD([p], lr=r["lr"], momentum=r["momentum"], weight_decay=r["weight_decay"])
    else:
        opt = torch.optim.Adam([p], lr=r["lr"], weight_decay=r["weight_decay"])
    steps = []
    for g in grads:
        opt.zero_grad()
        p.grad = torch.tensor(g, dtype=torch.float32)
        opt.step()
        steps.append([float(v) for v in p.detach()])
    out["recipes"].append({**r, "steps": steps})
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "optim.json")
with open(path, "w") as f:
    json.dump(out, f, indent=1)
print(f"torch {torch.__version__}: wrote {path}")
