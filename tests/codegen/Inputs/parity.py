#!/usr/bin/env python3
"""parity.py MODEL WORKDIR HARNESS [--clip X | --f64]: compares a dlc-generated
network with the same network written in PyTorch, on the same weights and
data.

  1. random weights (seeded) are written as a safetensors checkpoint under
     the IR's parameter names;
  2. forward: the harness's logits against PyTorch's, relative error < 1e-4;
  3. training: STEPS steps of the model's train section's optimizer (SGD
     with momentum 0.9 for most; see MODELS) on one batch, with gradient
     clipping by total norm where the train section has a clip
     (torch.nn.utils.clip_grad_norm_ between backward and step): each loss,
     and every parameter, running statistic (batchnorm in training mode)
     and optimizer state (momentum buffer, Adam's moments) afterwards,
     against torch.optim, relative error < 1e-4.  A line "step K clips" or
     "step K does not clip" says whether clipping scaled the gradients.

--f64: the harness is the network's f64 code (dlc --dtype=f64, the
harness built with -DREAL=double): the weights and inputs are written in
f64, and only the forward checks run, relative error < 1e-10.

--clip X gives the harness (compiled with -DCLIP) and PyTorch another
largest norm than the train section's, through NAME_set_clip.

The relative error of a tensor is max|a - b| / max(max|b|, 1e-6).  Prints
one line per check and 'N passed, N failed'."""
import os
import subprocess
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "runtime", "Inputs"))
from checkpoint_torch import read_safetensors, write_safetensors  # noqa: E402


def lenet5_params():
    return {"c1.weight": (6, 1, 5, 5), "c1.bias": (6,), "c3.weight": (16, 6, 5, 5),
            "c3.bias": (16,), "f5.weight": (120, 400), "f5.bias": (120,),
            "f6.weight": (84, 120), "f6.bias": (84,), "out.weight": (10, 84), "out.bias": (10,)}


def lenet5(p, x, training=False):
    x = F.max_pool2d(F.relu(F.conv2d(x, p["c1.weight"], p["c1.bias"], padding=2)), 2)
    x = F.max_pool2d(F.relu(F.conv2d(x, p["c3.weight"], p["c3.bias"])), 2)
    x = F.relu(F.linear(x.flatten(1), p["f5.weight"], p["f5.bias"]))
    x = F.relu(F.linear(x, p["f6.weight"], p["f6.bias"]))
    return F.linear(x, p["out.weight"], p["out.bias"])


def mlp_params():
    return {"h1.weight": (256, 784), "h1.bias": (256,), "h2.weight": (128, 256),
            "h2.bias": (128,), "out.weight": (10, 128), "out.bias": (10,)}


def mlp(p, x, training=False):
    x = F.relu(F.linear(x.flatten(1), p["h1.weight"], p["h1.bias"]))
    x = F.relu(F.linear(x, p["h2.weight"], p["h2.bias"]))
    return F.linear(x, p["out.weight"], p["out.bias"])


def simplecnn_params():
    return {"conv1.weight": (32, 1, 3, 3), "conv1.bias": (32,), "conv2.weight": (64, 32, 3, 3),
            "conv2.bias": (64,), "hidden.weight": (128, 1600), "hidden.bias": (128,),
            "out.weight": (10, 128), "out.bias": (10,)}


def simplecnn(p, x, training=False):
    x = F.max_pool2d(F.relu(F.conv2d(x, p["conv1.weight"], p["conv1.bias"])), 2)
    x = F.max_pool2d(F.relu(F.conv2d(x, p["conv2.weight"], p["conv2.bias"])), 2)
    x = F.relu(F.linear(x.flatten(1), p["hidden.weight"], p["hidden.bias"]))
    return F.linear(x, p["out.weight"], p["out.bias"])


def lrnnet_params():
    return {"a.weight": (8, 1, 3, 3), "a.bias": (8,), "b.weight": (8, 4, 3, 3), "b.bias": (8,),
            "out.weight": (10, 392), "out.bias": (10,)}


def lrnnet(p, x, training=False):
    x = F.leaky_relu(F.conv2d(x, p["a.weight"], p["a.bias"], padding=1), 0.1)
    x = F.max_pool2d(F.local_response_norm(x, 5, alpha=0.01, beta=0.75, k=2.0), 2)
    x = F.conv2d(x, p["b.weight"], p["b.bias"], padding=1, groups=2)
    x = F.local_response_norm(x, 4, alpha=0.3, beta=0.5, k=1.0)
    x = F.max_pool2d(F.leaky_relu(x, -0.2), 3, stride=2, ceil_mode=True)
    return F.linear(x.flatten(1), p["out.weight"], p["out.bias"])


def elunet_params():
    return {"a.weight": (8, 1, 3, 3), "a.bias": (8,), "b.weight": (8, 8, 3, 3), "b.bias": (8,),
            "c.weight": (32, 392), "c.bias": (32,), "out.weight": (10, 32), "out.bias": (10,)}


def elunet(p, x, training=False):
    x = F.max_pool2d(F.elu(F.conv2d(x, p["a.weight"], p["a.bias"], padding=1), 0.5), 2)
    x = F.elu(F.max_pool2d(F.conv2d(x, p["b.weight"], p["b.bias"], padding=1), 2))
    x = F.elu(F.linear(x.flatten(1), p["c.weight"], p["c.bias"]), 2.0)
    return F.linear(x, p["out.weight"], p["out.bias"])


def tilenet_params():
    return {"a.weight": (4, 1, 3, 3), "a.bias": (4,), "b.weight": (8, 4, 3, 5),
            "c.weight": (16, 8, 3, 3), "c.bias": (16,), "s.weight": (16, 16, 3, 3),
            "s.bias": (16,), "d.weight": (8, 16, 3, 3),
            "d.bias": (8,), "e.weight": (16, 192), "e.bias": (16,), "out.weight": (10, 16),
            "out.bias": (10,)}


def tilenet(p, x, training=False):
    x = F.relu(F.conv2d(x, p["a.weight"], p["a.bias"], padding=1))
    x = torch.tanh(F.conv2d(x, p["b.weight"], padding=(1, 2), dilation=(2, 1)))
    x = F.relu(F.conv2d(F.relu(F.max_pool2d(x, 2)), p["c.weight"], p["c.bias"]))
    x = F.relu(F.conv2d(x, p["s.weight"], p["s.bias"], stride=2, padding=1))
    x = F.leaky_relu(F.conv2d(x, p["d.weight"], p["d.bias"], padding=(1, 2), dilation=2), 0.1)
    x = torch.sigmoid(F.linear(x.flatten(1), p["e.weight"], p["e.bias"]))
    return F.linear(x, p["out.weight"], p["out.bias"])


def bnnet_params():
    return {"conv.weight": (8, 1, 3, 3), "bn1.weight": (8,), "bn1.bias": (8,),
            "bn1.running_mean": (8,), "bn1.running_var": (8,), "hidden.weight": (32, 1568),
            "bn2.weight": (32,), "bn2.bias": (32,), "bn2.running_mean": (32,),
            "bn2.running_var": (32,), "out.weight": (10, 32), "out.bias": (10,)}


def bnnet(p, x, training=False):
    """In training, F.batch_norm updates the running statistics in p."""
    x = F.conv2d(x, p["conv.weight"], padding=1)
    x = F.batch_norm(x, p["bn1.running_mean"], p["bn1.running_var"], p["bn1.weight"],
                     p["bn1.bias"], training=training, momentum=0.1, eps=1e-5)
    x = F.max_pool2d(F.relu(x), 2)
    x = F.linear(x.flatten(1), p["hidden.weight"])
    x = F.batch_norm(x, p["bn2.running_mean"], p["bn2.running_var"], p["bn2.weight"],
                     p["bn2.bias"], training=training, momentum=0.2, eps=1e-3)
    x = F.dropout(F.relu(x), p=0.0, training=training)
    return F.linear(x, p["out.weight"], p["out.bias"])


def blocknet_params():
    return {"a.weight": (24, 1, 3, 3), "a.bias": (24,), "b.weight": (32, 24, 1, 1),
            "b.bias": (32,), "c.weight": (16, 24, 3, 3), "c.bias": (16,),
            "d.weight": (16, 24, 3, 5), "d.bias": (16,), "gr.weight": (48, 16, 1, 1),
            "gr.bias": (48,), "dw.weight": (48, 1, 3, 3), "dw.bias": (48,),
            "e.weight": (16, 48, 3, 3),
            "e_2.weight": (16,), "e_2.bias": (16,), "e_2.running_mean": (16,),
            "e_2.running_var": (16,), "f.weight": (16, 16, 3, 3), "f_2.weight": (16,),
            "f_2.bias": (16,), "f_2.running_mean": (16,), "f_2.running_var": (16,),
            "h.weight": (16, 16, 1, 1), "h.bias": (16,),
            "out.weight": (10, 16), "out.bias": (10,)}


def blocknet(p, x, training=False):
    a = F.relu(F.conv2d(x, p["a.weight"], p["a.bias"], padding=1))
    q = F.max_pool2d(a, 3, stride=2, padding=1, ceil_mode=True)
    b = F.relu(F.conv2d(q, p["b.weight"], p["b.bias"]))
    c = F.leaky_relu(F.conv2d(q, p["c.weight"], p["c.bias"], padding=2, dilation=2), 0.1)
    d = torch.sigmoid(F.conv2d(q, p["d.weight"], p["d.bias"], stride=2, padding=(1, 2)))
    gr = F.relu(F.conv2d(torch.cat([b, c], 1), p["gr.weight"], p["gr.bias"], groups=3))
    dw = F.relu(F.conv2d(gr, p["dw.weight"], p["dw.bias"], padding=1, groups=48))
    e = F.conv2d(dw, p["e.weight"], stride=2, padding=1)
    e = F.batch_norm(e, p["e_2.running_mean"], p["e_2.running_var"], p["e_2.weight"],
                     p["e_2.bias"], training=training, momentum=0.1, eps=1e-5)
    s = F.relu(e + d)
    f = F.batch_norm(F.conv2d(s, p["f.weight"], padding=1), p["f_2.running_mean"],
                     p["f_2.running_var"], p["f_2.weight"], p["f_2.bias"], training=training,
                     momentum=0.1, eps=1e-5)
    t = F.relu(s + f)
    u = F.conv2d(t, p["h.weight"], p["h.bias"]) + t
    return F.linear(u.mean((2, 3)), p["out.weight"], p["out.bias"])


def clipnet_params():
    return {"a.weight": (4, 1, 3, 3), "a.bias": (4,), "h.weight": (32, 784), "h.bias": (32,),
            "out.weight": (10, 32), "out.bias": (10,)}


def clipnet(p, x, training=False):
    x = F.max_pool2d(F.relu(F.conv2d(x, p["a.weight"], p["a.bias"], padding=1)), 2)
    x = F.relu(F.linear(x.flatten(1), p["h.weight"], p["h.bias"]))
    return F.linear(x, p["out.weight"], p["out.bias"])


# The train sections' optimizers: torch.optim's, and the names of the state
# dlc keeps beside each parameter (@NAME.momentum_buffer, ...).
def sgd_momentum(params, lr):
    return torch.optim.SGD(params, lr=lr, momentum=0.9), ["momentum_buffer"]


def sgd_nesterov_decay(params, lr):
    return (torch.optim.SGD(params, lr=lr, momentum=0.9, nesterov=True, weight_decay=0.01),
            ["momentum_buffer"])


def adam_decay(params, lr):
    return torch.optim.Adam(params, lr=lr, weight_decay=0.01), ["exp_avg", "exp_avg_sq"]


# name: (parameter shapes, forward, lr, optimizer, clip): the train section's
MODELS = {"lenet5": (lenet5_params, lenet5, 0.01), "mlp": (mlp_params, mlp, 0.05),
          "simplecnn": (simplecnn_params, simplecnn, 0.01), "bnnet": (bnnet_params, bnnet, 0.05),
          "lrnnet": (lrnnet_params, lrnnet, 0.05), "tilenet": (tilenet_params, tilenet, 0.05),
          "elunet": (elunet_params, elunet, 0.05), "blocknet": (blocknet_params, blocknet, 0.05),
          "clipnet": (clipnet_params, clipnet, 0.05, sgd_nesterov_decay, 0.25),
          "clipadam": (clipnet_params, clipnet, 0.01, adam_decay, 0.25)}


def is_buffer(name):
    return name.endswith(".running_mean") or name.endswith(".running_var")


def rel(a, b):
    return float((a - b).abs().max() / max(float(b.abs().max()), 1e-6))


def main():
    model, work, harness = sys.argv[1:4]
    shapes, forward, lr, optimizer, clip = (MODELS[model] + (sgd_momentum, None))[:5]
    clip_arg = []
    f64 = sys.argv[4:5] == ["--f64"]
    if sys.argv[4:5] == ["--clip"]:
        clip = float(sys.argv[5])
        clip_arg = [sys.argv[5]]
    torch.manual_seed(0)
    params = {k: (torch.rand(s) * 2 - 1) * (1.0 / max(1, torch.tensor(s[1:]).prod().item())) ** 0.5
              for k, s in shapes().items()}
    for k in params:  # running variances must be positive
        if k.endswith(".running_var"):
            params[k] = params[k].abs() + 0.5
    n, steps = 16, 3
    x = torch.rand(n, 1, 28, 28)
    labels = torch.randint(0, 10, (n,), dtype=torch.int32)
    weights = os.path.join(work, "weights.safetensors")
    write_safetensors(weights, {k: v.double() for k, v in params.items()} if f64 else params)
    (x.double() if f64 else x).numpy().tofile(os.path.join(work, "x.bin"))
    labels.numpy().tofile(os.path.join(work, "labels.bin"))
    passed = failed = 0

    def check(what, err):
        nonlocal passed, failed
        ok = err < (1e-10 if f64 else 1e-4)
        passed += ok
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {what}: relative error {err:.2e}")

    out = os.path.join(work, "logits.bin")
    subprocess.run([harness, "forward", weights, os.path.join(work, "x.bin"), str(n), out],
                   check=True)
    real = "float64" if f64 else "float32"
    got = torch.from_numpy(__import__("numpy").fromfile(out, dtype=real)).reshape(n, 10)
    want = forward({k: v.double() for k, v in params.items()}, x.double())
    want = want if f64 else want.float()
    check("forward logits", rel(got, want))
    # fewer samples than threads: the convolutions split each sample among
    # the workers (3 threads: batch 1 in 3 parts, batch 2 in 2 parts each)
    for few in (1, 2):
        subprocess.run([harness, "forward", weights, os.path.join(work, "x.bin"), str(few), out],
                       check=True, env={**os.environ, "OMP_NUM_THREADS": "3"})
        got = torch.from_numpy(__import__("numpy").fromfile(out, dtype=real)).reshape(few, 10)
        check(f"forward logits at batch {few} on 3 threads", rel(got, want[:few]))
    if f64:
        print(f"{passed} passed, {failed} failed")
        return 1 if failed else 0

    result = os.path.join(work, "trained.safetensors")
    run = subprocess.run([harness, "train", weights, os.path.join(work, "x.bin"),
                          os.path.join(work, "labels.bin"), str(n), str(lr), str(steps), result]
                         + clip_arg, check=True, capture_output=True, text=True)
    losses = [float(line.split()[1]) for line in run.stdout.split("\n") if line.startswith("loss")]
    tp = {k: v.double().clone().requires_grad_(not is_buffer(k)) for k, v in params.items()}
    trainable = [v for k, v in tp.items() if not is_buffer(k)]
    opt, state = optimizer(trainable, lr)
    for step in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(forward(tp, x.double(), training=True), labels.long())
        loss.backward()
        if clip is not None:
            norm = float(torch.nn.utils.clip_grad_norm_(trainable, clip))
            print(f"step {step + 1} {'clips' if clip / (norm + 1e-6) < 1 else 'does not clip'}: "
                  f"total norm {norm:.4g}, clip {clip:g}")
        opt.step()
        check(f"loss of step {step + 1}", abs(losses[step] - loss.item()) / max(loss.item(), 1e-6))
    trained, _ = read_safetensors(result)
    for name, value in tp.items():
        check(f"{name} after {steps} steps", rel(trained[name].double(), value.detach()))
        if is_buffer(name):
            continue
        for s in state:
            check(f"{name}.{s}", rel(trained[f"{name}.{s}"].double(), opt.state[value][s]))
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
