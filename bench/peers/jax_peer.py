#!/usr/bin/env python3
"""jax_peer.py: the JAX (XLA) side of bench/peers_vs_dlc.sh: the networks of
bench/pytorch_peer.py written in plain JAX, the whole training step compiled
by XLA as one program.

  jax_peer.py bench [--model lenet5|alexnet|googlenet|lstm_fashion|gru_fashion]
                    [--mode train|infer] [--batch N] [--iters N] [--warmup N]
                    [--threads N] [--lr X]

prints pytorch_peer.py's JSON object (bench/peers/common.py).

The networks have the layers of the torch versions, with the same shapes:
LeNet-5 as pytorch_peer.py's lenet5(); torchvision's AlexNet (dropout 0.5
before the first two dense layers, in training) and GoogLeNet without its
auxiliary heads (convolutions without bias, batch normalization with eps
1e-3 on the batch's statistics in training and the running ones in
inference, max pooling with ceil_mode, torchvision's 3x3 "5x5" branch,
dropout 0.2 before the classifier).  Images are NHWC and kernels HWIO,
JAX's usual layout (XLA chooses its own layouts inside the program anyway).
Weights are drawn as PyTorch's default initialization draws them (uniform
in +-1/sqrt(fan_in)); the figures do not depend on them.
There is no ResNet nor VGG here (common.JAX_MODELS lists what there is):
bench/peers_vs_dlc.sh leaves JAX out of resnet18, resnet50 and vgg16.

lstm_fashion and gru_fashion are pytorch_peer.py's RowReader: an image's 28
rows are the 28 steps of torch.nn.LSTM (or GRU) of 128 units, PyTorch's
gates in PyTorch's order (i, f, g, o for the LSTM; r, z, n for the GRU, with
b_hn inside r * (...)), every weight and bias uniform in +-1/sqrt(128); the
last step's h, after dropout 0.2 in training, goes to a linear layer of 10.
The input projections of all 28 steps are one product before the
recurrence, which is a jax.lax.scan over the steps (XLA's while loop, not
unrolled).

--mode train times one step: cross-entropy of the scores, its gradient
(jax.value_and_grad) and SGD with momentum 0.9 (weight decay 1e-4 for
AlexNet and GoogLeNet, none for LeNet-5, on every parameter, as
torch.optim.SGD) or, for the recurrent models, Adam (torch.optim.Adam's
defaults: betas 0.9 and 0.999, eps 1e-8, no weight decay), all inside one
jax.jit whose parameter, optimizer and batch-norm buffers are donated, so
that XLA updates them in place.  Each step waits for its loss (as
pytorch_peer.py's loss.item()).  --mode infer times a jitted forward pass
in inference mode.  The program is compiled ahead of time before the
warm-up (compile_s in the report).

Threads: XLA:CPU sizes its thread pools by the machine's cores, and no flag
of jaxlib 0.10 caps them at N; --threads N pins the process to N CPUs
(sched_setaffinity before jax is imported, as `taskset` would), and with
N = 1 also turns off XLA's multi-threaded Eigen (--xla_cpu_multi_thread_eigen
=false).  Run it with bench/.venv-peers/bin/python (scripts/deps.sh peers).
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

args = common.parse(__doc__.split("\n")[0], models=common.JAX_MODELS)
cpus = common.pin_to_threads(args.threads)
if args.threads == 1:
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_cpu_multi_thread_eigen=false").strip()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

jax.config.update("jax_platforms", "cpu")


# --- layers: each is (init(key) -> params, state; apply(params, state, x, train, key))

class Builder:
    """Collects parameters and batch-norm buffers by name while a network's
    layers are declared; apply functions look them up by the same names."""

    def __init__(self, key):
        self.key, self.params, self.state = key, {}, {}

    def uniform(self, name, shape, fan_in):
        self.key, sub = jax.random.split(self.key)
        bound = 1.0 / fan_in ** 0.5
        self.params[name] = jax.random.uniform(sub, shape, jnp.float32, -bound, bound)


def conv(b, name, cin, cout, k, stride=1, pad=0, bias=True):
    b.uniform(name + ".w", (k, k, cin, cout), cin * k * k)
    if bias:
        b.uniform(name + ".b", (cout,), cin * k * k)

    def apply(p, x):
        y = lax.conv_general_dilated(x, p[name + ".w"], (stride, stride),
                                     [(pad, pad), (pad, pad)],
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return y + p[name + ".b"] if bias else y
    return apply


def dense(b, name, fin, fout):
    b.uniform(name + ".w", (fin, fout), fin)
    b.uniform(name + ".b", (fout,), fin)
    return lambda p, x: x @ p[name + ".w"] + p[name + ".b"]


def batchnorm(b, name, c, eps=1e-3, momentum=0.1):
    """Returns apply(p, s, x, train) -> (y, updates of the running statistics)."""
    b.params[name + ".gamma"] = jnp.ones((c,), jnp.float32)
    b.params[name + ".beta"] = jnp.zeros((c,), jnp.float32)
    b.state[name + ".mean"] = jnp.zeros((c,), jnp.float32)
    b.state[name + ".var"] = jnp.ones((c,), jnp.float32)

    def apply(p, s, x, train):
        if train:
            mean = x.mean(axis=(0, 1, 2))
            var = x.var(axis=(0, 1, 2))
            n = x.size // c
            updates = {name + ".mean": (1 - momentum) * s[name + ".mean"] + momentum * mean,
                       name + ".var": (1 - momentum) * s[name + ".var"]
                       + momentum * var * n / max(n - 1, 1)}
        else:
            mean, var, updates = s[name + ".mean"], s[name + ".var"], {}
        y = (x - mean) * lax.rsqrt(var + eps) * p[name + ".gamma"] + p[name + ".beta"]
        return y, updates
    return apply


def maxpool(x, k, stride, pad=0, ceil=False):
    """torch's MaxPool2d on NHWC; ceil_mode pads the high side as needed."""
    pads = []
    for size in x.shape[1:3]:
        span = size + 2 * pad - k
        out = (-(-span // stride) if ceil else span // stride) + 1
        if ceil and (out - 1) * stride >= size + pad:  # torch: last window starts inside
            out -= 1
        pads.append((pad, (out - 1) * stride + k - size - pad))
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, k, k, 1), (1, stride, stride, 1),
                             [(0, 0), *pads, (0, 0)])


def dropout(x, rate, train, key):
    if not train:
        return x
    keep = jax.random.bernoulli(key, 1 - rate, x.shape)
    return jnp.where(keep, x / (1 - rate), 0)


relu = jax.nn.relu


def lstm(b, name, fin, hidden):
    """torch.nn.LSTM of one layer (batch_first): apply(p, x) -> the last
    step's h, for x of (batch, steps, fin).  The weights are stored
    transposed, (fin, 4 hidden) and (hidden, 4 hidden), gates i, f, g, o."""
    b.uniform(name + ".w_ih", (fin, 4 * hidden), hidden)
    b.uniform(name + ".w_hh", (hidden, 4 * hidden), hidden)
    b.uniform(name + ".b_ih", (4 * hidden,), hidden)
    b.uniform(name + ".b_hh", (4 * hidden,), hidden)

    def apply(p, x):
        xs = x @ p[name + ".w_ih"] + (p[name + ".b_ih"] + p[name + ".b_hh"])
        w_hh = p[name + ".w_hh"]

        def step(carry, xw):
            h, c = carry
            i, f, g, o = jnp.split(xw + h @ w_hh, 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), None
        zero = jnp.zeros((x.shape[0], hidden), x.dtype)
        (h, _), _ = lax.scan(step, (zero, zero), xs.transpose(1, 0, 2))
        return h
    return apply


def gru(b, name, fin, hidden):
    """torch.nn.GRU of one layer (batch_first): apply(p, x) -> the last
    step's h, for x of (batch, steps, fin).  The weights are stored
    transposed, (fin, 3 hidden) and (hidden, 3 hidden), gates r, z, n;
    n = tanh(W_in x + b_in + r * (W_hn h + b_hn)), h' = (1 - z) n + z h."""
    b.uniform(name + ".w_ih", (fin, 3 * hidden), hidden)
    b.uniform(name + ".w_hh", (hidden, 3 * hidden), hidden)
    b.uniform(name + ".b_ih", (3 * hidden,), hidden)
    b.uniform(name + ".b_hh", (3 * hidden,), hidden)

    def apply(p, x):
        xs = x @ p[name + ".w_ih"] + p[name + ".b_ih"]
        w_hh, b_hh = p[name + ".w_hh"], p[name + ".b_hh"]

        def step(h, xw):
            hw = h @ w_hh + b_hh
            r = jax.nn.sigmoid(xw[:, :hidden] + hw[:, :hidden])
            z = jax.nn.sigmoid(xw[:, hidden:2 * hidden] + hw[:, hidden:2 * hidden])
            n = jnp.tanh(xw[:, 2 * hidden:] + r * hw[:, 2 * hidden:])
            return (1 - z) * n + z * h, None
        h, _ = lax.scan(step, jnp.zeros((x.shape[0], hidden), x.dtype),
                        xs.transpose(1, 0, 2))
        return h
    return apply


# --- the networks: each returns (params, state, forward(p, s, x, train, key) -> (scores, state updates))

def lenet5(b):
    c1, c3 = conv(b, "c1", 1, 6, 5, pad=2), conv(b, "c3", 6, 16, 5)
    f5, f6, f7 = dense(b, "f5", 400, 120), dense(b, "f6", 120, 84), dense(b, "f7", 84, 10)

    def forward(p, s, x, train, key):
        x = maxpool(relu(c1(p, x)), 2, 2)
        x = maxpool(relu(c3(p, x)), 2, 2)
        x = x.transpose(0, 3, 1, 2).reshape(x.shape[0], -1)  # flatten as torch (C, H, W)
        x = relu(f6(p, relu(f5(p, x))))
        return f7(p, x), {}
    return forward


def alexnet(b):
    convs = [conv(b, "features.0", 3, 64, 11, 4, 2), conv(b, "features.3", 64, 192, 5, 1, 2),
             conv(b, "features.6", 192, 384, 3, 1, 1), conv(b, "features.8", 384, 256, 3, 1, 1),
             conv(b, "features.10", 256, 256, 3, 1, 1)]
    fc = [dense(b, "classifier.1", 256 * 6 * 6, 4096), dense(b, "classifier.4", 4096, 4096),
          dense(b, "classifier.6", 4096, 1000)]

    def forward(p, s, x, train, key):
        x = maxpool(relu(convs[0](p, x)), 3, 2)
        x = maxpool(relu(convs[1](p, x)), 3, 2)
        x = relu(convs[4](p, relu(convs[3](p, relu(convs[2](p, x))))))
        x = maxpool(x, 3, 2)  # 6x6: torchvision's AdaptiveAvgPool2d((6, 6)) is the identity
        x = x.transpose(0, 3, 1, 2).reshape(x.shape[0], -1)
        k1, k2 = jax.random.split(key) if train else (None, None)  # inference: no masks
        x = relu(fc[0](p, dropout(x, 0.5, train, k1)))
        x = relu(fc[1](p, dropout(x, 0.5, train, k2)))
        return fc[2](p, x), {}
    return forward


def googlenet(b):
    def basic(name, cin, cout, k, stride=1, pad=0):
        c, bn = conv(b, name + ".conv", cin, cout, k, stride, pad, bias=False), \
            batchnorm(b, name + ".bn", cout)

        def apply(p, s, x, train, updates):
            y, u = bn(p, s, c(p, x), train)
            updates.update(u)
            return relu(y)
        return apply

    def inception(name, cin, c1, c3r, c3, c5r, c5, proj):
        b1 = basic(name + ".branch1", cin, c1, 1)
        b2 = [basic(name + ".branch2.0", cin, c3r, 1), basic(name + ".branch2.1", c3r, c3, 3, 1, 1)]
        b3 = [basic(name + ".branch3.0", cin, c5r, 1), basic(name + ".branch3.1", c5r, c5, 3, 1, 1)]
        b4 = basic(name + ".branch4.1", cin, proj, 1)

        def apply(p, s, x, train, u):
            return jnp.concatenate([
                b1(p, s, x, train, u),
                b2[1](p, s, b2[0](p, s, x, train, u), train, u),
                b3[1](p, s, b3[0](p, s, x, train, u), train, u),
                b4(p, s, maxpool(x, 3, 1, 1, ceil=True), train, u)], axis=-1)
        return apply

    conv1, conv2, conv3 = basic("conv1", 3, 64, 7, 2, 3), basic("conv2", 64, 64, 1), \
        basic("conv3", 64, 192, 3, 1, 1)
    i3 = [inception("inception3a", 192, 64, 96, 128, 16, 32, 32),
          inception("inception3b", 256, 128, 128, 192, 32, 96, 64)]
    i4 = [inception("inception4a", 480, 192, 96, 208, 16, 48, 64),
          inception("inception4b", 512, 160, 112, 224, 24, 64, 64),
          inception("inception4c", 512, 128, 128, 256, 24, 64, 64),
          inception("inception4d", 512, 112, 144, 288, 32, 64, 64),
          inception("inception4e", 528, 256, 160, 320, 32, 128, 128)]
    i5 = [inception("inception5a", 832, 256, 160, 320, 32, 128, 128),
          inception("inception5b", 832, 384, 192, 384, 48, 128, 128)]
    fc = dense(b, "fc", 1024, 1000)

    def forward(p, s, x, train, key):
        u = {}
        x = maxpool(conv1(p, s, x, train, u), 3, 2, ceil=True)
        x = maxpool(conv3(p, s, conv2(p, s, x, train, u), train, u), 3, 2, ceil=True)
        for block in i3:
            x = block(p, s, x, train, u)
        x = maxpool(x, 3, 2, ceil=True)
        for block in i4:
            x = block(p, s, x, train, u)
        x = maxpool(x, 2, 2, ceil=True)
        for block in i5:
            x = block(p, s, x, train, u)
        x = dropout(x.mean(axis=(1, 2)), 0.2, train, key)
        return fc(p, x), u
    return forward


def row_reader(cell):
    """pytorch_peer.py's RowReader with an LSTM or a GRU: 28 steps of 28
    pixels, 128 units, the last h through dropout 0.2 to a linear layer."""
    def build(b):
        rnn = {"lstm": lstm, "gru": gru}[cell](b, "h", 28, 128)
        out = dense(b, "out", 128, 10)

        def forward(p, s, x, train, key):
            h = rnn(p, x.reshape(-1, 28, 28))
            return out(p, dropout(h, 0.2, train, key)), {}
        return forward
    return build


NETWORKS = {"lenet5": lenet5, "alexnet": alexnet, "googlenet": googlenet,
            "lstm_fashion": row_reader("lstm"), "gru_fashion": row_reader("gru")}


def sgd(lr, momentum, decay):
    """torch.optim.SGD with momentum (and weight decay): (init(params) ->
    optimizer state, update(params, state, grads) -> params, state)."""
    def update(params, bufs, grads):
        grads = jax.tree_util.tree_map(lambda g, w: g + decay * w, grads, params)
        bufs = jax.tree_util.tree_map(lambda m, g: momentum * m + g, bufs, grads)
        return jax.tree_util.tree_map(lambda w, m: w - lr * m, params, bufs), bufs
    return lambda params: jax.tree_util.tree_map(jnp.zeros_like, params), update


def adam(lr, beta1=0.9, beta2=0.999, eps=1e-8):
    """torch.optim.Adam (no weight decay, no amsgrad): (init(params) ->
    optimizer state (step, first moments, second moments), update(params,
    state, grads) -> params, state).  As torch, the step size is lr / (1 -
    beta1^t) and eps is added to sqrt(v) / sqrt(1 - beta2^t)."""
    tree = jax.tree_util.tree_map

    def init(params):
        return jnp.zeros((), jnp.float32), tree(jnp.zeros_like, params), \
            tree(jnp.zeros_like, params)

    def update(params, state, grads):
        t, m, v = state
        t = t + 1
        m = tree(lambda m, g: beta1 * m + (1 - beta1) * g, m, grads)
        v = tree(lambda v, g: beta2 * v + (1 - beta2) * g * g, v, grads)
        step = lr / (1 - beta1 ** t)
        root = jnp.sqrt(1 - beta2 ** t)
        params = tree(lambda w, m, v: w - step * m / (jnp.sqrt(v) / root + eps),
                      params, m, v)
        return params, (t, m, v)
    return init, update


def cross_entropy(scores, labels):
    logp = jax.nn.log_softmax(scores)
    return -jnp.take_along_axis(logp, labels[:, None], axis=1).mean()


def main():
    b = Builder(jax.random.PRNGKey(0))
    forward = NETWORKS[args.model](b)
    params, state = b.params, b.state
    if args.model in common.RECURRENT:
        opt_init, opt_update = adam(args.lr)
    else:
        opt_init, opt_update = sgd(args.lr, 0.9, 0.0 if args.model == "lenet5" else 1e-4)

    def train_step(params, bufs, state, key, x, y):
        key, sub = jax.random.split(key)  # dropout's masks

        def loss_fn(p):
            scores, updates = forward(p, state, x, True, sub)
            return cross_entropy(scores, y), updates
        (loss, updates), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        params, bufs = opt_update(params, bufs, grads)
        return params, bufs, {**state, **updates}, key, loss

    def infer(params, state, x):
        return forward(params, state, x, False, None)[0]

    pool = [(jnp.asarray(x), jnp.asarray(y)) for x, y in common.data(args, layout="nhwc")]
    key = jax.random.PRNGKey(1)
    t0 = time.perf_counter()
    if args.mode == "train":
        bufs = opt_init(params)
        step = jax.jit(train_step, donate_argnums=(0, 1, 2, 3)).lower(
            params, bufs, state, key, *pool[0]).compile()
        carry = [params, bufs, state, key]  # donated to each step, replaced by its results

        def iteration(x, y):
            params, bufs, state, key, loss = step(*carry, x, y)
            carry[:] = params, bufs, state, key
            float(loss)
    else:
        run = jax.jit(infer).lower(params, state, pool[0][0]).compile()

        def iteration(x, y):
            run(params, state, x).block_until_ready()
    compile_s = time.perf_counter() - t0
    ms = common.time_iterations(iteration, pool, args.warmup, args.iters)
    common.report(args, "jax " + jax.__version__, ms, len(cpus), compile_s,
                  xla_flags=os.environ.get("XLA_FLAGS", ""))


if __name__ == "__main__":
    main()
