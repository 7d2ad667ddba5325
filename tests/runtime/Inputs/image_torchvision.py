"""PNG and JPEG files made with PIL (and by hand, for what PIL cannot
write), decoded by libdlrt (test_image) and compared with PIL's decoding
and torchvision's transforms on the same files.

  image_torchvision.py make DIR           writes the files
  image_torchvision.py decode BIN DIR     decoding: exact, against PIL
  image_torchvision.py transforms BIN DIR resize within 1/255 (PIL's path)
                                          and 1e-5 (the tensor path); crop,
                                          flip exact
"""
import os
import struct
import subprocess
import sys
import zlib

import numpy as np
from PIL import Image


def pattern(h, w, c, seed):
    """Smooth gradients with noise: resizing has something to average."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    planes = [(128 + 100 * np.sin(x / 5.0 + k) * np.cos(y / 7.0 - k)) for k in range(c)]
    a = np.stack(planes, -1) + rng.normal(0, 20, (h, w, c))
    return np.clip(a, 0, 255).astype(np.uint8)


def write_png16(path, a):
    """A 16-bit PNG (gray [h, w] or RGB [h, w, 3]), written by hand."""
    h, w = a.shape[:2]
    color = 2 if a.ndim == 3 else 0
    rows = a.astype(">u2").reshape(h, -1).tobytes()
    stride = len(rows) // h
    raw = b"".join(b"\x00" + rows[i * stride:(i + 1) * stride] for i in range(h))

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, color, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw)))
        f.write(chunk(b"IEND", b""))


def make(d):
    os.makedirs(d, exist_ok=True)
    rgb = pattern(37, 53, 3, 1)
    gray = pattern(41, 30, 1, 2)[:, :, 0]
    Image.fromarray(rgb).save(f"{d}/rgb.png")
    Image.fromarray(gray).save(f"{d}/gray.png")
    Image.fromarray(np.dstack([rgb, pattern(37, 53, 1, 3)])).save(f"{d}/rgba.png")
    Image.fromarray(rgb).convert("P", palette=Image.ADAPTIVE, colors=50).save(f"{d}/palette.png")
    Image.fromarray(rgb).save(f"{d}/interlaced.png", interlace=1)  # PIL ignores it; harmless
    Image.fromarray(gray).convert("1").save(f"{d}/bits1.png")
    rng = np.random.default_rng(4)
    write_png16(f"{d}/gray16.png", rng.integers(0, 65536, (9, 11)).astype(np.uint16))
    write_png16(f"{d}/rgb16.png", rng.integers(0, 65536, (7, 5, 3)).astype(np.uint16))
    Image.fromarray(rgb).save(f"{d}/rgb.jpg", quality=90)
    Image.fromarray(rgb).save(f"{d}/progressive.jpg", quality=90, progressive=True)
    Image.fromarray(gray).save(f"{d}/gray.jpg", quality=90)
    Image.fromarray(rgb).convert("CMYK").save(f"{d}/cmyk.jpg", quality=95)
    # bad files
    data = open(f"{d}/rgb.png", "rb").read()
    open(f"{d}/truncated.png", "wb").write(data[: len(data) // 2])
    corrupt = bytearray(data)
    corrupt[60:80] = b"\xff" * 20
    open(f"{d}/corrupt.png", "wb").write(bytes(corrupt))
    data = open(f"{d}/rgb.jpg", "rb").read()
    open(f"{d}/truncated.jpg", "wb").write(data[: len(data) // 2])
    open(f"{d}/text.png", "w").write("not an image\n")
    open(f"{d}/empty.png", "w").close()


def run(binary, *args):
    r = subprocess.run([binary, *map(str, args)], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"test_image {' '.join(map(str, args))}: {r.stdout}{r.stderr}")
    return r.stdout


def ours(binary, d, path, channels, transform=""):
    out = f"{d}/out.npy"
    run(binary, "decode", path, channels, transform, out)
    return np.load(out)


def pil_chw(img):
    a = np.asarray(img, dtype=np.float32) / 255
    return a[None] if a.ndim == 2 else a.transpose(2, 0, 1)


def decode(binary, d):
    for name in ["rgb.png", "gray.png", "rgba.png", "palette.png", "interlaced.png",
                 "bits1.png", "rgb.jpg", "progressive.jpg", "gray.jpg", "cmyk.jpg"]:
        path = f"{d}/{name}"
        img = Image.open(path)
        worst = 0
        for channels, mode in [(3, "RGB"), (1, "L")]:
            ref = pil_chw(img.convert(mode) if mode == "L" else img.convert("RGB"))
            got = ours(binary, d, path, channels)
            assert got.shape == ref.shape, (name, got.shape, ref.shape)
            worst = max(worst, float(np.abs(got - ref).max()) * 255)
        own = ours(binary, d, path, 0).shape[0]
        # CMYK: PIL's own conversion, rounded another way: within 1 of 255
        limit = 1.0001 if name == "cmyk.jpg" else 0
        verdict = "agrees with PIL" if worst <= limit else f"DIFFERS by {worst:.3f}/255"
        print(f"{name}: {own} channels of its own, RGB and L {verdict}")
    rng = np.random.default_rng(4)
    gray16 = rng.integers(0, 65536, (9, 11)).astype(np.uint16)
    rgb16 = rng.integers(0, 65536, (7, 5, 3)).astype(np.uint16)
    for name, ref in [("gray16.png", gray16[None]), ("rgb16.png", rgb16.transpose(2, 0, 1))]:
        got = ours(binary, d, f"{d}/{name}", 0)
        exact = got.shape == ref.shape and np.array_equal(got, (ref / 65535).astype(np.float32))
        print(f"{name}: {got.shape[0]} channels of 16 bits, {'exact' if exact else 'DIFFERS'}")


def transforms(binary, d):
    import torch
    import torchvision.transforms as T
    import torchvision.transforms.functional as F

    def report(what, got, ref, pil_ref=None):
        tensor_err = float(np.abs(got - ref).max())
        line = f"{what}: {tuple(got.shape)}, tensor path within {'1e-5' if tensor_err <= 1e-5 else tensor_err}"
        if pil_ref is not None:
            pil_err = float(np.abs(got - pil_ref).max()) * 255
            line += ", PIL path within 1/255" if pil_err <= 1.0001 else f", PIL path DIFFERS by {pil_err:.3f}/255"
        print(line)

    for name in ["rgb.png", "gray.png"]:
        path = f"{d}/{name}"
        img = Image.open(path).convert("RGB")
        t = torch.from_numpy(pil_chw(img))
        for size in ["16", "60", "[20, 31]", "[37, 25]", "[9, 90]"]:
            s = eval(size)
            ref = F.resize(t, s, antialias=True).numpy()
            pil_ref = pil_chw(T.Resize(s)(img))
            got = ours(binary, d, path, 3, f"resize({size})")
            report(f"{name} resize({size})", got, ref, pil_ref)
        for size in ["20", "[11, 50]", "64"]:
            s = eval(size)
            ref = F.center_crop(t, s).numpy()
            got = ours(binary, d, path, 3, f"center_crop({size})")
            print(f"{name} center_crop({size}): {tuple(got.shape)}, "
                  f"{'exact' if np.array_equal(got, ref) else 'DIFFERS'}")
        ref = F.hflip(t).numpy()
        got = ours(binary, d, path, 3, "hflip(p=1)")
        print(f"{name} hflip: {'exact' if np.array_equal(got, ref) else 'DIFFERS'}")
        mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
        ref = F.normalize(F.center_crop(F.resize(t, 32, antialias=True), 28), mean, std).numpy()
        got = ours(binary, d, path, 3,
                   f"resize(32) -> center_crop(28) -> normalize(mean={mean}, std={std})")
        report(f"{name} resize -> center_crop -> normalize", got, ref)
        out = f"{d}/crop.npy"
        run(binary, "crop", path, 3, 5, 7, 20, 30, out)
        ref = F.crop(t, 5, 7, 20, 30).numpy()
        print(f"{name} crop(5, 7, 20, 30): {'exact' if np.array_equal(np.load(out), ref) else 'DIFFERS'}")
        run(binary, "resized-crop", path, 3, 3, 4, 25, 30, 16, 16, out)
        ref = F.resized_crop(t, 3, 4, 25, 30, [16, 16], antialias=True).numpy()
        report(f"{name} resized_crop(3, 4, 25, 30, [16, 16])", np.load(out), ref)


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    elif sys.argv[1] == "decode":
        decode(sys.argv[2], sys.argv[3])
    else:
        transforms(sys.argv[2], sys.argv[3])
