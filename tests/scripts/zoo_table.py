#!/usr/bin/env python3
"""The ONNX zoo through the `torchlet` command, as a user runs it: for each model and
exporter, `convert`, `run` on every `x.K` against onnxruntime's `ort.K`, and one
`train` step (lr 0.1, batch x.0) exported with `export` against PyTorch's step (`sgd.*`,
and `sgd64.*` where the fixture has the float64 step). Prints a Markdown table of the
largest absolute differences (tests/RESULTS.md, "The ONNX zoo").

    cargo build --release -p torchlet-cli
    python3 tests/scripts/zoo_table.py MODEL ...     # needs numpy and safetensors
"""
import subprocess, numpy as np, os, sys, tempfile
from safetensors.numpy import load_file, save_file
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
T = os.path.join(ROOT, "target", "release", "torchlet")
Z = os.path.join(ROOT, "tests", "golden", "onnx")
os.chdir(tempfile.mkdtemp(prefix="torchlet-zoo-"))
print("| model | exporter | convert | run vs onnxruntime | SGD step vs PyTorch f32 | vs float64 | PyTorch f32 vs float64 |")
print("|---|---|---|---|---|---|---|")
models = sys.argv[1:]
for m in models:
    ref = load_file(f"{Z}/{m}.ref.safetensors")
    xs = {k: v for k, v in ref.items() if k.startswith("x.")}
    save_file(xs, f"{m}.in.st")
    for e in ("ts", "dyn"):
        r = subprocess.run([T, "convert", f"{Z}/{m}.{e}.onnx", f"{m}.{e}.tlm"], capture_output=True, text=True)
        if r.returncode: print(m, e, "convert FAILED", r.stderr.strip()[:200]); continue
        subprocess.run([T, "run", f"{m}.{e}.tlm", f"{m}.in.st", f"{m}.{e}.out.st"], capture_output=True, check=True)
        out = load_file(f"{m}.{e}.out.st")
        d = max(float(np.abs(out[k] - ref[k.replace('x.', 'ort.')]).max()) for k in xs)
        x0 = ref["x.0"]; t = ref["t"].astype(np.int64)
        save_file({"x": x0, "y": t}, f"{m}.data.st")
        subprocess.run([T, "train", f"{m}.{e}.tlm", f"{m}.data.st", "--lr", "0.1", "--steps", "1", "--batch", str(x0.shape[0]), "-o", f"{m}.{e}.tr.tlm"], capture_output=True, check=True)
        subprocess.run([T, "export", f"{m}.{e}.tr.tlm", f"{m}.{e}.tr.st"], capture_output=True, check=True)
        got = load_file(f"{m}.{e}.tr.st")
        keys = [k[4:] for k in ref if k.startswith("sgd.") and not k.endswith("num_batches_tracked")]
        d32 = max(float(np.abs(got[k] - ref["sgd." + k]).max()) for k in keys)
        has64 = all("sgd64." + k in ref for k in keys)
        d64 = max(float(np.abs(got[k] - ref["sgd64." + k]).max()) for k in keys) if has64 else None
        t32 = max(float(np.abs(ref["sgd." + k] - ref["sgd64." + k]).max()) for k in keys) if has64 else None
        print(f"| {m} | {e} | ok | {d:.1e} | {d32:.1e} | " + (f"{d64:.1e} | {t32:.1e} |" if has64 else "- | - |"))
