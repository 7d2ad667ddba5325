# Writes the fixed inputs of bench/int8_zoo.sh: Fashion-MNIST images
# resized to 224x224 (bilinear) and replicated to 3 channels, as an IDX
# folder that the zoo's ImageNet programs read ([3, 224, 224] samples).
#
#   /usr/bin/python3 bench/int8_zoo_data.py OUT_DIR [--calib 200] [--held-out 200]
#       [--source /usr/share/datasets/fashion-mnist]
#
# OUT_DIR/train-*: the first --calib images of Fashion-MNIST's train split
# (what calibrate reads); OUT_DIR/t10k-*: the first --held-out images of
# its test split (disjoint from them: another split), for the held-out
# top-1 agreement.  Labels are Fashion-MNIST's (0 to 9, below the 1000
# classes).  The images are 4-d IDX files of unsigned bytes (magic
# 0x00000804: count, 3, 224, 224), which dlc's IDX loader reads as
# [3, 224, 224] samples scaled by 1/255.  Deterministic: the same bytes on
# every run.  Needs numpy and torch (Debian's python3 has both).
import argparse
import gzip
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    zero, dtype, rank = struct.unpack(">HBB", data[:4])
    assert zero == 0 and dtype == 0x08, path
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * rank).reshape(dims)


def write_idx(path, array):
    with open(path, "wb") as f:
        f.write(struct.pack(">HBB", 0, 0x08, array.ndim))
        f.write(struct.pack(">" + "I" * array.ndim, *array.shape))
        f.write(np.ascontiguousarray(array, np.uint8).tobytes())


def resize(images, size=224):
    x = torch.from_numpy(images.astype(np.float32))[:, None]  # [n, 1, 28, 28]
    y = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
    y = y.round().clamp(0, 255).to(torch.uint8).numpy()
    return np.repeat(y, 3, axis=1)  # [n, 3, size, size]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--calib", type=int, default=200)
    p.add_argument("--held-out", type=int, default=200)
    p.add_argument("--source", default="/usr/share/datasets/fashion-mnist")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for split, n in (("train", a.calib), ("t10k", a.held_out)):
        images = read_idx(os.path.join(a.source, f"{split}-images-idx3-ubyte.gz"))[:n]
        labels = read_idx(os.path.join(a.source, f"{split}-labels-idx1-ubyte.gz"))[:n]
        write_idx(os.path.join(a.out, f"{split}-images-idx3-ubyte"), resize(images))
        write_idx(os.path.join(a.out, f"{split}-labels-idx1-ubyte"), labels)
        print(f"{a.out}: {split} split, {n} images of [3, 224, 224]")


if __name__ == "__main__":
    main()
