#!/usr/bin/env python3
"""image_errors.py DIR: small folders of images per class for the error
cases of tests/program/images_errors.test, each DIR/CASE a folder with
train/ and val/ of 10 classes ("0_c0" ... "9_c9") of 28x28 grayscale PNGs
but for what the case changes.  DIR/many holds 100,000 empty .png files
in two classes, which listing must not read."""
import os
import sys

import numpy as np
from PIL import Image


def base(d, size=28, classes=10, per_class=3):
    rng = np.random.default_rng(0)
    for split in ("train", "val"):
        for c in range(classes):
            folder = os.path.join(d, split, f"{c}_c{c}")
            os.makedirs(folder, exist_ok=True)
            for i in range(per_class):
                a = rng.integers(0, 256, (size, size), dtype=np.uint8)
                Image.fromarray(a).save(os.path.join(folder, f"{i}.png"))


def main(d):
    base(f"{d}/empty_class")
    os.makedirs(f"{d}/empty_class/train/10_empty")
    base(f"{d}/not_image")
    open(f"{d}/not_image/train/3_c3/1.png", "w").write("not an image\n")
    base(f"{d}/truncated")
    data = open(f"{d}/truncated/train/5_c5/0.png", "rb").read()
    open(f"{d}/truncated/train/5_c5/0.png", "wb").write(data[:100])
    base(f"{d}/small", size=20)
    base(f"{d}/nine", classes=9)
    os.makedirs(f"{d}/no_classes")
    base(f"{d}/val_extra")
    os.makedirs(f"{d}/val_extra/val/10_extra")
    Image.new("L", (28, 28)).save(f"{d}/val_extra/val/10_extra/0.png")
    base(f"{d}/mixed")  # a text file, skipped; a CMYK JPEG; an RGBA PNG
    open(f"{d}/mixed/train/0_c0/README.txt", "w").write("notes\n")
    Image.new("CMYK", (28, 28), (0, 128, 0, 30)).save(f"{d}/mixed/train/1_c1/cmyk.jpg")
    Image.new("RGBA", (28, 28), (10, 200, 30, 100)).save(f"{d}/mixed/train/2_c2/rgba.PNG")
    # nested folders, names that sort by byte, extensions in any case
    os.makedirs(f"{d}/mixed/train/1_c1/sub/deeper")
    os.makedirs(f"{d}/mixed/train/1_c1/sub-a")
    for name in ["sub/b.jpeg", "sub/deeper/a.png", "sub-a/Z.JPG", "B.png", "a.png"]:
        Image.new("RGB", (28, 28), (5, 6, 7)).save(f"{d}/mixed/train/1_c1/{name}",
                                                   format="PNG" if "png" in name.lower() else "JPEG")
    for c in range(2):
        folder = f"{d}/many/class{c}"
        os.makedirs(folder)
        for i in range(50000):
            open(f"{folder}/{i:06d}.png", "w").close()




def order(binary, root):
    """Our listing's order against torchvision's ImageFolder on root."""
    import subprocess
    from torchvision.datasets import ImageFolder
    out = subprocess.run([binary, "list", root, "0", "all"], capture_output=True, text=True,
                         check=True).stdout
    ours = [(line.split()[1], int(line.split()[2])) for line in out.splitlines()
            if line.startswith("train[")]
    theirs = ImageFolder(root).samples
    print(f"{len(ours)} images, {'the order of ImageFolder' if ours == theirs else 'DIFFERENT'}")


if __name__ == "__main__":
    if sys.argv[1] == "order":
        order(sys.argv[2], sys.argv[3])
    else:
        main(sys.argv[1])
