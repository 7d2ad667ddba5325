"""common.py: what the peers of bench/peers/ share with bench/pytorch_peer.py:
its command line, its random data, its timing loop and its JSON report.

Every peer runs as

  PEER.py bench [--model lenet5|alexnet|googlenet|resnet18|resnet50|vgg16|
                         lstm_fashion|gru_fashion]
                [--mode train|infer] [--batch N] [--iters N] [--warmup N]
                [--threads N] [--lr X]

and prints one JSON object with the keys of `./NAME bench --report` and of
pytorch_peer.py: median_ms, mean_ms, min_ms, max_ms, images_per_second
(batch / median) and peak_rss_kib (the process's peak resident memory,
interpreter and libraries included), plus framework, model, mode, threads,
batch and compile_s (the seconds spent compiling, before the warm-up; not
part of any timed iteration).

The data are pytorch_peer.py's: random inputs in [0, 1) and labels, cycled
through at most 8 batches (fewer when they would take more than 64 MiB).
The recurrent models (lstm_fashion, gru_fashion: pytorch_peer.py's
RowReader) take each image as 28 steps of 28 pixels, (batch, 28, 28).
"""
import argparse
import json
import os
import resource
import statistics
import time

import numpy as np

# all that ort_peer.py runs (torchvision's, but for LeNet-5)
CONVOLUTIONAL = ("lenet5", "alexnet", "googlenet", "resnet18", "resnet50", "vgg16")
RECURRENT = ("lstm_fashion", "gru_fashion")
MODELS = CONVOLUTIONAL + RECURRENT
# the networks that jax_peer.py has written by hand (not ResNet nor VGG)
JAX_MODELS = ("lenet5", "alexnet", "googlenet") + RECURRENT


def parse(description, models=MODELS, modes=("train", "infer")):
    """pytorch_peer.py's bench command line (the command word `bench` included)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("command", choices=["bench"])
    p.add_argument("--model", default="lenet5", choices=models)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--mode", choices=modes, default=modes[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    return p.parse_args()


def pin_to_threads(threads):
    """Keeps this process, and every thread it starts from now on, to the
    first `threads` CPUs it may run on (as `taskset` would).  Call it before
    importing a framework, so that its thread pools start inside the set."""
    cpus = sorted(os.sched_getaffinity(0))[:threads]
    os.sched_setaffinity(0, cpus)
    return cpus


def input_shape(model):
    """The shape of one of the model's inputs, and its classes: (channels,
    height, width) for the convolutional networks, (steps, features) =
    (28, 28) for the recurrent ones."""
    if model in RECURRENT:
        return (28, 28), 10
    return ((1, 28, 28), 10) if model == "lenet5" else ((3, 224, 224), 1000)


def data(args, layout="nchw", seed=0):
    """Up to 8 batches of (inputs in [0, 1), labels) as float32 and int32
    NumPy arrays, as pytorch_peer.py draws them (at most 64 MiB).  Images
    are NCHW or, with layout="nhwc", NHWC; sequences are (batch, steps,
    features) whatever the layout."""
    sample, classes = input_shape(args.model)
    batch_bytes = args.batch * 4 * int(np.prod(sample))
    batches = max(1, min(8, (64 << 20) // batch_bytes))
    rng = np.random.default_rng(seed)
    if len(sample) == 2 or layout == "nchw":
        shape = (args.batch, *sample)
    else:
        c, h, w = sample
        shape = (args.batch, h, w, c)
    return [(rng.random(shape, dtype=np.float32),
             rng.integers(0, classes, args.batch, dtype=np.int32))
            for _ in range(batches)]


def time_iterations(iteration, pool, warmup, iters):
    """Runs iteration(x, y) `warmup` times untimed, then `iters` times, each
    timed on its own; iteration must return only when its work is done.
    Returns the milliseconds of the timed iterations."""
    for i in range(warmup):
        iteration(*pool[i % len(pool)])
    ms = []
    for i in range(iters):
        x, y = pool[(warmup + i) % len(pool)]
        t0 = time.perf_counter()
        iteration(x, y)
        ms.append(1000 * (time.perf_counter() - t0))
    return ms


def report(args, framework, ms, threads, compile_s, **extra):
    """Prints the JSON object of pytorch_peer.py bench."""
    median = statistics.median(ms)
    print(json.dumps({"framework": framework, "model": args.model, "mode": args.mode,
                      "threads": threads, "batch": args.batch,
                      "median_ms": median, "mean_ms": statistics.fmean(ms),
                      "min_ms": min(ms), "max_ms": max(ms),
                      "images_per_second": args.batch * 1000 / median,
                      "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                      "compile_s": compile_s, **extra}))


def pytorch_peer():
    """bench/pytorch_peer.py as a module, for its networks (LeNet-5,
    torchvision's AlexNet, GoogLeNet without auxiliary heads, ResNet-18,
    ResNet-50 and VGG-16, and the RowReader of lstm_fashion and
    gru_fashion) and its optimizers, in whichever torch this Python has."""
    import importlib.util
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location(
        "pytorch_peer", os.path.join(here, "..", "pytorch_peer.py"))
    peer = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("pytorch_peer", peer)
    spec.loader.exec_module(peer)
    return peer


def onnx_file(model):
    """The model, in inference mode at batch 1, exported to ONNX once and kept
    in bench/.venv-peers/onnx/MODEL.onnx (by the venv's torch, with its
    TorchScript exporter; weights from torch.manual_seed(0))."""
    here = os.path.dirname(os.path.abspath(__file__))
    folder = os.path.join(here, "..", ".venv-peers", "onnx")
    path = os.path.join(folder, model + ".onnx")
    if not os.path.exists(path):
        import torch
        torch.manual_seed(0)
        net, shape, _ = pytorch_peer().network(model)
        net.eval()
        os.makedirs(folder, exist_ok=True)
        tmp = path + ".tmp"
        with torch.no_grad():
            torch.onnx.export(net, torch.rand(1, *shape), tmp, input_names=["input"],
                              output_names=["scores"], opset_version=17, dynamo=False)
        os.replace(tmp, path)
    return path
