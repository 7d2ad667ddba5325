#!/usr/bin/env python3
"""ort_peer.py: the inference runtimes of bench/peers_vs_dlc.sh, on
bench/pytorch_peer.py's networks exported to ONNX: ONNX Runtime (the
default), OpenVINO and Apache TVM.  Batch-1 inference only.

  ort_peer.py bench [--runtime ort|openvino|tvm]
                    [--model lenet5|alexnet|googlenet|resnet18|resnet50|vgg16]
                    [--mode infer]
                    [--batch 1] [--iters N] [--warmup N] [--threads N]

prints pytorch_peer.py's JSON object (bench/peers/common.py); --lr is
accepted and ignored, as there is no training.

The model is pytorch_peer.py's network in eval mode (no dropout, batch
normalization with its running statistics), exported once with the venv's
torch (TorchScript exporter, opset 17) to bench/.venv-peers/onnx/MODEL.onnx.
Each runtime loads that file and optimizes it as it does by default for
the CPU, in 32-bit floats:

- ort: onnxruntime.InferenceSession with every graph optimization
  (ORT_ENABLE_ALL); threads: SessionOptions.intra_op_num_threads = N (the
  calling thread counts as one of them), inter_op_num_threads = 1,
  sequential execution.
- openvino: Core.compile_model on "CPU" with PERFORMANCE_HINT LATENCY,
  INFERENCE_NUM_THREADS = N and INFERENCE_PRECISION_HINT f32 (OpenVINO
  would otherwise compute in bf16 or f16 on CPUs that have them).
- tvm: the ONNX graph imported by Relax (tvm.relax.frontend.onnx), its
  default optimization pipeline, built for the host's CPU (LLVM's name for it,
  e.g. znver3, with triple x86_64-linux-gnu) without any
  tuning (no MetaSchedule: tuning takes hours), run by Relax's virtual
  machine; threads: TVM_NUM_THREADS = N, set before tvm is imported.
  Compilation is compile_s in the report.

Run it with bench/.venv-peers/bin/python (scripts/deps.sh peers).
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def runtime_arg():
    """Takes --runtime X (or --runtime=X) out of sys.argv, the rest being
    pytorch_peer.py's flags."""
    runtime = "ort"
    for i, a in enumerate(sys.argv):
        if a == "--runtime" and i + 1 < len(sys.argv):
            runtime = sys.argv[i + 1]
            del sys.argv[i:i + 2]
            break
        if a.startswith("--runtime="):
            runtime = a.split("=", 1)[1]
            del sys.argv[i]
            break
    if runtime not in ("ort", "openvino", "tvm"):
        sys.exit(f"ort_peer.py: --runtime must be ort, openvino or tvm, not {runtime}")
    return runtime


def ort(path, threads):
    import onnxruntime as rt
    so = rt.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = rt.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = rt.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = rt.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return (lambda x: session.run(None, {"input": x})), "onnxruntime " + rt.__version__


def openvino(path, threads):
    import openvino as ov
    compiled = ov.Core().compile_model(path, "CPU", {
        "PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads,
        "INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()
    return (lambda x: request.infer({0: x})), "openvino " + ov.__version__.split("-")[0]


def tvm(path, threads):
    os.environ["TVM_NUM_THREADS"] = str(threads)
    import numpy as np
    import onnx
    import tvm as tvm_
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx
    mod = from_onnx(onnx.load(path), keep_params_in_input=False)
    mod = relax.get_pipeline("zero")(mod)
    # the wheel's LLVM says its triple is conda's, for which it refuses
    # mcpu=native: name the host's CPU, as LLVM detects it, and the triple
    cpu = tvm_.target.codegen.llvm_get_system_cpu()
    target = tvm_.target.Target({"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": cpu})
    exe = relax.build(mod, target=target)
    dev = tvm_.cpu()
    vm = relax.VirtualMachine(exe, dev)

    def run(x):
        out = vm["main"](tvm_.runtime.tensor(x, dev) if hasattr(tvm_.runtime, "tensor")
                         else tvm_.nd.array(x, dev))
        np.asarray(out.numpy() if hasattr(out, "numpy") else out[0].numpy())
    return run, "tvm " + tvm_.__version__


def main():
    runtime = runtime_arg()
    args = common.parse(__doc__.split("\n")[0], models=common.CONVOLUTIONAL,
                        modes=("infer",))
    if args.batch != 1:
        sys.exit("ort_peer.py: only --batch 1 (the ONNX files are exported at batch 1)")
    path = common.onnx_file(args.model)
    t0 = time.perf_counter()
    run, framework = {"ort": ort, "openvino": openvino, "tvm": tvm}[runtime](path, args.threads)
    pool = common.data(args)
    run(pool[0][0])
    compile_s = time.perf_counter() - t0
    ms = common.time_iterations(lambda x, y: run(x), pool, args.warmup, args.iters)
    common.report(args, framework, ms, args.threads, compile_s)


if __name__ == "__main__":
    main()
