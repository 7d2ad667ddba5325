#!/usr/bin/env python3
"""predict_inputs.py: inputs for `predict` in every format it reads, and a
PyTorch check of what it prints.

  predict_inputs.py make DIR
      writes the first Fashion-MNIST test images into DIR as PGM (P5 8-bit,
      P2 and P5 16-bit, P5 gzip-compressed), IDX (plain and gzip), .npy (uint8 one
      image; float32 and float64 batches, scaled to [0, 1] as training
      scales bytes), and DIR/manifest.txt: "FILE[INDEX] IMAGE" a line (FILE in
      DIR), the test image each prediction is of.  Standard library only.
  predict_inputs.py check DIR WEIGHTS OUTPUT
      runs LeNet-5 in PyTorch (tests/codegen/Inputs/parity.py) with the
      checkpoint WEIGHTS on the test images and checks every line of
      OUTPUT, "FILE[INDEX]: class K, probability P": that the line is in the
      manifest, that K is PyTorch's top class and P its softmax probability
      (to 2e-4; P is printed to 4 decimals).  Prints "N predictions match
      PyTorch".
"""
import gzip
import os
import re
import struct
import sys

FASHION = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"
SIZE = 28 * 28


def test_images(count):
    with gzip.open(FASHION, "rb") as f:
        data = f.read()
    return [data[16 + i * SIZE:16 + (i + 1) * SIZE] for i in range(count)]


def npy(shape, descr, payload):
    """A .npy file (format 1.0) of the given shape, dtype and raw data."""
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join(f"{d}, " for d in shape).rstrip(" "))
    header += " " * (-(10 + len(header) + 1) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + payload


def floats(images, fmt):
    return b"".join(struct.pack(f"<{SIZE}{fmt}", *(v / 255 for v in img)) for img in images)


def make(folder):
    os.makedirs(folder, exist_ok=True)
    img = test_images(13)
    files = {  # name -> (bytes, the test images it holds)
        "p5.pgm": (b"P5\n# 8-bit binary\n28 28\n255\n" + img[0], [0]),
        "p2-16bit.pgm": (b"P2\n28 28 65535\n" + "\n".join(
            " ".join(str(v * 257) for v in img[1][r * 28:(r + 1) * 28]) for r in range(28)
        ).encode() + b"\n", [1]),
        "p5.pgm.gz": (gzip.compress(b"P5 28 28 255\n" + img[2]), [2]),
        "five.idx": (struct.pack(">IIII", 0x803, 5, 28, 28) + b"".join(img[:5]),
                     [0, 1, 2, 3, 4]),
        "one.idx.gz": (gzip.compress(struct.pack(">IIII", 0x803, 1, 28, 28) + img[5]), [5]),
        "one-u8.npy": (npy([1, 28, 28], "|u1", img[6]), [6]),
        "batch-f32.npy": (npy([3, 1, 28, 28], "<f4", floats(img[7:10], "f")), [7, 8, 9]),
        "batch-f64.npy": (npy([2, 1, 28, 28], "<f8", floats(img[10:12], "d")), [10, 11]),
        "p5-16bit.pgm": (b"P5 28 28 65535\n" + struct.pack(">784H", *(v * 257 for v in img[12])),
                         [12]),
    }
    with open(os.path.join(folder, "manifest.txt"), "w") as manifest:
        for name, (data, numbers) in files.items():
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)
            for index, number in enumerate(numbers):
                manifest.write(f"{name}[{index}] {number}\n")


def check(folder, weights, output):
    import torch
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "..", "codegen", "Inputs"))
    from parity import lenet5  # also puts checkpoint_torch on the path
    from checkpoint_torch import read_safetensors

    params, _ = read_safetensors(weights)
    manifest = dict(line.split() for line in open(os.path.join(folder, "manifest.txt")))
    img = test_images(13)
    x = torch.tensor([list(b) for b in img], dtype=torch.float32).reshape(-1, 1, 28, 28) / 255
    with torch.no_grad():
        probs = torch.softmax(lenet5(params, x), dim=1)
    seen = 0
    for line in open(output):
        m = re.fullmatch(r"(\S+): class (\d+), probability ([0-9.]+)\n", line)
        assert m, f"unexpected line: {line!r}"
        source, k, p = m.group(1), int(m.group(2)), float(m.group(3))
        assert source in manifest, f"{source} is not an input"
        row = probs[int(manifest[source])]
        assert k == int(row.argmax()), f"{source}: class {k}, PyTorch says {int(row.argmax())}"
        assert abs(p - float(row[k])) < 2e-4, f"{source}: probability {p}, PyTorch {float(row[k])}"
        seen += 1
    assert seen == len(manifest), f"{seen} predictions for {len(manifest)} images"
    print(f"{seen} predictions match PyTorch")


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        check(*sys.argv[2:5])
