#!/usr/bin/env python3
"""idx_subset.py SRC DST NTRAIN NTEST: writes the first NTRAIN training and
NTEST test samples of the MNIST-style folder SRC (files plain or .gz) into
DST, uncompressed, so that a test trains and evaluates in a fraction of a
second on real data."""
import gzip
import os
import struct
import sys

NAMES = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte",
         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]


def read(folder, name):
    for candidate, opener in ((name, open), (name + ".gz", gzip.open)):
        path = os.path.join(folder, candidate)
        if os.path.exists(path):
            with opener(path, "rb") as f:
                return f.read()
    raise SystemExit(f"{name} not found in {folder}")


def subset(data, count):
    """The IDX file data cut to its first count samples."""
    rank = data[3]
    dims = list(struct.unpack(f">{rank}I", data[4:4 + 4 * rank]))
    per_sample = 1
    for d in dims[1:]:
        per_sample *= d
    assert count <= dims[0], f"only {dims[0]} samples"
    dims[0] = count
    body = 4 + 4 * rank
    return data[:4] + struct.pack(f">{rank}I", *dims) + data[body:body + count * per_sample]


def main():
    src, dst, ntrain, ntest = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    os.makedirs(dst, exist_ok=True)
    for i, name in enumerate(NAMES):
        with open(os.path.join(dst, name), "wb") as f:
            f.write(subset(read(src, name), ntrain if i < 2 else ntest))


if __name__ == "__main__":
    main()
