#!/usr/bin/python3
"""libdlrt's image loader against PyTorch's DataLoader: the same folder of
JPEGs, the same transforms (ImageNet's training augmentation:
RandomResizedCrop(224), RandomHorizontalFlip, ToTensor, Normalize), the same
batch and the same number of worker threads or processes, one epoch each,
alternating so that a slow spell of the machine hits both.  Prints the
median images per second of each and their ratio.

  bench/loader_vs_pytorch.py [--build build-rel] [--images 1000]
                             [--workers 2] [--repeats 3]

The folder (Fashion-MNIST's images tinted and scaled to 400x300 JPEGs of
quality 90, about an ImageNet photo's size, in 10 class folders) is made
once under /tmp.  dlc's side is `test_image load` (tests/runtime), which
runs the loader alone; PyTorch's is torchvision's ImageFolder through a
DataLoader(num_workers=W), with Debian's python3-torch and torchvision."""
import argparse
import gzip
import os
import statistics
import subprocess
import time

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def make_folder(root, count):
    if os.path.isdir(root) and sum(len(f) for _, _, f in os.walk(root)) >= count:
        return
    with gzip.open("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz") as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
    with gzip.open("/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz") as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    rng = np.random.default_rng(0)
    for i in range(count):
        d = os.path.join(root, f"class{labels[i]}")
        os.makedirs(d, exist_ok=True)
        a = images[i][:, :, None] / 255.0
        rgb = (a * rng.uniform(0, 255, 3) + (1 - a) * rng.uniform(0, 255, 3)).astype(np.uint8)
        Image.fromarray(rgb).resize((400, 300), Image.BILINEAR).save(
            os.path.join(d, f"{i:05d}.jpg"), quality=90)


def dlc_epoch(binary, root, batch, workers):
    tf = f"random_resized_crop(224) -> hflip -> normalize(mean={MEAN}, std={STD})"
    t0 = time.perf_counter()
    r = subprocess.run([binary, "load", root, "3", "224", "224", str(batch), str(workers), tf],
                       capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - t0
    count = int(r.stdout.split()[0])
    return count / seconds


def torch_epoch(root, batch, workers):
    tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                             transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
    t0 = time.perf_counter()
    loader = DataLoader(datasets.ImageFolder(root, tf), batch_size=batch, shuffle=True,
                        num_workers=workers)
    count = 0
    for x, _ in loader:
        count += x.shape[0]
    return count / (time.perf_counter() - t0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build-rel")
    p.add_argument("--images", type=int, default=1000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    root = f"/tmp/dlc-loader-bench-{a.images}"
    make_folder(root, a.images)
    torch.set_num_threads(1)
    binary = os.path.join(a.build, "tests", "test_image")
    dlc, pt = [], []
    for _ in range(a.repeats):
        dlc.append(dlc_epoch(binary, root, a.batch, a.workers))
        pt.append(torch_epoch(root, a.batch, a.workers))
    d, t = statistics.median(dlc), statistics.median(pt)
    print(f"{a.images} JPEGs of 400x300, RandomResizedCrop(224) + flip + normalize, "
          f"batch {a.batch}, {a.workers} workers, median of {a.repeats} epochs (whole process)")
    print(f"| dlc loader | {d:,.0f} images/s |")
    print(f"| PyTorch DataLoader | {t:,.0f} images/s |")
    print(f"| dlc vs PyTorch | {d / t:.2f} |")


if __name__ == "__main__":
    main()
