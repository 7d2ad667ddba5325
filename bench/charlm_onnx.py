#!/usr/bin/env python3
"""charlm_onnx.py: ONNX Runtime's side of bench/charlm_vs_peers.sh, run with
bench/.venv-peers/bin/python (scripts/deps.sh peers).

  charlm_onnx.py export FILE.onnx
      writes models/charlm.dl's twin (bench/pytorch_peer.py's CharLM) at
      one step as ONNX: the token id [1, 1] and the LSTM's state h and c
      [2, 1, 256] in, the scores [1, 1, 113] and the new state out (one
      ONNX LSTM node per layer, as torch.onnx exports nn.LSTM).
  charlm_onnx.py bench FILE.onnx [--threads N] [--iters N] [--warmup N]
      generates a character at a time at batch 1 with ONNX Runtime's CPU
      provider, the state carried from step to step: warm-up steps, then
      each timed step timed on its own.  Prints one JSON object with the
      keys of dlc's report: median_ms, mean_ms, min_ms, max_ms and
      peak_rss_kib.
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time

import numpy


def export(path):
    import torch
    sys.path.insert(0, os.path.dirname(__file__))
    from pytorch_peer import CharLM

    torch.manual_seed(0)
    model = CharLM().eval()
    x = torch.zeros(1, 1, dtype=torch.int64)
    h = torch.zeros(2, 1, 256)
    c = torch.zeros(2, 1, 256)

    class Step(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x, h, c):
            out, (h, c) = self.m(x, (h, c))
            return out, h, c

    torch.onnx.export(Step(model), (x, h, c), path, input_names=["x", "h", "c"],
                      output_names=["scores", "h_out", "c_out"], opset_version=17,
                      dynamo=False)


def bench(args):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = args.threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(args.model, opts, providers=["CPUExecutionProvider"])
    rng = numpy.random.default_rng(0)
    ids = rng.integers(0, 113, size=(args.warmup + args.iters, 1, 1), dtype=numpy.int64)
    h = numpy.zeros((2, 1, 256), numpy.float32)
    c = numpy.zeros((2, 1, 256), numpy.float32)
    ms = []
    for i in range(args.warmup + args.iters):
        t0 = time.perf_counter()
        _, h, c = sess.run(None, {"x": ids[i], "h": h, "c": c})
        if i >= args.warmup:
            ms.append(1000 * (time.perf_counter() - t0))
    median = statistics.median(ms)
    print(json.dumps({"framework": "onnxruntime " + ort.__version__, "model": "charlm",
                      "mode": "step", "threads": args.threads, "batch": 1,
                      "median_ms": median, "mean_ms": statistics.fmean(ms),
                      "min_ms": min(ms), "max_ms": max(ms),
                      "images_per_second": 1000 / median,
                      "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("command", choices=["export", "bench"])
    p.add_argument("model")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--warmup", type=int, default=200)
    args = p.parse_args()
    export(args.model) if args.command == "export" else bench(args)


if __name__ == "__main__":
    main()
