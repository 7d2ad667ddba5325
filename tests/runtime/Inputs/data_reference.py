"""data_reference.py: an independent reading of datasets, for test_data.

It prints what `test_data` prints for the same files, computed another way:
IDX with gzip and struct (the pixel bytes themselves, their CRC-32), .npy
with NumPy, the batcher's order with its own xoshiro256**, per-epoch seeds and
Fisher-Yates.

  data_reference.py idx-dir DIR                    like test_data idx-dir
  data_reference.py npy IMAGES LABELS              like test_data npy (NumPy)
  data_reference.py batches DIR BATCH SEED EPOCHS  like test_data batches
  data_reference.py compare FILE1 FILE2            the two outputs agree
                                                   ("scaled sum" to 1e-6)
  data_reference.py npy-suite TEST_DATA DIR        writes .npy files with
                                                   numpy.save, loads each with
                                                   TEST_DATA, compares
  data_reference.py copy-dir SRC DST NAME...       copies an MNIST folder,
                                                   decompressing the files named
"""
import gzip
import math
import os
import struct
import subprocess
import sys
import zlib

IDX_NAMES = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte",
             "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]


def f32(v):
    """v rounded to float32, as a Python float."""
    return struct.unpack("<f", struct.pack("<f", v))[0]


def read_maybe_gzip(path):
    with open(path, "rb") as f:
        data = f.read()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def find(folder, name):
    for candidate in (name, name + ".gz"):
        path = os.path.join(folder, candidate)
        if os.path.exists(path):
            return path
    raise SystemExit(f"{name} not found in {folder}")


def read_idx(path, want_rank):
    data = read_maybe_gzip(path)
    zero, dtype, rank = struct.unpack(">HBB", data[:4])
    assert zero == 0 and dtype == 8 and (rank == want_rank or want_rank > 1 < rank), path
    dims = list(struct.unpack(f">{rank}I", data[4:4 + 4 * rank]))
    payload = data[4 + 4 * rank:]
    assert len(payload) == math.prod(dims), path
    return dims, payload


def fmt_shape(dims):
    return "[" + ", ".join(str(d) for d in dims) + "]"


def dump_idx(name, images, labels):
    dims, pixels = read_idx(images, 3)
    (count,), labs = read_idx(labels, 1)
    assert count == dims[0]
    sample = dims[1:]
    if len(sample) == 2:
        sample = [1] + sample
    classes = max(labs) + 1
    scale = f32(1.0 / 255.0)
    print(f"{name}: {count} samples of {fmt_shape(sample)}, {classes} classes")
    print(f"{name}: first labels " + " ".join(str(v) for v in labs[:10]))
    print(f"{name}: label histogram " + " ".join(str(labs.count(bytes([c])))
                                                 for c in range(min(classes, 100))))
    mid = math.prod(sample) // 2
    print(f"{name}: values from {mid} " + " ".join("%.9g" % f32(v * scale)
                                                   for v in pixels[mid:mid + 8]))
    total = sum(pixels)
    print(f"{name}: scaled sum {total * scale:.6f}")
    print(f"{name}: pixel sum {total}, crc32 {zlib.crc32(pixels):08x}")


def cmd_idx_dir(folder):
    dump_idx("train", find(folder, IDX_NAMES[0]), find(folder, IDX_NAMES[1]))
    dump_idx("test", find(folder, IDX_NAMES[2]), find(folder, IDX_NAMES[3]))


def npy_reference(images, labels):
    """The lines test_data npy prints, from NumPy's reading of the files."""
    import numpy as np
    x = np.load(read_npy_path(images))
    y = np.load(read_npy_path(labels)).astype(np.int64)
    scale = float(np.float32(1) / np.float32(255)) if x.dtype == np.uint8 else 1.0
    xf = ((x.astype(np.float64) * scale - 0.0) / 1.0).astype(np.float32).ravel()
    classes = int(y.max()) + 1
    mid = math.prod(x.shape[1:]) // 2
    hist = np.bincount(y, minlength=classes)[:100]
    lines = [f"data: {x.shape[0]} samples of {fmt_shape(x.shape[1:])}, {classes} classes",
             "data: first labels " + " ".join(str(int(v)) for v in y[:10]),
             "data: label histogram " + " ".join(str(int(v)) for v in hist),
             f"data: values from {mid} " + " ".join("%.9g" % float(v) for v in xf[mid:mid + 8]),
             f"data: scaled sum {math.fsum(xf.astype(np.float64)):.6f}",
             f"data: values crc32 {zlib.crc32(xf.astype('<f4').tobytes()):08x}"]
    return "\n".join(lines) + "\n"


def read_npy_path(path):
    """np.load reads no gzip: inflate a compressed file into memory."""
    import io
    return io.BytesIO(read_maybe_gzip(path))


class Rng:
    """rng.c's xoshiro256** seeded through splitmix64."""
    M = (1 << 64) - 1

    def __init__(self, seed):
        self.s = []
        x = seed
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & self.M
            z = x
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & self.M
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & self.M
            self.s.append(z ^ (z >> 31))

    @staticmethod
    def rotl(x, k):
        return ((x << k) | (x >> (64 - k))) & Rng.M

    def next(self):
        s = self.s
        result = (self.rotl((s[1] * 5) & self.M, 7) * 9) & self.M
        t = (s[1] << 17) & self.M
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = self.rotl(s[3], 45)
        return result

    def below(self, n):
        limit = self.M - self.M % n
        while True:
            x = self.next()
            if x < limit:
                return x % n


def splitmix_step(z):
    z = (z + 0x9E3779B97F4A7C15) & Rng.M
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & Rng.M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & Rng.M
    return z ^ (z >> 31)


def epoch_seed(seed, epoch):
    """batch.c's seed for the shuffle of one epoch (0-based)."""
    return splitmix_step((splitmix_step(seed) + epoch) & Rng.M)


def cmd_batches(folder, batch, seed, epochs):
    dims, pixels = read_idx(find(folder, IDX_NAMES[0]), 3)
    _, labels = read_idx(find(folder, IDX_NAMES[1]), 1)
    count, size = dims[0], math.prod(dims[1:])
    for epoch in range(1, epochs + 1):
        rng = Rng(epoch_seed(seed, epoch - 1))
        order = list(range(count))
        for i in range(count - 1, 0, -1):
            j = rng.below(i + 1)
            order[i], order[j] = order[j], order[i]
        first = order[:batch]
        print(f"epoch {epoch}: first batch labels " + " ".join(str(labels[i]) for i in first[:16]))
        crc = 0
        for i in first:
            crc = zlib.crc32(pixels[i * size:(i + 1) * size], crc)
        print(f"epoch {epoch}: first batch pixel crc32 {crc:08x}")
        batches = -(-count // batch)
        last = count - (batches - 1) * batch
        print(f"epoch {epoch}: {batches} batches of {batch}, the last of {last}")
        print(f"epoch {epoch}: order starts " + " ".join(str(i) for i in order[:8]))
        assert sorted(order) == list(range(count))
        print(f"epoch {epoch}: a permutation; the batches follow it")


def compare(a, b):
    """Whether two outputs agree: exactly, but for "scaled sum" lines."""
    la, lb = a.splitlines(), b.splitlines()
    if len(la) != len(lb):
        return f"{len(la)} lines against {len(lb)}"
    for x, y in zip(la, lb):
        if x == y:
            continue
        if " scaled sum " in x and " scaled sum " in y:
            fx, fy = float(x.split()[-1]), float(y.split()[-1])
            if abs(fx - fy) <= 1e-6 * max(1.0, abs(fy)):
                continue
        return f"differ:\n  {x}\n  {y}"
    return None


def cmd_compare(path_a, path_b):
    with open(path_a) as fa, open(path_b) as fb:
        a, b = fa.read(), fb.read()
    problem = compare(a, b)
    if problem:
        print(problem)
        sys.exit(1)
    print(f"all {len(a.splitlines())} lines agree")


def npy_cases():
    """(name, images, labels, how) for the suite; how: None, a format version,
    or 'gz'."""
    import numpy as np
    rng = np.random.default_rng(7)

    def labels(n, dtype=np.int64, classes=10):
        return rng.integers(0, classes, n).astype(dtype)

    normal = rng.standard_normal
    big = rng.integers(-2**40, 2**40, (3, 4))
    return [
        ("u1", rng.integers(0, 256, (6, 28, 28), dtype=np.uint8), labels(6), None),
        ("u1-channel", rng.integers(0, 256, (5, 1, 28, 28), dtype=np.uint8),
         labels(5, np.uint8), None),
        ("f4", normal((7, 3, 4, 4)).astype(np.float32), labels(7, np.int32), None),
        ("f8", normal((4, 10)) * 1e3, labels(4), None),
        ("f2", normal((4, 6)).astype(np.float16), labels(4, np.int16), None),
        ("i1", rng.integers(-128, 128, (3, 5)).astype(np.int8), labels(3, np.uint16), None),
        ("i2", rng.integers(-2**15, 2**15, (3, 5)).astype(np.int16), labels(3, np.int8), None),
        ("u2", rng.integers(0, 2**16, (3, 2, 2)).astype(np.uint16), labels(3, np.uint32), None),
        ("i4", rng.integers(-2**31, 2**31, (2, 2, 2, 2, 2)).astype(np.int32),
         labels(2, np.uint64), None),
        ("u4", rng.integers(0, 2**32, (3, 3)).astype(np.uint32), labels(3), None),
        ("i8", big.astype(np.int64), labels(3), None),
        ("u8", rng.integers(0, 2**63, (3, 3), dtype=np.uint64), labels(3), None),
        ("bool", rng.integers(0, 2, (3, 8)).astype(bool), labels(3), None),
        ("strided", normal((5, 8)).astype(np.float32)[:, ::2], labels(5), None),
        ("v2", normal((3, 4)).astype(np.float32), labels(3), (2, 0)),
        ("v3", normal((3, 4)).astype(np.float32), labels(3), (3, 0)),
        ("gz", normal((3, 4)).astype(np.float32), labels(3), "gz"),
        ("many-classes", normal((300, 2)).astype(np.float32), labels(300, classes=120), None),
        # errors
        ("fortran", np.asfortranarray(normal((4, 3)).astype(np.float32)), labels(4), None),
        ("big-endian", normal((3, 4)).astype(">f4"), labels(3), None),
        ("float-labels", normal((3, 4)).astype(np.float32), labels(3, np.float32), None),
        ("count-mismatch", normal((3, 4)).astype(np.float32), labels(4), None),
        ("flat", normal(6).astype(np.float32), labels(6), None),
        ("structured", np.zeros((3, 2), dtype=[("a", "<f4"), ("b", "<i4")]), labels(3), None),
        ("complex", normal((3, 2)).astype(np.complex64), labels(3), None),
        ("nan", np.array([[1.0, np.nan], [2.0, 3.0]], dtype=np.float32), labels(2), None),
        ("negative-label", normal((3, 2)).astype(np.float32), np.array([0, -1, 2]), None),
    ]


def save(path, array, how):
    import numpy as np
    if how is None:
        np.save(path, array)
    elif how == "gz":
        with gzip.open(path, "wb") as f:
            np.save(f, array)
    else:
        with open(path, "wb") as f:
            np.lib.format.write_array(f, array, version=how)


def cmd_npy_suite(tool, folder):
    failed = 0
    for name, x, y, how in npy_cases():
        images = os.path.join(folder, f"{name}-images.npy")
        labels = os.path.join(folder, f"{name}-labels.npy")
        save(images, x, how)
        save(labels, y, None)
        run = subprocess.run([tool, "npy", images, labels], capture_output=True, text=True)
        if run.returncode != 0:
            print(f"{name}: " + run.stderr.strip().replace(folder + os.sep, ""))
            continue
        problem = compare(run.stdout, npy_reference(images, labels))
        if problem:
            failed += 1
        first = run.stdout.splitlines()[0].removeprefix("data: ")
        print(f"{name}: {first}: " + (problem or "agrees with NumPy"))
    sys.exit(1 if failed else 0)


def cmd_copy_dir(src, dst, plain):
    os.makedirs(dst, exist_ok=True)
    for name in IDX_NAMES:
        data = read_maybe_gzip(find(src, name))
        if name in plain:
            with open(os.path.join(dst, name), "wb") as f:
                f.write(data)
        else:
            with gzip.open(os.path.join(dst, name + ".gz"), "wb", compresslevel=1) as f:
                f.write(data)


def main(argv):
    cmd, args = argv[1], argv[2:]
    if cmd == "idx-dir":
        cmd_idx_dir(*args)
    elif cmd == "npy":
        sys.stdout.write(npy_reference(*args))
    elif cmd == "batches":
        cmd_batches(args[0], int(args[1]), int(args[2]), int(args[3]))
    elif cmd == "compare":
        cmd_compare(*args)
    elif cmd == "npy-suite":
        cmd_npy_suite(*args)
    elif cmd == "copy-dir":
        cmd_copy_dir(args[0], args[1], args[2:])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
