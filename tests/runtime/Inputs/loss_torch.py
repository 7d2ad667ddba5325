#!/usr/bin/env python3
"""loss_torch.py: PyTorch as the oracle for libdlrt's losses.

  gen ce|mse SEED N SIZE SCALE [extreme]   prints a problem for
                                           `test_checkpoint loss` (float32
                                           values, %.9g, which round-trips)
  check ce|mse PROBLEM OUTPUT              compares test_checkpoint's loss,
                                           gradient (and, for ce, correct count)
                                           with torch.nn.functional's in float64
                                           with autograd; prints "ok" lines

"extreme" mixes in logits of +-1e30 and +-3e38 and rows of equal values.
"""
import sys

import torch
import torch.nn.functional as F

REL = 1e-6


def gen(kind, seed, n, size, scale, extreme):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(n, size, generator=g, dtype=torch.float64) * scale).float()
    if extreme:
        picks = torch.randint(0, 4, (n, size), generator=g)
        huge = torch.tensor([1e30, -1e30, 3e38, -3e38], dtype=torch.float32)
        mask = torch.rand(n, size, generator=g) < 0.3
        x = torch.where(mask, huge[picks], x)
        x[0] = 1e30      # equal logits: a tie in every class
    out = [f"{n} {size}"]
    if kind == "ce":
        labels = torch.randint(0, size, (n,), generator=g)
        for i in range(n):
            out.append(" ".join([str(int(labels[i]))] + ["%.9g" % v for v in x[i].tolist()]))
    else:
        t = (torch.randn(n, size, generator=g, dtype=torch.float64) * scale).float()
        for rows in (x, t):
            for i in range(n):
                out.append(" ".join("%.9g" % v for v in rows[i].tolist()))
    print("\n".join(out))


def read_problem(kind, path):
    words = open(path).read().split()
    n, size = int(words[0]), int(words[1])
    vals = words[2:]
    if kind == "ce":
        rows = [vals[i * (size + 1):(i + 1) * (size + 1)] for i in range(n)]
        labels = torch.tensor([int(r[0]) for r in rows])
        x = torch.tensor([[float(v) for v in r[1:]] for r in rows], dtype=torch.float32)
        return x, labels
    x = torch.tensor([float(v) for v in vals[:n * size]], dtype=torch.float32).reshape(n, size)
    t = torch.tensor([float(v) for v in vals[n * size:]], dtype=torch.float32).reshape(n, size)
    return x, t


def read_output(path, n, size):
    lines = open(path).read().split("\n")
    assert lines[0].startswith("loss "), lines[0]
    loss = float(lines[0].split()[1])
    grad = torch.tensor([[float(v) for v in lines[1 + i].split()] for i in range(n)],
                        dtype=torch.float64)
    assert grad.shape == (n, size), grad.shape
    rest = lines[1 + n:]
    correct = int(rest[0].split()[1]) if rest and rest[0].startswith("correct") else None
    return loss, grad, correct


def check(kind, problem, output):
    x, target = read_problem(kind, problem)
    n, size = x.shape
    loss_c, grad_c, correct_c = read_output(output, n, size)
    x64 = x.double().requires_grad_(True)
    if kind == "ce":
        loss = F.cross_entropy(x64, target)
    else:
        loss = F.mse_loss(x64, target.double())
    loss.backward()
    ref, gref = loss.item(), x64.grad
    ok = True
    err = abs(loss_c - ref) / max(abs(ref), 1e-300)
    if not (loss_c >= 0 and abs(loss_c - ref) <= REL * abs(ref) + 1e-300):
        print(f"{kind}: loss {loss_c!r}, torch {ref!r}")
        ok = False
    gerr = ((grad_c - gref).abs() / gref.abs().clamp(min=1e-300))
    bad = (grad_c - gref).abs() > REL * gref.abs() + 1e-37
    if bad.any():
        i = bad.nonzero()[0].tolist()
        print(f"{kind}: gradient {i}: {grad_c[i[0], i[1]].item()!r}, "
              f"torch {gref[i[0], i[1]].item()!r}")
        ok = False
    if kind == "ce":
        correct = int((x.argmax(dim=1) == target).sum())
        if correct != correct_c:
            print(f"ce: {correct_c} correct, torch {correct}")
            ok = False
    if ok:
        # relative errors where float holds the value to full precision
        normal = gref.abs() >= 1e-30
        gmax = gerr[normal].max().item() if normal.any() else 0.0
        print(f"{kind} {n}x{size}: ok (loss rel err {err:.1e}, gradient max rel err {gmax:.1e})")
    return ok


def main(argv):
    if argv[1] == "gen":
        gen(argv[2], int(argv[3]), int(argv[4]), int(argv[5]), float(argv[6]),
            len(argv) > 7 and argv[7] == "extreme")
    elif argv[1] == "check":
        sys.exit(0 if check(argv[2], argv[3], argv[4]) else 1)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
