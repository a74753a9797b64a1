#!/usr/bin/env python3
"""Generate tests/golden/ops_vocab.json: PyTorch golden values for the ops of real tiny
CNNs (BatchNorm, GroupNorm, softmax family, per-pixel cross-entropy, cat, permute,
reductions, conv1d, conv_transpose2d, relu6/hardswish/hardsigmoid, adaptive max pool).

    python3 tests/golden/make_golden_vocab.py     # needs torch and numpy

The document has exactly the format of ops.json (see make_golden.py, whose input
generator, case builders, f32 rounding and writer it reuses): the conformance runner's
input plus "expected" or "expected_error" per case. How the numbers are produced is the
same: dyadic-rational inputs from a generator seeded by the case id, the reference
computed in float64 by torch.nn.functional and rounded once to f32.

Additions to ops.json's format:
  - batch_norm cases in training mode carry "expected"."buffers": the running_mean and
    running_var after the call (PyTorch's momentum update with the unbiased variance).
    running_mean / running_var are inputs without gradients (buffers).
  - Integer targets (cross_entropy, nll_loss) may hold ignore_index values (-100, 255,
    or a case's own), which are never counted.
  - Inputs of the piecewise activations avoid their kinks (0, 6 for relu6; -3, 3 for
    hardswish and hardsigmoid), where PyTorch's one-sided gradient is a convention,
    except in the cases whose id ends in "-at-kinks": inputs exactly on every
    breakpoint, so that the engine's convention is checked to be PyTorch's (central
    differences do not apply there).
  - add, sub, mul and div broadcast (NumPy rules), either operand the smaller.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_golden as mg  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "ops_vocab.json")
BUFFERS = ("running_mean", "running_var")
INT_INPUTS = {("cross_entropy", "target"), ("nll_loss", "target")}


def one(p, key, default):
    """A 1-D op's param: a one-element list in the JSON, an int for PyTorch."""
    v = p.get(key, default)
    return v[0] if isinstance(v, list) else v


def run_new_op(op, p, ins):
    x = ins["input"]
    if op == "batch_norm":
        return F.batch_norm(x, ins.get("running_mean"), ins.get("running_var"),
                            ins.get("weight"), ins.get("bias"), training=p.get("training", False),
                            momentum=p.get("momentum", 0.1), eps=p.get("eps", 1e-5))
    if op == "group_norm":
        return F.group_norm(x, p["num_groups"], ins.get("weight"), ins.get("bias"),
                            eps=p.get("eps", 1e-5))
    if op == "softmax":
        return F.softmax(x, dim=p["dim"])
    if op == "log_softmax":
        return F.log_softmax(x, dim=p["dim"])
    if op == "nll_loss":
        return F.nll_loss(x, ins["target"], reduction=p.get("reduction", "mean"),
                          ignore_index=p.get("ignore_index", -100))
    if op == "cross_entropy":
        return F.cross_entropy(x, ins["target"], reduction=p.get("reduction", "mean"),
                               ignore_index=p.get("ignore_index", -100))
    if op == "cat":
        return torch.cat([x, ins["other"]], dim=p.get("dim", 0))
    if op == "permute":
        return x.permute(*p["dims"])
    if op == "mean":
        return x.mean(dim=tuple(p["dim"]), keepdim=p.get("keepdim", False))
    if op == "sum":
        return x.sum(dim=tuple(p["dim"]), keepdim=p.get("keepdim", False))
    if op in ("add", "sub", "mul", "div"):
        o = ins["other"]
        return {"add": x + o, "sub": x - o, "mul": x * o, "div": x / o}[op]
    if op == "slice":
        d = p.get("dim", 0) % x.dim()
        return x[(slice(None),) * d + (slice(p.get("start", 0), p.get("end"), p.get("step", 1)),)]
    if op == "unsqueeze":
        return x.unsqueeze(p["dim"]) * 1.0
    if op == "squeeze":
        return x.squeeze(p["dim"]) * 1.0
    if op == "channel_shuffle":
        g, c = p["groups"], x.shape[1]
        return x.reshape(x.shape[0], g, c // g, *x.shape[2:]).transpose(1, 2).reshape(x.shape)
    if op == "silu":
        return F.silu(x)
    if op == "leaky_relu":
        return F.leaky_relu(x, p.get("negative_slope", 0.01))
    if op == "conv1d":
        return F.conv1d(x, ins["weight"], ins.get("bias"), stride=one(p, "stride", 1),
                        padding=one(p, "padding", 0), dilation=one(p, "dilation", 1),
                        groups=p.get("groups", 1))
    if op == "conv_transpose2d":
        return F.conv_transpose2d(x, ins["weight"], ins.get("bias"),
                                  stride=mg.pair(p, "stride", 1), padding=mg.pair(p, "padding", 0),
                                  output_padding=mg.pair(p, "output_padding", 0),
                                  groups=p.get("groups", 1), dilation=mg.pair(p, "dilation", 1))
    if op == "relu6":
        return F.relu6(x)
    if op == "hardswish":
        return F.hardswish(x)
    if op == "hardsigmoid":
        return F.hardsigmoid(x)
    if op == "adaptive_max_pool2d":
        return F.adaptive_max_pool2d(x, mg.pair(p, "output_size", None))
    raise KeyError(op)


def evaluate(case, dtype, forward_only=False):
    """make_golden.evaluate with buffers (no gradient; updated in place by batch_norm) and
    integer targets for every loss that takes class indices."""
    ins = {}
    for name, t in case["inputs"].items():
        if (case["op"], name) in INT_INPUTS:
            ins[name] = torch.tensor(t["data"], dtype=torch.long).reshape(t["shape"])
        elif name in BUFFERS:
            ins[name] = mg.to_t(t, dtype)
        else:
            ins[name] = mg.to_t(t, dtype).requires_grad_(True)
    out = run_new_op(case["op"], case.get("params", {}), ins)
    buffers = {n: ins[n] for n in BUFFERS if n in ins}
    if forward_only:
        return out, None, buffers
    if "grad_output" in case:
        g = mg.to_t(case["grad_output"], dtype)
        assert list(g.shape) == list(out.shape), (case["id"], g.shape, out.shape)
        out.backward(g)
    else:
        assert out.dim() == 0, case["id"]
        out.backward()
    grads = {n: t.grad for n, t in ins.items() if t.is_floating_point() and n not in BUFFERS}
    return out, grads, buffers


# make_golden's case builders evaluate through its own module-level evaluate (forward
# only, to size grad_output and to check that PyTorch refuses bad cases): route them here.
mg.evaluate = lambda case, dtype, forward_only=False: evaluate(case, dtype, forward_only)[:2]

V, W, D, case, bad = mg.V, mg.W, mg.D, mg.case, mg.bad


def avoiding(kinks, *shape, lo, hi):
    """Dyadic values in [lo, hi] that are none of `kinks`."""
    def make(g):
        t = g.vals(list(shape), lo, hi, 8)
        t["data"] = [v + 0.125 if v in kinks else v for v in t["data"]]
        return t
    return make


def positive(*shape, lo=0.25, hi=2.0):
    return lambda g: g.vals(list(shape), lo, hi, 8)


def nonzero_divisor(*shape):
    def make(g):
        t = g.vals(list(shape), 0.5, 2.0, 8)
        t["data"] = [v if g.r.random() < 0.5 else -v for v in t["data"]]
        return t
    return make


def targets(shape, classes, ignore=None, ignored_share=0.0):
    def make(g):
        t = g.ints(list(shape), classes)
        if ignore is not None:
            t["data"] = [ignore if g.r.random() < ignored_share else v for v in t["data"]]
            # at least one counted target, so a mean over counted targets exists
            if all(v == ignore for v in t["data"]):
                t["data"][0] = 0
        return t
    return make


def build():
    # batch_norm: training (batch statistics, running stats updated) and eval
    def bn(cid, x, training, affine=True, momentum=0.1, eps=1e-5):
        c = x[1]
        ins = {"input": V(*x)}
        if affine:
            ins.update({"weight": W(c), "bias": W(c)})
        ins.update({"running_mean": W(c), "running_var": positive(c)})
        case(cid, "batch_norm", {"training": training, "momentum": momentum, "eps": eps}, ins)

    bn("batch_norm-train-4d", (2, 3, 4, 5), True)
    bn("batch_norm-train-4d-noaffine", (3, 2, 3, 3), True, affine=False)
    bn("batch_norm-train-2d", (5, 4), True, momentum=0.2)
    bn("batch_norm-train-3d", (2, 3, 6), True, eps=1e-3)
    bn("batch_norm-train-batch1-spatial", (1, 2, 3, 4), True)
    bn("batch_norm-eval-4d", (2, 3, 4, 5), False)
    bn("batch_norm-eval-2d-noaffine", (3, 4), False, affine=False)

    # group_norm
    def gn(cid, x, groups, affine=True, eps=1e-5):
        ins = {"input": V(*x)}
        if affine:
            ins.update({"weight": W(x[1]), "bias": W(x[1])})
        case(cid, "group_norm", {"num_groups": groups, "eps": eps}, ins)

    gn("group_norm-g2-4d", (2, 4, 3, 3), 2)
    gn("group_norm-g1-batch1", (1, 3, 4, 5), 1)
    gn("group_norm-g4-per-channel", (2, 4, 2, 3), 4, eps=1e-3)
    gn("group_norm-g3-noaffine-3d", (2, 6, 5), 3, affine=False)

    # softmax, log_softmax
    for op in ("softmax", "log_softmax"):
        case(f"{op}-2d-dim1", op, {"dim": 1}, {"input": V(3, 5, lo=-4.0, hi=4.0)})
        case(f"{op}-2d-dim0", op, {"dim": 0}, {"input": V(4, 3, lo=-4.0, hi=4.0)})
        case(f"{op}-4d-dim1", op, {"dim": 1}, {"input": V(2, 4, 3, 2, lo=-4.0, hi=4.0)})
        case(f"{op}-4d-dim-1", op, {"dim": -1}, {"input": V(2, 2, 3, 4, lo=-4.0, hi=4.0)})
        case(f"{op}-2d-large-logits", op, {"dim": 1}, {"input": V(2, 6, lo=-60.0, hi=60.0)})

    # nll_loss over log-probabilities
    def logp(n, c):
        def make(g):
            t = g.vals([n, c], -3.0, 3.0, 8)
            x = torch.tensor(t["data"], dtype=torch.float64).reshape(n, c)
            return mg.f32_json(F.log_softmax(x, dim=1))
        return make

    case("nll_loss-mean", "nll_loss", {"reduction": "mean"},
         {"input": logp(4, 5), "target": targets([4], 5)}, loss=True)
    case("nll_loss-sum", "nll_loss", {"reduction": "sum"},
         {"input": logp(4, 5), "target": targets([4], 5)}, loss=True)
    case("nll_loss-mean-ignore-100", "nll_loss", {"reduction": "mean", "ignore_index": -100},
         {"input": logp(6, 3), "target": lambda g: {"shape": [6], "data": [0, -100, 2, 1, -100, 2]}},
         loss=True)
    case("nll_loss-sum-ignore-1", "nll_loss", {"reduction": "sum", "ignore_index": 1},
         {"input": logp(5, 4), "target": lambda g: {"shape": [5], "data": [1, 0, 3, 1, 2]}}, loss=True)

    # cross_entropy, extended: per-pixel, ignore_index, sum
    ce = "cross_entropy"
    case("cross_entropy-sum-2d", ce, {"reduction": "sum"},
         {"input": V(4, 5), "target": targets([4], 5)}, loss=True)
    case("cross_entropy-perpixel-mean", ce, {"reduction": "mean"},
         {"input": V(2, 4, 3, 3), "target": targets([2, 3, 3], 4)}, loss=True)
    case("cross_entropy-perpixel-ignore255-mean", ce, {"reduction": "mean", "ignore_index": 255},
         {"input": V(2, 11, 4, 3), "target": targets([2, 4, 3], 11, 255, 0.3)}, loss=True)
    case("cross_entropy-perpixel-ignore255-sum", ce, {"reduction": "sum", "ignore_index": 255},
         {"input": V(1, 3, 5, 4), "target": targets([1, 5, 4], 3, 255, 0.4)}, loss=True)
    case("cross_entropy-3d-ignore-100-mean", ce, {"reduction": "mean"},
         {"input": V(2, 3, 6), "target": targets([2, 6], 3, -100, 0.3)}, loss=True)
    case("cross_entropy-2d-ignore-default", ce, {"reduction": "mean"},
         {"input": V(4, 3), "target": lambda g: {"shape": [4], "data": [2, -100, 0, -100]}}, loss=True)

    # cat, permute, mean, sum, sub, div
    case("cat-dim1-4d", "cat", {"dim": 1}, {"input": V(2, 3, 2, 2), "other": V(2, 1, 2, 2)})
    case("cat-dim0-2d", "cat", {"dim": 0}, {"input": V(2, 3), "other": V(4, 3)})
    case("cat-dim-1-3d", "cat", {"dim": -1}, {"input": V(2, 2, 3), "other": V(2, 2, 1)})
    case("permute-0231", "permute", {"dims": [0, 2, 3, 1]}, {"input": V(2, 3, 2, 4)})
    case("permute-10", "permute", {"dims": [1, 0]}, {"input": V(3, 5)})
    case("permute-021", "permute", {"dims": [0, 2, 1]}, {"input": V(2, 3, 4)})
    for op in ("mean", "sum"):
        case(f"{op}-hw-keepdim", op, {"dim": [2, 3], "keepdim": True}, {"input": V(2, 3, 4, 5)})
        case(f"{op}-hw", op, {"dim": [2, 3], "keepdim": False}, {"input": V(2, 3, 4, 5)})
        case(f"{op}-dim1", op, {"dim": [1], "keepdim": False}, {"input": V(3, 4)})
        case(f"{op}-dim-1-keepdim", op, {"dim": [-1], "keepdim": True}, {"input": V(2, 3, 4)})
        case(f"{op}-all", op, {"dim": [0, 1, 2], "keepdim": False}, {"input": V(2, 3, 4)})
    case("sub-4d", "sub", None, {"input": V(2, 3, 2, 2), "other": V(2, 3, 2, 2)})
    case("div-2d", "div", None, {"input": V(3, 4), "other": nonzero_divisor(3, 4)})

    # conv1d: [N, C, L]; params as one-element lists
    def c1(cid, x, w, bias, s=1, p=0, d=1, g=1):
        ins = {"input": V(*x), "weight": W(*w)}
        if bias:
            ins["bias"] = W(w[0])
        case(cid, "conv1d", {"stride": [s], "padding": [p], "dilation": [d], "groups": g}, ins)

    c1("conv1d-k3-p1-bias", (2, 3, 9), (4, 3, 3), True, p=1)
    c1("conv1d-k5-s2-nobias", (2, 2, 11), (3, 2, 5), False, s=2)
    c1("conv1d-k3-d2-p2-bias", (1, 2, 8), (2, 2, 3), True, p=2, d=2)
    c1("conv1d-depthwise-k3-p1", (2, 4, 7), (4, 1, 3), True, p=1, g=4)
    c1("conv1d-pointwise", (2, 5, 6), (3, 5, 1), True)

    # conv_transpose2d: weight [C_in, C_out/groups, kh, kw]
    def ct(cid, x, w, bias, s=(1, 1), p=(0, 0), op=(0, 0), g=1, d=(1, 1)):
        ins = {"input": V(*x), "weight": W(*w)}
        if bias:
            ins["bias"] = W(w[1] * g)
        case(cid, "conv_transpose2d", {"stride": list(s), "padding": list(p),
                                       "output_padding": list(op), "groups": g,
                                       "dilation": list(d)}, ins)

    ct("conv_transpose2d-k2-s2-bias", (2, 3, 3, 4), (3, 2, 2, 2), True, s=(2, 2))
    ct("conv_transpose2d-k3-s2-p1-op1", (1, 2, 3, 3), (2, 3, 3, 3), True, s=(2, 2), p=(1, 1), op=(1, 1))
    ct("conv_transpose2d-k3-s1-p1-nobias", (2, 2, 4, 3), (2, 2, 3, 3), False, p=(1, 1))
    ct("conv_transpose2d-k3x2-s2x1-g2", (1, 4, 3, 3), (4, 1, 3, 2), True, s=(2, 1), g=2)
    ct("conv_transpose2d-k3-s2-d2", (1, 2, 3, 3), (2, 2, 3, 3), True, s=(2, 2), d=(2, 2))

    # activations (inputs avoid the kinks)
    case("relu6-4d", "relu6", None, {"input": avoiding({0.0, 6.0}, 2, 3, 4, 4, lo=-8.0, hi=8.0)})
    case("hardswish-4d", "hardswish", None,
         {"input": avoiding({-3.0, 3.0}, 2, 3, 4, 4, lo=-5.0, hi=5.0)})
    case("hardsigmoid-2d", "hardsigmoid", None,
         {"input": avoiding({-3.0, 3.0}, 4, 6, lo=-5.0, hi=5.0)})

    # the piecewise activations exactly at their breakpoints (PyTorch's conventions)
    def at(*vals):
        return lambda g: {"shape": [len(vals)], "data": list(vals)}
    case("relu6-at-kinks", "relu6", None, {"input": at(-1.0, 0.0, 3.0, 6.0, 7.0)})
    case("hardswish-at-kinks", "hardswish", None, {"input": at(-4.0, -3.0, 0.0, 3.0, 4.0)})
    case("hardsigmoid-at-kinks", "hardsigmoid", None, {"input": at(-4.0, -3.0, 0.0, 3.0, 4.0)})
    case("leaky_relu-2d", "leaky_relu", {"negative_slope": 0.2},
         {"input": avoiding({0.0}, 3, 4, lo=-2.0, hi=2.0)})
    case("leaky_relu-at-kinks", "leaky_relu", {"negative_slope": 0.125},
         {"input": at(-1.0, 0.0, 1.0)})

    # silu
    case("silu-4d", "silu", None, {"input": V(2, 3, 4, 4, lo=-6.0, hi=6.0)})
    case("silu-2d-large", "silu", None, {"input": V(3, 5, lo=-40.0, hi=40.0)})

    # broadcasting element-wise ops: squeeze-and-excitation's scale, a per-channel
    # bias, a row against a column, a scalar, either side the smaller
    for op in ("add", "sub", "mul", "div"):
        other = (lambda *s: nonzero_divisor(*s)) if op == "div" else (lambda *s: V(*s))
        case(f"{op}-bcast-se", op, None, {"input": V(2, 3, 4, 4), "other": other(2, 3, 1, 1)})
        case(f"{op}-bcast-channel", op, None, {"input": V(2, 3, 2, 3), "other": other(3, 1, 1)})
        case(f"{op}-bcast-row-col", op, None, {"input": V(3, 1), "other": other(4)})
        case(f"{op}-bcast-scalar", op, None, {"input": V(2, 5), "other": other()})
        first = nonzero_divisor(2, 1, 3) if op == "div" else V(2, 1, 3)
        case(f"{op}-bcast-smaller-first", op, None, {"input": V(1, 3), "other": first})
        case(f"{op}-bcast-both", op, None, {"input": V(2, 1, 4), "other": other(1, 3, 1)})

    # slice of activations: channel halves, steps, negative and past-the-end bounds
    case("slice-channels-first-half", "slice", {"dim": 1, "start": 0, "end": 3},
         {"input": V(2, 6, 2, 2)})
    case("slice-channels-second-half", "slice", {"dim": 1, "start": 3, "end": 6},
         {"input": V(2, 6, 2, 2)})
    case("slice-width-step2", "slice", {"dim": 3, "start": 1, "end": 7, "step": 2},
         {"input": V(1, 2, 3, 7)})
    case("slice-negative-start-past-end", "slice", {"dim": -1, "start": -3, "end": 100},
         {"input": V(3, 5)})
    case("slice-step3-3d", "slice", {"dim": 2, "start": 0, "end": 8, "step": 3},
         {"input": V(2, 2, 8)})

    # unsqueeze / squeeze of activations (views)
    case("unsqueeze-dim2", "unsqueeze", {"dim": 2}, {"input": V(2, 3, 5)})
    case("unsqueeze-dim-1", "unsqueeze", {"dim": -1}, {"input": V(2, 3)})
    case("squeeze-dim2", "squeeze", {"dim": 2}, {"input": V(2, 3, 1, 4)})
    case("squeeze-not-1-keeps", "squeeze", {"dim": 1}, {"input": V(2, 3, 4)})

    # channel_shuffle (ShuffleNet)
    case("channel_shuffle-g2", "channel_shuffle", {"groups": 2}, {"input": V(2, 6, 2, 3)})
    case("channel_shuffle-g3-3d", "channel_shuffle", {"groups": 3}, {"input": V(1, 6, 4)})
    case("channel_shuffle-g1", "channel_shuffle", {"groups": 1}, {"input": V(1, 3, 2, 2)})

    # adaptive_max_pool2d (distinct values: no ties)
    for oh, ow, x in [(1, 1, (2, 3, 5, 7)), (2, 2, (1, 2, 5, 7)), (3, 2, (2, 1, 5, 7)),
                      (4, 5, (1, 1, 3, 3))]:
        case(f"adaptive_max_pool2d-{oh}x{ow}-from-{x[2]}x{x[3]}", "adaptive_max_pool2d",
             {"output_size": [oh, ow]}, {"input": D(*x)})

    # bad input
    SM, IP = "ShapeMismatch", "InvalidParam"
    bad("bad-batch_norm-train-one-value-per-channel", "batch_norm",
        {"training": True, "momentum": 0.1, "eps": 1e-5},
        {"input": V(1, 3, 1, 1), "weight": W(3), "bias": W(3), "running_mean": W(3),
         "running_var": positive(3)}, SM)
    bad("bad-batch_norm-running-stats-length", "batch_norm",
        {"training": False, "momentum": 0.1, "eps": 1e-5},
        {"input": V(2, 3, 2, 2), "running_mean": W(2), "running_var": positive(2)}, SM)
    bad("bad-group_norm-groups-not-dividing", "group_norm", {"num_groups": 3, "eps": 1e-5},
        {"input": V(2, 4, 2, 2)}, IP)
    bad("bad-softmax-dim-out-of-range", "softmax", {"dim": 2}, {"input": V(2, 3)}, IP)
    bad("bad-cross_entropy-perpixel-target-shape", ce, {"reduction": "mean"},
        {"input": V(2, 3, 4, 4), "target": targets([2, 4, 3], 3)}, SM)
    bad("bad-cross_entropy-target-out-of-range-not-ignored", ce,
        {"reduction": "mean", "ignore_index": 255},
        {"input": V(2, 3), "target": lambda g: {"shape": [2], "data": [1, 7]}}, IP)
    bad("bad-cat-other-dims-differ", "cat", {"dim": 1}, {"input": V(2, 3, 2), "other": V(2, 3, 3)}, SM)
    bad("bad-permute-not-a-permutation", "permute", {"dims": [0, 0, 1]}, {"input": V(2, 3, 4)}, IP)
    bad("bad-mean-dim-out-of-range", "mean", {"dim": [3], "keepdim": False}, {"input": V(2, 3)}, IP)
    bad("bad-sub-shape-mismatch", "sub", None, {"input": V(2, 3), "other": V(3, 2)}, SM)
    bad("bad-channel_shuffle-groups-not-dividing", "channel_shuffle", {"groups": 4},
        {"input": V(1, 6, 2, 2)}, IP, torch_rejects=False)
    bad("bad-slice-step-0", "slice", {"dim": 1, "start": 0, "end": 2, "step": 0},
        {"input": V(2, 3)}, IP)
    bad("bad-mul-no-broadcast", "mul", None, {"input": V(2, 3, 4, 4), "other": V(2, 4, 1, 1)}, SM)
    bad("bad-conv1d-channel-mismatch", "conv1d",
        {"stride": [1], "padding": [0], "dilation": [1], "groups": 1},
        {"input": V(1, 3, 8), "weight": W(2, 2, 3)}, SM)
    bad("bad-conv_transpose2d-output-padding-not-below-stride", "conv_transpose2d",
        {"stride": [1, 1], "padding": [0, 0], "output_padding": [1, 1], "groups": 1,
         "dilation": [1, 1]}, {"input": V(1, 2, 3, 3), "weight": W(2, 2, 3, 3)}, IP)
    bad("bad-adaptive_max_pool2d-size0", "adaptive_max_pool2d", {"output_size": [0, 2]},
        {"input": D(1, 1, 4, 4)}, IP, torch_rejects=False)  # torch returns an empty tensor


def main():
    build()
    cases = mg.CASES
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids)), "duplicate ids"
    worst = []
    for c in cases:
        if "expected_error" in c:
            continue
        out, grads, buffers = evaluate(c, torch.float64)
        c["expected"] = {"output": mg.f32_json(out),
                         "grads": {n: mg.f32_json(g) for n, g in grads.items()}}
        if c["op"] == "batch_norm" and c["params"]["training"]:
            c["expected"]["buffers"] = {n: mg.f32_json(b) for n, b in buffers.items()}
        out32, grads32, _ = evaluate(c, torch.float32)
        d = (out32.detach().double() - out.detach()).abs().max().item()
        for n in grads:
            d = max(d, (grads32[n].double() - grads[n]).abs().max().item())
        worst.append((d, c["id"]))
    text = mg.emit({"cases": cases}) + "\n"
    mg.json.loads(text)
    with open(OUT, "w") as f:
        f.write(text)
    worst.sort(reverse=True)
    print(f"torch {torch.__version__}: wrote {OUT}: {len(cases)} cases "
          f"({sum('expected_error' in c for c in cases)} bad-input), {len(text)} bytes")
    print("largest |torch f32 - f64 reference|:", ", ".join(f"{i} {d:.2e}" for d, i in worst[:5]))
    counts = {}
    for c in cases:
        k = "bad" if "expected_error" in c else c["op"]
        counts[k] = counts.get(k, 0) + 1
    print(counts)


if __name__ == "__main__":
    main()
