#!/usr/bin/env bash
# The published CPU experiment, reproduced: AlexNet and GoogLeNet trained by
# dlc and by PyTorch on this machine, 2 threads each, at batch sizes 1, 2,
# 4, ... 128, with the training time per image and the peak memory of each.
# (A 2017 study of Caffe and TensorFlow did the same on CPUs and GPUs, up to
# batch 512, and reported the largest batch that fit.)
#
#   bench/zoo_vs_pytorch.sh [--models "alexnet googlenet"]
#                           [--batches "1 2 4 8 16 32 64 128"]
#                           [--repeats 3] [--out bench/zoo]
#
# Builds dlc and compiles models/MODEL.dl.  Each measurement is one process:
# dlc's `./MODEL bench --mode train` or bench/pytorch_peer.py (torchvision's
# MODEL, Debian's /usr/bin/python3), on random 3x224x224 images and labels,
# SGD with momentum 0.9 and weight decay 1e-4 at learning rate 0.001, one
# untimed step and then max(3, 32 / batch) timed steps, reporting the median
# step.  Peak memory is the process's peak resident set, from GNU time (for
# PyTorch it includes the interpreter and the libraries, about 0.25 GiB).
# Every (model, batch) is measured --repeats times, alternating which
# system goes first, and the tables give the median of the repeats.  A
# system that fails at a batch (out of memory: dlc refuses before it
# starts, PyTorch is killed or raises) is not run at larger batches.
#
# Writes OUT/zoo.md (the tables), OUT/zoo.dat (the same for gnuplot),
# OUT/time_per_image.png and OUT/peak_memory.png, and prints the tables.
set -euo pipefail
cd "$(dirname "$0")/.."
models="alexnet googlenet"
batches="1 2 4 8 16 32 64 128"
repeats=3
out=bench/zoo
while [ $# -gt 0 ]; do
    case "$1" in
        --models) models=$2; shift 2 ;;
        --batches) batches=$2; shift 2 ;;
        --repeats) repeats=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) sed -n '10,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    esac
done
threads=2
lr=0.001
python=/usr/bin/python3

scripts/deps.sh bench
cmake -S . -B build >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
for model in $models; do
    build/dlc "models/$model.dl" -o "$tmp/$model"
done

# OpenBLAS 0.3.21 takes AVX-512 Xeons for its generic Prescott target; the
# peer gets the core type it should have (PyTorch at its best).  dlc runs
# with whatever OpenBLAS picks by itself.
. bench/lib.sh
openblas_cores "$python"

# one measurement: who (dlc or torch), model, batch, run; leaves
# $tmp/who-model-batch-run.{json,kib} or, on failure, .err
measure() {
    local who=$1 model=$2 batch=$3 run=$4
    local base="$tmp/$who-$model-$batch-$run" iters=$(( 32 / batch > 3 ? 32 / batch : 3 ))
    local cmd
    if [ "$who" = dlc ]; then
        cmd=("$tmp/$model" bench --mode train --threads "$threads" --batch "$batch"
             --iters "$iters" --warmup 1 --lr "$lr" --report "$base.json")
    else
        cmd=(env OPENBLAS_CORETYPE="$peer_core" "$python" bench/pytorch_peer.py bench
             --model "$model" --mode train --threads "$threads" --batch "$batch"
             --iters "$iters" --warmup 1 --lr "$lr")
    fi
    if timed_run "$base" "$who $model batch $batch" "${cmd[@]}"; then
        [ "$who" = dlc ] || mv "$base.out" "$base.json"
    fi
}

for run in $(seq "$repeats"); do
    for model in $models; do
        for batch in $batches; do
            order="dlc torch"
            [ $(( run % 2 )) -eq 0 ] && order="torch dlc"
            for who in $order; do
                # once out of memory, larger batches are not tried
                ls "$tmp/$who-$model-"*.err >/dev/null 2>&1 && continue
                echo "run $run of $repeats: $who $model batch $batch" >&2
                measure "$who" "$model" "$batch" "$run"
            done
        done
    done
done

"$python" - "$tmp" "$out" "$repeats" "$threads" "$core" "$peer_core" "$models" "$batches" <<'PY'
import json, os, statistics, sys
import torch
tmp, out, repeats, threads, core, peer_core = sys.argv[1:7]
models, batches = sys.argv[7].split(), [int(b) for b in sys.argv[8].split()]
names = {"alexnet": "AlexNet", "googlenet": "GoogLeNet", "vgg16": "VGG-16",
         "resnet18": "ResNet-18", "resnet50": "ResNet-50"}

def result(who, model, batch):
    """(ms per image, peak GiB) as medians of the runs, or None when it failed."""
    ms, gib = [], []
    for run in range(1, int(repeats) + 1):
        base = f"{tmp}/{who}-{model}-{batch}-{run}"
        if not os.path.exists(base + ".json"):
            return None
        ms.append(json.load(open(base + ".json"))["median_ms"] / batch)
        gib.append(int(open(base + ".kib").read().split()[-1]) / 2**20)
    return statistics.median(ms), statistics.median(gib)

def failure(who, model):
    for name in sorted(os.listdir(tmp)):
        if name.startswith(f"{who}-{model}-") and name.endswith(".err"):
            return open(f"{tmp}/{name}").read().strip()
    return None

cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
            if l.startswith("model name")), "?")
lines = [f"Training time per image and peak memory, {threads} threads, {os.cpu_count()} CPUs "
         f"({cpu}); PyTorch {torch.__version__}; OpenBLAS core: {core} for dlc, "
         f"{peer_core} for PyTorch. Medians of {repeats} runs.", ""]
dat = ["# model batch dlc_ms_per_image torch_ms_per_image dlc_peak_gib torch_peak_gib"]
fmt = lambda v, spec: "—" if v is None else format(v, spec)
for model in models:
    lines += [f"**{names.get(model, model)}**", "",
              "| batch | dlc ms/image | PyTorch ms/image | dlc speed-up | dlc peak GiB "
              "| PyTorch peak GiB | dlc / PyTorch memory |",
              "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for batch in batches:
        d, t = result("dlc", model, batch), result("torch", model, batch)
        if d is None and t is None:
            continue
        speed = t[0] / d[0] if d and t else None
        memory = d[1] / t[1] if d and t else None
        lines.append(f"| {batch} | {fmt(d and d[0], '.1f')} | {fmt(t and t[0], '.1f')} "
                     f"| {fmt(speed, '.2f')} | {fmt(d and d[1], '.2f')} "
                     f"| {fmt(t and t[1], '.2f')} | {fmt(memory, '.2f')} |")
        dat.append(f"{model} {batch} " + " ".join(
            "NaN" if v is None else f"{v:.4f}"
            for v in (d and d[0], t and t[0], d and d[1], t and t[1])))
    for who, label in (("dlc", "dlc"), ("torch", "PyTorch")):
        why = failure(who, model)
        if why:
            lines.append(f"\n{label} stopped: {why}")
    lines.append("")
open(f"{out}/zoo.md", "w").write("\n".join(lines))
open(f"{out}/zoo.dat", "w").write("\n".join(dat) + "\n")
print("\n".join(lines))
PY

# one line per system and model; batch on a log scale
plot() {
    local file=$1 ylabel=$2 dlc_col=$3 torch_col=$4 plots="" i=0
    for model in $models; do
        i=$((i + 1))
        plots+="'$out/zoo.dat' using (strcol(1) eq '$model' ? \$2 : NaN):$dlc_col"
        plots+=" with linespoints lt $i pt 7 title 'dlc $model', "
        plots+="'$out/zoo.dat' using (strcol(1) eq '$model' ? \$2 : NaN):$torch_col"
        plots+=" with linespoints lt $i dt 2 pt 6 title 'PyTorch $model', "
    done
    gnuplot <<EOF
set terminal pngcairo size 800,500 font ",11"
set output '$out/$file'
set logscale x 2
set logscale y
set xlabel 'batch size'
set ylabel '$ylabel'
set key outside right
set grid
plot ${plots%, }
EOF
}
plot time_per_image.png "training time per image (ms)" 3 4
plot peak_memory.png "peak memory (GiB)" 5 6
echo "wrote $out/zoo.md, $out/zoo.dat, $out/time_per_image.png, $out/peak_memory.png" >&2
