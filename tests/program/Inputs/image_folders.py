#!/usr/bin/env python3
"""image_folders.py SRC DST NTRAIN NTEST [color]: Fashion-MNIST (the MNIST-style
folder SRC) written out as torchvision's ImageFolder layout, from the first
NTRAIN training and NTEST test images:

  DST/png/train/CLASS/NNNNN.png, DST/png/val/CLASS/NNNNN.png  (lossless)
  DST/jpg/train/...,             DST/jpg/val/...              (quality 90)
  DST/idx/                       the same images as IDX files, in the
                                 folders' order (class by class)

CLASS is the label and the class's name, "0_tshirt" ... "9_boot", so that
the sorted names keep Fashion-MNIST's labels.  An image-folder loader and
the IDX loader then see the same samples in the same places.

With color: DST/color/train/CLASS/NNNNN.jpg and DST/color/val/... instead,
each image tinted a random colour on a random background and scaled to
80x72, for networks of colour images."""
import gzip
import os
import struct
import sys

from PIL import Image

NAMES = ["tshirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker",
         "bag", "boot"]


def read(folder, name):
    for candidate, opener in ((name, open), (name + ".gz", gzip.open)):
        path = os.path.join(folder, candidate)
        if os.path.exists(path):
            with opener(path, "rb") as f:
                return f.read()
    raise SystemExit(f"{name} not found in {folder}")


def split(src, prefix, count):
    images = read(src, f"{prefix}-images-idx3-ubyte")
    labels = read(src, f"{prefix}-labels-idx1-ubyte")
    return [(images[16 + i * 784:16 + (i + 1) * 784], labels[8 + i]) for i in range(count)]


def write(dst, samples, split_name, idx_prefix):
    # the folders' order: by class, then by file name (the sample's index)
    ordered = sorted(range(len(samples)), key=lambda i: (samples[i][1], i))
    for fmt in ("png", "jpg"):
        for i in ordered:
            pixels, label = samples[i]
            d = os.path.join(dst, fmt, split_name, f"{label}_{NAMES[label]}")
            os.makedirs(d, exist_ok=True)
            img = Image.frombytes("L", (28, 28), pixels)
            if fmt == "png":
                img.save(os.path.join(d, f"{i:05d}.png"))
            else:
                img.save(os.path.join(d, f"{i:05d}.jpg"), quality=90)
    os.makedirs(os.path.join(dst, "idx"), exist_ok=True)
    with open(os.path.join(dst, "idx", f"{idx_prefix}-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, len(ordered), 28, 28))
        f.write(b"".join(samples[i][0] for i in ordered))
    with open(os.path.join(dst, "idx", f"{idx_prefix}-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x801, len(ordered)))
        f.write(bytes(samples[i][1] for i in ordered))


def write_color(dst, samples, split_name, seed):
    import numpy as np
    rng = np.random.default_rng(seed)
    for i, (pixels, label) in enumerate(samples):
        d = os.path.join(dst, "color", split_name, f"{label}_{NAMES[label]}")
        os.makedirs(d, exist_ok=True)
        a = np.frombuffer(pixels, np.uint8).reshape(28, 28, 1) / 255.0
        fg, bg = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
        rgb = (a * fg + (1 - a) * bg).astype(np.uint8)
        Image.fromarray(rgb).resize((80, 72), Image.BILINEAR).save(
            os.path.join(d, f"{i:05d}.jpg"), quality=90)


if __name__ == "__main__":
    src, dst, ntrain, ntest = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    if len(sys.argv) > 5 and sys.argv[5] == "color":
        write_color(dst, split(src, "train", ntrain), "train", 1)
        write_color(dst, split(src, "t10k", ntest), "val", 2)
    else:
        write(dst, split(src, "train", ntrain), "train", "train")
        write(dst, split(src, "t10k", ntest), "val", "t10k")
