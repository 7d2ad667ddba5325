#!/usr/bin/env python3
"""int8_peer.py: the int8 peers of bench/int8_vs_peers.sh.  ONNX Runtime
and OpenVINO, each on the f32 ONNX model of bench/peers/ort_peer.py and on
a statically quantized (QDQ) int8 model made from it, at any batch.

  int8_peer.py bench [--runtime ort|openvino] [--precision f32|int8]
                     [--model lenet5|alexnet|googlenet|resnet18|resnet50|vgg16]
                     [--mode infer] [--batch 1] [--iters N] [--warmup N]
                     [--threads N]
  int8_peer.py quantize --model MODEL   (makes the int8 model if it is missing)
  int8_peer.py check --model MODEL [--threads N]

bench prints pytorch_peer.py's JSON object (bench/peers/common.py), with
`precision` added.  check prints one JSON object that says which kernels
each runtime runs the int8 model with (see below).

The f32 model is bench/.venv-peers/onnx/MODEL.onnx (common.onnx_file,
exported at batch 1), its batch dimension made symbolic here, in memory.
The int8 model is made from that once and kept beside it, as
bench/.venv-peers/onnx/MODEL.int8.onnx (batch symbolic too):
onnxruntime.quantization's quant_pre_process (symbolic shape inference and
ORT's basic graph optimizations, which it recommends before quantizing),
then quantize_static with QuantFormat.QDQ, per-channel symmetric int8
weights (QInt8, per_channel=True, WeightSymmetric), and asymmetric uint8
activations (QUInt8) from min/max calibration, reduce_range=False: what
ORT 1.31's quantize_static documentation recommends for x86-64 CPUs with
VNNI (U8S8; without VNNI it recommends reduce_range=True, 7-bit weights,
which changes accuracy, not the kernels nor the speed).  Every Conv, Gemm,
Add, pooling and Concat that ORT's quantizer knows is quantized (its
default op_types).  Calibration: 32 inputs, one at a time: the first 32
training images of Fashion-MNIST (/usr/share/datasets/fashion-mnist, in
[0, 1] as pytorch_peer.py reads them) for LeNet-5, and for the ImageNet
networks a fixed batch of 32 standard-normal images
(numpy.random.default_rng(0)).  The weights are the export's
(torch.manual_seed(0)): the model is for timing, not for accuracy.

Each runtime sees the batch fixed to --batch before it optimizes the graph:

- ort: SessionOptions with add_free_dimension_override_by_name("batch", B),
  graph_optimization_level ORT_ENABLE_ALL, intra_op_num_threads = N,
  inter_op_num_threads = 1, sequential execution; CPUExecutionProvider.
- openvino: read_model, reshape to batch B, compile_model on "CPU" with
  PERFORMANCE_HINT LATENCY, INFERENCE_NUM_THREADS = N and
  INFERENCE_PRECISION_HINT f32 (as ort_peer.py; the hint is for the layers
  left in floating point: OpenVINO's low-precision transformations turn the
  QDQ pattern into int8 convolutions whatever the hint).

check says whether the int8 model really runs in int8: for ORT, the op
types of the graph after ORT_ENABLE_ALL (SessionOptions.
optimized_model_filepath), where ORT's QDQ fusions leave QLinearConv,
QLinearMatMul, QGemm (com.microsoft) and the like in place of
DequantizeLinear -> Conv -> QuantizeLinear; for OpenVINO, the runtime
model's layers (compiled_model.get_runtime_model()) by layer type and
runtimePrecision, with the primitive each convolution runs (e.g. a
brgconv_avx512_I8 on an AVX-512 Xeon).

Run it with bench/.venv-peers/bin/python (scripts/deps.sh peers).
"""
import argparse
import collections
import gzip
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

FASHION = "/usr/share/datasets/fashion-mnist"
CALIBRATION = 32  # inputs


def symbolic_batch(model):
    """The ONNX ModelProto with the first dimension of its inputs and
    outputs named "batch", and the shapes of its inner tensors dropped (the
    export recorded them at batch 1; the runtimes infer them again)."""
    for value in list(model.graph.input) + list(model.graph.output):
        dim = value.type.tensor_type.shape.dim[0]
        dim.ClearField("dim_value")
        dim.dim_param = "batch"
    del model.graph.value_info[:]
    return model


def f32_model(model_name):
    import onnx
    return symbolic_batch(onnx.load(common.onnx_file(model_name)))


def fashion_images(count):
    """The first `count` Fashion-MNIST training images, (count, 1, 28, 28)
    float32 in [0, 1], read from the IDX file as pytorch_peer.py does."""
    import numpy as np
    path = os.path.join(FASHION, "train-images-idx3-ubyte")
    path = path if os.path.exists(path) else path + ".gz"
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    rank = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    pixels = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)
    return (pixels[:count].astype(np.float32) / 255)[:, None, :, :]


def calibration_inputs(model_name):
    import numpy as np
    if model_name == "lenet5":
        return fashion_images(CALIBRATION)
    shape, _ = common.input_shape(model_name)
    return np.random.default_rng(0).standard_normal((CALIBRATION, *shape), dtype=np.float32)


def int8_file(model_name):
    """bench/.venv-peers/onnx/MODEL.int8.onnx, made once (see above)."""
    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process
    f32 = common.onnx_file(model_name)
    path = f32[:-len(".onnx")] + ".int8.onnx"
    if os.path.exists(path):
        return path

    class Reader(CalibrationDataReader):
        def __init__(self, images):
            self.images = iter(images)

        def get_next(self):
            x = next(self.images, None)
            return None if x is None else {"input": x[None]}

    with tempfile.TemporaryDirectory() as tmp:
        onnx.save(symbolic_batch(onnx.load(f32)), f"{tmp}/f32.onnx")
        quant_pre_process(f"{tmp}/f32.onnx", f"{tmp}/pre.onnx")
        quantize_static(f"{tmp}/pre.onnx", f"{tmp}/int8.onnx",
                        Reader(calibration_inputs(model_name)),
                        quant_format=QuantFormat.QDQ, per_channel=True, reduce_range=False,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        extra_options={"WeightSymmetric": True})
        os.replace(f"{tmp}/int8.onnx", path)
    return path


def ort_session(model_name, precision, batch, threads, optimized=None):
    import onnxruntime as rt
    so = rt.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = rt.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = rt.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.add_free_dimension_override_by_name("batch", batch)
    if optimized:
        so.optimized_model_filepath = optimized
    model = (int8_file(model_name) if precision == "int8"
             else f32_model(model_name).SerializeToString())
    return rt.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def ort(model_name, precision, batch, threads):
    import onnxruntime as rt
    session = ort_session(model_name, precision, batch, threads)
    return (lambda x: session.run(None, {"input": x})), "onnxruntime " + rt.__version__


def openvino_compiled(model_name, precision, batch, threads):
    import openvino as ov
    core = ov.Core()
    path = int8_file(model_name) if precision == "int8" else common.onnx_file(model_name)
    model = core.read_model(path)
    shape, _ = common.input_shape(model_name)
    model.reshape({0: [batch, *shape]})
    return core.compile_model(model, "CPU", {
        "PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads,
        "INFERENCE_PRECISION_HINT": "f32"})


def openvino(model_name, precision, batch, threads):
    import openvino as ov
    request = openvino_compiled(model_name, precision, batch, threads).create_infer_request()
    return (lambda x: request.infer({0: x})), "openvino " + ov.__version__.split("-")[0]


def check(model_name, threads):
    """Which kernels run the int8 model, in each runtime (see above)."""
    import onnx
    with tempfile.TemporaryDirectory() as tmp:
        ort_session(model_name, "int8", 1, threads, optimized=f"{tmp}/opt.onnx")
        graph = onnx.load(f"{tmp}/opt.onnx", load_external_data=False).graph
        ort_ops = collections.Counter(n.op_type for n in graph.node)
    compiled = openvino_compiled(model_name, "int8", 1, threads)
    layers, primitives = collections.Counter(), collections.Counter()
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        text = lambda key: info[key].astype(str) if key in info else "?"  # noqa: E731
        kind = text("layerType")
        layers[f"{kind} {text('runtimePrecision')}"] += 1
        if kind in ("Convolution", "FullyConnected", "MatMul"):
            primitives[f"{kind} {text('primitiveType')}"] += 1
    print(json.dumps({"model": model_name, "ort_ops": dict(ort_ops.most_common()),
                      "openvino_layers": dict(layers.most_common()),
                      "openvino_primitives": dict(primitives.most_common())}))


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("quantize", "check"):
        p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
        p.add_argument("command")
        p.add_argument("--model", required=True, choices=common.CONVOLUTIONAL)
        p.add_argument("--threads", type=int, default=2)
        args = p.parse_args()
        if args.command == "quantize":
            print(int8_file(args.model))
        else:
            check(args.model, args.threads)
        return
    # take --runtime and --precision out of argv, the rest is common.parse's
    extra = argparse.ArgumentParser(add_help=False)
    extra.add_argument("--runtime", choices=("ort", "openvino"), default="ort")
    extra.add_argument("--precision", choices=("f32", "int8"), default="f32")
    ours, rest = extra.parse_known_args()
    sys.argv[1:] = rest
    args = common.parse(__doc__.split("\n")[0], models=common.CONVOLUTIONAL,
                        modes=("infer",))
    t0 = time.perf_counter()
    run, framework = {"ort": ort, "openvino": openvino}[ours.runtime](
        args.model, ours.precision, args.batch, args.threads)
    pool = common.data(args)
    run(pool[0][0])
    compile_s = time.perf_counter() - t0
    ms = common.time_iterations(lambda x, y: run(x), pool, args.warmup, args.iters)
    common.report(args, framework, ms, args.threads, compile_s, precision=ours.precision)


if __name__ == "__main__":
    main()
