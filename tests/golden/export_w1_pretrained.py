#!/usr/bin/env python3
"""W1 with the firmware's pretrained weights, exported from PyTorch to ONNX: the input of
the model file that `finetune_model` loads (firmware/make_w1_model.sh runs the whole road).

    python3 tests/golden/export_w1_pretrained.py IN.safetensors OUT.onnx

IN holds W1's weights under the names of `torchlet::io::DIGITS_FCN_NAMES` (c1.weight,
c1.bias, ..., fc.bias), as `weights to-safetensors firmware/assets/w1_pretrained.tlw`
writes them; the module below has the same names, so they load as its state_dict. The
export is the TorchScript exporter (dynamo=False, opset 13, no constant folding) with
batch, H and W dynamic, as tests/golden/make_onnx_zoo.py exports W1. f32 values pass
through unchanged, so the model file holds the .tlw's weights bit for bit.

Needs torch, onnx and safetensors (CI does not: the ONNX file and the model file are committed).
"""
import sys

import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file


class W1(nn.Module):
    """W1 "digits-fcn" (torchlet::nn::digits_fcn), with torchlet's parameter names."""

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


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, out = sys.argv[1:]
    model = W1()
    model.load_state_dict(load_file(src), strict=True)
    model.eval()
    x = torch.zeros(1, 1, 28, 28)
    torch.onnx.export(model, (x,), out, dynamo=False, opset_version=13,
                      do_constant_folding=False, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch", 2: "h", 3: "w"}, "output": {0: "batch"}})
    onnx.checker.check_model(out)
    # The initializers are the loaded tensors, bit for bit.
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in onnx.load(out).graph.initializer}
    for k, v in model.state_dict().items():
        assert (inits[k] == v.numpy()).all(), k
    print(f"wrote {out}: {len(inits)} initializers equal to {src}")


if __name__ == "__main__":
    main()
