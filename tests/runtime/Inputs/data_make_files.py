"""data_make_files.py DIR: writes the small, mostly malformed, dataset files
that data_errors.test loads with test_data (struct and gzip only)."""
import gzip
import os
import struct
import sys


def idx(magic, dims, payload):
    return struct.pack(">I", magic) + struct.pack(f">{len(dims)}I", *dims) + payload


def npy(header, payload, major=1):
    header = header + " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY" + bytes([major, 0]) + struct.pack("<H", len(header)) + \
        header.encode() + payload


def main(folder):
    pixels = bytes(range(0, 180, 10))
    images = idx(0x803, [3, 2, 3], pixels)
    files = {
        "images": images,
        "labels": idx(0x801, [3], b"\x02\x00\x01"),
        "labels4": idx(0x801, [4], b"\x02\x00\x01\x03"),
        "empty": b"",
        "short-header": images[:6],
        "bad-magic": idx(0x01000803, [3, 2, 3], pixels),
        "float-type": idx(0xD03, [3, 2, 3], pixels),
        "truncated": images[:-1],
        "trailing": images + b"junk!",
        "zero-dim": idx(0x803, [3, 0, 3], b""),
        "huge-dims": idx(0x803, [0xFFFFFFFF] * 3, b""),
        "cut.gz": gzip.compress(images)[:-12],
        "images.gz": gzip.compress(images),
        "f4.npy": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 1), }",
                      struct.pack("<3f", 0.5, 1.5, -2.0)),
        "i8.npy": npy("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }",
                      struct.pack("<3q", 4, 0, 1)),
        "big-endian.npy": npy("{'descr': '>f4', 'fortran_order': False, 'shape': (3, 1), }",
                              struct.pack(">3f", 0.5, 1.5, -2.0)),
        "fortran.npy": npy("{'descr': '<f4', 'fortran_order': True, 'shape': (3, 1), }",
                           struct.pack("<3f", 0.5, 1.5, -2.0)),
        "bad-header.npy": npy("{'descr': '<f4', 'fortran_order': False 'shape': (3, 1), }",
                              struct.pack("<3f", 0.5, 1.5, -2.0)),
        "not.npy": images,
        "ragged.csv": b"label,a,b\n1,0.5,2\n0,3\n",
        "word.csv": b"label,a,b\n1,0.5,2\n0,3,x7\n",
        "good.csv": b"a,label,b\r\n0.5,1,2\r\n-1,0,300\r\n",
    }
    for name, data in files.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main(sys.argv[1])
