#!/usr/bin/env python3
"""zoo_torchvision.py MODEL SIZE BATCH WORKDIR HARNESS32 HARNESS64
[--f32-gradients]: compares a model of the zoo, compiled by dlc in f32
(HARNESS32) and f64 (HARNESS64, dlc --dtype=f64), each driven by
tests/codegen/Inputs/harness.c, with torchvision's model of the same name on
the same weights and data.

  1. torchvision.models.MODEL(weights=None) is built from seed 0, its
     batchnorms given random scales, shifts and running statistics and its
     zero biases random values (so that inference depends on all of them);
     its state_dict is written under dlc's names (torchvision_names.py) to
     safetensors files, in f32 and f64, which the harnesses load: a
     missing, extra or misshapen tensor fails there;
  2. forward: the f32 logits of BATCH random SIZExSIZE images, against the
     model in eval() mode (batchnorm with its running statistics);
  3. gradients: the cross-entropy loss of the same images with random
     labels and the gradient of every parameter after one backward pass
     (the harness's gradients mode: no update), in f64, against the model in
     train() mode (batchnorm with the batch's statistics) with its dropout
     set to p=0, as the compiled variant's is; with --f32-gradients the f32
     code's too.

Why f64 for the gradients: one backward pass through a deep network at
random initialization is ill-conditioned in f32 -- PyTorch's own f32
gradients differ from its f64 ones by up to 1.4e-1 (ResNet-50), 1.7e-2
(VGG-16) and 3.5e-4 (GoogLeNet) on these inputs, through ReLUs and batch
statistics that rounding tips over -- so only f64 can tell a wrong gradient
from rounding at 1e-4; --f32-gradients is for the models where f32 is well
conditioned (AlexNet, ResNet-18).

torchvision computes in f64 (the model converted after its f32 weights were
written).  The relative error of a tensor is max|a - b| / max(max|b|, 1e-12);
each must be below 1e-4.  Prints one line per check, the worst gradient of
each precision, and 'N passed, N failed'."""
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "runtime", "Inputs"))
from checkpoint_torch import read_safetensors, write_safetensors  # noqa: E402
from torchvision_names import state_dict_to_dlc, torch_to_dlc  # noqa: E402

TOLERANCE = 1e-4


def build(model):
    if model == "googlenet":  # torchvision's GoogLeNet keeps its auxiliary heads unless told
        return torchvision.models.googlenet(weights=None, aux_logits=False, init_weights=True)
    return getattr(torchvision.models, model)(weights=None)


def randomize(net):
    """Random batchnorm scales, shifts and running statistics, and random
    values for the biases torchvision initializes to zero."""
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
        for name, p in net.named_parameters():
            if name.endswith(".bias") and not p.any():
                p.uniform_(-0.1, 0.1)


def rel(a, b):
    return float((a - b).abs().max() / max(float(b.abs().max()), 1e-12))


def run_harness(harness, *args):
    return subprocess.run([harness, *map(str, args)], check=True, capture_output=True,
                          text=True).stdout


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    model, size, n, work, harness32, harness64 = args[0], int(args[1]), int(args[2]), *args[3:6]
    f32_gradients = "--f32-gradients" in sys.argv
    torch.manual_seed(0)
    net = build(model)
    randomize(net)
    tensors = state_dict_to_dlc(net.state_dict())
    weights32 = os.path.join(work, "weights.safetensors")
    weights64 = os.path.join(work, "weights64.safetensors")
    write_safetensors(weights32, tensors)
    write_safetensors(weights64, {k: v.double() for k, v in tensors.items()})
    del tensors  # VGG-16's are 0.5 GB
    x = torch.randn(n, 3, size, size)
    labels = torch.randint(0, 1000, (n,), dtype=torch.int32)
    x32, x64, lab = (os.path.join(work, f) for f in ("x.bin", "x64.bin", "labels.bin"))
    x.numpy().tofile(x32)
    x.double().numpy().tofile(x64)
    labels.numpy().tofile(lab)
    net = net.double()
    passed = failed = 0

    def check(what, err):
        nonlocal passed, failed
        ok = err < TOLERANCE
        passed += ok
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {what}: relative error {err:.2e}")

    # inference, in f32
    out = os.path.join(work, "logits.bin")
    run_harness(harness32, "forward", weights32, x32, n, out)
    got = torch.from_numpy(np.fromfile(out, dtype="float32")).reshape(n, 1000)
    net.eval()
    with torch.no_grad():
        want = net(x.double())
    check("f32 forward logits", rel(got.double(), want))

    # one backward pass in training mode, dropout off
    net.train()
    for m in net.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    want_loss = F.cross_entropy(net(x.double()), labels.long())
    want_loss.backward()
    runs = [("f64", harness64, weights64, x64)]
    if f32_gradients:
        runs.append(("f32", harness32, weights32, x32))
    for dtype, harness, weights, xs in runs:
        grads = os.path.join(work, f"gradients_{dtype}.safetensors")
        loss = float(run_harness(harness, "gradients", weights, xs, lab, n, grads).split()[1])
        check(f"{dtype} loss", abs(loss - want_loss.item()) / abs(want_loss.item()))
        got_grads, _ = read_safetensors(grads)
        worst, worst_name = 0.0, ""
        for key, p in net.named_parameters():
            name = torch_to_dlc(key)
            err = rel(got_grads.pop(name).double(), p.grad)
            check(f"{dtype} gradient {name} ({key})", err)
            if err >= worst:
                worst, worst_name = err, name
        check(f"{dtype}: no gradients beyond torchvision's parameters "
              f"({', '.join(got_grads) or 'none'})", 0.0 if not got_grads else 1.0)
        print(f"{dtype}: {len(list(net.parameters()))} gradients, worst relative error "
              f"{worst:.2e} ({worst_name})")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
