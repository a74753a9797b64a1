#!/usr/bin/env python3
"""Generate tests/golden/ops.json: PyTorch golden values for the op conformance runner.

    python3 tests/golden/make_golden.py          # needs torch and numpy (pip install torch numpy)

Format: exactly the conformance runner's input document (tests/golden/README.md), `{"cases": [...]}`,
where every case additionally carries either
  - "expected": {"output": {shape, data}, "grads": {input_name: {shape, data}}}
    (the runner's output format; "grads" has one entry per floating-point input), or
  - "expected_error": "ShapeMismatch" | "InvalidParam"   (bad input; no "expected", no
    "grad_output": the op must refuse before any backward pass).

How the numbers are produced:
  - Inputs and grad_output are dyadic rationals (k / 2^m, small k), so they are exactly
    representable in f32 and identical in the engine and in PyTorch. They come from
    Python's random.Random seeded with crc32(case id), so each case is reproducible on its
    own and adding a case does not change the others. Max-pool inputs are distinct values
    (a shuffled arange), so there are no ties; relu/leaky_relu inputs are never exactly 0.
  - The reference is computed by PyTorch in float64 (torch.nn.functional, CPU, autograd),
    then every output and gradient is rounded once to the nearest f32. The expected values
    are therefore the correctly rounded f32 of the exact result (up to f64 error), not
    PyTorch's f32 result; compare the engine's f32 output with a small tolerance.
  - Numbers are written as the shortest decimal that rounds back to the same f32 (also
    when parsed as f64 and then cast to f32; the script checks this).
  - Losses (cross_entropy, mse_loss) have no grad_output (the gradient of the scalar is 1);
    their output has shape [] and one data value.
  - Every case has "params" ({} for ops without params). All spatial params are written as 2-element lists [h, w]. A few "-defaults" cases
    omit params to exercise PyTorch's defaults (e.g. pool stride = kernel_size).

Error-kind convention for bad cases: tensors that disagree with each other or with their
own data (channel mismatch, in_features mismatch, data length != product(shape), target
count != batch, an input smaller than the kernel can take once padded: the engine's
message names both sizes) -> "ShapeMismatch"; parameter values that are invalid by themselves or
for the given input size (stride 0, groups not dividing channels, pool padding > kernel/2, reflect pad >= input size, size 0, class target
out of range) -> "InvalidParam". The script checks that PyTorch also rejects every bad
case it can express (data-length cases cannot be built in PyTorch).
"""
import json
import os
import warnings
import random
import sys
import zlib

import numpy as np
import torch
import torch.nn.functional as F

torch.set_num_threads(1)
warnings.filterwarnings("ignore", message="Using a target size")  # bad-mse_loss case
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "ops.json")


# ---------------------------------------------------------------- deterministic inputs
class Gen:
    def __init__(self, case_id):
        self.r = random.Random(zlib.crc32(case_id.encode()))

    def vals(self, shape, lo=-2.0, hi=2.0, denom=8, nonzero=False):
        n = int(np.prod(shape)) if shape else 1
        out = []
        while len(out) < n:
            v = self.r.randint(int(lo * denom), int(hi * denom)) / denom
            if nonzero and v == 0.0:
                continue
            out.append(v)
        return {"shape": list(shape), "data": out}

    def distinct(self, shape):
        """A shuffled arange, centred, never 0, all values distinct (no max-pool ties)."""
        n = int(np.prod(shape))
        denom = 1
        while denom * 4 < n:
            denom *= 2
        perm = list(range(n))
        self.r.shuffle(perm)
        return {"shape": list(shape), "data": [(p - n // 2 + 0.5) / denom for p in perm]}

    def ints(self, shape, hi):
        n = int(np.prod(shape))
        return {"shape": list(shape), "data": [self.r.randrange(hi) for _ in range(n)]}


def to_t(t, dtype=torch.float64):
    return torch.tensor(t["data"], dtype=dtype).reshape(t["shape"])


def f32_json(x):
    """{shape, data} with data rounded to f32 (as Python floats holding f32 values)."""
    a = x.detach().to(torch.float32).contiguous().numpy()
    return {"shape": list(a.shape), "data": [float(v) for v in a.reshape(-1)]}


# ---------------------------------------------------------------- op evaluation in torch
def pair(p, key, default):
    v = p.get(key, default)
    return tuple(v) if isinstance(v, list) else v


def run_op(op, params, ins):
    """ins: dict name -> torch tensor. Returns the output tensor."""
    p = params
    x = ins["input"]
    if op == "conv2d":
        return F.conv2d(x, ins["weight"], ins.get("bias"), stride=pair(p, "stride", 1),
                        padding=pair(p, "padding", 0), dilation=pair(p, "dilation", 1),
                        groups=p.get("groups", 1))
    if op == "max_pool2d":
        return F.max_pool2d(x, pair(p, "kernel_size", None), stride=pair(p, "stride", None),
                            padding=pair(p, "padding", 0), ceil_mode=p.get("ceil_mode", False))
    if op == "avg_pool2d":
        return F.avg_pool2d(x, pair(p, "kernel_size", None), stride=pair(p, "stride", None),
                            padding=pair(p, "padding", 0), ceil_mode=p.get("ceil_mode", False),
                            count_include_pad=p.get("count_include_pad", True))
    if op == "adaptive_avg_pool2d":
        return F.adaptive_avg_pool2d(x, pair(p, "output_size", None))
    if op == "linear":
        return F.linear(x, ins["weight"], ins.get("bias"))
    if op == "relu":
        return F.relu(x)
    if op == "leaky_relu":
        return F.leaky_relu(x, p.get("negative_slope", 0.01))
    if op == "sigmoid":
        return torch.sigmoid(x)
    if op == "tanh":
        return torch.tanh(x)
    if op == "add":
        if x.shape != ins["other"].shape:
            raise ValueError("add: shapes differ (no broadcasting in the engine)")
        return x + ins["other"]
    if op == "mul":
        if x.shape != ins["other"].shape:
            raise ValueError("mul: shapes differ (no broadcasting in the engine)")
        return x * ins["other"]
    if op == "flatten":
        return torch.flatten(x, p.get("start_dim", 0))
    if op == "cross_entropy":
        return F.cross_entropy(x, ins["target"], reduction=p.get("reduction", "mean"))
    if op == "mse_loss":
        return F.mse_loss(x, ins["target"], reduction=p.get("reduction", "mean"))
    if op == "pad":
        mode = p.get("mode", "constant")
        if mode == "constant":
            return F.pad(x, tuple(p["pad"]), mode="constant", value=p.get("value", 0.0))
        return F.pad(x, tuple(p["pad"]), mode=mode)
    if op == "interpolate":
        mode = p.get("mode", "nearest")
        if mode == "nearest":
            return F.interpolate(x, size=tuple(p["size"]), mode="nearest")
        return F.interpolate(x, size=tuple(p["size"]), mode=mode,
                             align_corners=p.get("align_corners", False))
    raise KeyError(op)


def evaluate(case, dtype, forward_only=False):
    ins = {}
    for name, t in case["inputs"].items():
        if isinstance(t["data"][0], int) and case["op"] == "cross_entropy" and name == "target":
            ins[name] = torch.tensor(t["data"], dtype=torch.long).reshape(t["shape"])
        else:
            ins[name] = to_t(t, dtype).requires_grad_(True)
    out = run_op(case["op"], case.get("params", {}), ins)
    if forward_only:
        return out, None
    if "grad_output" in case:
        g = to_t(case["grad_output"], dtype)
        assert list(g.shape) == list(out.shape), (case["id"], g.shape, out.shape)
        out.backward(g)
    else:
        assert out.dim() == 0, case["id"]
        out.backward()
    grads = {n: t.grad for n, t in ins.items() if t.is_floating_point()}
    return out, grads


# ---------------------------------------------------------------- case builders
CASES = []


def case(cid, op, params, inputs, loss=False):
    """inputs: name -> callable(Gen) or {shape,data}. grad_output derived from the output shape."""
    g = Gen(cid)
    c = {"id": cid, "op": op, "dtype": "f32", "params": params if params is not None else {}}
    c["inputs"] = {n: (f(g) if callable(f) else f) for n, f in inputs.items()}
    out, _ = evaluate(c, torch.float64, forward_only=True)
    if not loss:
        c["grad_output"] = g.vals(list(out.shape), -1.0, 1.0, 8)
    CASES.append(c)


def bad(cid, op, params, inputs, kind, torch_rejects=True):
    g = Gen(cid)
    c = {"id": cid, "op": op, "dtype": "f32", "params": params if params is not None else {}}
    c["inputs"] = {n: (f(g) if callable(f) else f) for n, f in inputs.items()}
    c["expected_error"] = kind
    if torch_rejects:
        try:
            evaluate(c, torch.float64, forward_only=True)
        except Exception:
            pass
        else:
            sys.exit(f"{cid}: PyTorch accepts this case")
    CASES.append(c)


V = lambda *shape, lo=-2.0, hi=2.0, nz=False: (lambda g: g.vals(list(shape), lo, hi, 8, nz))
W = lambda *shape: (lambda g: g.vals(list(shape), -1.0, 1.0, 8))
D = lambda *shape: (lambda g: g.distinct(list(shape)))


def conv(cid, x, w, bias, params):
    ins = {"input": V(*x), "weight": W(*w)}
    if bias:
        ins["bias"] = W(w[0])
    case(cid, "conv2d", params, ins)


def cp(s=(1, 1), p=(0, 0), d=(1, 1), g=1):
    return {"stride": list(s), "padding": list(p), "dilation": list(d), "groups": g}


def build():
    # conv2d (batch 2)
    conv("conv2d-s1-p0-g1-bias", (2, 2, 5, 6), (3, 2, 3, 3), True, cp())
    conv("conv2d-s1-p1-g1-nobias-k3x2", (2, 2, 5, 4), (2, 2, 3, 2), False, cp(p=(1, 1)))
    conv("conv2d-s1-p1-g1-bias-1ch", (2, 1, 6, 6), (4, 1, 3, 3), True, cp(p=(1, 1)))
    conv("conv2d-s2-p1-g1-bias", (2, 3, 7, 6), (4, 3, 3, 3), True, cp(s=(2, 2), p=(1, 1)))
    conv("conv2d-s2-p1-g2-nobias", (2, 4, 6, 7), (4, 2, 3, 3), False, cp(s=(2, 2), p=(1, 1), g=2))
    conv("conv2d-s1-p2-d2-g1-bias", (2, 2, 6, 5), (3, 2, 3, 3), True, cp(p=(2, 2), d=(2, 2)))
    conv("conv2d-s2-p2-d2-g2-bias-out6", (2, 4, 7, 7), (6, 2, 3, 3), True,
         cp(s=(2, 2), p=(2, 2), d=(2, 2), g=2))
    conv("conv2d-s1-p1-depthwise3-bias", (2, 3, 5, 6), (3, 1, 3, 3), True, cp(p=(1, 1), g=3))
    conv("conv2d-s2-p1-depthwise2-mult2-nobias", (2, 2, 6, 6), (4, 1, 3, 3), False,
         cp(s=(2, 2), p=(1, 1), g=2))
    conv("conv2d-s2x1-p1x0-k2x3-bias", (2, 2, 5, 6), (2, 2, 2, 3), True, cp(s=(2, 1), p=(1, 0)))
    conv("conv2d-s1-p0x2-k3x3-nobias", (2, 2, 4, 5), (3, 2, 3, 3), False, cp(p=(0, 2)))
    conv("conv2d-s3-p0-d2x1-k3x2-bias", (2, 2, 9, 8), (2, 2, 3, 2), True, cp(s=(3, 3), d=(2, 1)))
    conv("conv2d-1x1-bias", (2, 4, 3, 5), (3, 4, 1, 1), True, cp())
    conv("conv2d-kfull-p0-out1x1-bias", (2, 1, 4, 5), (2, 1, 4, 5), True, cp())
    conv("conv2d-s2-p0-floor-nobias", (2, 1, 6, 8), (2, 1, 3, 3), False, cp(s=(2, 2)))
    case("conv2d-defaults-bias", "conv2d", {},
         {"input": V(2, 1, 5, 5), "weight": W(2, 1, 3, 3), "bias": W(2)})

    # max_pool2d (distinct inputs, no ties)
    def mp(cid, x, k, s=None, p=(0, 0), ceil=False, defaults=False):
        prm = {"kernel_size": list(k)}
        if not defaults:
            prm.update({"stride": list(s if s else k), "padding": list(p), "ceil_mode": ceil})
        case(cid, "max_pool2d", prm, {"input": D(*x)})

    mp("max_pool2d-k2-defaults", (2, 2, 6, 6), (2, 2), defaults=True)
    mp("max_pool2d-k2-s2-p0-odd", (2, 2, 7, 5), (2, 2))
    mp("max_pool2d-k2-s2-p0-ceil-odd", (2, 2, 7, 5), (2, 2), ceil=True)
    mp("max_pool2d-k3-s1-p0", (1, 2, 5, 6), (3, 3), (1, 1))
    mp("max_pool2d-k3-s1-p1", (1, 2, 5, 6), (3, 3), (1, 1), (1, 1))
    mp("max_pool2d-k3-s2-p1", (2, 1, 7, 6), (3, 3), (2, 2), (1, 1))
    mp("max_pool2d-k3-s2-p1-ceil", (2, 1, 6, 6), (3, 3), (2, 2), (1, 1), True)
    mp("max_pool2d-k3-s3-p1-ceil-lastwindow-dropped", (1, 1, 5, 8), (3, 3), (3, 3), (1, 1), True)
    mp("max_pool2d-k3-s2-p0-ceil-partial", (1, 1, 8, 8), (3, 3), (2, 2), (0, 0), True)
    mp("max_pool2d-k2x3-s2x1-p1x0", (1, 2, 6, 5), (2, 3), (2, 1), (1, 0))

    # avg_pool2d
    def ap(cid, x, k, s=None, p=(0, 0), ceil=False, cip=True, defaults=False):
        prm = {"kernel_size": list(k)}
        if not defaults:
            prm.update({"stride": list(s if s else k), "padding": list(p), "ceil_mode": ceil,
                        "count_include_pad": cip})
        case(cid, "avg_pool2d", prm, {"input": V(*x)})

    ap("avg_pool2d-k2-defaults", (2, 2, 6, 6), (2, 2), defaults=True)
    ap("avg_pool2d-k3-s3-p0-floor", (1, 2, 7, 8), (3, 3))
    ap("avg_pool2d-k3-s1-p1-cip", (1, 2, 5, 6), (3, 3), (1, 1), (1, 1), cip=True)
    ap("avg_pool2d-k3-s1-p1-nocip", (1, 2, 5, 6), (3, 3), (1, 1), (1, 1), cip=False)
    ap("avg_pool2d-k3-s2-p1-ceil-cip", (2, 1, 6, 7), (3, 3), (2, 2), (1, 1), True, True)
    ap("avg_pool2d-k3-s2-p1-ceil-nocip", (2, 1, 6, 7), (3, 3), (2, 2), (1, 1), True, False)
    ap("avg_pool2d-k2-s2-p1-ceil-cip", (1, 2, 5, 5), (2, 2), (2, 2), (1, 1), True, True)
    ap("avg_pool2d-k3-s2-p0-ceil-cip-partial", (1, 1, 8, 8), (3, 3), (2, 2), (0, 0), True, True)
    ap("avg_pool2d-k3-s2-p0-ceil-nocip-partial", (1, 1, 8, 8), (3, 3), (2, 2), (0, 0), True, False)
    ap("avg_pool2d-k2x3-s1x2-p1x1-nocip", (2, 1, 5, 7), (2, 3), (1, 2), (1, 1), cip=False)
    ap("avg_pool2d-k2x3-s1x2-p1x1-cip", (2, 1, 5, 7), (2, 3), (1, 2), (1, 1), cip=True)

    # adaptive_avg_pool2d
    for oh, ow, x in [(1, 1, (2, 3, 5, 7)), (2, 2, (2, 2, 5, 7)), (3, 2, (2, 2, 5, 7)),
                      (4, 3, (1, 2, 5, 7)), (1, 1, (2, 4, 3, 4)), (4, 5, (1, 1, 3, 3))]:
        case(f"adaptive_avg_pool2d-{oh}x{ow}-from-{x[2]}x{x[3]}", "adaptive_avg_pool2d",
             {"output_size": [oh, ow]}, {"input": V(*x)})

    # linear (batch 3)
    case("linear-bias", "linear", None, {"input": V(3, 5), "weight": W(4, 5), "bias": W(4)})
    case("linear-nobias", "linear", None, {"input": V(3, 6), "weight": W(2, 6)})
    case("linear-bias-32to10", "linear", None,
         {"input": V(3, 32), "weight": W(10, 32), "bias": W(10)})

    # pointwise
    case("relu-4d", "relu", None, {"input": V(2, 3, 4, 5, nz=True)})
    case("relu-2d", "relu", None, {"input": V(3, 7, nz=True)})
    case("leaky_relu-0.01", "leaky_relu", {"negative_slope": 0.01}, {"input": V(2, 2, 3, 4, nz=True)})
    case("leaky_relu-0.2", "leaky_relu", {"negative_slope": 0.2}, {"input": V(2, 2, 3, 4, nz=True)})
    case("leaky_relu-defaults", "leaky_relu", {}, {"input": V(3, 5, nz=True)})
    case("sigmoid-4d", "sigmoid", None, {"input": V(2, 3, 4, 4, lo=-6.0, hi=6.0)})
    case("sigmoid-2d", "sigmoid", None, {"input": V(3, 5, lo=-10.0, hi=10.0)})
    case("tanh-4d", "tanh", None, {"input": V(2, 3, 4, 4, lo=-4.0, hi=4.0)})
    case("tanh-2d", "tanh", None, {"input": V(3, 5, lo=-10.0, hi=10.0)})
    case("add-4d", "add", None, {"input": V(2, 3, 4, 5), "other": V(2, 3, 4, 5)})
    case("add-2d", "add", None, {"input": V(3, 4), "other": V(3, 4)})
    case("mul-4d", "mul", None, {"input": V(2, 3, 4, 5), "other": V(2, 3, 4, 5)})
    case("mul-2d", "mul", None, {"input": V(3, 4), "other": V(3, 4)})
    case("flatten-start1-4d", "flatten", {"start_dim": 1}, {"input": V(2, 3, 4, 5)})
    case("flatten-start1-3d", "flatten", {"start_dim": 1}, {"input": V(3, 2, 5)})
    case("flatten-start2-4d", "flatten", {"start_dim": 2}, {"input": V(2, 3, 4, 5)})

    # losses (no grad_output)
    ce = lambda n, c, lim: {"input": V(n, c, lo=-lim, hi=lim), "target": lambda g: g.ints([n], c)}
    case("cross_entropy-4x5", "cross_entropy", {"reduction": "mean"}, ce(4, 5, 2.0), loss=True)
    case("cross_entropy-8x10", "cross_entropy", {"reduction": "mean"}, ce(8, 10, 3.0), loss=True)
    case("cross_entropy-3x10-large-logits", "cross_entropy", {"reduction": "mean"},
         ce(3, 10, 30.0), loss=True)
    case("cross_entropy-1x3", "cross_entropy", {"reduction": "mean"}, ce(1, 3, 2.0), loss=True)
    case("mse_loss-2x3x4", "mse_loss", {"reduction": "mean"},
         {"input": V(2, 3, 4), "target": V(2, 3, 4)}, loss=True)
    case("mse_loss-5", "mse_loss", {"reduction": "mean"}, {"input": V(5), "target": V(5)}, loss=True)
    case("mse_loss-4d", "mse_loss", {"reduction": "mean"},
         {"input": V(2, 1, 3, 3), "target": V(2, 1, 3, 3)}, loss=True)

    # pad: [left, right, top, bottom]
    def pd(cid, x, pad, mode, value=None):
        prm = {"pad": list(pad), "mode": mode}
        if value is not None:
            prm["value"] = value
        case(cid, "pad", prm, {"input": V(*x)})

    pd("pad-constant0-l1r2t0b1", (2, 2, 3, 4), (1, 2, 0, 1), "constant", 0.0)
    pd("pad-constant1.5-l2r0t1b3", (1, 2, 3, 4), (2, 0, 1, 3), "constant", 1.5)
    pd("pad-constant-crop-lm1r2tm1b0", (1, 2, 4, 5), (-1, 2, -1, 0), "constant", 0.0)
    pd("pad-reflect-l1r2t2b1", (1, 2, 4, 5), (1, 2, 2, 1), "reflect")
    pd("pad-reflect-l3r0t0b2", (2, 1, 4, 5), (3, 0, 0, 2), "reflect")
    pd("pad-replicate-l2r1t0b3", (1, 2, 3, 4), (2, 1, 0, 3), "replicate")
    pd("pad-replicate-l4r4t3b3-larger-than-input", (1, 1, 2, 3), (4, 4, 3, 3), "replicate")

    # interpolate
    def it(cid, x, size, mode, ac=None):
        prm = {"size": list(size), "mode": mode}
        if ac is not None:
            prm["align_corners"] = ac
        case(cid, "interpolate", prm, {"input": V(*x)})

    it("interpolate-nearest-up-4x5-to-7x9", (2, 2, 4, 5), (7, 9), "nearest")
    it("interpolate-nearest-down-6x7-to-4x3", (1, 2, 6, 7), (4, 3), "nearest")
    it("interpolate-nearest-up2x-3x4-to-6x8", (1, 2, 3, 4), (6, 8), "nearest")
    it("interpolate-nearest-mixed-5x4-to-3x7", (1, 1, 5, 4), (3, 7), "nearest")
    for ac in (False, True):
        a = "ac1" if ac else "ac0"
        it(f"interpolate-bilinear-{a}-up-4x5-to-7x9", (2, 2, 4, 5), (7, 9), "bilinear", ac)
        it(f"interpolate-bilinear-{a}-down-7x6-to-4x5", (1, 2, 7, 6), (4, 5), "bilinear", ac)
        it(f"interpolate-bilinear-{a}-up2x-3x3-to-6x6", (1, 1, 3, 3), (6, 6), "bilinear", ac)
        it(f"interpolate-bilinear-{a}-mixed-5x4-to-3x7", (1, 2, 5, 4), (3, 7), "bilinear", ac)
        it(f"interpolate-bilinear-{a}-down-5x4-to-1x3", (1, 1, 5, 4), (1, 3), "bilinear", ac)
    it("interpolate-bilinear-ac0-identity-4x5", (1, 1, 4, 5), (4, 5), "bilinear", False)

    # bad input
    SM, IP = "ShapeMismatch", "InvalidParam"
    bad("bad-conv2d-channel-mismatch", "conv2d", cp(p=(1, 1)),
        {"input": V(1, 3, 5, 5), "weight": W(2, 2, 3, 3), "bias": W(2)}, SM)
    bad("bad-conv2d-bias-length", "conv2d", cp(),
        {"input": V(1, 2, 5, 5), "weight": W(3, 2, 3, 3), "bias": W(2)}, SM)
    bad("bad-conv2d-stride0", "conv2d", cp(s=(0, 1)),
        {"input": V(1, 1, 5, 5), "weight": W(1, 1, 3, 3)}, IP)
    bad("bad-conv2d-kernel-bigger-than-padded-input", "conv2d", cp(p=(0, 1)),
        {"input": V(1, 1, 3, 3), "weight": W(1, 1, 5, 3)}, SM)
    bad("bad-conv2d-groups-not-dividing-channels", "conv2d", cp(g=2),
        {"input": V(1, 3, 4, 4), "weight": W(2, 1, 3, 3)}, IP)
    bad("bad-conv2d-data-length", "conv2d", cp(),
        {"input": {"shape": [1, 1, 4, 4], "data": [0.5] * 15}, "weight": W(1, 1, 3, 3)}, SM,
        torch_rejects=False)
    bad("bad-max_pool2d-stride0", "max_pool2d",
        {"kernel_size": [2, 2], "stride": [0, 0], "padding": [0, 0], "ceil_mode": False},
        {"input": D(1, 1, 4, 4)}, IP)
    bad("bad-max_pool2d-kernel-bigger-than-padded-input", "max_pool2d",
        {"kernel_size": [3, 3], "stride": [1, 1], "padding": [0, 0], "ceil_mode": False},
        {"input": D(1, 1, 2, 5)}, SM)
    bad("bad-max_pool2d-padding-over-half-kernel", "max_pool2d",
        {"kernel_size": [2, 2], "stride": [2, 2], "padding": [2, 2], "ceil_mode": False},
        {"input": D(1, 1, 6, 6)}, IP)
    bad("bad-avg_pool2d-stride0", "avg_pool2d",
        {"kernel_size": [2, 2], "stride": [1, 0], "padding": [0, 0], "ceil_mode": False,
         "count_include_pad": True}, {"input": V(1, 1, 4, 4)}, IP)
    bad("bad-avg_pool2d-kernel-bigger-than-padded-input", "avg_pool2d",
        {"kernel_size": [4, 4], "stride": [1, 1], "padding": [1, 1], "ceil_mode": False,
         "count_include_pad": True}, {"input": V(1, 1, 1, 5)}, SM)
    bad("bad-linear-in-features-mismatch", "linear", None,
        {"input": V(3, 5), "weight": W(4, 6), "bias": W(4)}, SM)
    bad("bad-add-shape-mismatch", "add", None, {"input": V(2, 3), "other": V(3, 2)}, SM)
    bad("bad-mul-data-length", "mul", None,
        {"input": {"shape": [2, 2], "data": [1.0, 2.0, 3.0, 4.0]},
         "other": {"shape": [2, 2], "data": [1.0, 2.0, 3.0, 4.0, 5.0]}}, SM, torch_rejects=False)
    bad("bad-relu-data-length", "relu", None,
        {"input": {"shape": [2, 3], "data": [1.0, -2.0, 3.0, -4.0, 5.0]}}, SM, torch_rejects=False)
    bad("bad-pad-reflect-too-large", "pad", {"pad": [4, 0, 0, 0], "mode": "reflect"},
        {"input": V(1, 1, 3, 4)}, IP)
    bad("bad-interpolate-size0", "interpolate",
        {"size": [0, 3], "mode": "bilinear", "align_corners": False}, {"input": V(1, 1, 3, 3)}, IP)
    bad("bad-cross_entropy-target-out-of-range", "cross_entropy", {"reduction": "mean"},
        {"input": V(2, 3), "target": {"shape": [2], "data": [1, 3]}}, IP)
    bad("bad-cross_entropy-target-count", "cross_entropy", {"reduction": "mean"},
        {"input": V(3, 4), "target": {"shape": [2], "data": [0, 1]}}, SM)
    bad("bad-mse_loss-shape-mismatch", "mse_loss", {"reduction": "mean"},
        {"input": V(2, 3), "target": V(3, 2)}, SM)


# ---------------------------------------------------------------- output
def fmt(v):
    """A number of a tensor's data: integers as such, floats as the shortest f32 repr."""
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        f = np.float32(v)
        assert float(f) == v and np.isfinite(f), v
        s = str(f)  # numpy: shortest repr that round-trips to this f32
        assert np.float32(float(s)) == f, (v, s)  # also exact when parsed as f64 then cast
        return s
    return json.dumps(v)


def emit(obj, ind=0):
    pad = " " * ind
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        if set(obj) == {"shape", "data"}:
            return ('{"shape": [' + ", ".join(map(str, obj["shape"])) + '], "data": ['
                    + ", ".join(fmt(x) for x in obj["data"]) + "]}")
        items = [f'{pad}  {json.dumps(k)}: {emit(v, ind + 2)}' for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list) and obj and isinstance(obj[0], dict):
        return "[\n" + ",\n".join(pad + "  " + emit(v, ind + 2) for v in obj) + "\n" + pad + "]"
    if isinstance(obj, list):
        return "[" + ", ".join(json.dumps(x) for x in obj) + "]"
    return json.dumps(obj)  # params: plain JSON (e.g. negative_slope 0.01 as written)


def main():
    build()
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids)), "duplicate ids"
    worst = []
    for c in CASES:
        if "expected_error" in c:
            continue
        out, grads = evaluate(c, torch.float64)
        c["expected"] = {"output": f32_json(out),
                         "grads": {n: f32_json(g) for n, g in grads.items()}}
        # sanity: PyTorch's own f32 result vs the rounded f64 reference
        out32, grads32 = evaluate(c, torch.float32)
        d = (out32.detach().double() - out.detach()).abs().max().item()
        for n in grads:
            d = max(d, (grads32[n].double() - grads[n]).abs().max().item())
        worst.append((d, c["id"]))
        if c["op"] in ("interpolate", "max_pool2d") and c["params"].get("mode") != "bilinear":
            assert torch.equal(out32.detach().double(), out.detach()), c["id"]
    text = emit({"cases": CASES}) + "\n"
    json.loads(text)
    with open(OUT, "w") as f:
        f.write(text)
    worst.sort(reverse=True)
    print(f"torch {torch.__version__}: wrote {OUT}: {len(CASES)} cases "
          f"({sum('expected_error' in c for c in CASES)} bad-input), {len(text)} bytes")
    print("largest |torch f32 - f64 reference|:", ", ".join(f"{i} {d:.2e}" for d, i in worst[:5]))
    counts = {}
    for c in CASES:
        k = "bad" if "expected_error" in c else c["op"]
        counts[k] = counts.get(k, 0) + 1
    print(counts)


if __name__ == "__main__":
    main()
