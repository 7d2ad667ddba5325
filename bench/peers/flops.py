#!/usr/bin/env python3
"""flops.py: the floating-point operations of bench/pytorch_peer.py's networks
(the networks every system of bench/peers_vs_dlc.sh runs), counted from the
shapes of their layers, for the GFLOP/s table of bench/peers_vs_dlc.sh.

  flops.py [--models "lenet5 alexnet googlenet"]   (or any of pytorch_peer.py's
                                                  models: resnet18, resnet50,
                                                  vgg16, lstm_fashion and
                                                  gru_fashion too)

prints one JSON object: for each model, infer_flops_per_image (one forward
pass of one image) and train_flops_per_image (one image's share of a
training step).

What is counted: the multiply-adds of the convolutions, dense layers and
recurrent layers, 2 operations each.  A convolution giving Cout x Hout x
Wout from Cin channels with k x k kernels in `groups` groups costs 2 Cout
Hout Wout (Cin / groups) k k per image, a dense layer of in x out weights 2
in out, a recurrent layer of G gates (4 for nn.LSTM, 3 for nn.GRU) and H
units over T steps of F inputs 2 T G H (F + H) (as
bench/recurrent_vs_pytorch.sh counts it).  Pooling, ReLU, batch normalization, dropout, the gates' pointwise
work, the loss, bias additions and the optimizer's update are not counted
(they are a few per cent of the products at most).
A training step counts 3 forward passes: the forward pass, and for the
backward pass one product for the gradient of the inputs and one for the
gradient of the weights, each as costly as the forward product (the first
layer's input gradient, which nobody needs, is counted too, as is usual).

The shapes are taken by running each network once in eval mode on one
image, with forward hooks on its Conv2d, Linear, LSTM and GRU modules;
any torch will do (Debian's /usr/bin/python3, or
bench/.venv-peers/bin/python).
"""
import argparse
import json
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def forward_flops(model, shape):
    """The operations of the products of one forward pass of one image."""
    total = 0

    def hook(module, inputs, output):
        nonlocal total
        if isinstance(module, nn.Conv2d):
            cout, hout, wout = output.shape[1:]
            kh, kw = module.kernel_size
            total += 2 * cout * hout * wout * (module.in_channels // module.groups) * kh * kw
        elif isinstance(module, (nn.LSTM, nn.GRU)):
            gates = 4 if isinstance(module, nn.LSTM) else 3
            steps = inputs[0].shape[1 if module.batch_first else 0]
            h, dirs = module.hidden_size, 2 if module.bidirectional else 1
            for layer in range(module.num_layers):
                f = module.input_size if layer == 0 else dirs * h
                total += 2 * dirs * steps * gates * h * (f + h)
        else:
            total += 2 * module.in_features * module.out_features
    handles = [m.register_forward_hook(hook) for m in model.modules()
               if isinstance(m, (nn.Conv2d, nn.Linear, nn.LSTM, nn.GRU))]
    model.eval()
    with torch.no_grad():
        model(torch.zeros(1, *shape))
    for h in handles:
        h.remove()
    return total


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="lenet5 alexnet googlenet")
    args = p.parse_args()
    peer = common.pytorch_peer()
    result = {}
    for name in args.models.split():
        model, shape, _ = peer.network(name)
        f = forward_flops(model, shape)
        result[name] = {"infer_flops_per_image": f, "train_flops_per_image": 3 * f}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
