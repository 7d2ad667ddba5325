#!/usr/bin/env python3
"""profile_vs_ort.py: dlc's DLRT_PROFILE table and ort_profile.py's, op by
op, for the same network at batch 1: which of dlc's ops lag ONNX Runtime's
nodes, and by how much.

  DLRT_PROFILE=1 ./googlenet bench --mode infer --batch 1 --iters 100 2> dlc1.txt
  bench/.venv-peers/bin/python bench/peers/ort_profile.py --top 1000 > ort1.txt
  (alternate the two a few times: dlc2.txt, ort2.txt, ...)
  python3 bench/peers/profile_vs_ort.py dlc1.txt,dlc2.txt ort1.txt,ort2.txt

Each op's figure is its shortest call over all the files given (the figure
to trust on a shared machine).  ONNX Runtime's nodes are named after the
torch modules (/inception3b/branch2/branch2.1/Relu_output_0_nchwc), dlc's
after the .dl file's names (inception3b.branch2_1.out): a node matches the
op whose name is its first and last module joined by a dot, the last one's
dots made underscores, with ".out" added for a convolution or
concatenation and a pooling's "_0" dropped.  Prints the matched pairs,
largest gap first, then the totals by ONNX Runtime's operator type and the
names left unmatched on either side (GoogLeNet's four poolings between its
stages, which torchvision and the .dl file name differently).
"""
import collections
import re
import sys

DLC_ROW = re.compile(r"\s*[\d.]+\s+\d+\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s+(\S+) \((\w+)")
ORT_ROW = re.compile(r"\s*(\d+)\s+\d+\s+/(\S+) \((\w+)\)")


def shortest(paths, pattern, key):
    best = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                m = pattern.match(line)
                if m:
                    k, us = key(m)
                    best[k] = min(us, best.get(k, us))
    return best


def dlc_key(m):
    return (m.group(2), m.group(3)), float(m.group(1))


def ort_key(m):
    parts = [p for p in m.group(2).split("/")
             if not p.startswith(("Relu", "MaxPool", "Concat", "Conv", "Gemm"))]
    name = parts[0] + ("." + parts[-1].replace(".", "_") if len(parts) > 1 else "")
    return (name, m.group(3)), float(m.group(1))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    dlc = shortest(sys.argv[1].split(","), DLC_ROW, dlc_key)
    ort = shortest(sys.argv[2].split(","), ORT_ROW, ort_key)
    by_name = {name: (kind, us) for (name, kind), us in dlc.items()}
    rows, unmatched, used = [], [], set()
    for (name, op), us in ort.items():
        want = name + ".out" if op in ("Conv", "Concat") else name
        if op == "MaxPool" and want.endswith("_0"):
            want = want[:-2]  # torchvision's branch4.0, the .dl file's branch4
        hit = by_name.get(want)
        if hit is None:
            unmatched.append(f"{name} ({op})")
            continue
        used.add(want)
        rows.append((hit[1] - us, name, op, hit[1], us))
    rows.sort(reverse=True)
    print(f"{'op':36s} {'kind':8s} {'dlc us':>8s} {'ORT us':>8s} {'gap':>7s} {'ratio':>6s}")
    totals = collections.defaultdict(lambda: [0.0, 0.0])
    for gap, name, op, d, o in rows:
        print(f"{name:36s} {op:8s} {d:8.0f} {o:8.0f} {gap:7.0f} {d / o:6.2f}")
        totals[op][0] += d
        totals[op][1] += o
    print()
    for op, (d, o) in sorted(totals.items(), key=lambda kv: -kv[1][0]):
        print(f"{op:10s} dlc {d / 1000:7.3f} ms, ONNX Runtime {o / 1000:7.3f} ms, {d / o:5.2f}")
    print("unmatched ONNX Runtime nodes:", ", ".join(unmatched) or "none")
    print("unmatched dlc ops:", ", ".join(n for n in by_name if n not in used) or "none")


if __name__ == "__main__":
    main()
