#!/usr/bin/env python3
"""Writes the seed inputs of the readers' fuzz targets (fuzz_idx.c,
fuzz_npy.c, fuzz_csv.c, fuzz_pgm.c, fuzz_safetensors.c) into
tests/fuzz/{idx,npy,csv,pgm,safetensors}/: small valid files of each
format, plain and gzip, that the fuzzers mutate.  Run it again only to
change the seeds; the files are committed."""
import gzip
import json
import os
import struct
import sys

root = os.path.dirname(os.path.abspath(__file__))


def write(folder, name, data, gz=True):
    os.makedirs(os.path.join(root, folder), exist_ok=True)
    with open(os.path.join(root, folder, name), "wb") as f:
        f.write(data)
    if gz:
        with open(os.path.join(root, folder, name + ".gz"), "wb") as f:
            f.write(gzip.compress(data, mtime=0))


def pair(a, b):
    """Images and labels as fuzz_split (readers.h) reads them."""
    return struct.pack("<H", len(a)) + a + b


def idx(kind, dims, values):
    return struct.pack(">BBBB", 0, 0, kind, len(dims)) + \
        b"".join(struct.pack(">I", d) for d in dims) + bytes(values)


images = idx(8, [3, 2, 3], range(18))
labels = idx(8, [3], [2, 0, 1])
write("idx", "images", images)
write("idx", "pair", pair(images, labels), gz=False)
write("idx", "pair-gz", pair(gzip.compress(images, mtime=0), gzip.compress(labels, mtime=0)),
      gz=False)
write("idx", "rank4", idx(8, [2, 1, 2, 2], range(8)), gz=False)


def npy(descr, shape, payload):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join("%d, " % d for d in shape) if len(shape) == 1 else ", ".join(map(str, shape)))
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + payload


imgs = npy("<f4", [2, 1, 2, 2], struct.pack("<8f", *[0.5 * i for i in range(8)]))
labs = npy("<i8", [2], struct.pack("<2q", 1, 0))
write("npy", "images.npy", imgs)
write("npy", "u1.npy", npy("|u1", [1, 2, 2], bytes([0, 64, 128, 255])))
write("npy", "pair.npy", pair(imgs, labs), gz=False)
write("npy", "pair-gz.npy", pair(gzip.compress(imgs, mtime=0), labs), gz=False)
write("npy", "f8.npy", npy("<f8", [1, 1, 2, 2], struct.pack("<4d", 1, 2, 3, 4)), gz=False)

# CSV: the first byte is the label column (low 3 bits, less 1) and the
# header bit (fuzz_csv.c); the file follows, plain or gzip
def csv(name, knob, text):
    write("csv", name, bytes([knob]) + text, gz=False)
    write("csv", name + ".gz", bytes([knob]) + gzip.compress(text, mtime=0), gz=False)


csv("good.csv", 1, b"0,1.5,2\n1,-3,4e2\n2,5,6\n")
csv("header.csv", 11, b"a,b,label\n1,2,0\n3,4,1\n")
csv("crlf.csv", 2, b"1,2,3\r\n4,5,6\r\n")

# PGM
write("pgm", "p5.pgm", b"P5\n# a comment\n3 2\n255\n" + bytes([0, 10, 20, 30, 40, 255]))
write("pgm", "p2.pgm", b"P2\n2 2\n15\n0 5\n10 15\n")
write("pgm", "p5-16.pgm", b"P5 2 1 65535\n" + struct.pack(">2H", 0, 65535), gz=False)

# safetensors: w f32 [2, 3], b f64 [3], step i64 []
head = {"__metadata__": {"network": "fuzz", "dlc_version": "0.1.0"},
        "w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
        "b": {"dtype": "F64", "shape": [3], "data_offsets": [24, 48]},
        "step": {"dtype": "I64", "shape": [], "data_offsets": [48, 56]}}
text = json.dumps(head).encode()
text += b" " * ((8 - len(text) % 8) % 8)
body = struct.pack("<6f", *range(6)) + struct.pack("<3d", 1, 2, 3) + struct.pack("<q", 7)
write("safetensors", "good.safetensors", struct.pack("<Q", len(text)) + text + body, gz=False)
del head["__metadata__"]
text = json.dumps(head, separators=(",", ":")).encode()
write("safetensors", "no-meta.safetensors", struct.pack("<Q", len(text)) + text + body, gz=False)
sys.exit(0)
