#!/usr/bin/env python3
"""int8_checkpoint.py: the Python side of the int8 program's tests, reading
and writing checkpoints with tests/runtime/Inputs/checkpoint_torch.py's
safetensors reader (json and struct, no safetensors package).

  show PATH                       each tensor's name, dtype and shape, and the
                                  metadata's keys, one a line
  set IN OUT NAME INDEX VALUE     IN with entry INDEX of tensor NAME set to
                                  VALUE (a float: 0, nan, inf), into OUT
  inputs N OUT                    N images of f32 [1,28,28], raw, from a fixed
                                  seed (some values beyond the input's scale)
  lenet5 CKPT INPUTS N SCORES     LeNet-5 in int8 (models/lenet5.dl, dlc
                                  --quantize=int8) computed here from CKPT with
                                  integers (float64 sums of int8 products are
                                  exact), requantized as docs/quantization.md
                                  says; compares with SCORES (int8_scores's
                                  output) bit for bit and prints the verdict
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "runtime", "Inputs"))
import checkpoint_torch  # noqa: E402


def quantize(x, scale):
    """f32 x to int8 with the f32 scale: rint(x / scale), clamped"""
    q = torch.round(x / torch.tensor(scale, dtype=torch.float32))  # half to even
    return q.clamp(-128, 127).nan_to_num(0).to(torch.int64)


def requant_params(acc_scale, bias, out_scale):
    """the bias, multiplier and shift of dlrt_requant_init, in Python doubles"""
    b = round(bias / acc_scale)  # half to even
    b = max(-(1 << 30), min(1 << 30, b))
    mant, e = math.frexp(acc_scale / out_scale)
    m = round(math.ldexp(mant, 31))
    if m == 1 << 31:
        m, e = m >> 1, e + 1
    shift = 31 - e
    if shift > 62:
        m, shift = 0, 0
    elif shift < 0:
        m, shift = (1 << 31) - 1, 0
    return b, m, shift


def requantize(acc, params, relu):
    """(acc + bias) * m / 2^shift, half to even, clamped: exact in Python ints"""
    b, m, shift = params
    num = (acc + b) * m
    if shift:
        q, r = divmod(num, 1 << shift)  # floor, 0 <= r < 2^shift
        half = 1 << (shift - 1)
        q += 1 if r > half or (r == half and q % 2) else 0
    else:
        q = num
    return max(0 if relu else -128, min(127, q))


def layer(t, name, x, sx, conv=None):
    """an int8 layer on int64 x: the sums, and per filter the scale sx * sw"""
    w = t[name + ".qweight"].to(torch.float64)
    xf = x.to(torch.float64)
    acc = F.conv2d(xf, w, **conv) if conv is not None else xf.flatten(1) @ w.t()
    return acc.to(torch.int64), [float(sx) * float(s) for s in t[name + ".weight_scale"]]


def requant_layer(t, name, acc, scales, relu):
    sy = float(t[name + ".output_scale"])
    bias = [float(b) for b in t[name + ".qbias"]]
    out = acc.clone()
    for f in range(acc.shape[1]):
        params = requant_params(scales[f], bias[f], sy)
        flat = out[:, f].reshape(-1)
        for i in range(flat.numel()):
            flat[i] = requantize(int(flat[i]), params, relu)
        out[:, f] = flat.reshape(out[:, f].shape)
    return out


def lenet5(t, x):
    s_in = float(t["c1.input_scale"])
    q = quantize(x, s_in)
    acc, sc = layer(t, "c1", q, s_in, {"padding": 2})
    q = F.max_pool2d(requant_layer(t, "c1", acc, sc, True).to(torch.float64), 2).to(torch.int64)
    acc, sc = layer(t, "c3", q, t["c1.output_scale"], {})
    q = F.max_pool2d(requant_layer(t, "c3", acc, sc, True).to(torch.float64), 2).to(torch.int64)
    acc, sc = layer(t, "f5", q, t["c3.output_scale"])
    q = requant_layer(t, "f5", acc, sc, True)
    acc, sc = layer(t, "f6", q, t["f5.output_scale"])
    q = requant_layer(t, "f6", acc, sc, True)
    acc, sc = layer(t, "out", q, t["f6.output_scale"])
    bias = t["out.qbias"].to(torch.float64)
    scores = acc.to(torch.float64) * torch.tensor(sc, dtype=torch.float64) + bias
    return scores.to(torch.float32)


def main(argv):
    if argv[1] == "show":
        tensors, meta = checkpoint_torch.read_safetensors(argv[2], strict=True)
        for name, t in tensors.items():
            print(name, checkpoint_torch.NAMES[t.dtype], list(t.shape))
        for key in meta:
            print("meta", key)
    elif argv[1] == "set":
        tensors, meta = checkpoint_torch.read_safetensors(argv[2])
        t = tensors[argv[4]].clone()
        t.view(-1)[int(argv[5])] = float(argv[6])
        tensors[argv[4]] = t
        checkpoint_torch.write_safetensors(argv[3], tensors, meta)
    elif argv[1] == "inputs":
        g = torch.Generator().manual_seed(5)
        x = torch.rand(int(argv[2]), 1, 28, 28, generator=g) * 1.2 - 0.1
        with open(argv[3], "wb") as f:
            f.write(x.numpy().tobytes())
    elif argv[1] == "lenet5":
        t, _ = checkpoint_torch.read_safetensors(argv[2])
        n = int(argv[4])
        with open(argv[3], "rb") as f:
            x = torch.frombuffer(bytearray(f.read()), dtype=torch.float32).reshape(n, 1, 28, 28)
        want = lenet5(t, x)
        with open(argv[5]) as f:
            got = torch.tensor([[float.fromhex(v) for v in line.split()] for line in f],
                               dtype=torch.float32)
        same = torch.equal(got, want)
        print(f"int8 lenet5: {n} samples, scores {'the same bits' if same else 'DIFFER'}")
        if not same:
            print("max difference", (got - want).abs().max().item())
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
