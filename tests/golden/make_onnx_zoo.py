#!/usr/bin/env python3
"""The ONNX zoo for torchlet-onnx's importer tests: tiny PyTorch models exported with both
exporters of `torch.onnx.export`, plus reference outputs and one SGD step.

    python3 tests/golden/make_onnx_zoo.py [NAME ...]    # all, or only the models named

Needs torch, torchvision, onnx, onnxruntime and safetensors (CI does not: the files it writes are committed).
Writes into tests/golden/onnx/:
  - NAME.ts.onnx      TorchScript exporter (dynamo=False, opset 13, 17 or 18 as listed in ZOO,
                      no constant folding), dynamic_axes on batch and the free spatial dims;
  - NAME.dyn.onnx     the dynamo exporter (dynamo=True, dynamic_shapes), with its initializers
                      as external data in NAME.dyn.onnx.data (external_data=True; the
                      optimizer off for the models with BatchNorm, which it would fold;
                      the models in SLIM without the nodes' metadata);
  - NAME.ref.safetensors  the parameters and buffers (state_dict names), the inputs `x.K`
                      at several sizes (some never exported), PyTorch's outputs `y.K` (eval
                      mode) and onnxruntime's `ort.K` for the TorchScript file, and, after one
                      SGD step (lr 0.1, cross-entropy or mean-square loss as listed, model in
                      training mode on `x.0`, targets `t`), the updated state_dict as `sgd.NAME`
                      and, for the models in SLIM, the same step in float64 as `sgd64.NAME`
                      (their `x.0` drawn until that step is stable: `stable_input`);
  - refused_lstm.onnx, refused_scale.onnx  tiny models with an LSTM node and with arithmetic
                      on a constant (the importer must refuse them by node); `--refused-only`
                      writes just these.
Seeds are fixed; outputs of reruns can differ in the last bits across torch versions.
"""
import copy
import os
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file

warnings.filterwarnings("ignore")
torch.set_num_threads(1)
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "onnx")


def w1():
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(1),
        nn.Linear(32, 10),
    )


class LeNet5(nn.Module):
    """LeNet-5 on 1x28x28 (fixed size: the head's flatten needs 16*4*4)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 4 * 4, 16)
        self.fc2 = nn.Linear(16, 16)
        self.fc3 = nn.Linear(16, 10)

    def forward(self, x):
        x = F.max_pool2d(torch.tanh(self.conv1(x)), 2)
        x = F.max_pool2d(torch.sigmoid(self.conv2(x)), 2)
        x = x.reshape(x.shape[0], -1)
        x = F.relu(self.fc1(x))
        x = F.leaky_relu(self.fc2(x), 0.1)
        return self.fc3(x)


class InvRes(nn.Module):
    """MobileNetV2's inverted residual: expand 1x1, depthwise 3x3, project 1x1, add."""

    def __init__(self, c, e):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(c, c * e, 1, bias=False), nn.BatchNorm2d(c * e), nn.ReLU6(),
            nn.Conv2d(c * e, c * e, 3, padding=1, groups=c * e, bias=False), nn.BatchNorm2d(c * e),
            nn.ReLU6(),
            nn.Conv2d(c * e, c, 1, bias=False), nn.BatchNorm2d(c),
        )

    def forward(self, x):
        return x + self.conv(x)


class MobileNetish(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 8, 3, stride=2, padding=1, bias=False),
                                  nn.BatchNorm2d(8), nn.ReLU6())
        self.block = InvRes(8, 2)
        self.head = nn.Sequential(nn.Conv2d(8, 16, 1), nn.Hardswish())
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.head(self.block(self.stem(x)))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


class UNetish(nn.Module):
    """Encoder, bottleneck, transposed-conv decoder with a skip concat; per-pixel classes."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU())
        self.down = nn.MaxPool2d(2)
        self.mid = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.ReLU())
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.dec = nn.Sequential(nn.Conv2d(8, 4, 3, padding=1), nn.Sigmoid())
        self.out = nn.Conv2d(4, 3, 1)

    def forward(self, x):
        e = self.enc(x)
        m = self.mid(self.down(e))
        u = self.up(m)
        return self.out(self.dec(torch.cat([u, e], 1)))


class Seq1d(nn.Module):
    """A conv1d sequence classifier: [N, 2, L] -> [N, 5]."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(2, 6, 5, padding=2)
        self.c2 = nn.Conv1d(6, 8, 3, stride=2, dilation=2, groups=2)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        x = F.relu(self.c1(x))
        x = torch.tanh(self.c2(x))
        x = x.mean(dim=2)
        return F.log_softmax(self.fc(x), dim=1)


class PadResize(nn.Module):
    """Asymmetric pad, a strided conv, a bilinear and a nearest upsample, softmax over C."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 4, 3, stride=2)
        self.c2 = nn.Conv2d(4, 4, 3, padding=1)
        self.c3 = nn.Conv2d(4, 3, 1)

    def forward(self, x):
        x = F.pad(x, (1, 0, 1, 0))
        x = F.hardsigmoid(self.c1(x))
        x = F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)
        x = F.relu(self.c2(x))
        x = F.interpolate(x, scale_factor=2.0, mode="nearest")
        return F.softmax(self.c3(x), dim=1)


class SENet(nn.Module):
    """Squeeze-and-excitation with a sigmoid and a hardsigmoid scale (torchvision's
    block, as MobileNetV3 and EfficientNet use it), SiLU, and arithmetic with constants
    on either side: scalars, and a registered buffer broadcast per channel; Split and a
    strided Slice of activations."""

    def __init__(self):
        super().__init__()
        from torchvision.ops import SqueezeExcitation
        self.stem = nn.Sequential(nn.Conv2d(1, 8, 3, stride=2, padding=1, bias=False),
                                  nn.BatchNorm2d(8), nn.SiLU())
        self.se1 = SqueezeExcitation(8, 4, activation=nn.SiLU)
        self.dw = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False),
                                nn.BatchNorm2d(8), nn.Hardswish())
        self.se2 = SqueezeExcitation(8, 4, scale_activation=nn.Hardsigmoid)
        self.register_buffer("shift", torch.linspace(-0.5, 0.5, 8).reshape(8, 1, 1))
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = self.se2(self.dw(self.se1(self.stem(x))))
        a, b = x.chunk(2, dim=1)  # Split of activations, swapped back together
        x = torch.cat([b, a], 1)
        x = x + x[:, :, :, ::2].mean(dim=3, keepdim=True)  # a strided Slice of W
        x = (x - self.shift) * 0.5 + 1.0
        x = 2.0 - x / 4.0
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


class Pool1d(nn.Module):
    """1-D average pooling and Unsqueeze / Squeeze of activations: [N, 2, L] -> [N, 5].
    (1-D max pooling makes the dynamo exporter fix L: torchlet-onnx's own tests build
    that node.)"""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(2, 6, 3, padding=1)
        self.fc = nn.Linear(6, 5)

    def forward(self, x):
        x = F.avg_pool1d(F.relu(self.c1(x)), 2)
        x = F.avg_pool1d(x, 3, stride=2, padding=1, count_include_pad=False)
        x = x.unsqueeze(1).squeeze(1)
        return self.fc(x.mean(dim=2))


def mlp():
    """A plain MLP on [N, features]: Linear, ReLU, Linear, LogSoftmax over the features."""
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 4), nn.LogSoftmax(dim=1))


def mobilenet_v3_small():
    """torchvision's MobileNetV3-Small (width 0.1, reduced tail, a 32-wide head, no
    dropout so that a training step is deterministic): hardswish, SE with hardsigmoid."""
    from torchvision.models.mobilenetv3 import MobileNetV3, _mobilenet_v3_conf
    setting, _ = _mobilenet_v3_conf("mobilenet_v3_small", width_mult=0.1, reduced_tail=True)
    return MobileNetV3(setting, 32, num_classes=10, dropout=0.0)


def efficientnet_b0():
    """torchvision's EfficientNet-B0 (width 0.1, depth 0.25, a 32-wide head, no dropout
    or stochastic depth): SiLU, SE with sigmoid, depthwise 3x3 and 5x5."""
    from torchvision.models.efficientnet import EfficientNet, _efficientnet_conf
    setting, _ = _efficientnet_conf("efficientnet_b0", width_mult=0.1, depth_mult=0.25)
    return EfficientNet(setting, dropout=0.0, stochastic_depth_prob=0.0, num_classes=10,
                        last_channel=32)


def shufflenet_v2():
    """torchvision's ShuffleNetV2 (the x0_5 layout narrowed: stages of 2, 3 and 2 blocks,
    8-16-32-64 channels, a 32-wide head): channel split, channel shuffle."""
    from torchvision.models.shufflenetv2 import ShuffleNetV2
    return ShuffleNetV2([2, 3, 2], [8, 16, 32, 64, 32], num_classes=10)


def ghostnet():
    """timm's GhostNet (width 0.1, no dropout): ghost modules, whose outputs are
    channel Slices of a concat. Its head (a 1x1 conv to 1280 features, fixed by the
    constructor) is narrowed to 32 after construction, to keep the fixture small."""
    from timm.models.ghostnet import _create_ghostnet
    m = _create_ghostnet("ghostnet_100", width=0.1, num_classes=10, drop_rate=0.0)
    m.conv_head = nn.Conv2d(m.conv_head.in_channels, 32, 1)
    m.num_features = 32
    m.classifier = nn.Linear(32, 10)
    return m


# name: (constructor, C, export size (H, W) or (L,), sizes to test, loss kind, TorchScript opset)
ZOO = {
    "w1": (w1, 1, (28, 28), [(28, 28), (20, 24), (13, 9)], "ce", 13),
    "lenet5": (LeNet5, 1, (28, 28), [(28, 28)], "ce", 17),
    "mobilenetish": (MobileNetish, 1, (16, 16), [(16, 16), (12, 20), (7, 9)], "ce", 17),
    "unetish": (UNetish, 1, (16, 16), [(16, 16), (8, 12), (20, 6)], "mse", 18),
    "seq1d": (Seq1d, 2, (32,), [(32,), (24,), (17,)], "ce", 13),
    "padresize": (PadResize, 1, (8, 8), [(8, 8), (9, 6), (5, 7)], "mse", 17),
    "mlp": (mlp, 6, (), [(), (), ()], "ce", 17),
    "pool1d": (Pool1d, 2, (32,), [(32,), (24,), (17,)], "ce", 17),
    "senet": (SENet, 1, (16, 16), [(16, 16), (12, 20), (7, 9)], "ce", 17),
    "mobilenet_v3_small": (mobilenet_v3_small, 3, (32, 32), [(32, 32), (40, 36), (33, 47)], "ce", 17),
    "efficientnet_b0": (efficientnet_b0, 3, (32, 32), [(32, 32), (40, 36), (33, 47)], "ce", 17),
    "shufflenet_v2": (shufflenet_v2, 3, (64, 64), [(64, 64), (72, 56), (65, 47)], "ce", 17),
    "ghostnet": (ghostnet, 3, (32, 32), [(32, 32), (40, 36), (33, 47)], "ce", 17),
}


# Models whose dynamo export is kept without its per-node metadata (the exporter's
# stack traces and FX names: 90% of the file, nothing the importer reads).
SLIM = {"mlp", "pool1d", "senet", "mobilenet_v3_small", "efficientnet_b0", "ghostnet",
        "shufflenet_v2"}


def slim(path):
    m = onnx.load(path)
    for n in m.graph.node:
        del n.metadata_props[:]
    os.remove(path + ".data")
    # Initializers external as the exporter wrote them; small ones (axes, shapes: what
    # onnxruntime reads while it loads) and Constant nodes stay inline.
    from onnx.external_data_helper import convert_model_to_external_data
    convert_model_to_external_data(m, all_tensors_to_one_file=True, size_threshold=64,
                                   location=os.path.basename(path) + ".data",
                                   convert_attribute=False)
    onnx.save(m, path)


def step64(model, x, t):
    """The state_dict after one SGD step (lr 0.1, cross-entropy) of a float64 copy."""
    m = copy.deepcopy(model).double().train()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    F.cross_entropy(m(x.double()), t).backward()
    opt.step()
    return {k: v for k, v in m.state_dict().items() if v.is_floating_point()}


def stable_input(model, shape, t, g, tries=20):
    """A random input whose one-step result barely moves when the input does (a relative
    1e-7 perturbation, three times, moves no value of the float64 step by 1e-6): one
    SGD step of a random ReLU network with BatchNorm in training mode is ill-conditioned
    on some inputs (a ReLU input within rounding of zero), where neither float32 PyTorch
    nor torchlet can be compared to anything."""
    for _ in range(tries):
        x = torch.randn(*shape, generator=g)
        base = step64(model, x, t)
        worst = 0.0
        for s in range(3):
            e = torch.randn(*shape, generator=torch.Generator().manual_seed(100 + s))
            moved = step64(model, x.double() * (1 + 1e-7 * e.double()), t)
            worst = max(worst, max((moved[k] - base[k]).abs().max().item() for k in base))
        if worst < 1e-6:
            return x
    raise RuntimeError(f"no stable input in {tries} draws")


def spatial_names(rank):
    return {0: [], 1: ["l"], 2: ["h", "w"]}[rank]


def export_ts(model, x, path, opset, fixed):
    names = [] if fixed else spatial_names(x.dim() - 2)
    axes = {0: "batch"}
    for k, n in enumerate(names):
        axes[2 + k] = n
    # No constant folding: it would fold BatchNorm into the convolutions.
    torch.onnx.export(model, (x,), path, dynamo=False, opset_version=opset,
                      do_constant_folding=False,
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": axes, "output": {0: "batch"}})


def export_dyn(model, x, path, fixed, optimize):
    from torch.export import Dim
    shapes = {0: Dim("batch", min=1, max=64)}
    if not fixed:
        for k, n in enumerate(spatial_names(x.dim() - 2)):
            shapes[2 + k] = Dim(n, min=x.shape[2 + k] // 2, max=256)
    prog = torch.onnx.export(model, (x,), dynamo=True, dynamic_shapes=({**shapes},),
                             input_names=["input"], output_names=["output"], optimize=optimize)
    prog.save(path, external_data=True)


def main(only=()):
    """Writes every model of ZOO, or only those named."""
    os.makedirs(OUT, exist_ok=True)
    for name, (ctor, c, size, sizes, loss, opset) in ZOO.items():
        if only and name not in only:
            continue
        torch.manual_seed(0)
        model = ctor()
        if any(isinstance(m, nn.BatchNorm2d) for m in model.modules()):
            # Non-trivial running statistics, so eval mode differs from training mode.
            model.train()
            with torch.no_grad():
                for _ in range(3):
                    model(torch.randn(4, c, *size))
        model.eval()
        x = torch.randn(2, c, *size)
        fixed = name == "lenet5"
        ts = os.path.join(OUT, f"{name}.ts.onnx")
        dyn = os.path.join(OUT, f"{name}.dyn.onnx")
        export_ts(model, x, ts, opset, fixed)
        # The optimizer folds BatchNorm into the convolutions: off where there is some.
        has_bn = any(isinstance(m, nn.BatchNorm2d) for m in model.modules())
        export_dyn(model, x, dyn, fixed, optimize=not has_bn)
        if name in SLIM:
            slim(dyn)
        onnx.checker.check_model(ts)
        sess = ort.InferenceSession(ts, providers=["CPUExecutionProvider"])
        sess_dyn = ort.InferenceSession(dyn, providers=["CPUExecutionProvider"])
        ref = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
        g = torch.Generator().manual_seed(1)
        for k, s in enumerate(sizes):
            xs = torch.randn(2 if k != 1 else 3, c, *s, generator=g)
            if k == 0 and name in SLIM and loss == "ce":
                t0 = torch.arange(2) % model(xs).shape[1]
                xs = stable_input(model, xs.shape, t0, g)
            with torch.no_grad():
                y = model(xs)
            o = sess.run(None, {"input": xs.numpy()})[0]
            od = sess_dyn.run(None, {sess_dyn.get_inputs()[0].name: xs.numpy()})[0]
            assert np.allclose(o, y.numpy(), rtol=1e-4, atol=1e-5), name
            assert np.allclose(od, y.numpy(), rtol=1e-4, atol=1e-5), name
            ref[f"x.{k}"] = xs
            ref[f"y.{k}"] = y
            ref[f"ort.{k}"] = torch.from_numpy(o)
        # One SGD step in training mode on x.0, also in float64 (sgd64.*, rounded to
        # f32): a step of a BatchNorm network can be ill-conditioned in float32.
        exact = copy.deepcopy(model).double().train() if name in SLIM else None
        model.train()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x0 = ref["x.0"]
        out = model(x0)
        if loss == "ce":
            t = torch.arange(x0.shape[0]) % out.shape[1]
            F.cross_entropy(out, t).backward()
            ref["t"] = t
        else:
            t = torch.randn(out.shape, generator=g)
            F.mse_loss(out, t).backward()
            ref["t"] = t
        opt.step()
        for k, v in model.state_dict().items():
            ref[f"sgd.{k}"] = v.detach().clone().contiguous()
        if exact is not None:
            opt = torch.optim.SGD(exact.parameters(), lr=0.1)
            F.cross_entropy(exact(x0.double()), ref["t"]).backward() if loss == "ce" else \
                F.mse_loss(exact(x0.double()), ref["t"].double()).backward()
            opt.step()
            for k, v in exact.state_dict().items():
                v = v.detach().clone().contiguous()
                ref[f"sgd64.{k}"] = v.float() if v.is_floating_point() else v
        save_file({k: v.contiguous() for k, v in ref.items()},
                  os.path.join(OUT, f"{name}.ref.safetensors"))
        print(name, "ok", os.path.getsize(ts), os.path.getsize(dyn))
    if not only:
        refused()


def refused():
    class Rnn(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(3, 4, batch_first=True)

        def forward(self, x):
            return self.rnn(x)[0]

    class Scale(nn.Module):
        """x * 2 + 1 after a conv: arithmetic with a constant, which the importer refuses."""

        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 2, 3)

        def forward(self, x):
            return self.conv(x) * 2.0 + 1.0

    torch.manual_seed(0)
    torch.onnx.export(Rnn().eval(), (torch.randn(1, 5, 3),), os.path.join(OUT, "refused_lstm.onnx"),
                      dynamo=False, opset_version=13, input_names=["input"])
    torch.onnx.export(Scale().eval(), (torch.randn(1, 1, 6, 6),), os.path.join(OUT, "refused_scale.onnx"),
                      dynamo=False, opset_version=13, input_names=["input"])


if __name__ == "__main__":
    import sys
    if sys.argv[1:] == ["--refused-only"]:
        os.makedirs(OUT, exist_ok=True)
        refused()
    else:
        main(sys.argv[1:])
