#!/usr/bin/env python3
"""ort_profile.py: where ONNX Runtime's batch-1 inference spends its time,
node by node, to set beside dlc's DLRT_PROFILE=1 table of the same network.

  bench/.venv-peers/bin/python bench/peers/ort_profile.py [--model googlenet]
      [--threads 2] [--iters 100] [--warmup 20] [--top 20]

The session is ort_peer.py's (every graph optimization, N intra-op threads,
sequential), with ONNX Runtime's profiler on; its JSON trace (written to
the working folder, then removed) gives each node's kernel time per run.
Prints the nodes' shortest and median times, longest median first (--top
of them), then the same summed by operator type.  The profiler's own
overhead is in the figures: compare shares and per-node times, not the
step's time, with ort_peer.py's.  Run the dlc side as

  DLRT_PROFILE=1 ./googlenet bench --mode infer --batch 1 --iters 100
"""
import argparse
import collections
import json
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="googlenet", choices=common.CONVOLUTIONAL)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--top", type=int, default=20)
    args = p.parse_args()
    import onnxruntime as rt
    so = rt.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    so.execution_mode = rt.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = rt.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.enable_profiling = True
    so.profile_file_prefix = "ort_profile"
    session = rt.InferenceSession(common.onnx_file(args.model), so,
                                  providers=["CPUExecutionProvider"])
    shape = session.get_inputs()[0].shape
    x = np.random.default_rng(0).random([1] + list(shape[1:]), dtype=np.float32)
    for _ in range(args.warmup + args.iters):  # the warm-up's runs dropped below
        session.run(None, {"input": x})
    trace = session.end_profiling()
    with open(trace) as f:
        events = json.load(f)
    os.remove(trace)
    times = collections.defaultdict(list)
    kinds = {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            node = e["name"][:-len("_kernel_time")]
            times[node].append(e["dur"])
            kinds[node] = e["args"].get("op_name", "?")
    rows = sorted(((min(t[args.warmup:]), statistics.median(t[args.warmup:]), n)
                   for n, t in times.items() if len(t) > args.warmup), key=lambda r: -r[1])
    print(f"ONNX Runtime {rt.__version__}, {args.model}, batch 1, {args.threads} threads, "
          f"{args.iters} runs: {len(rows)} nodes")
    print(f"{'min us':>10} {'median us':>10}  node (operator)")
    for least, median, node in rows[:args.top]:
        print(f"{least:10.0f} {median:10.0f}  {node} ({kinds[node]})")
    by_kind = collections.defaultdict(lambda: [0, 0, 0])
    for least, median, node in rows:
        k = by_kind[kinds[node]]
        k[0] += least
        k[1] += median
        k[2] += 1
    print(f"\n{'min ms':>10} {'median ms':>10}  operator (nodes)")
    for kind, (least, median, n) in sorted(by_kind.items(), key=lambda kv: -kv[1][1]):
        print(f"{least / 1e3:10.3f} {median / 1e3:10.3f}  {kind} ({n})")
    print(f"{sum(r[0] for r in rows) / 1e3:10.3f} {sum(r[1] for r in rows) / 1e3:10.3f}  in all")


if __name__ == "__main__":
    main()
