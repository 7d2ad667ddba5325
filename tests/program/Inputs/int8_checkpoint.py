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
  tinyres CKPT INPUTS N SCORES    the same for the residual network
                                  (Inputs/int8_resnet.dl): its int8 adds
                                  (qadd) and global average pooling
                                  (qglobalavgpool) too
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


def round_shift(num, shift):
    """num / 2^shift rounded half to even, in Python ints"""
    if not shift:
        return num
    q, r = divmod(num, 1 << shift)  # floor, 0 <= r < 2^shift
    half = 1 << (shift - 1)
    return q + (1 if r > half or (r == half and q % 2) else 0)


def qadd_params(sa, sb, sy):
    """dlrt_qadd_init's multipliers and shift, in Python doubles"""
    ma, mb = sa / sy, sb / sy
    _, e = math.frexp(max(ma, mb))
    shift = 31 - e
    if 0 <= shift <= 62 and round(math.ldexp(max(ma, mb), shift)) >= 1 << 31:
        shift -= 1
    if shift > 62:
        return 0, 0, 0
    shift = max(shift, 0)
    top = (1 << 31) - 1
    return min(round(math.ldexp(ma, shift)), top), min(round(math.ldexp(mb, shift)), top), shift


def qadd(t, a, sa, b, sb, name, relu):
    """a + b of int8 tensors into the scale NAME.scale, as qadd"""
    ma, mb, shift = qadd_params(float(sa), float(sb), float(t[name + ".scale"]))
    lo = 0 if relu else -128
    flat = [max(lo, min(127, round_shift(int(x) * ma + int(y) * mb, shift)))
            for x, y in zip(a.reshape(-1).tolist(), b.reshape(-1).tolist())]
    return torch.tensor(flat, dtype=torch.int64).reshape(a.shape)


def qgap(t, x, sx, name):
    """global average pooling of int8 x into NAME.scale: the sums, requantized"""
    hw = x.shape[2] * x.shape[3]
    params = requant_params(float(sx) / hw, 0.0, float(t[name + ".scale"]))
    sums = x.sum(dim=(2, 3)).reshape(-1).tolist()
    flat = [requantize(int(s), params, False) for s in sums]
    return torch.tensor(flat, dtype=torch.int64).reshape(x.shape[0], x.shape[1], 1, 1)


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


def tinyres(t, x):
    s_in = float(t["stem.input_scale"])
    q = quantize(x, s_in)
    acc, sc = layer(t, "stem", q, s_in, {"padding": 1})
    x0 = F.max_pool2d(requant_layer(t, "stem", acc, sc, True).to(torch.float64), 2).to(torch.int64)
    s0 = t["stem.output_scale"]
    acc, sc = layer(t, "block1.conv1", x0, s0, {"padding": 1})
    y = requant_layer(t, "block1.conv1", acc, sc, True)
    acc, sc = layer(t, "block1.conv2", y, t["block1.conv1.output_scale"], {"padding": 1})
    y = requant_layer(t, "block1.conv2", acc, sc, False)
    x1 = qadd(t, y, t["block1.conv2.output_scale"], x0, s0, "block1.out.1", True)
    s1 = t["block1.out.1.scale"]
    acc, sc = layer(t, "block2.conv1", x1, s1, {"stride": 2, "padding": 1})
    y = requant_layer(t, "block2.conv1", acc, sc, True)
    acc, sc = layer(t, "block2.conv2", y, t["block2.conv1.output_scale"], {"padding": 1})
    y = requant_layer(t, "block2.conv2", acc, sc, False)
    acc, sc = layer(t, "block2.downsample_0", x1, s1, {"stride": 2})
    d = requant_layer(t, "block2.downsample_0", acc, sc, False)
    x2 = qadd(t, y, t["block2.conv2.output_scale"], d, t["block2.downsample_0.output_scale"],
              "block2.out.1", True)
    g = qgap(t, x2, t["block2.out.1.scale"], "out")
    acc, sc = layer(t, "fc", g, t["out.scale"])
    scores = acc.to(torch.float64) * torch.tensor(sc, dtype=torch.float64) + \
        t["fc.qbias"].to(torch.float64)
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
    elif argv[1] in ("lenet5", "tinyres"):
        t, _ = checkpoint_torch.read_safetensors(argv[2])
        n = int(argv[4])
        with open(argv[3], "rb") as f:
            x = torch.frombuffer(bytearray(f.read()), dtype=torch.float32).reshape(n, 1, 28, 28)
        want = (lenet5 if argv[1] == "lenet5" else tinyres)(t, x)
        with open(argv[5]) as f:
            got = torch.tensor([[float.fromhex(v) for v in line.split()] for line in f],
                               dtype=torch.float32)
        same = torch.equal(got, want)
        print(f"int8 {argv[1]}: {n} samples, scores {'the same bits' if same else 'DIFFER'}")
        if not same:
            print("max difference", (got - want).abs().max().item())
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
