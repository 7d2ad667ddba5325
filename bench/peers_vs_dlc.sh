#!/usr/bin/env bash
# dlc against the other compilers and runtimes of deep-learning models, on
# this machine and on 2 threads each: PyTorch 1.13 (Debian's, eager), JAX
# (the whole step compiled by XLA), PyTorch 2 with torch.compile (Inductor),
# and for batch-1 inference ONNX Runtime, OpenVINO and Apache TVM; with the
# GFLOP/s each achieves against this machine's sgemm peak, and an ablation
# of dlc's own optimizations (dlc -fno-fuse, -fno-tile, -fno-layout,
# -fno-plan-memory, -fno-fuse -fno-plan-memory).
#
#   bench/peers_vs_dlc.sh [--cases "lenet-train lenet-infer alexnet-train-64
#                          alexnet-train-1 googlenet-train-32" | all]
#                         [--systems "dlc torch jax torch2 ort openvino tvm
#                          dlc-nofuse dlc-notile dlc-nolayout dlc-noplan
#                          dlc-nofuse-noplan"]
#                         [--repeats 3] [--out bench/peers] [--build build]
#                         [--threads 2] [--quick]
#
# The cases (each a separate row; the first five are the default, --cases
# all adds the others):
#   lenet-train         LeNet-5 training, batch 64 (images/s), 200 timed steps after 20
#   lenet-infer         LeNet-5 inference, batch 1 (µs/image), 2,000 after 200
#   alexnet-train-64    AlexNet training, batch 64 (ms/image), 3 after 1
#   alexnet-train-1     AlexNet training, batch 1 (ms/image), 32 after 1
#   googlenet-train-32  GoogLeNet training, batch 32 (ms/image), 3 after 1
#   alexnet-infer-1     AlexNet inference, batch 1 (ms/image), 50 after 5
#   googlenet-infer-1   GoogLeNet inference, batch 1 (ms/image), 50 after 5
#   resnet18-infer-1    ResNet-18 inference, batch 1 (ms/image), 50 after 5
#   resnet50-infer-1    ResNet-50 inference, batch 1 (ms/image), 30 after 3
#   vgg16-infer-1       VGG-16 inference, batch 1 (ms/image), 10 after 2
#   lstm-train          lstm_fashion (an LSTM of 128 units over an image's 28
#                       rows) training, batch 64 (images/s), 60 after 10
#   gru-train           gru_fashion (the same with a GRU) training, batch 64
#                       (images/s), 60 after 10
#   lstm-infer-1        lstm_fashion inference, batch 1 (µs/image), 500 after 50
# --quick times a tenth of the iterations (at least 2), for a smoke run.
#
# The systems: dlc (`./MODEL bench`, compiled by BUILD/dlc); torch
# (bench/pytorch_peer.py with Debian's /usr/bin/python3 and the
# OPENBLAS_CORETYPE it should have, bench/lib.sh); jax, torch2 and ort,
# openvino, tvm (bench/peers/*_peer.py with bench/.venv-peers/bin/python,
# which `scripts/deps.sh peers` installs); dlc-nofuse, dlc-notile,
# dlc-nolayout, dlc-noplan and dlc-nofuse-noplan (the model compiled with
# `dlc -fno-fuse`, `-fno-tile`, `-fno-layout`, `-fno-plan-memory` or
# `-fno-fuse -fno-plan-memory`; a variant that this dlc does not compile,
# for want of the pass, is reported as failed, the others go on).  ort,
# openvino and tvm only infer, at batch 1, and only the convolutional
# networks.  JAX sits out resnet18-infer-1, resnet50-infer-1 and
# vgg16-infer-1: bench/peers/jax_peer.py writes its networks by hand, and
# has no ResNet nor VGG.  In the recurrent cases JAX runs the recurrence as
# a jax.lax.scan inside the jitted step, and torch.compile unrolls its 28
# steps (bench/peers/jax_peer.py, torch2_peer.py).
# Every system gets --threads 2 (bench/README.md says how each is held to
# it), or the --threads given: on a machine that other work shares, one
# thread each is the steadier comparison.
#
# Each measurement is one process, its peak memory the process's peak
# resident set from GNU time.  Every (case, system) is measured --repeats
# times, the order of the systems reversed on every other run; the tables
# give the median of the repeats.  Training is SGD with momentum 0.9 at
# learning rate 0.01 (LeNet-5) or 0.001 with weight decay 1e-4 (the zoo),
# or Adam at 0.001 (the recurrent models), on random data.  The GFLOP/s
# table divides each model's FLOPs (bench/peers/flops.py: the products of
# convolutions, dense and recurrent layers, training = 3 forward passes) by
# the measured time, and compares them with the best 2-thread OpenBLAS
# sgemm of this machine (bench/sgemm_peak.c).
#
# Writes OUT/peers.md (the tables) and OUT/peers.json (every run's figures),
# and prints the tables.
set -euo pipefail
cd "$(dirname "$0")/.."
default_cases="lenet-train lenet-infer alexnet-train-64 alexnet-train-1 googlenet-train-32"
cases=$default_cases
systems="dlc torch jax torch2 ort openvino tvm"
systems+=" dlc-nofuse dlc-notile dlc-nolayout dlc-noplan dlc-nofuse-noplan"
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
        *) sed -n '/^#   bench\/peers_vs_dlc.sh/,/\[--quick\]/p' "$0" |
               sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    esac
done
if [ "$cases" = all ]; then
    cases="$default_cases alexnet-infer-1 googlenet-infer-1 resnet18-infer-1 resnet50-infer-1"
    cases+=" vgg16-infer-1 lstm-train gru-train lstm-infer-1"
fi
python=/usr/bin/python3
venv=bench/.venv-peers/bin/python

# case -> model mode batch iterations warm-up learning-rate
case_spec() {
    case "$1" in
        lenet-train) echo lenet5 train 64 200 20 0.01 ;;
        lenet-infer) echo lenet5 infer 1 2000 200 0.01 ;;
        alexnet-train-64) echo alexnet train 64 3 1 0.001 ;;
        alexnet-train-1) echo alexnet train 1 32 1 0.001 ;;
        googlenet-train-32) echo googlenet train 32 3 1 0.001 ;;
        alexnet-infer-1) echo alexnet infer 1 50 5 0.001 ;;
        googlenet-infer-1) echo googlenet infer 1 50 5 0.001 ;;
        resnet18-infer-1) echo resnet18 infer 1 50 5 0.001 ;;
        resnet50-infer-1) echo resnet50 infer 1 30 3 0.001 ;;
        vgg16-infer-1) echo vgg16 infer 1 10 2 0.001 ;;
        lstm-train) echo lstm_fashion train 64 60 10 0.001 ;;
        gru-train) echo gru_fashion train 64 60 10 0.001 ;;
        lstm-infer-1) echo lstm_fashion infer 1 500 50 0.001 ;;
        *) echo "peers_vs_dlc.sh: unknown case $1" >&2; exit 2 ;;
    esac
}
for c in $cases; do case_spec "$c" >/dev/null; done
# a dlc system -> the flags it compiles the model with
dlc_flags() {
    case "$1" in
        dlc) ;;
        dlc-nofuse) echo -fno-fuse ;;
        dlc-notile) echo -fno-tile ;;
        dlc-nolayout) echo -fno-layout ;;
        dlc-noplan) echo -fno-plan-memory ;;
        dlc-nofuse-noplan) echo -fno-fuse -fno-plan-memory ;;
        *) return 1 ;;
    esac
}
for s in $systems; do
    case "$s" in
        torch|jax|torch2|ort|openvino|tvm) ;;
        *) dlc_flags "$s" >/dev/null ||
               { echo "peers_vs_dlc.sh: unknown system $s" >&2; exit 2; } ;;
    esac
done
# whether a system runs a case: the ONNX runtimes only infer at batch 1,
# and not the recurrent models; JAX has no ResNet nor VGG
applies() {
    local system=$1 model=$2 mode=$3 batch=$4
    case "$system" in
        ort|openvino|tvm) [ "$mode" = infer ] && [ "$batch" = 1 ] &&
            [ "$model" != lstm_fashion ] && [ "$model" != gru_fashion ] ;;
        jax) [ "$model" != resnet18 ] && [ "$model" != resnet50 ] && [ "$model" != vgg16 ] ;;
        *) true ;;
    esac
}

if [[ " $systems " =~ \ (jax|torch2|ort|openvino|tvm)\  ]]; then
    scripts/deps.sh peers
else
    scripts/deps.sh bench
fi
cmake -S . -B "$build" >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
. bench/lib.sh
openblas_cores "$python"

models=$(for c in $cases; do case_spec "$c" | cut -d' ' -f1; done | sort -u | tr '\n' ' ')
# default dlc must compile every model; a variant that does not (a flag
# this dlc does not know yet, such as -fno-layout before the layout pass)
# leaves $tmp/SYSTEM-MODEL.err, and measure reports its runs as failed
for model in $models; do
    for s in $systems; do
        dlc_flags "$s" >/dev/null || continue
        # shellcheck disable=SC2046  # the flags are words
        if "$build"/dlc $(dlc_flags "$s") "models/$model.dl" -o "$tmp/$s-$model" \
                2>"$tmp/$s-$model.log"; then
            cat "$tmp/$s-$model.log" >&2
        elif [ "$s" = dlc ]; then
            cat "$tmp/$s-$model.log" >&2
            exit 1
        else
            { echo "dlc $(dlc_flags "$s") did not compile it:"; tail -n 3 "$tmp/$s-$model.log"; } |
                tr '\n' ' ' >"$tmp/$s-$model.err"
            echo "  $s: $model left out: $(cat "$tmp/$s-$model.err")" >&2
        fi
    done
done

echo "measuring the sgemm peak on $threads threads" >&2
cc -O2 bench/sgemm_peak.c -o "$tmp/sgemm_peak" -lopenblas
OPENBLAS_NUM_THREADS=$threads OPENBLAS_CORETYPE=$peer_core "$tmp/sgemm_peak" \
    "$($quick && echo 1 || echo 3)" | tee "$tmp/sgemm.txt" >&2
"$python" bench/peers/flops.py --models "$models" >"$tmp/flops.json"

# one measurement: case, system, run; leaves $tmp/case-system-run.{json,kib}
# or, on failure, .err
measure() {
    local case=$1 system=$2 run=$3
    local model mode batch iters warmup lr
    read -r model mode batch iters warmup lr <<<"$(case_spec "$case")"
    if $quick; then
        iters=$(( iters / 10 > 2 ? iters / 10 : 2 ))
        warmup=$(( warmup / 10 > 1 ? warmup / 10 : 1 ))
    fi
    local base="$tmp/$case-$system-$run" cmd
    local flags=(--mode "$mode" --batch "$batch" --iters "$iters" --warmup "$warmup"
                 --threads "$threads")
    case "$system" in
        dlc*) cmd=("$tmp/$system-$model" bench "${flags[@]}" --lr "$lr" --report "$base.json") ;;
        torch) cmd=(env OPENBLAS_CORETYPE="$peer_core" "$python" bench/pytorch_peer.py bench
                    --model "$model" "${flags[@]}" --lr "$lr") ;;
        jax|torch2) cmd=("$venv" "bench/peers/${system}_peer.py" bench --model "$model"
                         "${flags[@]}" --lr "$lr") ;;
        ort|openvino|tvm) cmd=("$venv" bench/peers/ort_peer.py bench --runtime "$system"
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
        read -r model mode batch _ <<<"$(case_spec "$case")"
        order=$systems
        [ $(( run % 2 )) -eq 0 ] && order=$(echo "$systems" | tr ' ' '\n' | tac | tr '\n' ' ')
        for system in $order; do
            applies "$system" "$model" "$mode" "$batch" || continue
            echo "run $run of $repeats: $system $case" >&2
            measure "$case" "$system" "$run"
        done
    done
done

"$python" - "$tmp" "$out" "$repeats" "$threads" "$core" "$peer_core" "$cases" "$systems" <<'PY'
import glob, json, os, re, statistics, sys
tmp, out, repeats, threads, core, peer_core = sys.argv[1:7]
cases, systems = sys.argv[7].split(), sys.argv[8].split()
repeats = int(repeats)
flops = json.load(open(f"{tmp}/flops.json"))
sgemm = json.loads(open(f"{tmp}/sgemm.txt").read().strip().splitlines()[-1])
peak = sgemm["peak_gflops"]

SPEC = {  # case: model, mode, batch, row label, unit
    "lenet-train": ("lenet5", "train", 64, "LeNet-5 training, batch 64", "images/s"),
    "lenet-infer": ("lenet5", "infer", 1, "LeNet-5 inference, batch 1", "µs/image"),
    "alexnet-train-64": ("alexnet", "train", 64, "AlexNet training, batch 64", "ms/image"),
    "alexnet-train-1": ("alexnet", "train", 1, "AlexNet training, batch 1", "ms/image"),
    "googlenet-train-32": ("googlenet", "train", 32, "GoogLeNet training, batch 32", "ms/image"),
    "alexnet-infer-1": ("alexnet", "infer", 1, "AlexNet inference, batch 1", "ms/image"),
    "googlenet-infer-1": ("googlenet", "infer", 1, "GoogLeNet inference, batch 1", "ms/image"),
    "resnet18-infer-1": ("resnet18", "infer", 1, "ResNet-18 inference, batch 1", "ms/image"),
    "resnet50-infer-1": ("resnet50", "infer", 1, "ResNet-50 inference, batch 1", "ms/image"),
    "vgg16-infer-1": ("vgg16", "infer", 1, "VGG-16 inference, batch 1", "ms/image"),
    "lstm-train": ("lstm_fashion", "train", 64, "LSTM training, batch 64", "images/s"),
    "gru-train": ("gru_fashion", "train", 64, "GRU training, batch 64", "images/s"),
    "lstm-infer-1": ("lstm_fashion", "infer", 1, "LSTM inference, batch 1", "µs/image"),
}
RECURRENT = ("lstm_fashion", "gru_fashion")
NO_JAX = ("resnet18", "resnet50", "vgg16")  # jax_peer.py has no ResNet nor VGG
NAMES = {"dlc": "dlc", "torch": "PyTorch 1.13", "jax": "JAX", "torch2": "torch.compile",
         "ort": "ONNX Runtime", "openvino": "OpenVINO", "tvm": "TVM",
         "dlc-nofuse": "dlc -fno-fuse", "dlc-notile": "dlc -fno-tile",
         "dlc-nolayout": "dlc -fno-layout", "dlc-noplan": "dlc -fno-plan-memory",
         "dlc-nofuse-noplan": "dlc -fno-fuse -fno-plan-memory"}
ABLATIONS = ["dlc-nofuse", "dlc-notile", "dlc-nolayout", "dlc-noplan", "dlc-nofuse-noplan"]
peers = [s for s in systems if s not in ABLATIONS and s != "dlc"]
MEMORY_CASES = ["alexnet-train-64", "googlenet-train-32"]


def runs(case, system):
    """The runs' JSON objects with peak_kib added; None if a run failed or
    the system does not run the case."""
    found = []
    for run in range(1, repeats + 1):
        base = f"{tmp}/{case}-{system}-{run}"
        if not os.path.exists(base + ".json"):
            return None
        r = json.load(open(base + ".json"))
        r["peak_kib"] = int(open(base + ".kib").read().split()[-1])
        found.append(r)
    return found


def failure(case, system):
    for run in range(1, repeats + 1):
        path = f"{tmp}/{case}-{system}-{run}.err"
        if os.path.exists(path):
            return re.sub(r"\s+", " ", open(path).read()).strip()[-300:]
    return None


def value(case, system):
    """The case's figure (in its unit) as the median of the runs, and the
    median milliseconds per image; None if there is none."""
    r = runs(case, system)
    if not r:
        return None
    batch = SPEC[case][2]
    ms_per_image = statistics.median(x["median_ms"] / batch for x in r)
    unit = SPEC[case][4]
    v = {"images/s": 1000 / ms_per_image, "µs/image": 1000 * ms_per_image,
         "ms/image": ms_per_image}[unit]
    return v, ms_per_image


def peak_gib(case, system):
    r = runs(case, system)
    return statistics.median(x["peak_kib"] for x in r) / 2**20 if r else None


def fmt(v):
    if v is None:
        return "—"
    return f"{v:,.0f}" if v >= 1000 else f"{v:.3g}" if v < 10 else f"{v:.1f}"


applies = lambda case, s: (s != "jax" or SPEC[case][0] not in NO_JAX) and (
    s not in ("ort", "openvino", "tvm") or (
        SPEC[case][1] == "infer" and SPEC[case][2] == 1 and SPEC[case][0] not in RECURRENT))
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
            if l.startswith("model name")), "?")
lines = [f"{threads} threads each, {os.cpu_count()} CPUs ({cpu}); OpenBLAS core: {core} "
         f"for dlc, {peer_core} for PyTorch 1.13. Medians of {repeats} runs, each the "
         f"median of its iterations.", ""]
columns = ["dlc"] * ("dlc" in systems) + peers
lines += ["| case | " + " | ".join(NAMES[s] for s in columns) + " | dlc vs fastest peer |",
          "| --- |" + " ---: |" * (len(columns) + 1)]
notes = []
for case in cases:
    label, unit = SPEC[case][3], SPEC[case][4]
    cells, best = [], None
    for s in columns:
        v = value(case, s) if applies(case, s) else None
        cells.append(fmt(v and v[0]) if applies(case, s) else "")
        if v and s != "dlc" and (best is None or v[1] < best):
            best = v[1]
        if applies(case, s) and not v and failure(case, s):
            notes.append(f"{NAMES[s]}, {label}: failed: {failure(case, s)}")
    d = value(case, "dlc") if "dlc" in systems else None
    ratio = f"{best / d[1]:.2f}" if d and best else "—"
    lines.append(f"| {label} ({unit}) | " + " | ".join(cells) + f" | {ratio} |")
for case in MEMORY_CASES:
    if case not in cases:
        continue
    cells, best = [], None
    for s in columns:
        g = peak_gib(case, s)
        cells.append(fmt(g) if applies(case, s) else "")
        if g and s != "dlc" and (best is None or g < best):
            best = g
    d = peak_gib(case, "dlc") if "dlc" in systems else None
    ratio = f"{best / d:.2f}" if d and best else "—"
    lines.append(f"| peak memory, {SPEC[case][3]} (GiB) | " + " | ".join(cells)
                 + f" | {ratio} |")
lines += ["", "dlc vs fastest peer: the fastest peer's time per image over dlc's (for "
          "memory: the smallest peer's peak over dlc's); above 1, dlc is faster (smaller). "
          "Peak memory is the process's peak resident set (GNU time), interpreter and "
          "libraries included.", ""]
if notes:
    lines += ["Failures:", ""] + [f"- {n}" for n in notes] + [""]

lines += [f"**Achieved GFLOP/s** (FLOPs per image from bench/peers/flops.py: products of "
          f"convolutions, dense and recurrent layers, a training step counted as 3 forward "
          f"passes; "
          f"in parentheses, the fraction of this machine's {threads}-thread OpenBLAS sgemm "
          f"peak, {peak:.1f} GFLOP/s at N = {sgemm['n']})", "",
          "| case | GFLOP per image | " + " | ".join(NAMES[s] for s in columns) + " |",
          "| --- | ---: |" + " ---: |" * len(columns)]
for case in cases:
    model, mode = SPEC[case][0], SPEC[case][1]
    f = flops[model]["train_flops_per_image" if mode == "train" else "infer_flops_per_image"]
    cells = []
    for s in columns:
        v = value(case, s) if applies(case, s) else None
        if v:
            g = f / v[1] / 1e6
            cells.append(f"{g:.2f} ({100 * g / peak:.0f}%)" if g < 10
                         else f"{g:.1f} ({100 * g / peak:.0f}%)")
        else:
            cells.append("" if not applies(case, s) else "—")
    lines.append(f"| {SPEC[case][3]} | {f / 1e9:.4g} | " + " | ".join(cells) + " |")
lines.append("")

ablations = [s for s in ABLATIONS if s in systems]
if ablations and "dlc" in systems:
    lines += ["**Ablation**: dlc compiled with passes switched off ("
              + ", ".join(f"`{NAMES[s]}`" for s in ablations)
              + "); time per image and peak memory, each relative to default "
              "dlc (above 1: slower, or more memory, than default dlc).", "",
              "| case | dlc | " + " | ".join(NAMES[s] for s in ablations) + " |",
              "| --- | ---: |" + " ---: |" * len(ablations)]
    failed = []
    for case in cases:
        label, unit = SPEC[case][3], SPEC[case][4]
        d, dm = value(case, "dlc"), peak_gib(case, "dlc")
        cells = []
        for s in ablations:
            v, m = value(case, s), peak_gib(case, s)
            if not v and failure(case, s):
                failed.append(f"{NAMES[s]}, {label}: failed: {failure(case, s)}")
            t = f"{v[1] / d[1]:.2f}" if v and d else "—"
            mem = f"{m / dm:.2f}" if m and dm else "—"
            cells.append(f"{t} time, {mem} memory ({fmt(v and v[0])} {unit}, {fmt(m)} GiB)")
        lines.append(f"| {label} | {fmt(d and d[0])} {unit}, {fmt(dm)} GiB | "
                     + " | ".join(cells) + " |")
    lines.append("")
    if failed:
        lines += ["Failures:", ""] + [f"- {n}" for n in failed] + [""]

every = {case: {s: runs(case, s) for s in systems if applies(case, s)} for case in cases}
json.dump({"threads": int(threads), "openblas_core": core, "peer_openblas_core": peer_core,
           "sgemm": sgemm, "flops": flops, "runs": every},
          open(f"{out}/peers.json", "w"), indent=1)
open(f"{out}/peers.md", "w").write("\n".join(lines))
print("\n".join(lines))
PY
echo "wrote $out/peers.md and $out/peers.json" >&2
