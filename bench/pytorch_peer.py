#!/usr/bin/env python3
"""pytorch_peer.py: the PyTorch side of dlc's benchmarks, the same networks
trained the same way as dlc's models/ (bench/lenet5_vs_pytorch.sh,
bench/zoo_vs_pytorch.sh).

--model lenet5 (the default) is models/lenet5.dl (tests/codegen/Inputs/
parity.py checks that the two compute the same thing), trained with SGD at
learning rate 0.01 and momentum 0.9, cross-entropy, PyTorch's default
initialization (which dlc's follows).  --model alexnet, vgg16, googlenet,
resnet18 or resnet50 is torchvision's network, which models/NAME.dl is
(tests/models/zoo_torchvision_*.test), on 3x224x224 images and 1000
classes, trained with SGD at momentum 0.9 and weight decay 1e-4, as the
train sections of those models say (GoogLeNet without its auxiliary
heads, as models/googlenet.dl).

  pytorch_peer.py bench [--model M] [--mode train|infer] [--batch N] [--iters N]
                        [--warmup N] [--threads N] [--lr X]
      as `./NAME bench`: random inputs in [0, 1) and labels, cycled
      through at most 8 batches (fewer when they would take more than 64
      MiB, as dlc's bench does); warm-up iterations, then each timed
      iteration timed on its own.  Prints one JSON object with the keys of
      the dlc program's report: median_ms, mean_ms, min_ms, max_ms,
      images_per_second (batch / median), and peak_rss_kib (the process's
      peak resident memory, interpreter included).
      --amp bf16 (with --device cuda) trains in PyTorch's automatic mixed
      precision, the forward pass under torch.autocast(dtype=bfloat16), as
      dlc's --gpu-math=bf16 is compared with.
      --model charlm is models/charlm.dl (token ids in, a label at every
      step); --mode step times one step of it at the batch, going on from
      the LSTM's state, as generating text a character at a time does.
  pytorch_peer.py accuracy [--epochs N] [--data DIR] [--threads N]
      trains LeNet-5 on Fashion-MNIST (batch 64, a new random order each
      epoch) and prints {"test_accuracy": ..., "seconds": ...}; with
      --model charlm, the language model on --data's text (fortunes), and
      prints its validation bits per character.

Run it with Debian's /usr/bin/python3, which has torch (and torchvision,
for the zoo).
"""
import argparse
import gzip
import json
import math
import os
import resource
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn


def lenet5():
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(),
        nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, 10))


def zoo(name):
    """torchvision's network as models/NAME.dl builds it."""
    import torchvision
    if name == "googlenet":
        return torchvision.models.googlenet(aux_logits=False, init_weights=True)
    return getattr(torchvision.models, name)()


class RowReader(nn.Module):
    """models/lstm_fashion.dl and gru_fashion.dl: an image's 28 rows are the
    steps of an LSTM (or a GRU) of 128 units, whose final state a linear
    layer classifies after dropout (0.2)."""

    def __init__(self, cell):
        super().__init__()
        self.h = (nn.LSTM if cell == "lstm" else nn.GRU)(28, 128, batch_first=True)
        self.drop = nn.Dropout(0.2)
        self.out = nn.Linear(128, 10)

    def forward(self, x):
        _, h = self.h(x.reshape(-1, 28, 28))
        h = h[0] if isinstance(h, tuple) else h
        return self.out(self.drop(h[-1]))


RECURRENT = {"lstm_fashion": "lstm", "gru_fashion": "gru"}


class CharLM(nn.Module):
    """models/charlm.dl: each of 128 characters' embedding (113 -> 64) into
    a 2-layer LSTM of 256 units (dropout 0.2 between the layers), and at
    every step a linear layer's scores of the next character.  forward
    takes and returns the LSTM's state, as generating a character at a
    time needs."""

    def __init__(self):
        super().__init__()
        self.e = nn.Embedding(113, 64)
        self.h = nn.LSTM(64, 256, num_layers=2, dropout=0.2, batch_first=True)
        self.out = nn.Linear(256, 113)

    def forward(self, x, state=None):
        y, state = self.h(self.e(x), state)
        return self.out(y), state


def network(name):
    """The network, its input's shape and its number of classes."""
    if name == "lenet5":
        return lenet5(), (1, 28, 28), 10
    if name in RECURRENT:
        return RowReader(RECURRENT[name]), (28, 28), 10
    if name == "charlm":
        return CharLM(), (128,), 113
    return zoo(name), (3, 224, 224), 1000


def sgd(model, name="lenet5", lr=0.01):
    """The model's optimizer, as its train section says: SGD with momentum
    (Adam for the recurrent ones, at lr 0.001 unless given)."""
    if name in RECURRENT or name == "charlm":
        return torch.optim.Adam(model.parameters(), lr=lr)
    if name == "lenet5":
        return torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)


def train_step(model, opt, x, y, amp=None):
    """One step; amp "bf16": the forward pass and the loss under
    torch.autocast in bf16 (bf16 needs no loss scaling)."""
    opt.zero_grad(set_to_none=True)
    with torch.autocast(device_type=x.device.type, dtype=torch.bfloat16, enabled=amp == "bf16"):
        out = model(x)
        if isinstance(out, tuple):  # a language model: scores at every step
            out, y = out[0].reshape(-1, out[0].shape[-1]), y.reshape(-1)
        loss = F.cross_entropy(out, y)
    loss.backward()
    opt.step()
    return loss.item()  # as dlc's train_step, which returns the loss


def bench(args):
    torch.manual_seed(0)
    model, shape, classes = network(args.model)
    batch_bytes = args.batch * 4 * int(torch.tensor(shape).prod())
    batches = max(1, min(8, (64 << 20) // batch_bytes))
    if args.model == "charlm":  # token ids in, a label at every step
        pool = [(torch.randint(0, classes, (args.batch, *shape)),
                 torch.randint(0, classes, (args.batch, *shape))) for _ in range(batches)]
    else:
        pool = [(torch.rand(args.batch, *shape), torch.randint(0, classes, (args.batch,)))
                for _ in range(batches)]
    dev = torch.device(args.device)
    model.to(dev)
    if args.mode == "train":
        model.train()
        opt = sgd(model, args.model, args.lr)

        def iteration(x, y):
            # the batch comes from the host each step, as dlc's does
            train_step(model, opt, x.to(dev), y.to(dev), args.amp)
    elif args.mode == "step":  # a language model's one step, going on from its state
        model.eval()
        state = [None]

        def iteration(x, y):
            with torch.inference_mode():
                out, state[0] = model(x[:, :1].to(dev), state[0])
                out.cpu()
    else:
        model.eval()

        def iteration(x, y):
            with torch.inference_mode():
                out = model(x.to(dev))
                (out[0] if isinstance(out, tuple) else out).cpu()
    for i in range(args.warmup):
        iteration(*pool[i % len(pool)])
    ms = []
    for i in range(args.iters):
        x, y = pool[(args.warmup + i) % len(pool)]
        t0 = time.perf_counter()
        iteration(x, y)
        ms.append(1000 * (time.perf_counter() - t0))
    median = statistics.median(ms)
    print(json.dumps({"framework": "pytorch " + torch.__version__, "model": args.model,
                      "mode": args.mode, "amp": args.amp,
                      "threads": torch.get_num_threads(), "batch": args.batch,
                      "median_ms": median, "mean_ms": statistics.fmean(ms),
                      "min_ms": min(ms), "max_ms": max(ms),
                      "images_per_second": args.batch * 1000 / median,
                      "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                      "peak_device_mib": (torch.cuda.max_memory_allocated() / 2**20
                                          if dev.type == "cuda" else None)}))


def read_idx(path):
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    rank = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    return torch.frombuffer(bytearray(data[4 + 4 * rank:]), dtype=torch.uint8).reshape(dims)


def split(folder, prefix):
    def find(name):
        path = os.path.join(folder, name)
        return path if os.path.exists(path) else path + ".gz"
    x = read_idx(find(f"{prefix}-images-idx3-ubyte")).float().div(255).unsqueeze(1)
    y = read_idx(find(f"{prefix}-labels-idx1-ubyte")).long()
    return x, y


def read_text(path):
    """A UTF-8 file, or a folder's regular files in name order (bytewise),
    symbolic links and strfile's NAME.dat indexes skipped, as dlc's text()
    reads them (runtime/text.c)."""
    if not os.path.isdir(path):
        return open(path, encoding="utf-8").read()
    names = sorted(os.listdir(path), key=lambda n: n.encode())
    listed = set(names)
    parts = []
    for n in names:
        full = os.path.join(path, n)
        if os.path.islink(full) or not os.path.isfile(full):
            continue
        if n.endswith(".dat") and n[:-4] in listed:
            continue
        parts.append(open(full, encoding="utf-8").read())
    return "".join(parts)


def charlm_accuracy(args):
    """models/charlm.dl as its train section trains it: the text's distinct
    characters as the vocabulary (in code point order), samples of 128
    characters at a stride of 128 with the 128 that follow as labels, the
    last 5% held out, Adam at lr 0.002, batch 32, a new random order each
    epoch; prints the validation loss in bits per character."""
    torch.manual_seed(1)
    start = time.perf_counter()
    text = read_text(args.data)
    vocab = sorted(set(text))
    index = {ch: i for i, ch in enumerate(vocab)}
    ids = torch.tensor([index[ch] for ch in text], dtype=torch.int64)
    T = 128
    total = (len(ids) - 1) // T
    nval = round(0.05 * total)
    ntrain = total - nval
    x = ids[:total * T].reshape(total, T)
    y = ids[1:total * T + 1].reshape(total, T)
    model = CharLM()
    opt = torch.optim.Adam(model.parameters(), lr=0.002)
    for epoch in range(args.epochs):
        model.train()
        order = torch.randperm(ntrain)
        for i in range(0, ntrain, 32):
            idx = order[i:i + 32]
            train_step(model, opt, x[idx], y[idx])
    model.eval()
    loss = 0.0
    with torch.inference_mode():
        for i in range(ntrain, total, 32):
            out, _ = model(x[i:min(i + 32, total)])
            loss += float(F.cross_entropy(out.reshape(-1, 113), y[i:min(i + 32, total)].reshape(-1),
                                          reduction="sum"))
    nats = loss / (nval * T)
    print(json.dumps({"framework": "pytorch " + torch.__version__, "epochs": args.epochs,
                      "validation_loss": nats, "bits_per_character": nats / math.log(2),
                      "seconds": time.perf_counter() - start}))


def accuracy(args):
    """LeNet-5 as models/lenet5.dl trains it; or a recurrent model as its
    train section says: Adam at lr 0.001 with a cosine schedule over the
    epochs, set at every step as dlc's program sets it
    (runtime/program/train.c)."""
    if args.model == "charlm":
        return charlm_accuracy(args)
    torch.manual_seed(1)
    start = time.perf_counter()
    xtr, ytr = split(args.data, "train")
    xte, yte = split(args.data, "t10k")
    model = network(args.model)[0]
    recurrent = args.model in RECURRENT
    opt = sgd(model, args.model, 0.001 if recurrent else 0.01)
    steps = (len(xtr) + 63) // 64
    for epoch in range(args.epochs):
        model.train()
        order = torch.randperm(len(xtr))
        for step, i in enumerate(range(0, len(xtr), 64)):
            if recurrent:
                t = epoch + step / steps
                opt.param_groups[0]["lr"] = 0.001 * 0.5 * (1 + math.cos(math.pi * t / args.epochs))
            idx = order[i:i + 64]
            train_step(model, opt, xtr[idx], ytr[idx])
    model.eval()
    with torch.inference_mode():
        correct = sum(int((model(xte[i:i + 1000]).argmax(1) == yte[i:i + 1000]).sum())
                      for i in range(0, len(xte), 1000))
    print(json.dumps({"framework": "pytorch " + torch.__version__, "epochs": args.epochs,
                      "test_accuracy": correct / len(xte),
                      "seconds": time.perf_counter() - start}))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("command", choices=["bench", "accuracy"])
    p.add_argument("--model", default="lenet5",
                   choices=["lenet5", "lstm_fashion", "gru_fashion", "charlm", "alexnet", "vgg16",
                            "googlenet", "resnet18", "resnet50"])
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--mode", choices=["train", "infer", "step"], default="train")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu",
                   help="cpu, or cuda: the model on the GPU (cuDNN's default settings); "
                        "the report adds peak_device_mib, torch.cuda.max_memory_allocated")
    p.add_argument("--amp", choices=["bf16"], default=None,
                   help="train under torch.autocast in bf16 (automatic mixed precision)")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    bench(args) if args.command == "bench" else accuracy(args)


if __name__ == "__main__":
    main()
