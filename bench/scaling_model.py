#!/usr/bin/env python3
"""scaling_model.py: the alpha-beta model of a data-parallel training step
at K ranks (docs/distributed.md), on the schedule dlc compiles.

  bench/scaling_model.py INFO PROFILE --step-ms C [--name NAME]

INFO is `./net info --ranks K` (any K: the bucket plan, which does not
depend on it), PROFILE what `DLRT_PROFILE=1 ./net bench` printed on
stderr: the time of each op of the training step, from which each bucket's
completion is placed within the step (the op after which it is complete,
as a share of the step's time; the CPU's shares stand for the GPU's).
C is one rank's compute time per step (milliseconds, an assumption about
the GPU, stated in the table).  It prints, for K = 8, 64 and 512 and each
fabric, the step's time and the scaling efficiency C / T_K, where

  T_K = max(C, when the last bucket's sum is done)
  bucket b's sum starts at max(its completion, the end of bucket b-1's) and
  takes sum_time(bytes_b, K), each bucket in turn on the link.

sum_time is the cost of dlc's sum (a reduce-scatter and an all-gather of
point-to-point messages: two rounds, each of K - 1 messages per rank posted
at once): 2 (alpha + (K - 1) o) + 2 (K - 1) / K * S * beta, where alpha is
the latency of a message, o the time a rank spends per message and beta
the time per byte of its link.  The ring allreduce's 2 (K - 1) alpha +
2 (K - 1) / K * S * beta is printed beside it for comparison.  On NVLink,
above 8 ranks, the sum is hierarchical, as NCCL does it: a reduce-scatter
among a node's 8 GPUs on NVLink, an allreduce of each GPU's eighth among
the nodes on its own InfiniBand link, an all-gather on NVLink.
"""
import argparse
import re
import sys

FABRICS = {
    # one 100 Gb/s Ethernet port per GPU, TCP: 20 us a message, 2 us of
    # software per message, 12.5 GB/s
    "100GbE": dict(alpha=20e-6, o=2e-6, beta=8 / 100e9),
    # NVLink (A100 class: 150 GB/s of bus bandwidth for a sum, 3 us) in
    # nodes of 8, nodes joined by one 200 Gb/s InfiniBand port per GPU (5 us)
    "NVLink": dict(alpha=3e-6, o=1e-6, beta=1 / 150e9, node=8,
                   inter=dict(alpha=5e-6, o=1e-6, beta=8 / 200e9)),
}


def direct(S, K, f):
    if K == 1:
        return 0.0
    return 2 * (f["alpha"] + (K - 1) * f["o"]) + 2 * (K - 1) / K * S * f["beta"]


def ring(S, K, f):
    if K == 1:
        return 0.0
    return 2 * (K - 1) * f["alpha"] + 2 * (K - 1) / K * S * f["beta"]


def sum_time(S, K, f, algo):
    node = f.get("node")
    if not node or K <= node:
        return algo(S, K, f)
    # half of a reduce-scatter and half of an all-gather within the node
    # (direct(S, node) covers both), the nodes' allreduce of S / node
    return algo(S, node, f) + algo(S / node, K // node, f["inter"])


def read_plan(path):
    buckets = []
    for line in open(path):
        m = re.match(r"\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+.*train_op(\d+)_", line)
        if m:
            buckets.append((float(m.group(2)) * 1024, int(m.group(4))))
    if not buckets:
        sys.exit(f"{path}: no bucket plan (./net info --ranks K)")
    return buckets


def read_profile(path):
    times = {}
    for line in open(path):
        m = re.match(r"\s*([\d.]+)\s+(\d+)\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+.*train_op(\d+)_", line)
        if m:
            times[int(m.group(3))] = float(m.group(1)) / int(m.group(2))
    if not times:
        sys.exit(f"{path}: no training step's ops (DLRT_PROFILE=1 ./net bench)")
    return times


def step(buckets, share, C, K, f, algo):
    done = 0.0
    for size, after in buckets:
        ready = C * share[after]
        done = max(done, ready) + sum_time(size, K, f, algo)
    return max(C, done)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("info")
    ap.add_argument("profile")
    ap.add_argument("--step-ms", type=float, required=True)
    ap.add_argument("--name", default="")
    a = ap.parse_args()
    buckets = read_plan(a.info)
    times = read_profile(a.profile)
    total = sum(times.values())
    share, acc = {}, 0.0
    for k in sorted(times):
        acc += times[k]
        share[k] = acc / total
    S = sum(b for b, _ in buckets)
    C = a.step_ms / 1e3
    print(f"{a.name}: {S / 2**20:.1f} MiB of gradients in {len(buckets)} buckets, "
          f"{a.step_ms:g} ms of compute per step; the last bucket complete at "
          f"{100 * share[buckets[-1][1]]:.0f}% of the step, the first at "
          f"{100 * share[buckets[0][1]]:.0f}%")
    print(f"  {'fabric':8} {'K':>4} {'sum alone ms':>13} {'step ms':>9} {'efficiency':>10}"
          f" {'ring: eff.':>10} {'no overlap':>10}")
    for name, f in FABRICS.items():
        for K in (8, 64, 512):
            alone = sum(sum_time(b, K, f, direct) for b, _ in buckets)
            t = step(buckets, share, C, K, f, direct)
            tr = step(buckets, share, C, K, f, ring)
            serial = C + alone
            print(f"  {name:8} {K:4} {alone * 1e3:13.2f} {t * 1e3:9.2f} {100 * C / t:9.1f}%"
                  f" {100 * C / tr:9.1f}% {100 * C / serial:9.1f}%")


if __name__ == "__main__":
    main()
