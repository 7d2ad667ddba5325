#!/usr/bin/env python3
"""torch2_peer.py: the PyTorch 2 side of bench/peers_vs_dlc.sh:
bench/pytorch_peer.py's networks and training step, compiled by
torch.compile (TorchDynamo capturing the graph, TorchInductor generating C++
and OpenMP for the CPU).

  torch2_peer.py bench [--model lenet5|alexnet|googlenet|resnet18|resnet50|vgg16|
                               lstm_fashion|gru_fashion]
                       [--mode train|infer] [--batch N] [--iters N] [--warmup N]
                       [--threads N] [--lr X]

prints pytorch_peer.py's JSON object (bench/peers/common.py).

The networks, the optimizer and the step are pytorch_peer.py's own (it is
imported): LeNet-5, torchvision's AlexNet, GoogLeNet without auxiliary
heads, ResNet-18, ResNet-50 and VGG-16, and the RowReader of lstm_fashion
and gru_fashion (torch.nn.LSTM or GRU of 128 units over an image's 28
rows); cross-entropy, SGD with momentum 0.9 (weight decay 1e-4 for the
zoo), Adam for the recurrent models.  For those, TorchDynamo is told to
trace into nn.LSTM and nn.GRU
(torch._dynamo.config.allow_rnn), which by default it leaves to eager
PyTorch behind a graph break; traced, the recurrence is decomposed into its
28 steps, unrolled, for Inductor to fuse (except the LSTM in inference,
which Inductor gives to oneDNN's LSTM layer whole; main says why not in
training).  --mode train compiles the model with torch.compile (its
forward pass, and through AOTAutograd its backward pass) and the
optimizer's step with torch.compile as well (Inductor fuses the updates of
all parameters); what runs uncompiled between them is zero_grad, the call
of backward and loss.item().  --mode infer compiles the model in eval mode with Inductor's
`freezing` (weights taken as constants, convolutions and linear layers
prepacked for oneDNN), which is the setting PyTorch recommends for CPU
inference, and runs it under torch.inference_mode().

Compilation happens in 3 untimed steps before --warmup (the second step
recompiles the optimizer once its momentum buffers exist); its seconds
are compile_s in the report.

Threads: torch.set_num_threads(N), which sets the OpenMP threads of both
ATen's kernels and Inductor's generated ones.  Run it with
bench/.venv-peers/bin/python, which has PyPI's torch 2 (scripts/deps.sh
peers); Debian's torch 1.13 has no torch.compile.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import torch  # noqa: E402
import torch._dynamo.config  # noqa: E402
import torch._inductor.config  # noqa: E402

COMPILE_STEPS = 3


def main():
    args = common.parse(__doc__.split("\n")[0])
    torch.set_num_threads(args.threads)
    peer = common.pytorch_peer()
    if args.model in common.RECURRENT:
        torch._dynamo.config.allow_rnn = True
        if args.model == "lstm_fashion" and args.mode == "train":
            # Inductor's oneDNN LSTM layer (aten.mkldnn_rnn_layer), which the
            # decomposition of aten.lstm picks when oneDNN is on, fails in
            # training under AOTAutograd in torch 2.14; off, the LSTM is
            # unrolled into products and pointwise kernels, as the GRU
            # always is (it has no oneDNN path).
            torch.backends.mkldnn.enabled = False
    torch.manual_seed(0)
    model, shape, classes = peer.network(args.model)
    pool = [(torch.from_numpy(x), torch.from_numpy(y).long()) for x, y in common.data(args)]
    t0 = time.perf_counter()
    if args.mode == "train":
        model.train()
        opt = peer.sgd(model, args.model, args.lr)
        compiled = torch.compile(model)
        opt_step = torch.compile(opt.step)

        def iteration(x, y):
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(compiled(x), y)
            loss.backward()
            opt_step()
            loss.item()
    else:
        model.eval()
        torch._inductor.config.freezing = True
        compiled = torch.compile(model)

        def iteration(x, y):
            with torch.inference_mode():
                compiled(x)
    for i in range(COMPILE_STEPS):
        iteration(*pool[i % len(pool)])
    compile_s = time.perf_counter() - t0
    ms = common.time_iterations(iteration, pool, args.warmup, args.iters)
    common.report(args, "torch.compile " + torch.__version__, ms, torch.get_num_threads(),
                  compile_s)


if __name__ == "__main__":
    main()
