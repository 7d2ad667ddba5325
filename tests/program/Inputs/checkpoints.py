#!/usr/bin/env python3
"""checkpoints.py: compares dlc checkpoints, reading safetensors with json
and struct only (docs/checkpoints.md).

  checkpoints.py same A B     every tensor of A has the bytes of B's; prints
                              "same tensors (N)", else the ones that differ
                              and exits 1
  checkpoints.py differ A B   every trainable tensor (not a momentum buffer)
                              differs; prints "tensors differ (N)", else the
                              equal ones and exits 1
  checkpoints.py close A B TOL
                              every tensor of A within TOL of B's, relative
                              to the largest magnitude in B's; prints
                              "close tensors (N)", else the ones that are
                              not and exits 1
  checkpoints.py meta A       the metadata, one "key=value" a line, sorted
  checkpoints.py set-meta A B KEY=VALUE...
                              writes A to B with these metadata entries
                              set (for tests of bad metadata)
"""
import json
import struct
import sys


def read(path):
    """(name -> the tensor's raw bytes, metadata) of a safetensors file."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    meta = header.pop("__metadata__", {})
    tensors = {name: data[info["data_offsets"][0]:info["data_offsets"][1]]
               for name, info in header.items()}
    return tensors, meta


def values(path):
    """name -> the tensor's values, as floats, of a safetensors file."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    data = blob[8 + n:]
    out = {}
    for name, info in header.items():
        code = {"F32": "f", "F64": "d"}[info["dtype"]]
        raw = data[info["data_offsets"][0]:info["data_offsets"][1]]
        out[name] = struct.unpack(f"<{len(raw) // struct.calcsize(code)}{code}", raw)
    return out


def close(a_path, b_path, tol):
    a, b = values(a_path), values(b_path)
    assert sorted(a) == sorted(b), f"different tensors: {sorted(a)} and {sorted(b)}"
    bad = []
    for name in sorted(a):
        scale = max((abs(v) for v in b[name]), default=0.0) or 1.0
        worst = max((abs(x - y) for x, y in zip(a[name], b[name])), default=0.0)
        if not worst <= tol * scale:
            bad.append(f"{name} ({worst / scale:.3g})")
    print(f"tensors not close: {', '.join(bad)}" if bad else f"close tensors ({len(a)})")
    return 1 if bad else 0


def set_meta(src, dst, entries):
    with open(src, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = header.setdefault("__metadata__", {})
    for entry in entries:
        key, value = entry.split("=", 1)
        meta[key] = value
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + blob[8 + n:])


def main():
    mode = sys.argv[1]
    if mode == "set-meta":
        set_meta(sys.argv[2], sys.argv[3], sys.argv[4:])
        return 0
    if mode == "close":
        return close(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    a, meta = read(sys.argv[2])
    if mode == "meta":
        for key in sorted(meta):
            print(f"{key}={meta[key]}")
        return 0
    b, _ = read(sys.argv[3])
    assert sorted(a) == sorted(b), f"different tensors: {sorted(a)} and {sorted(b)}"
    if mode == "same":
        bad = [name for name in a if a[name] != b[name]]
        print(f"tensors that differ: {', '.join(bad)}" if bad else f"same tensors ({len(a)})")
    else:
        trainable = [name for name in a if not name.endswith("_buffer")
                     and "exp_avg" not in name]
        bad = [name for name in trainable if a[name] == b[name]]
        print(f"equal tensors: {', '.join(bad)}" if bad else f"tensors differ ({len(trainable)})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
