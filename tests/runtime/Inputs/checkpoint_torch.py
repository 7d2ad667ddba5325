#!/usr/bin/env python3
"""checkpoint_torch.py: the PyTorch side of the checkpoint tests, without the
safetensors package (the format is read and written with json and struct, as
docs/checkpoints.md shows).

  load PATH          reads PATH into torch tensors and prints its metadata and
                     tensors in the format `test_checkpoint read` prints; also
                     checks the layout dlc writes (padding, order, alignment)
  save-modules PATH  writes the state_dict of a Conv2d and a Linear, tensors of
                     the other dtypes and metadata, with the data in another
                     order than the header's; prints what `test_checkpoint read`
                     must print for it
  resave IN OUT      reads IN and writes its tensors and metadata to OUT
  save-conv PATH K   a Conv2d(1, 6, K)'s state_dict as c1.weight and c1.bias
  save-f16 PATH      a float16 tensor (a dtype dlc does not support)
"""
import collections
import json
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "F64": torch.float64, "I32": torch.int32,
          "I64": torch.int64, "U8": torch.uint8, "I8": torch.int8, "F16": torch.float16}
NAMES = {v: k for k, v in DTYPES.items()}


def read_safetensors(path, strict=False):
    """(an ordered dict of name -> tensor, metadata) from path; strict also
    checks the layout dlc writes."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"),
                        object_pairs_hook=collections.OrderedDict)
    data = memoryview(blob)[8 + n:]  # slices of a view copy nothing
    meta = header.pop("__metadata__", {})
    tensors = collections.OrderedDict()
    end = 0
    for name, info in header.items():
        begin, stop = info["data_offsets"]
        dtype = DTYPES[info["dtype"]]
        if strict:
            assert begin == end, f"{name}: data not in header order"
        end = stop
        if begin == stop:
            t = torch.empty(info["shape"], dtype=dtype)
        else:
            t = torch.frombuffer(bytearray(data[begin:stop]), dtype=dtype)
        tensors[name] = t.reshape(info["shape"])
    if strict:
        assert n % 8 == 0, f"header size {n} is not a multiple of 8"
        assert blob[8:8 + n].rstrip(b" ").endswith(b"}"), "padding is not spaces"
        assert end == len(data), f"{len(data) - end} bytes after the data"
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items())
    return tensors, meta


def write_safetensors(path, tensors, meta=None, reverse_data=False):
    """Writes tensors (a dict) and meta; the metadata goes last in the header,
    and with reverse_data the data is stored in the opposite order."""
    chunks = {name: t.detach().contiguous().numpy().tobytes() for name, t in tensors.items()}
    order = list(tensors)[::-1] if reverse_data else list(tensors)
    offsets, at = {}, 0
    for name in order:
        offsets[name] = [at, at + len(chunks[name])]
        at += len(chunks[name])
    header = collections.OrderedDict()
    for name, t in tensors.items():
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": offsets[name]}
    if meta:
        header["__metadata__"] = meta
    text = json.dumps(header).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name in order:
            f.write(chunks[name])


def show(value, dtype):
    if dtype == torch.float32:
        return "%.9g" % value
    if dtype == torch.float64:
        return "%.17g" % value
    return "%d" % value


def describe(tensors, meta):
    """The text `test_checkpoint read` prints."""
    lines = [f"meta {k} = {v}" for k, v in meta.items()]
    for name, t in tensors.items():
        shape = ",".join(str(d) for d in t.shape)
        values = "".join(" " + show(v, t.dtype) for v in t.flatten().tolist())
        lines.append(f"{name} {NAMES[t.dtype]} [{shape}]{values}")
    return "".join(line + "\n" for line in lines)


def emit(text):
    sys.stdout.buffer.write(text.encode("utf-8"))


def save_modules(path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(collections.OrderedDict(
        c1=torch.nn.Conv2d(2, 3, 3), fc=torch.nn.Linear(4, 3)))
    tensors = collections.OrderedDict(net.state_dict())
    tensors["step"] = torch.tensor(7, dtype=torch.int64)
    tensors["ids"] = torch.tensor([-5, 0, 2**31 - 1], dtype=torch.int32)
    tensors["mask"] = torch.tensor([[0, 255], [1, 128]], dtype=torch.uint8)
    tensors["scale"] = torch.tensor([1 / 3, -5e-324, 1e308], dtype=torch.float64)
    tensors["none"] = torch.zeros(0, 2)
    meta = collections.OrderedDict(
        [("network", "from-torch"),
         ("note", 'quote " backslash \\ tab\t e\u0301 \u00e9 \u2713 \U0001F600'),
         ("format", "pt")])
    write_safetensors(path, tensors, meta, reverse_data=True)
    emit(describe(tensors, meta))


def main(argv):
    cmd = argv[1]
    if cmd == "load":
        tensors, meta = read_safetensors(argv[2], strict=True)
        emit(describe(tensors, meta))
    elif cmd == "save-modules":
        save_modules(argv[2])
    elif cmd == "resave":
        tensors, meta = read_safetensors(argv[2])
        write_safetensors(argv[3], tensors, meta, reverse_data=True)
    elif cmd == "save-conv":
        torch.manual_seed(1)
        conv = torch.nn.Conv2d(1, 6, int(argv[3]))
        write_safetensors(argv[2], {"c1." + k: v for k, v in conv.state_dict().items()})
    elif cmd == "save-f16":
        write_safetensors(argv[2], {"w": torch.ones(2, dtype=torch.float16)})
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
