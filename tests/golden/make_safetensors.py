#!/usr/bin/env python3
"""PyTorch side of the weights interop fixtures (torch is NOT needed in CI).

W1 "digits-fcn" (torchlet::nn::digits_fcn) as a torch.nn.Module whose
state_dict keys are the names torchlet maps onto its parameters (c1.weight, c1.bias,
..., fc.bias), in torchlet's creation order.

    python3 tests/golden/make_safetensors.py
        writes, with torch.manual_seed(0):
        tests/golden/w1_torch.safetensors          PyTorch's initial W1 state_dict
        tests/golden/w1_inputs.safetensors         inputs x28 [2,1,28,28], x12x20
                                                   [1,1,12,20], x13x17 [1,1,13,17] and
                                                   PyTorch's logits for each
                                                   (logits_x28, ...)

    python3 tests/golden/make_safetensors.py --from-torchlet
        reads tests/golden/w1_torchlet.safetensors (W1 trained by torchlet, exported
        by `cargo run --release -p torchlet-tests --bin weights -- export-w1 ...`),
        loads it into PyTorch with load_state_dict(strict=True), and writes PyTorch's
        logits on the same inputs to tests/golden/w1_torchlet_torch_logits.safetensors.

The Rust tests (tests/tests/weights_safetensors.rs) check torchlet's logits against
both within 1e-5.
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))


class W1(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 16, 3, padding=1)
        self.c3 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        x = F.relu(self.c3(x))
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)


def inputs():
    g = torch.Generator().manual_seed(1)
    return {
        "x28": torch.rand(2, 1, 28, 28, generator=g),
        "x12x20": torch.rand(1, 1, 12, 20, generator=g),
        "x13x17": torch.rand(1, 1, 13, 17, generator=g),
    }


def logits(model, xs):
    with torch.no_grad():
        return {"logits_" + k: model(v).contiguous() for k, v in xs.items()}


def main():
    torch.set_num_threads(1)
    model = W1().eval()
    if "--from-torchlet" in sys.argv:
        state = load_file(os.path.join(HERE, "w1_torchlet.safetensors"))
        model.load_state_dict(state, strict=True)
        xs = load_file(os.path.join(HERE, "w1_inputs.safetensors"))
        xs = {k: v for k, v in xs.items() if k.startswith("x")}
        out = logits(model, xs)
        save_file(out, os.path.join(HERE, "w1_torchlet_torch_logits.safetensors"))
        print("wrote w1_torchlet_torch_logits.safetensors", {k: tuple(v.shape) for k, v in out.items()})
        return
    torch.manual_seed(0)
    model = W1().eval()
    assert sum(p.numel() for p in model.parameters()) == 6218
    save_file({k: v.contiguous() for k, v in model.state_dict().items()},
              os.path.join(HERE, "w1_torch.safetensors"))
    xs = inputs()
    save_file({**xs, **logits(model, xs)}, os.path.join(HERE, "w1_inputs.safetensors"))
    print("wrote w1_torch.safetensors and w1_inputs.safetensors")


if __name__ == "__main__":
    main()
