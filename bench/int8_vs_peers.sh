#!/usr/bin/env bash
# dlc's int8 inference against its own f32 and against the int8 of ONNX
# Runtime and OpenVINO, every system in the same run (issue 36, item 6):
# LeNet-5, ResNet-18 and GoogLeNet at batch 1 and batch 64, 2 threads each.
#
#   bench/int8_vs_peers.sh [--cases "lenet-1 lenet-64 resnet18-1 resnet18-64
#                           googlenet-1 googlenet-64"]
#                          [--systems "dlc dlc-int8 ort ort-int8 openvino
#                           openvino-int8"]
#                          [--repeats 3] [--out bench/peers] [--build build]
#                          [--threads 2] [--quick]
#
# The cases (inference; time per image, the median of the timed iterations;
# all six are the default):
#   lenet-1       LeNet-5, batch 1 (µs/image), 2,000 timed after 200
#   lenet-64      LeNet-5, batch 64 (µs/image), 200 after 20
#   resnet18-1    ResNet-18, batch 1 (ms/image), 50 after 5
#   resnet18-64   ResNet-18, batch 64 (ms/image), 10 after 2
#   googlenet-1   GoogLeNet, batch 1 (ms/image), 50 after 5
#   googlenet-64  GoogLeNet, batch 64 (ms/image), 10 after 2
# --quick times a tenth of the iterations (at least 2), for a smoke run.
# The default run (3 repeats) should take 10 to 15 minutes on a quiet
# 2-core machine, compiling the programs included (an estimate from the
# f32 times of bench/README.md: most of it is the batch-64 ImageNet cases
# and compiling the four ImageNet programs).
#
# The systems:
#   dlc            `BUILD/dlc models/X.dl -o X`, then
#                  `./X bench --mode infer --batch B --threads T`
#   dlc-int8       `BUILD/dlc models/X.dl --quantize=int8 -o X8`, the same
#                  bench; uncalibrated, on the program's random weights and
#                  scales (docs/quantization.md): the same work as
#                  calibrated weights, for timing only
#   ort, ort-int8  ONNX Runtime on the f32 ONNX export of bench/peers/
#                  ort_peer.py, or on its statically quantized QDQ model
#   openvino, openvino-int8   OpenVINO on the same two files
# The peers run in bench/peers/int8_peer.py (bench/.venv-peers/bin/python,
# `scripts/deps.sh peers`), whose header says how the int8 model is made
# (quantize_static, QDQ, per-channel symmetric int8 weights, uint8
# activations as ORT recommends for x86 CPUs, 32 calibration inputs:
# Fashion-MNIST images for LeNet-5, seeded normal noise for the others)
# and how each runtime is held to T threads.  The int8 models are made once
# and kept in bench/.venv-peers/onnx/X.int8.onnx.
#
# Are the peers really in int8?  Before timing, `int8_peer.py check` lists
# the kernels each runtime runs the int8 model with, and the table's notes
# give them.  Checked 2026-11-27 on a 2-core Xeon with AVX-512 VNNI, ORT
# 1.31.1, OpenVINO 2026.4.1: ORT's optimized graph (ORT_ENABLE_ALL) holds
# a QLinearConv for every convolution (2 in LeNet-5, 20 in ResNet-18, 57 in
# GoogLeNet), QGemm for the dense layers, QLinearAdd (ResNet-18's 8
# residual sums), QLinearConcat (GoogLeNet's 9), int8 pooling
# (NhwcMaxPool, QLinearGlobalAveragePool), and one QuantizeLinear and one
# DequantizeLinear, at the ends; no f32 Conv nor Gemm is left.  ORT's
# profiler (SessionOptions.enable_profiling) shows those kernels running,
# QLinearConv taking 79% (ResNet-18) and 94% (GoogLeNet) of the kernel
# time at batch 1.  OpenVINO runs every convolution in u8 with oneDNN's
# int8 primitives (brgconv_avx512_I8, brgconv_avx512_1x1_I8), its dense
# layers as brgemm_avx512_I8, its pooling and concatenations in u8 too,
# and ResNet-18's sums fused into its convolutions (no Eltwise layer left;
# compiled_model.get_runtime_model(), each layer's runtimePrecision).
#
# Each measurement is one process; every (case, system) is measured
# --repeats times, the order of the systems reversed on every other run,
# and the table gives the medians.  Writes OUT/int8.md (the table, the
# command and the check) and OUT/int8.json (every run's figures and the
# check), and prints the table.
set -euo pipefail
cd "$(dirname "$0")/.."
command_line=bench/int8_vs_peers.sh
for a in "$@"; do
    case "$a" in
        *[!A-Za-z0-9_./=-]*) command_line+=" \"$a\"" ;;
        *) command_line+=" $a" ;;
    esac
done
cases="lenet-1 lenet-64 resnet18-1 resnet18-64 googlenet-1 googlenet-64"
systems="dlc dlc-int8 ort ort-int8 openvino openvino-int8"
repeats=3
out=bench/peers
build=build
quick=false
threads=2
while [ $# -gt 0 ]; do
    case "$1" in
        --cases) cases=$2; shift 2 ;;
        --systems) systems=$2; shift 2 ;;
        --repeats) repeats=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --build) build=$2; shift 2 ;;
        --quick) quick=true; shift ;;
        --threads) threads=$2; shift 2 ;;
        *) sed -n '/^#   bench\/int8_vs_peers.sh/,/\[--quick\]/p' "$0" |
               sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    esac
done
venv=bench/.venv-peers/bin/python

# case -> model batch iterations warm-up
case_spec() {
    case "$1" in
        lenet-1) echo lenet5 1 2000 200 ;;
        lenet-64) echo lenet5 64 200 20 ;;
        resnet18-1) echo resnet18 1 50 5 ;;
        resnet18-64) echo resnet18 64 10 2 ;;
        googlenet-1) echo googlenet 1 50 5 ;;
        googlenet-64) echo googlenet 64 10 2 ;;
        *) echo "int8_vs_peers.sh: unknown case $1" >&2; exit 2 ;;
    esac
}
for c in $cases; do case_spec "$c" >/dev/null; done
for s in $systems; do
    case "$s" in
        dlc|dlc-int8|ort|ort-int8|openvino|openvino-int8) ;;
        *) echo "int8_vs_peers.sh: unknown system $s" >&2; exit 2 ;;
    esac
done

scripts/deps.sh peers
cmake -S . -B "$build" >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
. bench/lib.sh

models=$(for c in $cases; do case_spec "$c" | cut -d' ' -f1; done | sort -u | tr '\n' ' ')
for model in $models; do
    for s in dlc dlc-int8; do
        [[ " $systems " = *" $s "* ]] || continue
        flags=()
        [ "$s" = dlc-int8 ] && flags=(--quantize=int8)
        echo "compiling $model ($s)" >&2
        # a program that does not compile (the int8 kernels are young) is
        # reported as failed in the table, and the others go on
        if ! "$build"/dlc "${flags[@]}" "models/$model.dl" -o "$tmp/$s-$model" \
                2>"$tmp/$s-$model.log"; then
            { echo "dlc ${flags[*]} did not compile it:"; tail -n 3 "$tmp/$s-$model.log"; } |
                tr '\n' ' ' >"$tmp/$s-$model.err"
            echo "  $s: $model left out: $(cat "$tmp/$s-$model.err")" >&2
        fi
    done
    if [[ " $systems " =~ \ (ort|openvino)-int8\  ]]; then
        echo "quantizing $model for the peers (once), and checking their kernels" >&2
        "$venv" bench/peers/int8_peer.py quantize --model "$model" >&2 ||
            echo "  quantizing $model failed; its int8 peers will fail too" >&2
        "$venv" bench/peers/int8_peer.py check --model "$model" --threads "$threads" \
            2>"$tmp/check-$model.log" | tail -n 1 >"$tmp/check-$model.json" || true
    fi
done

# one measurement: case, system, run; leaves $tmp/case-system-run.json or,
# on failure, .err
measure() {
    local case=$1 system=$2 run=$3
    local model batch iters warmup
    read -r model batch iters warmup <<<"$(case_spec "$case")"
    if $quick; then
        iters=$(( iters / 10 > 2 ? iters / 10 : 2 ))
        warmup=$(( warmup / 10 > 1 ? warmup / 10 : 1 ))
    fi
    local base="$tmp/$case-$system-$run" cmd
    local flags=(--mode infer --batch "$batch" --iters "$iters" --warmup "$warmup"
                 --threads "$threads")
    case "$system" in
        dlc*) cmd=("$tmp/$system-$model" bench "${flags[@]}" --report "$base.json") ;;
        *) cmd=("$venv" bench/peers/int8_peer.py bench --runtime "${system%-int8}"
                --precision "$([[ $system = *-int8 ]] && echo int8 || echo f32)"
                --model "$model" "${flags[@]}") ;;
    esac
    if [[ $system = dlc* && -e "$tmp/$system-$model.err" ]]; then  # it did not compile
        cp "$tmp/$system-$model.err" "$base.err"
        echo "  $system $case failed: $(cat "$base.err")" >&2
        return 0
    fi
    if timed_run "$base" "$system $case" "${cmd[@]}"; then
        case "$system" in
            dlc*) ;;
            *) tail -n 1 "$base.out" >"$base.json" ;;
        esac
    fi
}

for run in $(seq "$repeats"); do
    for case in $cases; do
        order=$systems
        [ $(( run % 2 )) -eq 0 ] && order=$(echo "$systems" | tr ' ' '\n' | tac | tr '\n' ' ')
        for system in $order; do
            echo "run $run of $repeats: $system $case" >&2
            measure "$case" "$system" "$run"
        done
    done
done

"$venv" - "$tmp" "$out" "$repeats" "$threads" "$cases" "$systems" "$command_line" \
    "$(git rev-parse --short HEAD)" <<'PY'
import glob, json, os, re, statistics, sys, time
tmp, out, repeats, threads, cases, systems, command, commit = sys.argv[1:9]
cases, systems, repeats = cases.split(), systems.split(), int(repeats)

SPEC = {  # case: model, batch, label, unit
    "lenet-1": ("lenet5", 1, "LeNet-5", "µs/image"),
    "lenet-64": ("lenet5", 64, "LeNet-5", "µs/image"),
    "resnet18-1": ("resnet18", 1, "ResNet-18", "ms/image"),
    "resnet18-64": ("resnet18", 64, "ResNet-18", "ms/image"),
    "googlenet-1": ("googlenet", 1, "GoogLeNet", "ms/image"),
    "googlenet-64": ("googlenet", 64, "GoogLeNet", "ms/image"),
}
NAMES = {"dlc": "dlc f32", "dlc-int8": "dlc int8", "ort": "ORT f32", "ort-int8": "ORT int8",
         "openvino": "OpenVINO f32", "openvino-int8": "OpenVINO int8"}


def runs(case, system):
    """The runs' JSON objects; None if any run failed."""
    found = []
    for run in range(1, repeats + 1):
        path = f"{tmp}/{case}-{system}-{run}.json"
        if not os.path.exists(path):
            return None
        found.append(json.load(open(path)))
    return found


def failure(case, system):
    for run in range(1, repeats + 1):
        path = f"{tmp}/{case}-{system}-{run}.err"
        if os.path.exists(path):
            return re.sub(r"\s+", " ", open(path).read()).strip()[-300:]
    return None


def ms_per_image(case, system):
    r = runs(case, system) if system in systems else None
    return statistics.median(x["median_ms"] / SPEC[case][1] for x in r) if r else None


def fmt(v):
    if v is None:
        return "—"
    # 9.996 would print as "10" in 3 digits: 10.0, as the figures above 10
    return f"{v:,.0f}" if v >= 1000 else f"{v:.3g}" if v < 9.995 else f"{v:.1f}"


def ratio(slow, fast):
    """slow's time over fast's: above 1, fast is faster."""
    a, b = ms_per_image(*slow), ms_per_image(*fast)
    return f"{a / b:.2f}" if a and b else "—"


cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
            if l.startswith("model name")), "?")
flags = next((l.split(":", 1)[1].split() for l in open("/proc/cpuinfo")
              if l.startswith("flags")), [])
isa = ("AVX-512 VNNI" if "avx512_vnni" in flags else "AVX-VNNI" if "avx_vnni" in flags
       else "AVX2, no VNNI" if "avx2" in flags else "no AVX2")
versions = {}
for case in cases:
    for s in systems:
        for r in runs(case, s) or []:
            if "framework" in r:
                versions[s.split("-")[0]] = r["framework"]
lines = [f"{time.strftime('%Y-%m-%d')}, commit {commit}, {os.cpu_count()} CPUs ({cpu}, "
         f"{isa}), {threads} threads each; "
         + ", ".join(versions[k] for k in sorted(versions))
         + f". Medians of {repeats} run{'s' * (repeats > 1)}, each the median of its "
         "iterations.", "",
         "```", command, "```", "",
         "| network | batch | " + " | ".join(NAMES[s] for s in systems)
         + " | dlc int8 vs dlc f32 | dlc int8 vs ORT int8 | dlc int8 vs OpenVINO int8 |",
         "| --- | ---: |" + " ---: |" * (len(systems) + 3)]
notes = []
for case in cases:
    model, batch, label, unit = SPEC[case]
    scale = 1000 if unit == "µs/image" else 1
    cells = []
    for s in systems:
        v = ms_per_image(case, s)
        cells.append(fmt(v and v * scale))
        if v is None and failure(case, s):
            notes.append(f"{NAMES[s]}, {label} batch {batch}: failed: {failure(case, s)}")
    mine = (case, "dlc-int8")
    lines.append(f"| {label} ({unit}) | {batch} | " + " | ".join(cells)
                 + f" | {ratio((case, 'dlc'), mine)} | {ratio((case, 'ort-int8'), mine)}"
                 f" | {ratio((case, 'openvino-int8'), mine)} |")
lines += ["", "Times per image. \"A vs B\" is B's time over A's: above 1, A is faster "
          "(dlc int8 vs dlc f32 is int8's speedup). dlc int8 runs uncalibrated, on random "
          "weights and scales; the peers' int8 is a QDQ model from ONNX Runtime's "
          "quantize_static (bench/peers/int8_peer.py).", ""]

pairs = [(f, i) for f, i in (("dlc", "dlc-int8"), ("ort", "ort-int8"),
                             ("openvino", "openvino-int8")) if f in systems and i in systems]
if pairs:
    lines += ["Each system's own int8 speedup (its f32 time over its int8 time):", "",
              "| network | batch | " + " | ".join(NAMES[f][:-4] for f, _ in pairs) + " |",
              "| --- | ---: |" + " ---: |" * len(pairs)]
    for case in cases:
        lines.append(f"| {SPEC[case][2]} | {SPEC[case][1]} | "
                     + " | ".join(ratio((case, f), (case, i)) for f, i in pairs) + " |")
    lines.append("")

checks, check_lines = {}, []
for path in sorted(glob.glob(f"{tmp}/check-*.json")):
    try:
        c = json.load(open(path))
    except ValueError:
        notes.append(f"int8_peer.py check failed: {os.path.basename(path)}")
        continue
    checks[c["model"]] = c
    ort_q = {k: v for k, v in c["ort_ops"].items()
             if k.startswith(("QLinear", "Nhwc")) or k in ("QGemm", "ConvInteger",
                                                            "MatMulInteger")}
    ort_f = {k: v for k, v in c["ort_ops"].items()
             if k in ("Conv", "Gemm", "MatMul", "FusedConv", "FusedGemm")}
    ov_q = sum(v for k, v in c["openvino_primitives"].items() if k.endswith("I8"))
    ov_all = sum(c["openvino_primitives"].values())
    check_lines.append(
        f"- {c['model']}: ORT's optimized graph: "
        + ", ".join(f"{k} ×{v}" for k, v in ort_q.items())
        + ("; left in f32: " + ", ".join(f"{k} ×{v}" for k, v in ort_f.items())
           if ort_f else "; no Conv nor Gemm left in f32")
        + f". OpenVINO: {ov_q} of its {ov_all} convolutions and dense layers in int8 ("
        + ", ".join(f"{k} ×{v}" for k, v in c["openvino_primitives"].items()) + ").")
if check_lines:
    lines += ["The peers' int8 kernels (`bench/peers/int8_peer.py check`):", ""]
    lines += check_lines + [""]
if notes:
    lines += ["Failures:", ""] + [f"- {n}" for n in notes] + [""]

every = {case: {s: runs(case, s) for s in systems} for case in cases}
json.dump({"command": command, "commit": commit, "threads": int(threads),
           "repeats": repeats, "cpu": cpu, "isa": isa, "runs": every, "checks": checks},
          open(f"{out}/int8.json", "w"), indent=1)
open(f"{out}/int8.md", "w").write("\n".join(lines))
print("\n".join(lines))
PY
echo "wrote $out/int8.md and $out/int8.json" >&2
