#!/usr/bin/env python3
"""kernels_torch.py: PyTorch as the oracle for libdlrt's kernels.

  gen SUITE SEED          prints the cases of SUITE (fixed by SEED) for
                          `test_kernels run SPEC OUT`
  check SPEC OUT          recomputes every case of SPEC with torch in float64
                          (autograd for the backward kernels, torch.optim for
                          the updates) and compares each array of OUT; prints
                          one line per op, "OP: N cases ok (...)", and a line
                          per failing array naming its case

Suites: conv, dense, act, pool, softmax, misc (globalavgpool, concat through
copy_rows, add), optim (sgd and adam), rnn (torch.nn.RNN, LSTM and GRU).

The error of an array is max|c - torch| / max(max|torch|, 1e-6): relative to
the largest value of the tensor, so that values near zero in a tensor of
ones are judged by the tensor's scale.  Every array must be within 1e-4;
the optimizers' also within 1e-6 of torch.optim run in float32.

The SPEC format is test_kernels.c's: "case LABEL OP NPARAMS", KEY VALUE pairs,
NARRAYS, then NAME COUNT VALUES... per array; values as %.9g, which
round-trips float32.  Float parameters are rounded to float32 before torch
sees them, since the kernels take floats.
"""
import itertools
import sys

import numpy as np
import torch
import torch.nn.functional as F

TOL = 1e-4
# sgd and adam are also run by torch in float32, which they must match to
# within a few roundings (bit for bit on machines whose torch uses FMA)
EXACT_OPS = ("sgd", "adam")
TOL32 = 1e-6


# ---- the format --------------------------------------------------------------

def f32(v):
    return float(np.float32(v))


def fmt_case(label, op, params, arrays):
    out = [f"case {label} {op} {len(params)}"]
    out.append(" ".join(f"{k} {v:.9g}" if isinstance(v, float) else f"{k} {int(v)}"
                        for k, v in params.items()))
    out.append(str(len(arrays)))
    for name, t in arrays.items():
        vals = t.detach().to(torch.float32).reshape(-1).tolist()
        out.append(f"{name} {len(vals)} " + " ".join("%.9g" % v for v in vals))
    return "\n".join(out)


def read_cases(path, with_params):
    """[(label, op, params, {name: float64 tensor})] in file order, and
    whether the whole file was read."""
    words = open(path).read().split()
    cases = []
    try:
        read_words(words, with_params, cases)
    except (IndexError, ValueError, AssertionError):
        print(f"{path}: malformed or truncated after {len(cases)} cases")
        return cases, False
    return cases, True


def read_words(words, with_params, cases):
    pos = 0
    while pos < len(words):
        assert words[pos] == "case"
        label = words[pos + 1]
        pos += 2
        params = {}
        op = None
        if with_params:
            op, nparams = words[pos], int(words[pos + 1])
            pos += 2
            for _ in range(nparams):
                params[words[pos]] = float(words[pos + 1])
                pos += 2
        narrays = int(words[pos])
        pos += 1
        arrays = {}
        for _ in range(narrays):
            name, count = words[pos], int(words[pos + 1])
            vals = [float(v) for v in words[pos + 2:pos + 2 + count]]
            assert len(vals) == count
            arrays[name] = torch.tensor(vals, dtype=torch.float64)
            pos += 2 + count
        cases.append((label, op, params, arrays))


# ---- generators -----------------------------------------------------------

class Gen:
    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def uniform(self, *shape, scale=1.0):
        return ((torch.rand(*shape, generator=self.g, dtype=torch.float64) * 2 - 1)
                * scale).float()

    def normal(self, *shape, scale=1.0):
        return (torch.randn(*shape, generator=self.g, dtype=torch.float64) * scale).float()

    def quantized(self, *shape):
        """Values in multiples of 1/4 in [-1, 1]: many ties."""
        return (torch.randint(-4, 5, shape, generator=self.g) / 4.0).float()

    def int(self, lo, hi):
        return int(torch.randint(lo, hi + 1, (1,), generator=self.g))


def conv_out(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def gen_conv(gen):
    kernels = [(1, 1), (3, 3), (5, 5), (3, 5)]
    combos = itertools.product(kernels, (1, 2), (0, 1, 2), (1, 2), ("1", "2", "dw"), (1, 3))
    cases = []
    for i, ((kh, kw), s, p, d, groups, n) in enumerate(combos):
        if i % 5:
            continue
        if groups == "1":
            g, c, f = 1, gen.int(1, 3), gen.int(1, 4)
        elif groups == "2":
            g, c, f = 2, 4, 2 * gen.int(1, 3)
        else:
            c = gen.int(2, 4)
            g, f = c, c * gen.int(1, 2)
        # strides and paddings differ by axis in some cases
        sh, sw = s, (s if i % 3 else 3 - s)
        ph, pw = p, (p if i % 2 else (p + 1) % 3)
        h = max(gen.int(4, 9), d * (kh - 1) + 1 - 2 * ph)
        w = max(gen.int(4, 9), d * (kw - 1) + 1 - 2 * pw)
        oh, ow = conv_out(h, kh, sh, ph, d), conv_out(w, kw, sw, pw, d)
        params = dict(n=n, c=c, h=h, w=w, f=f, oh=oh, ow=ow, kh=kh, kw=kw, sh=sh, sw=sw,
                      ph=ph, pw=pw, dh=d, dw=d, groups=g)
        arrays = {"x": gen.normal(n, c, h, w), "w": gen.uniform(f, c // g, kh, kw)}
        if i % 3 != 2:
            arrays["b"] = gen.uniform(f)
        arrays["dy"] = gen.normal(n, f, oh, ow)
        label = (f"conv_n{n}_c{c}_{h}x{w}_f{f}_k{kh}x{kw}_s{sh}x{sw}_p{ph}x{pw}_d{d}_g{g}"
                 + ("" if "b" in arrays else "_nobias"))
        cases.append(fmt_case(label, "conv2d", params, arrays))
    # dilation differing by axis, and a large channel count
    for (n, c, h, w, f, kh, kw, sh, sw, ph, pw, dh, dw, g) in [
            (2, 4, 9, 8, 4, 3, 3, 1, 2, 1, 0, 2, 1, 2),
            (1, 16, 6, 6, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1),
            (3, 6, 5, 7, 6, 3, 5, 2, 1, 2, 2, 1, 2, 6)]:
        oh, ow = conv_out(h, kh, sh, ph, dh), conv_out(w, kw, sw, pw, dw)
        params = dict(n=n, c=c, h=h, w=w, f=f, oh=oh, ow=ow, kh=kh, kw=kw, sh=sh, sw=sw,
                      ph=ph, pw=pw, dh=dh, dw=dw, groups=g)
        arrays = {"x": gen.normal(n, c, h, w), "w": gen.uniform(f, c // g, kh, kw),
                  "b": gen.uniform(f), "dy": gen.normal(n, f, oh, ow)}
        label = f"conv_n{n}_c{c}_{h}x{w}_f{f}_k{kh}x{kw}_s{sh}x{sw}_p{ph}x{pw}_d{dh}x{dw}_g{g}"
        cases.append(fmt_case(label, "conv2d", params, arrays))
    return cases


def gen_dense(gen):
    cases = []
    for n, i, o, bias in [(1, 1, 1, True), (1, 5, 3, True), (3, 7, 9, True),
                          (8, 64, 10, True), (5, 100, 33, False), (2, 3, 50, True)]:
        arrays = {"x": gen.normal(n, i), "w": gen.uniform(o, i)}
        if bias:
            arrays["b"] = gen.uniform(o)
        arrays["dy"] = gen.normal(n, o)
        cases.append(fmt_case(f"dense_n{n}_in{i}_out{o}" + ("" if bias else "_nobias"),
                              "dense", dict(n=n, **{"in": i}, out=o), arrays))
    return cases


def gen_act(gen):
    cases = []
    for op in ("relu", "sigmoid", "tanh"):
        for count, scale in ((1, 1.0), (100, 3.0), (64, 30.0)):
            x = gen.normal(count, scale=scale)
            if op == "relu" and count > 1:
                x[::7] = 0.0    # the kink: torch's gradient there is 0
            cases.append(fmt_case(f"{op}_{count}_x{scale:g}", op, dict(count=count),
                                  {"x": x, "dy": gen.normal(count)}))
    return cases


def gen_pool(gen):
    cases = []
    geometries = [  # n c h w kh kw sh sw ph pw ceil
        (1, 1, 4, 4, 2, 2, 2, 2, 0, 0, False),
        (2, 3, 5, 5, 3, 3, 2, 2, 1, 1, False),
        (2, 3, 5, 5, 3, 3, 2, 2, 1, 1, True),
        (3, 2, 7, 6, 3, 2, 2, 1, 1, 1, True),
        (1, 2, 5, 5, 2, 2, 2, 2, 0, 0, True),
        (2, 1, 8, 7, 3, 3, 3, 3, 1, 1, True),
        (1, 3, 6, 6, 4, 4, 3, 3, 2, 2, True),
        (2, 2, 9, 9, 5, 3, 2, 2, 2, 1, True),
        (1, 1, 3, 3, 1, 1, 1, 1, 0, 0, False),
        (3, 2, 10, 7, 3, 3, 1, 1, 1, 1, False),
        (1, 1, 7, 7, 2, 3, 3, 2, 1, 1, True),
        (2, 4, 12, 12, 2, 2, 2, 2, 0, 0, False),
        (2, 3, 6, 8, 5, 5, 1, 1, 2, 2, False),   # centred 5x5 windows, ties
        (2, 3, 14, 13, 3, 3, 2, 2, 0, 0, True),  # GoogLeNet's stride 2, ceil mode
    ]
    for i, (n, c, h, w, kh, kw, sh, sw, ph, pw, ceil) in enumerate(geometries):
        probe = F.max_pool2d(torch.zeros(1, 1, h, w), (kh, kw), (sh, sw), (ph, pw),
                             ceil_mode=ceil)
        oh, ow = probe.shape[2], probe.shape[3]
        geo = f"n{n}_c{c}_{h}x{w}_k{kh}x{kw}_s{sh}x{sw}_p{ph}x{pw}" + ("_ceil" if ceil else "")
        for op, cip in (("maxpool", 0), ("avgpool", 1), ("avgpool", 0)):
            ties = op == "maxpool" and i % 2 == 0
            x = gen.quantized(n, c, h, w) if ties else gen.normal(n, c, h, w)
            if op == "maxpool" and i % 4 == 1:
                x = -x.abs() - 1    # all negative: padding must not win
            params = dict(n=n, c=c, h=h, w=w, oh=oh, ow=ow, kh=kh, kw=kw, sh=sh, sw=sw,
                          ph=ph, pw=pw, count_include_pad=cip, ceil=int(ceil))
            label = f"{op}_{geo}" + ("_ties" if ties else "") + \
                ("" if op == "maxpool" else "_cip" if cip else "_nocip")
            cases.append(fmt_case(label, op, params,
                                  {"x": x, "dy": gen.normal(n, c, oh, ow)}))
    return cases


def gen_softmax(gen):
    cases = []
    for outer, axis, inner, scale in [(4, 10, 1, 1.0), (2, 5, 6, 1.0), (3, 1, 4, 1.0),
                                      (8, 100, 1, 30.0), (1, 7, 1, 1e3), (6, 3, 5, 5.0)]:
        where = "last" if inner == 1 else "middle"
        cases.append(fmt_case(f"softmax_{outer}x{axis}x{inner}_{where}_x{scale:g}", "softmax",
                              dict(outer=outer, axis=axis, inner=inner),
                              {"x": gen.normal(outer, axis, inner, scale=scale),
                               "dy": gen.normal(outer, axis, inner)}))
    return cases


def gen_misc(gen):
    cases = []
    for n, c, hw in [(2, 3, 49), (1, 1, 1), (4, 16, 25)]:
        cases.append(fmt_case(f"globalavgpool_n{n}_c{c}_hw{hw}", "globalavgpool",
                              dict(n=n, c=c, hw=hw),
                              {"x": gen.normal(n, c, hw), "dy": gen.normal(n, c)}))
    # concat along dim 1 of [outer, ci, inner]: len_i = ci * inner
    for outer, cs, inner in [(3, (2, 3, 1), 4), (1, (5, 7), 1), (4, (6,), 2), (2, (1, 1, 1, 1), 9)]:
        params = dict(outer=outer, parts=len(cs), inner=inner)
        arrays = {}
        for i, ci in enumerate(cs):
            params[f"len{i}"] = ci * inner
            params[f"c{i}"] = ci
            arrays[f"in{i}"] = gen.normal(outer, ci, inner)
        arrays["dy"] = gen.normal(outer, sum(cs), inner)
        cases.append(fmt_case(f"concat_{outer}x{'+'.join(map(str, cs))}x{inner}", "concat",
                              params, arrays))
    for count in (1, 17, 1000):
        cases.append(fmt_case(f"add_{count}", "add", dict(count=count),
                              {"a": gen.normal(count), "b": gen.normal(count)}))
    for count in (1, 1000, 2500):
        arrays = {f"t{k}": gen.normal(count) for k in range(4)}
        arrays["relu_y"] = gen.normal(count)
        cases.append(fmt_case(f"sum4_{count}", "sum", dict(count=count), arrays))
    return cases


def gen_optim(gen):
    cases = []
    for count, steps, lr, mom, nest, wd in [(10, 5, 0.1, 0.0, 0, 0.0),
                                            (33, 5, 0.05, 0.9, 0, 0.0),
                                            (33, 5, 0.05, 0.9, 1, 0.0),
                                            (20, 6, 0.02, 0.5, 1, 0.01),
                                            (20, 4, 0.3, 0.0, 0, 0.1),
                                            (15, 6, 0.01, 0.99, 0, 0.001)]:
        arrays = {"p": gen.normal(count)}
        for s in range(steps):
            arrays[f"g{s}"] = gen.normal(count)
        label = f"sgd_lr{lr:g}_m{mom:g}" + ("_nesterov" if nest else "") + f"_wd{wd:g}"
        cases.append(fmt_case(label, "sgd", dict(count=count, steps=steps, lr=f32(lr),
                                                 momentum=f32(mom), nesterov=nest,
                                                 weight_decay=f32(wd)), arrays))
    for count, steps, lr, b1, b2, eps, wd in [(10, 6, 1e-3, 0.9, 0.999, 1e-8, 0.0),
                                              (25, 6, 0.01, 0.8, 0.95, 1e-6, 0.1),
                                              (16, 8, 0.1, 0.5, 0.9, 1e-3, 0.01)]:
        arrays = {"p": gen.normal(count)}
        for s in range(steps):
            arrays[f"g{s}"] = gen.normal(count, scale=10.0 ** (s % 3 - 1))
        label = f"adam_lr{lr:g}_b{b1:g},{b2:g}_eps{eps:g}_wd{wd:g}"
        cases.append(fmt_case(label, "adam", dict(count=count, steps=steps, lr=f32(lr),
                                                  beta1=f32(b1), beta2=f32(b2), eps=f32(eps),
                                                  weight_decay=f32(wd)), arrays))
    return cases


# DlrtCell's order
RNN_CELLS = ("rnn_tanh", "rnn_relu", "lstm", "gru")


def gen_rnn(gen):
    """Every cell forward and reverse, all steps or the last, with lengths
    (a packed sequence) and without, h0 (and c0) or zeros, biases or none,
    libm's activations or the fast ones."""
    cases = []
    for cell, name in enumerate(RNN_CELLS):
        g = {"lstm": 4, "gru": 3}.get(name, 1)
        for n, t, f, h, rev, last, lengths, h0, bias, fast in [
                (3, 5, 4, 6, 0, 0, None, False, True, 0),
                (4, 6, 3, 5, 1, 0, [6, 2, 4, 1], True, True, 0),
                (4, 6, 3, 5, 0, 1, [3, 6, 1, 5], False, False, 0),
                (4, 6, 3, 5, 1, 1, [6, 6, 2, 3], True, True, 1),
                (2, 7, 5, 4, 0, 0, [7, 4], True, True, 1),
                (1, 1, 2, 3, 0, 1, None, True, True, 0)]:
            scale = h ** -0.5   # torch's initialization
            arrays = {"x": gen.normal(n, t, f), "w_ih": gen.uniform(g * h, f, scale=scale),
                      "w_hh": gen.uniform(g * h, h, scale=scale)}
            if bias:
                arrays["b_ih"] = gen.uniform(g * h, scale=scale)
                arrays["b_hh"] = gen.uniform(g * h, scale=scale)
            if h0:
                arrays["h0"] = gen.normal(n, h, scale=0.5)
                if name == "lstm":
                    arrays["c0"] = gen.normal(n, h, scale=0.5)
            if lengths:
                arrays["lengths"] = torch.tensor(lengths, dtype=torch.float32)
            arrays["dy"] = gen.normal(n, h) if last else gen.normal(n, t, h)
            label = (f"{name}_n{n}_T{t}_F{f}_H{h}" + ("_reverse" if rev else "")
                     + ("_last" if last else "") + ("_lengths" if lengths else "")
                     + ("_h0" if h0 else "") + ("" if bias else "_nobias")
                     + ("_fast" if fast else ""))
            params = dict(n=n, T=t, F=f, H=h, cell=cell, reverse=rev, last=last, fast=fast)
            cases.append(fmt_case(label, "rnn", params, arrays))
    return cases


SUITES = {"conv": gen_conv, "dense": gen_dense, "act": gen_act, "pool": gen_pool,
          "softmax": gen_softmax, "misc": gen_misc, "optim": gen_optim, "rnn": gen_rnn}


# ---- references ------------------------------------------------------------

def leaf(t, *shape):
    return t.reshape(*shape).clone().requires_grad_(True)


def ref_conv(p, a):
    n, c, h, w, f = (int(p[k]) for k in ("n", "c", "h", "w", "f"))
    g, kh, kw = int(p["groups"]), int(p["kh"]), int(p["kw"])
    x = leaf(a["x"], n, c, h, w)
    wt = leaf(a["w"], f, c // g, kh, kw)
    b = leaf(a["b"], f) if "b" in a else None
    y = F.conv2d(x, wt, b, stride=(int(p["sh"]), int(p["sw"])),
                 padding=(int(p["ph"]), int(p["pw"])),
                 dilation=(int(p["dh"]), int(p["dw"])), groups=g)
    assert y.shape[2:] == (int(p["oh"]), int(p["ow"])), y.shape
    dy = a["dy"].reshape(y.shape)
    (y * dy).sum().backward()
    db = b.grad if b is not None else dy.sum(dim=(0, 2, 3))
    return {"y": y.detach(), "dx": x.grad, "dw": wt.grad, "db": db}


def ref_dense(p, a):
    n, i, o = int(p["n"]), int(p["in"]), int(p["out"])
    x, wt = leaf(a["x"], n, i), leaf(a["w"], o, i)
    b = leaf(a["b"], o) if "b" in a else None
    y = F.linear(x, wt, b)
    dy = a["dy"].reshape(n, o)
    (y * dy).sum().backward()
    db = b.grad if b is not None else dy.sum(dim=0)
    return {"y": y.detach(), "dx": x.grad, "dw": wt.grad, "db": db}


def ref_act(op):
    fn = {"relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh}[op]

    def ref(p, a):
        x = leaf(a["x"], -1)
        y = fn(x)
        (y * a["dy"]).sum().backward()
        return {"y": y.detach(), "dx": x.grad}
    return ref


def ref_pool(op):
    def ref(p, a):
        n, c, h, w = (int(p[k]) for k in ("n", "c", "h", "w"))
        k, s, pad = (int(p["kh"]), int(p["kw"])), (int(p["sh"]), int(p["sw"])), \
            (int(p["ph"]), int(p["pw"]))
        x = leaf(a["x"], n, c, h, w)
        if op == "maxpool":
            y = F.max_pool2d(x, k, s, pad, ceil_mode=bool(p["ceil"]))
        else:
            y = F.avg_pool2d(x, k, s, pad, ceil_mode=bool(p["ceil"]),
                             count_include_pad=bool(p["count_include_pad"]))
        assert y.shape[2:] == (int(p["oh"]), int(p["ow"])), y.shape
        (y * a["dy"].reshape(y.shape)).sum().backward()
        return {"y": y.detach(), "dx": x.grad}
    return ref


def ref_globalavgpool(p, a):
    n, c, hw = int(p["n"]), int(p["c"]), int(p["hw"])
    x = leaf(a["x"], n, c, hw, 1)
    y = F.adaptive_avg_pool2d(x, 1)
    (y * a["dy"].reshape(y.shape)).sum().backward()
    return {"y": y.detach(), "dx": x.grad}


def ref_softmax(p, a):
    shape = (int(p["outer"]), int(p["axis"]), int(p["inner"]))
    x = leaf(a["x"], *shape)
    y = F.softmax(x, dim=1)
    (y * a["dy"].reshape(shape)).sum().backward()
    return {"y": y.detach(), "dx": x.grad}


def ref_concat(p, a):
    outer, parts, inner = int(p["outer"]), int(p["parts"]), int(p["inner"])
    ins = [leaf(a[f"in{i}"], outer, int(p[f"c{i}"]), inner) for i in range(parts)]
    y = torch.cat(ins, dim=1)
    (y * a["dy"].reshape(y.shape)).sum().backward()
    out = {"y": y.detach()}
    for i, t in enumerate(ins):
        out[f"d{i}"] = t.grad
    return out


def ref_add(p, a):
    y = a["a"] + a["b"]
    return {"y": y, "y_in_a": y, "y_in_b": y}


def ref_sum(p, a):
    # an add of four terms is the chain ((t0 + t1) + t2) + t3
    y = ((a["t0"] + a["t1"]) + a["t2"]) + a["t3"]
    return {"y": y, "y_relu": torch.relu(y),
            "y_relu_grad": torch.where(a["relu_y"] > 0, y, torch.zeros_like(y)), "y_in_t2": y}


# The hyperparameters as the kernels see them: float32 (the spec's %.9g
# text is float32's value only after rounding).
def ref_sgd(p, a):
    param = a["p"].clone().requires_grad_(True)
    mom = f32(p["momentum"])
    opt = torch.optim.SGD([param], lr=f32(p["lr"]), momentum=mom, nesterov=bool(p["nesterov"]),
                          weight_decay=f32(p["weight_decay"]))
    for s in range(int(p["steps"])):
        param.grad = a[f"g{s}"].clone()
        opt.step()
    out = {"p": param.detach()}
    if mom != 0:
        out["momentum_buffer"] = opt.state[param]["momentum_buffer"]
    return out


def ref_adam(p, a):
    param = a["p"].clone().requires_grad_(True)
    opt = torch.optim.Adam([param], lr=f32(p["lr"]), betas=(f32(p["beta1"]), f32(p["beta2"])),
                           eps=f32(p["eps"]), weight_decay=f32(p["weight_decay"]))
    for s in range(int(p["steps"])):
        param.grad = a[f"g{s}"].clone()
        opt.step()
    st = opt.state[param]
    return {"p": param.detach(), "exp_avg": st["exp_avg"], "exp_avg_sq": st["exp_avg_sq"]}


def ref_rnn(p, a):
    """The layer as one direction of a torch module (the reverse one of a
    bidirectional module for reverse), lengths through a packed sequence;
    absent biases are zeros, whose gradients are compared all the same."""
    n, t, f, h, cell = (int(p[k]) for k in ("n", "T", "F", "H", "cell"))
    rev, last, name = bool(p["reverse"]), bool(p["last"]), RNN_CELLS[cell]
    g = {"lstm": 4, "gru": 3}.get(name, 1)
    kind = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU}.get(name, torch.nn.RNN)
    extra = {"nonlinearity": name[4:]} if kind is torch.nn.RNN else {}
    m = kind(f, h, batch_first=True, bidirectional=rev, **extra).double()
    d, sfx = (1, "_l0_reverse") if rev else (0, "_l0")
    weights = {"w_ih": ("weight_ih", (g * h, f)), "w_hh": ("weight_hh", (g * h, h)),
               "b_ih": ("bias_ih", (g * h,)), "b_hh": ("bias_hh", (g * h,))}
    with torch.no_grad():
        for key, (attr, shape) in weights.items():
            value = a[key].reshape(shape) if key in a else torch.zeros(shape)
            getattr(m, attr + sfx).copy_(value)
    x = leaf(a["x"], n, t, f)

    def state(key):   # the same for both directions of a bidirectional module
        s = a[key].reshape(1, n, h) if key in a else torch.zeros(1, n, h, dtype=torch.float64)
        return s.expand(2 if rev else 1, n, h).contiguous()

    hx = (state("h0"), state("c0")) if name == "lstm" else state("h0")
    inp = x
    if "lengths" in a:
        inp = torch.nn.utils.rnn.pack_padded_sequence(x, a["lengths"].long(), batch_first=True,
                                                      enforce_sorted=False)
    out, hn = m(inp, hx)
    if "lengths" in a:
        out, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=t)
    if name == "lstm":
        hn = hn[0]
    y = hn[d] if last else out[:, :, d * h:(d + 1) * h]
    (y * a["dy"].reshape(y.shape)).sum().backward()
    grad = lambda attr: getattr(m, attr + sfx).grad
    return {"y": y.detach(), "dx": x.grad, "dw_ih": grad("weight_ih"),
            "dw_hh": grad("weight_hh"), "db_ih": grad("bias_ih"), "db_hh": grad("bias_hh")}


REFS = {"conv2d": ref_conv, "dense": ref_dense, "relu": ref_act("relu"),
        "sigmoid": ref_act("sigmoid"), "tanh": ref_act("tanh"), "maxpool": ref_pool("maxpool"),
        "avgpool": ref_pool("avgpool"), "globalavgpool": ref_globalavgpool,
        "softmax": ref_softmax, "concat": ref_concat, "add": ref_add, "sum": ref_sum, "sgd": ref_sgd,
        "adam": ref_adam, "rnn": ref_rnn}


def rel_error(got, want):
    got, want = got.reshape(-1), want.reshape(-1).double()
    if got.shape != want.shape:
        return float("inf")
    if not torch.isfinite(got).all():
        return float("inf")
    if want.numel() == 0:
        return 0.0
    return ((got - want).abs().max() / want.abs().max().clamp(min=1e-6)).item()


def check(spec, output):
    cases, ok = read_cases(spec, True)
    outputs, _ = read_cases(output, False)   # a truncated output fails its cases
    results = {label: arrays for label, _, _, arrays in outputs}
    stats = {}   # op -> [cases, failed, max error]
    for label, op, params, inputs in cases:
        st = stats.setdefault(op, [0, 0, 0.0, 0, 0])
        st[0] += 1
        want = REFS[op](params, inputs)
        got = results.get(label)
        if got is None:
            print(f"{op} case {label}: no output")
            st[1] += 1
            continue
        bad = False
        if op in EXACT_OPS:
            # the kernels follow torch.optim operation by operation: against
            # torch in float32 they agree to the last bit or nearly
            want32 = REFS[op](params, {k: v.float() for k, v in inputs.items()})
            for name in sorted(set(want32) & set(got)):
                st[3] += 1
                g32, w32 = got[name].float(), want32[name].reshape(-1)
                st[4] += bool((g32 == w32).all())
                err = rel_error(g32.double(), w32.double())
                if not err <= TOL32:
                    print(f"{op} case {label}: {name} relative error {err:.2e} > {TOL32:g} "
                          "against torch in float32")
                    bad = True
        for name in sorted(set(want) | set(got)):
            if name not in got or name not in want:
                print(f"{op} case {label}: array {name} only in "
                      f"{'torch' if name in want else 'the output'}")
                bad = True
                continue
            err = rel_error(got[name], want[name])
            st[2] = max(st[2], err)
            if not err <= TOL:
                i = int((got[name] - want[name].reshape(-1)).abs().nan_to_num(float("inf"))
                        .argmax())
                print(f"{op} case {label}: {name} relative error {err:.2e} > {TOL:g} "
                      f"(at {i}: {got[name][i].item()!r}, torch {want[name].reshape(-1)[i].item()!r})")
                bad = True
        if bad:
            st[1] += 1
    for op, (count, failed, err, arrays32, exact32) in stats.items():
        if failed:
            ok = False
            print(f"{op}: {failed} of {count} cases FAILED")
        elif op in EXACT_OPS:
            print(f"{op}: {count} cases ok (max relative error {err:.1e}; against torch in "
                  f"float32, {exact32} of {arrays32} arrays bit-identical)")
        else:
            print(f"{op}: {count} cases ok (max relative error {err:.1e})")
    return ok


def main(argv):
    if len(argv) == 4 and argv[1] == "gen" and argv[2] in SUITES:
        cases = SUITES[argv[2]](Gen(int(argv[3])))
        labels = [c.split()[1] for c in cases]
        assert len(set(labels)) == len(labels), "duplicate case labels"
        print("\n".join(cases))
    elif len(argv) == 4 and argv[1] == "check":
        sys.exit(0 if check(argv[2], argv[3]) else 1)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
