#!/usr/bin/env python3
"""parity_recurrent.py MODEL WORKDIR HARNESS [HARNESS_F64]: a dlc-generated
recurrent network against the same network built of torch.nn.RNN, LSTM,
GRU, Embedding and Linear modules, on the same weights and batch (lmnet: a
language model, token ids in and a cross-entropy at every step; vlnet:
sequences of different lengths, as torch's packed sequences; tbnet:
stateful layers, truncated backpropagation through time, each training step
starting from the states the last ended in, detached).

  1. the torch modules' own initial weights (seeded) are written as a
     safetensors checkpoint under dlc's parameter names, which are the
     modules' state_dict names (h.weight_ih_l0, h.bias_hh_l1_reverse, ...);
  2. forward: the harness's logits against the modules' (in f64), relative
     error < 1e-5, at the full batch and at batch 1; a language model's
     also a step at a time (NAME_forward_step);
  3. training: STEPS steps of SGD with momentum 0.9 on one batch: each loss,
     then every parameter and momentum buffer of dlc's checkpoint loaded
     into the modules by load_state_dict (strict), against torch.optim.SGD,
     relative error < 1e-5;
  4. with HARNESS_F64 (the network compiled with --dtype=f64): every
     gradient of one batch against autograd's in f64, relative error
     < 1e-10.

The relative error of a tensor is max|a - b| / max(max|b|, 1e-6).  Prints
one line per check and 'N passed, N failed'."""
import os
import subprocess
import sys

import numpy
import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "runtime", "Inputs"))
from checkpoint_torch import read_safetensors, write_safetensors  # noqa: E402

STEPS, LR, BATCH, T, F, CLASSES = 3, 0.1, 8, 12, 7, 10


def lstmnet():
    """lstm(seq, hidden=16, layers=2, bidirectional=true, last=true) -> dense(10)"""
    m = nn.ModuleDict({"h": nn.LSTM(F, 16, num_layers=2, bidirectional=True, batch_first=True),
                       "out": nn.Linear(32, CLASSES)})

    def forward(x):
        _, (hn, _) = m["h"](x)
        return m["out"](torch.cat([hn[-2], hn[-1]], 1))
    return m, forward, {}


def grunet():
    """gru(seq, hidden=16, layers=2) -> dense(6, per_step=true) -> tanh ->
    flatten -> dense(10)"""
    m = nn.ModuleDict({"h": nn.GRU(F, 16, num_layers=2, batch_first=True),
                       "s": nn.Linear(16, 6), "out": nn.Linear(T * 6, CLASSES)})

    def forward(x):
        y, _ = m["h"](x)
        return m["out"](torch.tanh(m["s"](y)).flatten(1))
    return m, forward, {}


def rnnnet():
    """rnn(seq, hidden=16, bidirectional=true) -> rnn_relu(hidden=12,
    reverse=true, last=true) -> dense(10): the reversed layer is a torch RNN
    on the sequence flipped in time, whose parameters dlc names _reverse"""
    m = nn.ModuleDict({"h": nn.RNN(F, 16, bidirectional=True, batch_first=True),
                       "r": nn.RNN(32, 12, nonlinearity="relu", batch_first=True),
                       "out": nn.Linear(12, CLASSES)})

    def forward(x):
        y, _ = m["h"](x)
        _, hn = m["r"](y.flip(1))
        return m["out"](hn[-1])
    rename = {f"r.{w}_l0": f"r.{w}_l0_reverse" for w in
              ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}
    return m, forward, rename


VOCAB = 11


def lmnet():
    """embedding(text, vocab=11, dim=5) -> lstm(hidden=6, layers=2) ->
    dense(11, per_step=true): a language model's logits at every step"""
    m = nn.ModuleDict({"e": nn.Embedding(VOCAB, 5), "h": nn.LSTM(5, 6, num_layers=2,
                                                                 batch_first=True),
                       "out": nn.Linear(6, VOCAB)})

    def forward(x):
        y, _ = m["h"](m["e"](x))
        return m["out"](y)
    return m, forward, {}


def tbnet():
    """embedding(text, vocab=11, dim=5) -> lstm(hidden=6, stateful=true) ->
    gru(hidden=5, stateful=true) -> dense(11, per_step=true): truncated
    backpropagation through time, each call starting from the states the
    last ended in, detached (forward.reset: back to the zero state)"""
    m = nn.ModuleDict({"e": nn.Embedding(VOCAB, 5), "h": nn.LSTM(5, 6, batch_first=True),
                       "g": nn.GRU(6, 5, batch_first=True), "out": nn.Linear(5, VOCAB)})
    state = {}

    def forward(x):
        y, (hn, cn) = m["h"](m["e"](x), state.get("h"))
        z, gn = m["g"](y, state.get("g"))
        state["h"], state["g"] = (hn.detach(), cn.detach()), gn.detach()
        return m["out"](z)
    forward.reset = state.clear
    return m, forward, {}


# each sequence's length for vlnet, the longest first, the shortest 1
LENGTHS = torch.tensor([T, 1, 5, T - 1, 3, 8, 2, 11], dtype=torch.int32)


def vlnet():
    """lstm(seq, len, hidden=8, bidirectional=true, last=true) -> dense(10),
    sequences of different lengths: torch's packed sequences"""
    m = nn.ModuleDict({"h": nn.LSTM(F, 8, bidirectional=True, batch_first=True),
                       "out": nn.Linear(16, CLASSES)})

    def forward(x):
        n = x.shape[0]
        packed = nn.utils.rnn.pack_padded_sequence(x, LENGTHS[:n].long(), batch_first=True,
                                                   enforce_sorted=False)
        _, (hn, _) = m["h"](packed)
        return m["out"](torch.cat([hn[-2], hn[-1]], 1))
    return m, forward, {}


MODELS = {"lstmnet": lstmnet, "grunet": grunet, "rnnnet": rnnnet, "lmnet": lmnet,
          "vlnet": vlnet, "tbnet": tbnet}
# the models whose input is token ids and whose labels are per step
LANGUAGE = {"lmnet", "tbnet"}


def rel(a, b):
    return float((a - b).abs().max() / max(float(b.abs().max()), 1e-6))


def run(harness, *args):
    return subprocess.run([harness, *map(str, args)], check=True, capture_output=True,
                          text=True).stdout


def main():
    model, work, harness = sys.argv[1:4]
    harness64 = sys.argv[4] if len(sys.argv) > 4 else None
    torch.manual_seed(0)
    m, forward, rename = MODELS[model]()
    # the biases too, so that a misplaced one shows
    with torch.no_grad():
        for p in m.parameters():
            p.uniform_(-0.5, 0.5)
    m = m.double()
    to_dlc = lambda name: rename.get(name, name)  # noqa: E731
    to_torch = {v: k for k, v in rename.items()}
    language = model in LANGUAGE
    if language:  # token ids in, a label at every step
        x = torch.randint(0, VOCAB, (BATCH, 9), dtype=torch.int32)
        labels = torch.randint(0, VOCAB, (BATCH, 9), dtype=torch.int32)
        loss_of = lambda logits: nn.functional.cross_entropy(  # noqa: E731
            logits.reshape(-1, VOCAB), labels.reshape(-1).long())
    else:
        x = torch.rand(BATCH, T, F, dtype=torch.float64)
        labels = torch.randint(0, CLASSES, (BATCH,), dtype=torch.int32)
        loss_of = lambda logits: nn.functional.cross_entropy(logits, labels.long())  # noqa: E731
    tx = x.long() if language else x
    weights = os.path.join(work, "weights.safetensors")
    write_safetensors(weights, {to_dlc(k): v.float() for k, v in m.state_dict().items()})
    (x if language else x.float()).numpy().tofile(os.path.join(work, "x.bin"))
    for name in ("x.bin", "x64.bin"):  # vlnet's lengths, beside its inputs
        LENGTHS.numpy().tofile(os.path.join(work, name + ".len"))
    labels.numpy().tofile(os.path.join(work, "labels.bin"))
    passed = failed = 0

    def check(what, err, tolerance=1e-5):
        nonlocal passed, failed
        ok = err < tolerance
        passed += ok
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {what}: relative error {err:.2e}")

    out = os.path.join(work, "logits.bin")
    want = forward(tx).detach()
    reset = getattr(forward, "reset", lambda: None)  # a stateful network's
    reset()  # each harness run starts from the zero state
    for n in (BATCH, 1):
        run(harness, "forward", weights, os.path.join(work, "x.bin"), n, out)
        got = torch.from_numpy(numpy.fromfile(out, dtype="float32")).reshape(want[:n].shape)
        check(f"forward logits at batch {n}", rel(got.double(), want[:n]))

    if language:  # a step at a time (NAME_forward_step), from the zero state
        run(harness, "steps", weights, os.path.join(work, "x.bin"), BATCH, out)
        got = torch.from_numpy(numpy.fromfile(out, dtype="float32")).reshape(want.shape)
        check(f"logits a step at a time at batch {BATCH}", rel(got.double(), want))

    result = os.path.join(work, "trained.safetensors")
    stdout = run(harness, "train", weights, os.path.join(work, "x.bin"),
                 os.path.join(work, "labels.bin"), BATCH, LR, STEPS, result)
    losses = [float(line.split()[1]) for line in stdout.split("\n") if line.startswith("loss")]
    start = {k: v.clone() for k, v in m.state_dict().items()}
    opt = torch.optim.SGD(m.parameters(), lr=LR, momentum=0.9)
    for step in range(STEPS):
        opt.zero_grad()
        loss = loss_of(forward(tx))
        loss.backward()
        opt.step()
        check(f"loss of step {step + 1}", abs(losses[step] - loss.item()) / loss.item())
    trained, _ = read_safetensors(result)
    # dlc's checkpoint loads into the torch modules as it is
    twin = MODELS[model]()[0].double()
    twin.load_state_dict({to_torch.get(k, k): trained[k].double() for k in
                          (to_dlc(k) for k in m.state_dict())}, strict=True)
    for name, value in m.named_parameters():
        check(f"{to_dlc(name)} after {STEPS} steps",
              rel(dict(twin.named_parameters())[name].detach(), value.detach()))
        check(f"{to_dlc(name)}.momentum_buffer",
              rel(trained[to_dlc(name) + ".momentum_buffer"].double(),
                  opt.state[value]["momentum_buffer"]))

    if harness64:
        m.load_state_dict(start)
        write_safetensors(weights, {to_dlc(k): v for k, v in m.state_dict().items()})
        x.numpy().tofile(os.path.join(work, "x64.bin"))  # token ids stay int32
        grads = os.path.join(work, "gradients.safetensors")
        run(harness64, "gradients", weights, os.path.join(work, "x64.bin"),
            os.path.join(work, "labels.bin"), BATCH, grads)
        m.zero_grad()
        reset()
        loss_of(forward(tx)).backward()
        got, _ = read_safetensors(grads)
        for name, value in m.named_parameters():
            check(f"f64 gradient of {to_dlc(name)}", rel(got[to_dlc(name)], value.grad), 1e-10)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
